//! The CI case: every job starts from a fresh `git clone` (new file stamps) with the cache
//! of an earlier pipeline restored. git's index vouches for the contents of the files it
//! holds clean, so the run record replays and the fact cache is used without reading
//! them; a racy or modified file is read; with `TERRACI_CACHE_SECRET` set, a cache not
//! signed with it, or changed since, is ignored.

use std::path::Path;
use std::time::Duration;

use crate::changes::git_at;
use crate::support::{Output, Project};

const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\n";
const VPC: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
const DNS: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/dns/terraform.tfstate\"\n  }\n}\n";
/// The EKS module reads the VPC's state...
const EKS: &str = "data \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
const EKS_FILE: &str = "stage/eks/main.tf";

/// ...or, in another version, the DNS module's.
fn eks_reading_dns() -> String {
    EKS.replace("/vpc/", "/dns/")
}

/// A repository with the three modules committed on `main`, EKS's file as `eks`.
fn origin(eks: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (rel, text) in [
        (".terraci.yaml", CONFIG),
        ("stage/vpc/main.tf", VPC),
        ("stage/dns/main.tf", DNS),
        (EKS_FILE, eks),
    ] {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    git_at(dir.path(), &["-c", "init.defaultBranch=main", "init", "-q"]);
    git_at(dir.path(), &["add", "-A"]);
    git_at(dir.path(), &["commit", "-q", "-m", "base"]);
    dir
}

/// Empties the project directory and clones `origin` into it: the same path every time,
/// as a CI runner clones into the same directory (the run record's key holds it).
/// Then `git status`, as a job's first git command does: a checkout writes its last
/// files within the clock tick it writes the index in, which leaves their entries racy,
/// and git rewrites the index once it has checked them.
fn fresh_clone(p: &Project, origin: &Path) {
    for entry in std::fs::read_dir(p.path()).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            std::fs::remove_dir_all(path).expect("remove dir");
        } else {
            std::fs::remove_file(path).expect("remove file");
        }
    }
    let from = origin.to_str().expect("utf-8 temp path");
    let into = p.path().to_str().expect("utf-8 temp path");
    git_at(p.path(), &["clone", "-q", from, into]);
    std::thread::sleep(Duration::from_millis(20));
    git_at(p.path(), &["status", "--porcelain"]);
    // A run records only what settled before it began.
    std::thread::sleep(Duration::from_millis(120));
}

/// The run on the base commit CI restores the cache of: `generate -v` in a fresh clone
/// of `origin`, its pipeline, and the cache it wrote kept aside.
fn base_run(p: &Project, origin: &Path) -> (String, tempfile::TempDir) {
    fresh_clone(p, origin);
    let base = p.run(&["generate", "-v"]);
    assert_eq!(base.code, 0, "{}", base.stderr);
    (base.stdout, keep_cache(p))
}

/// The cache directory of the project, copied aside (`cache:` saving it at a job's end).
fn keep_cache(p: &Project) -> tempfile::TempDir {
    let kept = tempfile::tempdir().expect("temp dir");
    for entry in std::fs::read_dir(p.path().join(".terraci/cache")).expect("cache written") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), kept.path().join(entry.file_name())).expect("copy");
    }
    kept
}

/// `cache:` restoring it into a fresh clone, without the files named in `leave_out`.
fn restore_cache(p: &Project, kept: &Path, leave_out: &[&str]) {
    let dir = p.path().join(".terraci/cache");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for entry in std::fs::read_dir(kept).expect("kept cache") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if !leave_out.contains(&name.to_str().expect("utf-8 name")) {
            std::fs::copy(entry.path(), dir.join(name)).expect("copy");
        }
    }
}

/// That the run in `p` left the fact cache restored from `kept` byte for byte: every
/// entry was found, and nothing was rewritten (`why` says by what).
fn assert_facts_kept(p: &Project, kept: &Path, why: &str) {
    let restored = std::fs::read(p.path().join(".terraci/cache/facts.bin")).expect("restored");
    let kept = std::fs::read(kept.join("facts.bin")).expect("kept");
    assert!(restored == kept, "{why}: the fact cache was rewritten");
}

/// What `generate` writes without any cache (the header's command line aside).
fn uncached(p: &Project) -> String {
    let out = p.run(&["generate", "--no-cache"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout.replace(" --no-cache", "")
}

#[test]
fn a_fresh_clone_with_the_cache_restored_replays_the_base_run_byte_for_byte() {
    let origin = origin(EKS);
    let p = Project::empty();
    let (base, kept) = base_run(&p, origin.path());

    fresh_clone(&p, origin.path());
    restore_cache(&p, kept.path(), &[]);
    let again = p.run(&["generate", "-v"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("note: replayed the last run"),
        "every stamp is new, but git's index vouches for every file: {}",
        again.stderr
    );
    assert_eq!(again.stdout, base);
    assert_eq!(without_verbose(&again.stdout), uncached(&p));

    // Without the record, from the facts and summaries the index finds: the same bytes.
    fresh_clone(&p, origin.path());
    restore_cache(&p, kept.path(), &["run.bin"]);
    let cached = computed(p.run(&["generate", "-v"]));
    assert_eq!(without_verbose(&cached.stdout), uncached(&p));
    assert_facts_kept(&p, kept.path(), "every entry held by its blob");
}

/// `out` of a run that computed its pipeline from the restored caches: not replayed,
/// and with no notice (a cache it could not use).
fn computed(out: Output) -> Output {
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("note: replayed"), "{}", out.stderr);
    assert!(!out.stderr.contains("notice:"), "{}", out.stderr);
    out
}

/// A pipeline of `generate -v`, its header's command line as without `-v`.
fn without_verbose(pipeline: &str) -> String {
    pipeline.replacen(
        "# Command: terraci generate -v\n",
        "# Command: terraci generate\n",
        1,
    )
}

/// The blob id git holds for `rel` at HEAD of the repository `dir`, as 20 bytes.
fn blob_id(dir: &Path, rel: &str) -> Vec<u8> {
    let hex = git_at(dir, &["rev-parse", &format!("HEAD:{rel}")]);
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// CRC-32 (IEEE), as the cache files' checksum.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A fact cache whose entry for EKS's file holds the facts of the version reading the
/// DNS state, under the blob id of the version reading the VPC's: a wrong fact stored
/// under a real blob id, the checksum made right again (and a MAC, when the cache was
/// signed, left as it was). Made by a run in a clone of the DNS version, with `env`.
fn poisoned_cache(env: &[(&str, &str)]) -> tempfile::TempDir {
    let vpc_version = origin(EKS);
    let dns_version = origin(&eks_reading_dns());
    let p = Project::empty();
    fresh_clone(&p, dns_version.path());
    let out = p.run_env(&["generate"], env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let kept = keep_cache(&p);
    let facts = kept.path().join("facts.bin");
    let mut bytes = std::fs::read(&facts).expect("facts written");
    let (real, wanted) = (
        blob_id(dns_version.path(), EKS_FILE),
        blob_id(vpc_version.path(), EKS_FILE),
    );
    let at = bytes
        .windows(20)
        .position(|w| w == real.as_slice())
        .expect("the fact cache holds the blob id");
    bytes[at..at + 20].copy_from_slice(&wanted);
    let signed =
        bytes.len() > 56 && &bytes[bytes.len() - 48..bytes.len() - 32] == b"terraci-hmac-256";
    let end = bytes.len() - if signed { 56 } else { 8 };
    let sum = u64::from(crc32(&bytes[..end])).to_le_bytes();
    bytes[end..end + 8].copy_from_slice(&sum);
    std::fs::write(&facts, bytes).expect("write");
    kept
}

#[test]
fn a_fresh_clone_reads_no_file_its_index_vouches_for_but_reads_a_racy_or_modified_one() {
    let origin = origin(EKS);
    let p = Project::empty();
    // The record and the summaries are left out: the facts are what is looked at.
    let leave_out = ["run.bin", "summaries.bin"];
    let poisoned = poisoned_cache(&[]);
    fresh_clone(&p, origin.path());
    let reads_vpc = uncached(&p);
    std::fs::write(p.path().join(EKS_FILE), eks_reading_dns()).expect("write");
    let reads_dns = uncached(&p);
    assert_ne!(reads_vpc, reads_dns, "the two versions give two pipelines");

    // Clean: the entry's blob is the index's, so EKS's file is not read, and what the
    // cache holds under that blob is what the run uses (which is why a restored cache
    // must be trusted, or signed: the next test).
    fresh_clone(&p, origin.path());
    restore_cache(&p, poisoned.path(), &leave_out);
    let clean = p.run(&["generate"]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert_eq!(clean.stdout, reads_dns, "EKS's file was read");

    // Racy: the index is not clearly newer than the files (its mtime put back), so
    // its stat data proves nothing and every file is read.
    fresh_clone(&p, origin.path());
    restore_cache(&p, poisoned.path(), &leave_out);
    let index = std::fs::File::options()
        .write(true)
        .open(p.path().join(".git/index"))
        .expect("index");
    index
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_000_000))
        .expect("set the index's mtime");
    drop(index);
    let racy = p.run(&["generate"]);
    assert_eq!(racy.code, 0, "{}", racy.stderr);
    assert_eq!(racy.stdout, reads_vpc, "a racy entry vouched for its file");

    // Modified after the checkout: its stat data is not the index's; read.
    fresh_clone(&p, origin.path());
    restore_cache(&p, poisoned.path(), &leave_out);
    std::fs::write(p.path().join(EKS_FILE), format!("{EKS}# edited\n")).expect("write");
    std::thread::sleep(Duration::from_millis(120));
    let modified = p.run(&["generate"]);
    assert_eq!(modified.code, 0, "{}", modified.stderr);
    assert_eq!(modified.stdout, uncached(&p));
    assert_eq!(modified.stdout, reads_vpc);
}

#[test]
fn with_the_cache_secret_set_a_poisoned_or_unsigned_cache_is_ignored_with_a_notice() {
    let secret = [("TERRACI_CACHE_SECRET", "protected-branch-secret")];
    let origin = origin(EKS);
    let p = Project::empty();
    fresh_clone(&p, origin.path());
    let reads_vpc = uncached(&p);
    let leave_out = ["run.bin", "summaries.bin"];

    // Signed with the secret, then changed: the signature no longer holds.
    let poisoned = poisoned_cache(&secret);
    fresh_clone(&p, origin.path());
    restore_cache(&p, poisoned.path(), &leave_out);
    let out = p.run_env(&["generate"], &secret);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout, reads_vpc,
        "the poisoned fact reached the output"
    );
    assert!(
        out.stderr.contains("notice: ignoring the fact cache")
            && out
                .stderr
                .contains("signature does not match the secret in TERRACI_CACHE_SECRET"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("protected-branch-secret"),
        "{}",
        out.stderr
    );

    // Written without the secret (a fork's merge request): not used either.
    let unsigned = poisoned_cache(&[]);
    fresh_clone(&p, origin.path());
    restore_cache(&p, unsigned.path(), &leave_out);
    let out = p.run_env(&["generate"], &secret);
    assert_eq!(
        out.stdout, reads_vpc,
        "the poisoned fact reached the output"
    );
    assert!(
        out.stderr
            .contains("not signed with the secret in TERRACI_CACHE_SECRET"),
        "{}",
        out.stderr
    );

    // A cache this run signed is used by the next: the repeat is replayed.
    let first = p.run_env(&["generate", "-v"], &secret);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let again = p.run_env(&["generate", "-v"], &secret);
    assert!(
        again.stderr.contains("note: replayed the last run"),
        "{}",
        again.stderr
    );
    assert_eq!(without_verbose(&again.stdout), reads_vpc);
    let signed = std::fs::read(p.path().join(".terraci/cache/facts.bin")).expect("facts");
    assert!(
        !signed
            .windows(secret[0].1.len())
            .any(|w| w == secret[0].1.as_bytes()),
        "the secret was written"
    );
}

/// Each CI job runs its own copy of terraci (an image's layer, a download, a `cargo
/// install`): a new file, with a new stamp. The cache and the record know the build by
/// its content (the linker's build ID), so the copy replays the run and reads the facts.
#[test]
fn another_copy_of_the_same_binary_finds_the_cache() {
    let origin = origin(EKS);
    let p = Project::empty();
    let (base, kept) = base_run(&p, origin.path());

    let bin = tempfile::tempdir().expect("temp dir");
    let copy = bin.path().join("terraci");
    std::fs::copy(env!("CARGO_BIN_EXE_terraci"), &copy).expect("copy the binary");
    let run_copy = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&copy);
        cmd.args(args)
            .current_dir(p.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", p.path())
            .env("TERRACI_CACHE_HOME", p.cache_home());
        let out = cmd.output().expect("run the copy");
        (
            out.status.code(),
            p.redact(&out.stdout),
            p.redact(&out.stderr),
        )
    };

    fresh_clone(&p, origin.path());
    restore_cache(&p, kept.path(), &[]);
    let (code, stdout, stderr) = run_copy(&["generate", "-v"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("note: replayed the last run"),
        "the copy is the same build: {stderr}"
    );
    assert_eq!(stdout, base);

    // Without the record: the facts and summaries are this build's too.
    fresh_clone(&p, origin.path());
    restore_cache(&p, kept.path(), &["run.bin"]);
    let (code, stdout, stderr) = run_copy(&["generate", "-v"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("notice:"), "{stderr}");
    assert_eq!(without_verbose(&stdout), uncached(&p));
}

/// `--from-commit`: the run reads HEAD's commit, so a fresh clone with the cache of such a
/// run restored replays it without looking at the work tree, and an edit or a file the
/// job made and did not commit is not seen.
#[test]
fn from_commit_replays_in_a_fresh_clone_and_reads_the_commit_not_the_work_tree() {
    let origin = origin(EKS);
    let p = Project::empty();
    fresh_clone(&p, origin.path());
    let pristine = uncached(&p);
    let base = p.run(&["generate", "--from-commit", "-v"]);
    assert_eq!(base.code, 0, "{}", base.stderr);
    let as_uncached = |out: &str| out.replacen(" --from-commit -v\n", "\n", 1);
    assert_eq!(as_uncached(&base.stdout), pristine);
    let kept = keep_cache(&p);

    // A job that edits a module and writes another before terraci runs.
    let uncommitted = |p: &Project| {
        std::fs::write(p.path().join(EKS_FILE), eks_reading_dns()).expect("edit");
        std::fs::create_dir_all(p.path().join("stage/extra")).expect("mkdir");
        std::fs::write(
            p.path().join("stage/extra/main.tf"),
            VPC.replace("/vpc/", "/extra/"),
        )
        .expect("write");
    };
    fresh_clone(&p, origin.path());
    restore_cache(&p, kept.path(), &[]);
    uncommitted(&p);
    let again = p.run(&["generate", "--from-commit", "-v"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("note: replayed the last run"),
        "the commit's tree is the recorded one: {}",
        again.stderr
    );
    assert_eq!(again.stdout, base.stdout);

    // Without the record: every fact found by the commit's blob ids, the same bytes.
    fresh_clone(&p, origin.path());
    restore_cache(&p, kept.path(), &["run.bin"]);
    uncommitted(&p);
    let cached = computed(p.run(&["generate", "--from-commit", "-v"]));
    assert_eq!(cached.stdout, base.stdout);
    assert_facts_kept(&p, kept.path(), "every entry found by its object id");

    // A cache of the work tree's runs serves too: its entries hold the blob ids git's
    // index vouched for, which are the commit's stamps.
    let (_, worktree_kept) = base_run(&p, origin.path());
    fresh_clone(&p, origin.path());
    restore_cache(&p, worktree_kept.path(), &["run.bin"]);
    let switched = p.run(&["generate", "--from-commit", "-v"]);
    assert_eq!(switched.code, 0, "{}", switched.stderr);
    assert_eq!(switched.stdout, base.stdout);
    assert_facts_kept(&p, worktree_kept.path(), "every entry found by its blob id");
    uncommitted(&p);

    // The work tree's run sees the job's files.
    let worktree = p.run(&["generate", "--no-cache"]);
    assert_eq!(worktree.code, 0, "{}", worktree.stderr);
    assert!(
        worktree.stdout.contains("stage/extra"),
        "{}",
        worktree.stdout
    );
    assert!(!cached.stdout.contains("stage/extra"), "{}", cached.stdout);
}

/// `--from-commit --changed-only` compares commits only (`--committed-only`): an edit
/// not committed changes neither the change set nor what the modules read.
#[test]
fn from_commit_changed_only_compares_the_commits_and_reads_them() {
    let origin = origin(EKS);
    let p = Project::empty();
    fresh_clone(&p, origin.path());
    git_at(p.path(), &["checkout", "-q", "-b", "feature"]);
    std::fs::write(p.path().join(EKS_FILE), eks_reading_dns()).expect("edit");
    git_at(p.path(), &["commit", "-q", "-am", "eks reads dns"]);
    let args = [
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--no-cache",
    ];
    let committed = p.run(&[&args[..], &["--committed-only"]].concat());
    assert_eq!(committed.code, 0, "{}", committed.stderr);
    assert!(committed.stdout.contains("eks"), "{}", committed.stdout);

    // Not committed: the VPC module moved its state, and DNS has an edit.
    std::fs::write(
        p.path().join("stage/vpc/main.tf"),
        VPC.replace(
            "stage/vpc/terraform.tfstate",
            "stage/moved/terraform.tfstate",
        ),
    )
    .expect("edit");
    std::fs::write(
        p.path().join("stage/dns/main.tf"),
        format!("{DNS}# edited\n"),
    )
    .expect("edit");
    let from_commit = p.run(&[&args[..], &["--from-commit"]].concat());
    assert_eq!(from_commit.code, 0, "{}", from_commit.stderr);
    assert_eq!(
        from_commit
            .stdout
            .replacen(" --from-commit\n", " --committed-only\n", 1),
        committed.stdout
    );
    let worktree = p.run(&args);
    assert_eq!(worktree.code, 0, "{}", worktree.stderr);
    assert_ne!(
        worktree
            .stdout
            .replacen("--no-cache\n", "--no-cache --committed-only\n", 1),
        committed.stdout
    );
}

/// `--from-commit` where there is no commit to read says so, and writes nothing.
#[test]
fn from_commit_outside_a_repository_or_before_a_commit_is_an_error_that_says_so() {
    let p = Project::empty();
    p.write(".terraci.yaml", CONFIG);
    p.write("stage/vpc/main.tf", VPC);
    let out = p.run(&["generate", "--from-commit", "-o", "out.yml"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--from-commit reads the project from HEAD's commit")
            && out.stderr.contains("is not inside a git repository"),
        "{}",
        out.stderr
    );
    git_at(p.path(), &["-c", "init.defaultBranch=main", "init", "-q"]);
    let out = p.run(&["generate", "--from-commit", "-o", "out.yml"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("has no commit yet"), "{}", out.stderr);
    assert!(!p.path().join("out.yml").exists());
}

/// A fresh clone of `origin`'s branch `branch` (with `main` beside it, as a CI job
/// fetches the target branch).
fn fresh_clone_of(p: &Project, origin: &Path, branch: &str) {
    fresh_clone(p, origin);
    git_at(p.path(), &["checkout", "-q", branch]);
}

/// Commits `files` on a new branch `branch` of `origin`, from `main`.
fn branch(origin: &Path, branch: &str, files: &[(&str, &str)]) {
    git_at(origin, &["checkout", "-q", "-b", branch, "main"]);
    for (rel, text) in files {
        let path = origin.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    git_at(origin, &["add", "-A"]);
    git_at(origin, &["commit", "-q", "-m", branch]);
    git_at(origin, &["checkout", "-q", "main"]);
}

#[test]
fn from_commit_takes_the_walk_from_the_base_run_s_memo_only_when_the_diff_changes_contents_alone() {
    let origin = origin(EKS);
    // EKS reads a state no module writes: a warning only the edited text gives.
    let eks_reading_nothing = EKS.replace("stage/vpc/terraform", "stage/nowhere/terraform");
    branch(
        origin.path(),
        "eks-edited",
        &[(EKS_FILE, &eks_reading_nothing)],
    );
    let rds = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/rds/terraform.tfstate\"\n  }\n}\n";
    let rds_reading_vpc = format!("{rds}{}", EKS.replace("\"net\"", "\"vpc\""));
    branch(
        origin.path(),
        "new-module",
        &[("stage/rds/main.tf", &rds_reading_vpc)],
    );
    let p = Project::empty();
    fresh_clone(&p, origin.path());
    let base = p.run(&["generate", "--from-commit"]);
    assert_eq!(base.code, 0, "{}", base.stderr);
    assert!(p.path().join(".terraci/cache/walk.bin").is_file());
    let kept = keep_cache(&p);
    let memo = "note: the walk of HEAD's commit is the memo's";
    let changed = [
        "generate",
        "--from-commit",
        "--changed-only",
        "--base-ref",
        "main",
        "-v",
    ];
    // What the same run computes with no cache at all.
    let fresh = |p: &Project| {
        let out = p.run(&[&changed[..], &["--no-cache"]].concat());
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout.replacen(" --no-cache\n", "\n", 1)
    };
    let warnings = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|l| l.starts_with("warning"))
            .map(str::to_owned)
            .collect()
    };

    // Contents alone: the walk is the memo's, and the edited file is read, not answered
    // from the cache under its old id (which would not warn).
    fresh_clone_of(&p, origin.path(), "eks-edited");
    restore_cache(&p, kept.path(), &[]);
    let out = computed(p.run(&changed));
    assert!(
        out.stderr.contains(&format!("{memo} (`")) && out.stderr.contains("1 file(s) changed"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, fresh(&p));
    let uncached = p.run(&[&changed[..], &["--no-cache"]].concat());
    assert_eq!(warnings(&out.stderr), warnings(&uncached.stderr));
    assert!(out.stderr.contains("stage/nowhere"), "{}", out.stderr);

    // A module added: the diff refuses, and the run walks and finds it.
    fresh_clone_of(&p, origin.path(), "new-module");
    restore_cache(&p, kept.path(), &[]);
    let out = computed(p.run(&changed));
    assert!(!out.stderr.contains(memo), "{}", out.stderr);
    assert_eq!(out.stdout, fresh(&p));
    assert!(out.stdout.contains("stage/rds"), "{}", out.stdout);

    // A damaged memo is not used.
    fresh_clone_of(&p, origin.path(), "eks-edited");
    restore_cache(&p, kept.path(), &[]);
    let walk = p.path().join(".terraci/cache/walk.bin");
    let mut bytes = std::fs::read(&walk).expect("memo restored");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&walk, bytes).expect("write");
    let out = p.run(&changed);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains(memo), "{}", out.stderr);
    assert!(
        out.stderr.contains("notice: ignoring the walk memo")
            && out.stderr.contains("corrupt or truncated"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, fresh(&p));
    // ...and is written again: the next run (not a replay) takes its walk from it.
    std::fs::remove_file(p.path().join(".terraci/cache/run-generate-changed.bin"))
        .expect("the run recorded");
    let again = computed(p.run(&changed));
    assert!(again.stderr.contains(memo), "{}", again.stderr);

    // With the cache secret set, a memo not signed with it is not used either.
    fresh_clone_of(&p, origin.path(), "eks-edited");
    restore_cache(&p, kept.path(), &[]);
    let secret = [("TERRACI_CACHE_SECRET", "s3cret")];
    let out = p.run_env(&changed, &secret);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains(memo), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("not signed with the secret in TERRACI_CACHE_SECRET"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, fresh(&p));
}
