//! `local-exec` under a terminal (a pseudo-terminal made by the test): the progress
//! display draws from its own thread, and the run must finish, and stop on Ctrl-C.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::Project;

const TIMEOUT: Duration = Duration::from_secs(60);

/// A fake `terraform` on PATH: `body` is its shell script.
fn fake_terraform(p: &Project, body: &str) -> String {
    p.write("bin/terraform", format!("#!/bin/sh\n{body}\n"));
    let bin = p.path().join("bin");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            bin.join("terraform"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Starts `terraci ARGS` with a pseudo-terminal as stdin, stdout and stderr; returns the
/// child and what it writes to the terminal (read until the terminal closes).
pub(crate) fn spawn_in_terminal(
    p: &Project,
    args: &[&str],
    path: &str,
) -> (Child, Arc<Mutex<String>>) {
    let (child, text, _) = spawn_with_keyboard(p, args, path);
    (child, text)
}

/// [`spawn_in_terminal`], and the terminal's keyboard: what is written to it is typed.
pub(crate) fn spawn_with_keyboard(
    p: &Project,
    args: &[&str],
    path: &str,
) -> (Child, Arc<Mutex<String>>, std::fs::File) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the ints; the other pointers are null
    // (no name, default termios and window size).
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let stdio = || Stdio::from(slave.try_clone().expect("dup the terminal"));
    let child = p
        .command(args)
        .env("PATH", path)
        .env("TERM", "xterm")
        .stdin(stdio())
        .stdout(stdio())
        .stderr(stdio())
        .spawn()
        .expect("terraci starts");
    drop(slave);
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    let mut master = std::fs::File::from(master);
    let keyboard = master.try_clone().expect("dup the terminal");
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // EIO once the last writer is gone.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .expect("not poisoned")
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (child, text, keyboard)
}

pub(crate) fn wait(child: &mut Child, what: &str) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("local-exec {what} in a terminal did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn local_exec_in_a_terminal_finishes() {
    let p = Project::fixture("example");
    let path = fake_terraform(&p, "sleep 0.1\necho \"fake terraform $*\"");
    let (mut child, text) = spawn_in_terminal(&p, &["local-exec", "run", "--auto-approve"], &path);
    assert_eq!(wait(&mut child, "run"), 0, "{}", text.lock().unwrap());
    let start = Instant::now();
    while !text.lock().unwrap().contains("20 succeeded") && start.elapsed() < TIMEOUT {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        text.lock().unwrap().contains("20 succeeded, 0 failed"),
        "{}",
        text.lock().unwrap()
    );
}

#[test]
fn local_exec_in_a_terminal_stops_on_ctrl_c() {
    let p = Project::fixture("example");
    // Every command takes long; the module directory says it has started.
    let path = fake_terraform(
        &p,
        "touch .started\nsleep 30 &\ntrap 'kill $!; exit 130' INT\nwait $!",
    );
    let (mut child, text) = spawn_in_terminal(&p, &["local-exec", "run", "--auto-approve"], &path);
    let vpc = p.path().join("platform/stage/eu-central-1/vpc/.started");
    let start = Instant::now();
    while !vpc.exists() && start.elapsed() < TIMEOUT {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(vpc.exists(), "no command started: {}", text.lock().unwrap());
    // SAFETY: kill(2) on our own child's pid has no memory effects.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let stopped = Instant::now();
    let code = wait(&mut child, "after Ctrl-C");
    assert!(
        stopped.elapsed() < Duration::from_secs(20),
        "took {:?}",
        stopped.elapsed()
    );
    assert_eq!(code, 130, "{}", text.lock().unwrap());
}

#[test]
fn local_exec_with_a_module_that_does_not_exist_is_an_error() {
    let p = Project::fixture("example");
    let out = p.run(&[
        "local-exec",
        "plan",
        "--dry-run",
        "-m",
        "platform/stage/eu-central-1/vcp",
    ]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        out.stderr,
        "error: no module `platform/stage/eu-central-1/vcp`\n"
    );
    // A glob that names modules is fine.
    let out = p.run(&["local-exec", "plan", "--dry-run", "-m", "platform/stage/**"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn local_exec_run_asks_once_before_it_applies() {
    let p = Project::fixture("example");
    let path = fake_terraform(&p, "echo \"$(basename \"$PWD\") $1\"");
    let (mut child, text, mut keyboard) = spawn_with_keyboard(
        &p,
        &[
            "local-exec",
            "run",
            "-f",
            "environment=stage",
            "-x",
            "**/eks/**",
        ],
        &path,
    );
    let start = Instant::now();
    while !text
        .lock()
        .expect("not poisoned")
        .contains("Only 'yes' is accepted")
    {
        assert!(
            start.elapsed() < TIMEOUT,
            "no question: {}",
            text.lock().expect("x")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::io::Write::write_all(&mut keyboard, b"no\n").expect("type");
    let code = wait(&mut child, "run");
    let shown = text.lock().expect("not poisoned").clone();
    assert_eq!(code, 1, "{shown}");
    assert!(shown.contains("local-exec will apply"), "{shown}");
    assert!(
        shown.contains("  platform/stage/eu-central-1/vpc"),
        "{shown}"
    );
    assert!(
        shown.contains("apply cancelled: nothing was run"),
        "{shown}"
    );
    // Nothing ran: the fake terraform was never called.
    assert!(!shown.contains("vpc plan"), "{shown}");
}

#[test]
fn local_exec_apply_without_a_terminal_needs_auto_approve() {
    let p = Project::fixture("example");
    let out = p.run(&["local-exec", "apply", "-f", "environment=stage"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("there is no terminal to ask on: pass --auto-approve"),
        "{}",
        out.stderr
    );
}
