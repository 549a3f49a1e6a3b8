//! A repeat `generate --changed-only` is replayed from the run record only while the
//! project's files and git's change set are what the recorded run saw: an edit, a new
//! commit on the base, another `--base-ref`, an untracked file or a same-length edit
//! with its modification time put back all run it again, and its output is then what a
//! run without any cache writes.

use std::time::Duration;

use crate::changes::git_at;
use crate::support::{Output, Project};

const STAGE: &str = "platform/stage/eu-central-1";
const REPLAYED: &str = "note: replayed the last run";
/// The replay's note when the repository's fingerprint was the recorded one.
const UNASKED: &str = "git was not asked";

/// `fixtures/example` committed on `main`, then a `feature` branch with one commit
/// changing the stage VPC.
fn feature_branch() -> Project {
    let p = Project::fixture("example");
    git_at(p.path(), &["-c", "init.defaultBranch=main", "init", "-q"]);
    commit(&p, "initial");
    git_at(p.path(), &["checkout", "-q", "-b", "feature"]);
    append(&p, &format!("{STAGE}/vpc/main.tf"), "# widen the CIDR\n");
    commit(&p, "vpc");
    // A first run makes the cache directory, which moves the project directory's
    // stamp: the repository's fingerprint that run took is then no longer current.
    let out = p.run(&["generate", "--changed-only", "--base-ref", "main"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    p
}

fn commit(p: &Project, message: &str) {
    git_at(p.path(), &["add", "-A"]);
    git_at(p.path(), &["commit", "-q", "--allow-empty", "-m", message]);
}

fn append(p: &Project, rel: &str, text: &str) {
    let old = p.read(rel);
    p.write(rel, format!("{old}{text}"));
}

/// `generate --changed-only --base-ref BASE -v`, after the files have settled (a run
/// records only files that last changed clearly before it began).
fn changed_only(p: &Project, base: &str) -> Output {
    std::thread::sleep(Duration::from_millis(120));
    let out = p.run(&["generate", "--changed-only", "--base-ref", base, "-v"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out
}

/// What a run without either cache writes (the header's command line aside).
fn fresh(p: &Project, base: &str) -> String {
    let out = p.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        base,
        "-v",
        "--no-cache",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout.replace(" --no-cache", "")
}

/// Runs twice: the first run must not replay (its inputs changed), the second must,
/// and both must write what a run without caches writes.
fn reruns_then_replays(p: &Project, base: &str, what: &str) -> String {
    let after = changed_only(p, base);
    assert!(
        !after.stderr.contains(REPLAYED),
        "{what}: replayed a stale record: {}",
        after.stderr
    );
    assert_eq!(after.stdout, fresh(p, base), "{what}");
    let again = changed_only(p, base);
    assert!(
        again.stderr.contains(REPLAYED),
        "{what}: the next run is not replayed: {}",
        again.stderr
    );
    assert!(
        again.stderr.contains(UNASKED),
        "{what}: the next run asked git again: {}",
        again.stderr
    );
    assert_eq!(again.stdout, after.stdout, "{what}");
    after.stdout
}

#[test]
fn a_repeat_changed_only_run_is_replayed_and_never_from_a_stale_record() {
    let p = feature_branch();
    let first = reruns_then_replays(&p, "main", "the first run");
    assert!(
        first.contains("plan-platform-stage-eu-central-1-vpc:"),
        "{first}"
    );
    assert!(
        !first.contains("plan-platform-prod-eu-central-1-vpc:"),
        "{first}"
    );

    // An edit of another module's Terraform file, not committed.
    append(&p, &format!("{STAGE}/rds/main.tf"), "# bigger disk\n");
    let edited = reruns_then_replays(&p, "main", "an edit");
    assert!(edited.contains("plan-platform-stage-eu-central-1-rds:"));

    // A file git sees but discovery does not read: only the change set tells.
    p.write("platform/prod/eu-central-1/vpc/README.md", "notes\n");
    let untracked = reruns_then_replays(&p, "main", "an untracked file");
    assert!(untracked.contains("plan-platform-prod-eu-central-1-vpc:"));

    // Files git sees where no Terraform file is: a hidden directory, and a directory
    // with nothing tracked in it (its parent's listing does not change).
    p.write(".github/notes.md", "notes\n");
    let hidden = reruns_then_replays(&p, "main", "an untracked file in a hidden directory");
    assert_eq!(hidden, untracked, "a file in no module changes no job");
    p.write("scratch/.keep", "");
    reruns_then_replays(&p, "main", "a new directory");
    p.write("scratch/draft.tf.bak", "x\n");
    reruns_then_replays(
        &p,
        "main",
        "an untracked file in a directory without tracked files",
    );
    // A rule that hides the README from git takes its module out of the change set.
    p.write(".git/info/exclude", "README.md\n");
    let excluded = reruns_then_replays(&p, "main", "a new exclude rule");
    assert!(
        !excluded.contains("plan-platform-prod-eu-central-1-vpc:"),
        "{excluded}"
    );
    std::fs::remove_file(p.path().join(".git/info/exclude")).expect("remove the rule");
    let restored = reruns_then_replays(&p, "main", "the exclude rule removed");
    assert_eq!(restored, untracked);
    // Staging the edit: the index changes, git's answer does not, so the run is
    // replayed after asking git, and the next one without.
    git_at(p.path(), &["add", &format!("{STAGE}/rds/main.tf")]);
    let staged = changed_only(&p, "main");
    assert!(
        staged.stderr.contains(REPLAYED) && !staged.stderr.contains(UNASKED),
        "a staged edit: {}",
        staged.stderr
    );
    assert_eq!(staged.stdout, untracked);
    let again = changed_only(&p, "main");
    assert!(again.stderr.contains(UNASKED), "{}", again.stderr);

    // The base moves on to include the branch (as after a merge): no file changes,
    // only git knows that the VPC commit is no longer a change.
    git_at(p.path(), &["branch", "-f", "main", "feature"]);
    let moved = reruns_then_replays(&p, "main", "a new commit on the base");
    assert!(
        !moved.contains("plan-platform-stage-eu-central-1-vpc:"),
        "{moved}"
    );
    assert!(
        moved.contains("plan-platform-stage-eu-central-1-rds:"),
        "{moved}"
    );

    // Another base ref is another run.
    let other = reruns_then_replays(&p, "HEAD~1", "another --base-ref");
    assert_ne!(other, moved);
    assert!(
        other.contains("plan-platform-stage-eu-central-1-vpc:"),
        "{other}"
    );
    let back = changed_only(&p, "main");
    assert_eq!(back.stdout, fresh(&p, "main"), "back to the first base ref");
}

#[test]
fn a_same_length_edit_with_its_mtime_put_back_is_never_replayed() {
    let p = feature_branch();
    let readme = "platform/prod/eu-central-1/vpc/README.md";
    p.write(readme, "notes\n");
    commit(&p, "readme");
    // On the base too: only an edit in the working tree makes it a change.
    git_at(p.path(), &["branch", "-f", "main", "feature"]);
    reruns_then_replays(&p, "main", "the first run");
    for (rel, from, to) in [
        // Read by discovery: its stamp (change time) tells.
        (
            format!("{STAGE}/eks/main.tf"),
            "}/vpc/terraform",
            "}/rds/terraform",
        ),
        // Not read by discovery, tracked by git: only the change set tells.
        (readme.to_owned(), "notes", "NOTES"),
    ] {
        let path = p.path().join(&rel);
        let mtime = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime");
        let text = p.read(&rel);
        let edited = text.replacen(from, to, 1);
        assert!(edited != text && edited.len() == text.len(), "{rel}");
        p.write(&rel, &edited);
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_modified(mtime).expect("put the mtime back");
        drop(file);
        let out = reruns_then_replays(&p, "main", &format!("a same-length edit of {rel}"));
        if rel == readme {
            assert!(
                out.contains("plan-platform-prod-eu-central-1-vpc:"),
                "{out}"
            );
        }
    }
}

#[test]
fn full_and_changed_only_runs_keep_a_record_each() {
    // A merge request's `--changed-only` run beside the base pipeline's full run (the CI
    // cache holds both), or a user switching between the two: neither replaces the
    // other's record, so each repeat is replayed.
    let p = feature_branch();
    let full = || {
        std::thread::sleep(Duration::from_millis(120));
        let out = p.run(&["generate", "-v"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out
    };
    let first = full();
    let changed = changed_only(&p, "main");
    let again = full();
    assert!(
        again.stderr.contains(REPLAYED),
        "the full run's record was replaced by the --changed-only run's: {}",
        again.stderr
    );
    assert_eq!(again.stdout, first.stdout);
    let changed_again = changed_only(&p, "main");
    assert!(
        changed_again.stderr.contains(REPLAYED),
        "the --changed-only run's record was replaced by the full run's: {}",
        changed_again.stderr
    );
    assert_eq!(changed_again.stdout, changed.stdout);
    for name in ["run.bin", "run-generate-changed.bin"] {
        assert!(
            p.path().join(".terraci/cache").join(name).is_file(),
            "no {name}"
        );
    }
}
