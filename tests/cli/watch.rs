//! `terraci watch` as a user runs it: the real binary and the real file watcher on a
//! copy of the example, an edit saved the way editors save (temp file + rename), then
//! Ctrl-C. Waits poll with a generous timeout; nothing asserts on how long anything took.

use std::io::Read as _;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::Project;

const TIMEOUT: Duration = Duration::from_secs(20);
const RDS: &str = "platform/stage/eu-central-1/rds/main.tf";
const READS_EKS: &str = r#"
data "terraform_remote_state" "eks" {
  backend = "s3"
  config = {
    bucket = "acme-terraform-state"
    key    = "${local.service}/${local.environment}/${local.region}/eks/terraform.tfstate"
    region = "eu-central-1"
  }
}
"#;

/// Polls `done` until it holds; panics with `what` and the stderr so far otherwise.
fn wait_for(what: &str, stderr: &Mutex<String>, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < TIMEOUT,
            "timed out waiting for {what}; stderr so far:\n{}",
            stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `needs` of a GitLab job.
fn needs(pipeline: &str, job: &str) -> Vec<String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(pipeline).expect("YAML");
    doc[job]["needs"]
        .as_sequence()
        .expect("needs")
        .iter()
        .filter_map(|n| n["job"].as_str().map(str::to_owned))
        .collect()
}

/// Starts `terraci watch` with `args` in `p` and waits for its first pipeline; the child
/// and its stderr so far (collected as it comes).
fn start_watch(p: &Project, args: &[&str]) -> (Child, Arc<Mutex<String>>) {
    let mut child = p
        .command(&[&["watch"], args].concat())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("terraci watch starts");
    let stderr = capture_stderr(&mut child);
    wait_for("the first pipeline", &stderr, || {
        stderr.lock().unwrap().contains(" written in ")
    });
    (child, stderr)
}

/// Collects the child's stderr as it comes.
fn capture_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let mut pipe = child.stderr.take().expect("stderr is piped");
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

#[test]
fn watch_rewrites_the_pipeline_on_an_edit_and_exits_cleanly_on_ctrl_c() {
    let p = Project::fixture("example");
    let (mut child, stderr) = start_watch(&p, &["-o", "out.yml"]);
    let job = "plan-platform-stage-eu-central-1-rds";
    assert_eq!(
        needs(&p.read("out.yml"), job),
        ["apply-platform-stage-eu-central-1-vpc"]
    );

    // Saved as editors do: a hidden temp file renamed over the original.
    let rds = p.path().join(RDS);
    let edited = format!("{}{READS_EKS}", p.read(RDS));
    let tmp = rds.with_file_name(".main.tf.swp");
    std::fs::write(&tmp, edited).unwrap();
    std::fs::rename(&tmp, &rds).unwrap();
    wait_for("the rewrite", &stderr, || {
        stderr.lock().unwrap().contains(" rewritten in ")
    });
    assert_eq!(
        needs(&p.read("out.yml"), job),
        [
            "apply-platform-stage-eu-central-1-eks",
            "apply-platform-stage-eu-central-1-vpc"
        ]
    );

    // SAFETY: kill(2) on our own child's pid has no memory effects.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("watch did not stop on SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    // The reader thread sees EOF once the process is gone.
    wait_for("stderr to close", &stderr, || {
        Arc::strong_count(&stderr) == 1
    });

    let text = p.redact(stderr.lock().unwrap().as_bytes());
    let text = regex::Regex::new(r"in \d+ ms")
        .unwrap()
        .replace_all(&text, "in N ms");
    assert_eq!(
        text,
        "watching [PROJECT]: 10 modules, 11 edges -> out.yml written in N ms\n\
         platform/stage/eu-central-1/rds/main.tf changed -> 1 edge changed -> out.yml rewritten in N ms\n"
    );
}

#[test]
fn watch_changed_only_keeps_the_merge_request_pipeline_current() {
    let p = Project::fixture("example");
    let git = |args: &[&str]| crate::changes::git_at(p.path(), args);
    git(&["-c", "init.defaultBranch=main", "init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "initial"]);
    git(&["checkout", "-q", "-b", "feature"]);
    let (mut child, stderr) = start_watch(
        &p,
        &["--changed-only", "--base-ref", "main", "-o", "out.yml"],
    );
    assert!(
        p.read("out.yml").contains("terraci-no-changes"),
        "nothing changed yet: the no-op pipeline"
    );
    // A comment: the facts stay, the change set does not.
    std::fs::write(p.path().join(RDS), format!("{}# a comment\n", p.read(RDS))).unwrap();
    wait_for("the edit's pipeline", &stderr, || {
        stderr.lock().unwrap().contains(" rewritten in ")
    });
    let pipeline = p.read("out.yml");
    assert!(
        pipeline.contains("plan-platform-stage-eu-central-1-rds:"),
        "{pipeline}"
    );
    assert!(
        !pipeline.contains("plan-platform-stage-eu-central-1-vpc:"),
        "{pipeline}"
    );

    // Committed, then the base moves on to include it: only git changed.
    git(&["commit", "-q", "-am", "rds"]);
    git(&["branch", "-f", "main", "feature"]);
    // Watch writes the file before it prints its line: wait for both, or the kill below
    // can come between the two (the commit and the branch move may also come as two
    // batches, each with its line).
    wait_for("the pipeline after the base moved", &stderr, || {
        p.read("out.yml").contains("terraci-no-changes")
            && stderr.lock().unwrap().contains("the change set changed")
    });
    let _ = child.kill();
    let _ = child.wait();
}
