//! SIGINT and SIGTERM as a callback: local-exec stops starting jobs, watch mode ends.

use std::io;
use std::thread::JoinHandle;

/// Calls `on_signal` for each SIGINT or SIGTERM while this guard lives (instead of the
/// default of ending the process); dropping it restores the default.
pub struct SignalGuard {
    handle: signal_hook::iterator::Handle,
    thread: Option<JoinHandle<()>>,
}

impl SignalGuard {
    pub fn install(on_signal: impl Fn() + Send + 'static) -> io::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("terraci-signals".into())
            .spawn(move || {
                for _ in signals.forever() {
                    on_signal();
                }
            })?;
        Ok(SignalGuard {
            handle,
            thread: Some(thread),
        })
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
