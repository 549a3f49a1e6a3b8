//! Process spawning and interruption: the IO edge of local-exec, behind
//! [`ProcessRunner`] so the scheduler runs in tests without processes.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use camino::Utf8Path;

use super::CommandLine;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Success,
    Code(i32),
    Signal(i32),
}

/// Runs one command to completion.
pub(crate) trait ProcessRunner: Sync {
    /// Runs `command` in `dir` with `env` added to the inherited environment, stdin
    /// closed, stdout appended to `out` and stderr to `err` (the same file for a log;
    /// for `show -json`, the JSON file and the log: a warning on stderr must never end
    /// up in plan.json). A runner that starts a process registers it with `interrupt`
    /// so Ctrl-C reaches it.
    fn run(
        &self,
        dir: &Utf8Path,
        env: &[(String, String)],
        command: &CommandLine,
        out: &File,
        err: &File,
        interrupt: &Interrupt,
    ) -> io::Result<Exit>;
}

/// The real runner: `std::process::Command`, each child in its own process group.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OsRunner;

impl ProcessRunner for OsRunner {
    fn run(
        &self,
        dir: &Utf8Path,
        env: &[(String, String)],
        command: &CommandLine,
        out: &File,
        err: &File,
        interrupt: &Interrupt,
    ) -> io::Result<Exit> {
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(err.try_clone()?);
        // A terminal Ctrl-C goes to the foreground process group. Keeping children out
        // of it lets terraci forward exactly one SIGINT: Terraform takes a second one
        // as "exit now", which can leave the state locked.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        interrupt.register(pid);
        let status = child.wait();
        interrupt.unregister(pid);
        let status = status?;
        if status.success() {
            return Ok(Exit::Success);
        }
        if let Some(code) = status.code() {
            return Ok(Exit::Code(code));
        }
        #[cfg(unix)]
        if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
            return Ok(Exit::Signal(signal));
        }
        Ok(Exit::Code(1))
    }
}

/// The Ctrl-C flag, and the process groups of the running commands to forward it to.
#[derive(Debug, Default)]
pub(crate) struct Interrupt {
    set: AtomicBool,
    running: Mutex<BTreeSet<u32>>,
}

impl Interrupt {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Stops new jobs from starting and sends SIGINT to every running command.
    pub(crate) fn trigger(&self) {
        let running = self.lock();
        self.set.store(true, Ordering::SeqCst);
        for &pid in running.iter() {
            send_sigint(pid);
        }
    }

    /// Records a started process group; if Ctrl-C came while it was starting, it gets
    /// its SIGINT now.
    pub(crate) fn register(&self, pid: u32) {
        let mut running = self.lock();
        running.insert(pid);
        if self.is_set() {
            send_sigint(pid);
        }
    }

    pub(crate) fn unregister(&self, pid: u32) {
        self.lock().remove(&pid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(unix)]
fn send_sigint(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory effects; a negative pid names the process group the
    // child leads (it was spawned with `process_group(0)`), reaching its plugins too.
    unsafe {
        libc::kill(-pid, libc::SIGINT);
    }
}

#[cfg(not(unix))]
fn send_sigint(_pid: u32) {}
