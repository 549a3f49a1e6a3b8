//! File events for watch mode: notify's recommended watcher (inotify, FSEvents, ...),
//! debounced into batches of paths, and SIGINT/SIGTERM as the end of the stream.
//!
//! Only paths leave this module: what a path means (an edit, a new module, the config)
//! is decided by [`terraci::watch`], which tests drive with scripted batches instead.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use notify::{EventKind, RecursiveMode, Watcher as _};

use super::{ChangeEvents, SignalGuard};

/// A batch ends after this long without a new event. An editor's save is a burst of
/// events well inside it (write, rename, attribute change); a shorter quiet time would
/// split the burst, a longer one is latency added to every regeneration.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(15);
/// A batch ends after this long even if events keep coming (a `git checkout` of many
/// files), so regeneration is never starved.
const MAX_BATCH: Duration = Duration::from_millis(500);

enum Message {
    Paths(Vec<PathBuf>),
    Stop,
}

/// The real watcher: notify events on a channel, plus a signal thread on the same one.
pub(crate) struct NotifyEvents {
    rx: Receiver<Message>,
    /// Watching stops when this is dropped.
    _watcher: notify::RecommendedWatcher,
    _signals: SignalGuard,
}

impl NotifyEvents {
    /// Watches `root` recursively and the directories of the files in `outside` that
    /// are not under `root`.
    pub(crate) fn start(root: &Utf8Path, outside: &[Utf8PathBuf]) -> io::Result<NotifyEvents> {
        let (tx, rx) = mpsc::channel();
        let events_tx = tx.clone();
        let rescan_root = root.as_std_path().to_owned();
        let handler = move |event: notify::Result<notify::Event>| {
            let paths = match event {
                // Reads and opens change nothing.
                Ok(event) if matches!(event.kind, EventKind::Access(_)) => return,
                // The kernel dropped events: the root itself as a path makes watch mode
                // rediscover everything.
                Ok(event) if event.need_rescan() => vec![rescan_root.clone()],
                Ok(event) => event.paths,
                // A watch that failed on one path (it vanished while being added) says
                // nothing about the others.
                Err(_) => return,
            };
            let _ = events_tx.send(Message::Paths(paths));
        };
        // Discovery does not follow symlinked directories; neither does the watcher.
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(handler, config).map_err(io_error)?;
        watcher
            .watch(root.as_std_path(), RecursiveMode::Recursive)
            .map_err(io_error)?;
        let dirs: BTreeSet<&Utf8Path> = outside
            .iter()
            .filter(|p| !p.starts_with(root))
            .filter_map(|p| p.parent())
            .collect();
        for dir in dirs {
            watcher
                .watch(dir.as_std_path(), RecursiveMode::NonRecursive)
                .map_err(io_error)?;
        }
        let signals = SignalGuard::install(move || {
            let _ = tx.send(Message::Stop);
        })?;
        Ok(NotifyEvents {
            rx,
            _watcher: watcher,
            _signals: signals,
        })
    }
}

impl ChangeEvents for NotifyEvents {
    fn next_batch(&mut self) -> io::Result<Option<Vec<Utf8PathBuf>>> {
        let mut batch = BTreeSet::new();
        match self.rx.recv() {
            Ok(Message::Paths(paths)) => batch.extend(paths),
            Ok(Message::Stop) | Err(_) => return Ok(None),
        }
        let deadline = Instant::now() + MAX_BATCH;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.rx.recv_timeout(DEBOUNCE.min(left)) {
                Ok(Message::Paths(paths)) => batch.extend(paths),
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return Ok(None),
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
        // terraci's paths are UTF-8; a file with another name is not one it reads.
        Ok(Some(
            batch
                .into_iter()
                .filter_map(|p| Utf8PathBuf::from_path_buf(p).ok())
                .collect(),
        ))
    }
}

fn io_error(err: notify::Error) -> io::Error {
    match err.kind {
        notify::ErrorKind::Io(e) => e,
        _ => io::Error::other(err.to_string()),
    }
}
