//! `--changed-only` on real git histories: a feature branch against `main`, the working
//! tree, renames, deletions, libraries, subdirectory projects, filters and the no-op
//! pipeline. Histories are built with the `git` CLI; terraci reads them with gix.

use std::process::Command;

use crate::snap;
use crate::support::{actionlint, gitlab_ci_local_list, Project};

const STAGE: &str = "platform/stage/eu-central-1";
const PROD: &str = "platform/prod/eu-central-1";

/// A project inside a git repository (`repo` is the repository root; the project is
/// `repo/<sub>`).
struct Repo {
    project: Project,
    sub: &'static str,
}

impl Repo {
    /// `fixtures/example` committed on `main`, then checked out on a `feature` branch.
    fn example() -> Repo {
        Repo::fixture_in("example", "")
    }

    /// `fixtures/<name>` copied to `<sub>` of a fresh repository, committed on `main`,
    /// then checked out on `feature`.
    fn fixture_in(name: &str, sub: &'static str) -> Repo {
        let project = if sub.is_empty() {
            Project::fixture(name)
        } else {
            let fixture = Project::fixture(name);
            let outer = Project::empty();
            std::fs::rename(fixture.path(), outer.path().join(sub)).expect("move fixture");
            outer
        };
        let repo = Repo { project, sub };
        repo.git(&["-c", "init.defaultBranch=main", "init", "-q"]);
        repo.commit("initial");
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        git_at(self.project.path(), args)
    }

    fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }

    /// Path of `rel` inside the repository (not the project).
    fn write(&self, rel: &str, text: &str) {
        self.project.write(rel, text);
    }

    fn append(&self, rel: &str, text: &str) {
        let old = self.project.read(rel);
        self.project.write(rel, format!("{old}{text}"));
    }

    /// `terraci ARGS`, run from the repository root.
    fn run(&self, args: &[&str]) -> crate::support::Output {
        self.project.run(args)
    }

    /// `generate --changed-only --base-ref main ARGS --dry-run`, as a snapshot section.
    fn dry_run(&self, extra: &[&str]) -> String {
        let mut args = vec!["generate", "--changed-only", "--base-ref", "main"];
        if !self.sub.is_empty() {
            args.extend(["-d", self.sub]);
        }
        args.extend_from_slice(extra);
        args.push("--dry-run");
        self.section(&args)
    }

    /// `$ terraci ARGS`, then the exit code, stdout and stderr.
    fn section(&self, args: &[&str]) -> String {
        let out = self.run(args);
        format!("$ terraci {}\n{}", args.join(" "), out.snapshot())
    }
}

#[test]
fn a_commit_on_a_feature_branch_plans_the_module_and_its_dependents() {
    let repo = Repo::example();
    repo.append(&format!("{STAGE}/vpc/main.tf"), "# widen the CIDR\n");
    repo.commit("vpc");
    snap!("changes_feature_branch", repo.dry_run(&[]));
}

#[test]
fn json_dry_run_lists_changed_files_modules_reasons_and_jobs() {
    let repo = Repo::example();
    repo.append(&format!("{STAGE}/vpc/main.tf"), "# widen the CIDR\n");
    repo.append("_modules/kafka/main.tf", "# more partitions\n");
    repo.commit("vpc and kafka");
    let out = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    // The library is not a changed module: its users are.
    assert_eq!(
        v["changed_modules"],
        serde_json::json!([
            format!("{PROD}/app"),
            format!("{STAGE}/app"),
            format!("{STAGE}/vpc")
        ])
    );
    snap!("changes_dry_run_json", out.snapshot());
}

#[test]
fn explain_says_why_each_module_is_in_the_pipeline() {
    let repo = Repo::example();
    repo.append(&format!("{STAGE}/eks/main.tf"), "# bigger nodes\n");
    repo.commit("eks");
    let out = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--explain",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out
        .stdout
        .contains("plan-platform-stage-eu-central-1-eks-addons:"));
    assert!(!out.stdout.contains("plan-platform-stage-eu-central-1-vpc:"));
    snap!("changes_explain", out.stderr);
}

#[test]
fn working_tree_edits_count_unless_committed_only() {
    let repo = Repo::example();
    repo.write(".gitignore", "*.log\n");
    repo.append(&format!("{STAGE}/rds/main.tf"), "# committed\n");
    repo.commit("rds");
    // Unstaged, staged and untracked changes in three other modules.
    repo.append(&format!("{PROD}/vpc/main.tf"), "# unstaged\n");
    repo.append(&format!("{PROD}/rds/main.tf"), "# staged\n");
    repo.git(&["add", &format!("{PROD}/rds/main.tf")]);
    repo.write(&format!("{STAGE}/eks/addons/extra.tf"), "# untracked\n");
    // An ignored file marks nothing.
    repo.write(&format!("{STAGE}/vpc/debug.log"), "ignored\n");
    let mut all = repo.dry_run(&[]);
    all.push_str(&repo.dry_run(&["--committed-only"]));
    snap!("changes_working_tree", all);
}

#[test]
fn a_renamed_module_is_a_deleted_one_plus_a_new_one() {
    let repo = Repo::example();
    repo.git(&[
        "mv",
        &format!("{PROD}/monitoring"),
        &format!("{PROD}/observability"),
    ]);
    repo.commit("rename monitoring");
    let out = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    assert_eq!(
        v["changed_files"],
        serde_json::json!([
            format!("{PROD}/monitoring/main.tf"),
            format!("{PROD}/observability/main.tf")
        ])
    );
    assert_eq!(
        v["changed_modules"],
        serde_json::json!([format!("{PROD}/observability")])
    );
    snap!("changes_rename", repo.dry_run(&[]));
}

#[test]
fn a_deleted_module_is_reported_and_references_to_it_are_unmatched() {
    let repo = Repo::example();
    repo.git(&["rm", "-r", "-q", &format!("{STAGE}/rds")]);
    // A submodule deleted under a module that stays does not mark its parent.
    repo.git(&["rm", "-r", "-q", &format!("{STAGE}/eks/addons")]);
    repo.commit("drop rds and addons");
    let mut all = repo.dry_run(&[]);
    let out = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    assert_eq!(v["changed_modules"], serde_json::json!([]));
    let codes: Vec<String> = v["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["code"].as_str().unwrap_or(""),
                d["module"].as_str().unwrap_or("")
            )
        })
        .collect();
    all.push_str(&format!("diagnostics (JSON): {codes:#?}\n"));
    snap!("changes_deleted_module", all);
}

#[test]
fn a_changed_library_marks_every_module_that_uses_it_transitively() {
    let repo = Repo::example();
    // _modules/kafka calls _modules/naming; modules/sqs is not listed as a library but
    // stage eks reaches it through a local source.
    repo.append(
        "_modules/kafka/main.tf",
        "\nmodule \"naming\" {\n  source = \"../naming\"\n}\n",
    );
    repo.write(
        "_modules/naming/main.tf",
        "output \"prefix\" {\n  value = \"acme\"\n}\n",
    );
    repo.write(
        "modules/sqs/main.tf",
        "variable \"name\" {\n  type = string\n}\n",
    );
    repo.append(
        &format!("{STAGE}/eks/main.tf"),
        "\nmodule \"queue\" {\n  source = \"../../../../modules/sqs\"\n  name   = \"eks\"\n}\n",
    );
    repo.commit("libraries");
    repo.git(&["checkout", "-q", "-B", "main"]);
    repo.git(&["checkout", "-q", "-b", "libs"]);
    repo.append("_modules/naming/main.tf", "# shorter prefix\n");
    repo.write("modules/sqs/policy.json.tpl", "{}\n");
    repo.commit("change both libraries");
    snap!("changes_libraries", repo.dry_run(&[]));
}

#[test]
fn any_file_marks_its_module_not_only_terraform_files() {
    let repo = Repo::example();
    repo.append(&format!("{PROD}/app/terraform.tfvars"), "# retune\n");
    repo.write(
        &format!("{STAGE}/eks/templates/userdata.sh.tpl"),
        "#!/bin/sh\n",
    );
    repo.write(&format!("{STAGE}/vpc/.terraform.lock.hcl"), "# providers\n");
    // Outside every module: nothing.
    repo.write("README.md", "# infra\n");
    repo.commit("non-terraform files");
    snap!("changes_non_terraform_files", repo.dry_run(&[]));
}

#[test]
fn a_project_in_a_subdirectory_sees_only_its_own_changes() {
    let repo = Repo::fixture_in("example", "infra");
    repo.write("docs/runbook.md", "# runbook\n");
    repo.append(&format!("infra/{STAGE}/rds/main.tf"), "# bigger disk\n");
    repo.commit("rds and docs");
    let mut all = repo.dry_run(&[]);
    // The JSON names paths relative to the project, not the repository.
    let out = repo.run(&[
        "generate",
        "-d",
        "infra",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    all.push_str(&format!("changed_files (JSON): {}\n", v["changed_files"]));
    snap!("changes_subdirectory_project", all);
}

#[test]
fn include_dependencies_adds_what_the_changed_modules_read() {
    let repo = Repo::example();
    repo.append(&format!("{STAGE}/eks/main.tf"), "# bigger nodes\n");
    repo.commit("eks");
    snap!(
        "changes_include_dependencies",
        repo.dry_run(&["--include-dependencies"])
    );
}

#[test]
fn filters_apply_after_propagation() {
    let repo = Repo::example();
    repo.append(&format!("{STAGE}/vpc/main.tf"), "# widen the CIDR\n");
    repo.commit("vpc");
    let mut all = String::new();
    // eks is filtered out, yet its dependents (app, addons) still see the change, and
    // their jobs wait for the vpc through it.
    all.push_str(&repo.dry_run(&["-x", &format!("{STAGE}/eks")]));
    // Only prod gets jobs: the stage vpc change reaches prod monitoring.
    all.push_str(&repo.dry_run(&["-f", "environment=prod"]));
    snap!("changes_filters_after_propagation", all);
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn nothing_affected_gives_a_valid_no_op_pipeline_for_both_providers() {
    let repo = Repo::example();
    repo.write("README.md", "# infra\n");
    repo.commit("docs only");
    let args = ["generate", "--changed-only", "--base-ref", "main"];
    let gitlab = repo.run(&args);
    assert_eq!(gitlab.code, 0, "{}", gitlab.stderr);
    let jobs = gitlab_ci_local_list(&gitlab.stdout).expect("gitlab-ci-local accepts it");
    assert!(jobs.contains("terraci-no-changes"), "{jobs}");
    let github = repo
        .project
        .run_env(&args, &[("TERRACI_PROVIDER", "github")]);
    assert_eq!(github.code, 0, "{}", github.stderr);
    assert_eq!(actionlint(&github.stdout), "");
    let mut all = format!(
        "$ terraci {} (gitlab)\n{}",
        args.join(" "),
        gitlab.snapshot()
    );
    all.push_str(&format!(
        "$ terraci {} (github)\n{}",
        args.join(" "),
        github.snapshot()
    ));
    let explain = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--explain",
    ]);
    all.push_str(&format!(
        "$ terraci generate --changed-only --base-ref main --explain (stderr)\n{}",
        explain.stderr
    ));
    snap!("changes_nothing_affected", all);
}

#[test]
fn an_unknown_base_ref_names_what_was_tried() {
    let repo = Repo::example();
    let mut all = repo.section(&["generate", "--changed-only", "--base-ref", "nope"]);
    // Without --base-ref and without main/master, the defaults are listed.
    repo.git(&["branch", "-q", "-m", "main", "trunk"]);
    all.push_str(&repo.section(&["generate", "--changed-only"]));
    assert!(all.contains("exit: 1"));
    // The flags that only make sense with --changed-only are a usage error without it.
    all.push_str(&repo.section(&["generate", "--base-ref", "main"]));
    snap!("changes_unknown_base_ref", all);
}

#[test]
fn ci_variables_pick_the_base_when_no_base_ref_is_given() {
    let repo = Repo::example();
    let base = repo.git(&["rev-parse", "main"]).trim().to_owned();
    repo.append(&format!("{PROD}/monitoring/main.tf"), "# more alerts\n");
    repo.commit("monitoring");
    // main moves on after the branch point: only the merge base counts.
    repo.git(&["checkout", "-q", "main"]);
    repo.append(&format!("{PROD}/vpc/main.tf"), "# on main only\n");
    repo.commit("vpc on main");
    repo.git(&["checkout", "-q", "feature"]);
    let args = [
        "generate",
        "--changed-only",
        "--dry-run",
        "--format",
        "json",
    ];
    let changed = |env: &[(&str, &str)]| {
        let out = repo.project.run_env(&args, env);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
        v["changed_modules"].clone()
    };
    let expected = serde_json::json!([format!("{PROD}/monitoring")]);
    assert_eq!(
        changed(&[("CI_MERGE_REQUEST_DIFF_BASE_SHA", &base)]),
        expected
    );
    // GITHUB_BASE_REF names a branch of `origin`.
    repo.git(&["update-ref", "refs/remotes/origin/main", "main"]);
    assert_eq!(changed(&[("GITHUB_BASE_REF", "main")]), expected);
    // Without any: origin/main, then main.
    assert_eq!(changed(&[]), expected);
}

/// `git ARGS` in `dir`, with a fixed identity and dates and no system or user config.
pub(crate) fn git_at(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository of its own, with one commit, to use as a submodule.
fn submodule_origin() -> Project {
    let origin = Project::empty();
    origin.write("README.md", "vendored\n");
    git_at(
        origin.path(),
        &["-c", "init.defaultBranch=main", "init", "-q"],
    );
    git_at(origin.path(), &["add", "-A"]);
    git_at(origin.path(), &["commit", "-q", "-m", "vendored"]);
    origin
}

/// The example with `origin` as a submodule at `<STAGE>/vpc/vendor`, added on `main`;
/// `feature` starts from there.
fn example_with_submodule(origin: &Project) -> Repo {
    let repo = Repo::example();
    repo.git(&["checkout", "-q", "main"]);
    let url = origin.path().to_str().expect("utf-8 temp dir");
    repo.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        url,
        &format!("{STAGE}/vpc/vendor"),
    ]);
    repo.commit("add the submodule");
    repo.git(&["checkout", "-q", "-B", "feature"]);
    repo
}

#[test]
fn a_submodule_bump_marks_the_module_that_contains_it() {
    let origin = submodule_origin();
    let repo = example_with_submodule(&origin);
    let inner = repo.project.path().join(format!("{STAGE}/vpc/vendor"));
    git_at(&inner, &["commit", "-q", "--allow-empty", "-m", "bump"]);
    repo.commit("bump the submodule");
    let out = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--committed-only",
        "--explain",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("changed: vendor (submodule)"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("plan-platform-stage-eu-central-1-vpc:"));
}

#[test]
fn uncommitted_changes_inside_a_submodule_are_seen() {
    let origin = submodule_origin();
    let repo = example_with_submodule(&origin);
    repo.write(&format!("{STAGE}/vpc/vendor/README.md"), "edited\n");
    let args = [
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--explain",
    ];
    let out = repo.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("changed: vendor (submodule)"),
        "{}",
        out.stderr
    );
    // Only the working tree changed.
    let out = repo.run(&[&args[..4], &["--committed-only"]].concat());
    assert!(
        !out.stdout.contains("plan-platform-stage-eu-central-1-vpc:"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_change_set_of_commits_alone_does_not_need_git_s_index() {
    let repo = Repo::example();
    repo.append(&format!("{STAGE}/vpc/main.tf"), "# widen the CIDR\n");
    repo.commit("vpc");
    // What the commits changed is told by their trees: a damaged index (which only the
    // work tree's status reads) is not an error with `--committed-only`.
    repo.write(".git/index", "garbage");
    let args = [
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
    ];
    let out = repo.run(&[&args[..], &["--committed-only"]].concat());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("platform-stage-eu-central-1-vpc"),
        "{}",
        out.stdout
    );
    // Without it, the status is asked and the damaged index is named.
    let out = repo.run(&args);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(".git/index"), "{}", out.stderr);
}

#[test]
fn git_errors_name_what_was_tried_and_what_to_run() {
    let mut all = String::new();
    // A damaged index: named, with the command that rebuilds it.
    let repo = Repo::example();
    repo.write(".git/index", "garbage");
    all.push_str(&repo.section(&["generate", "--changed-only", "--base-ref", "main"]));
    // The fetch hint uses the repository's remotes and the ref that was tried.
    let repo = Repo::example();
    repo.git(&[
        "remote",
        "add",
        "upstream",
        "https://example.invalid/live.git",
    ]);
    for base in ["upstream/develop", "origin/develop", "develop"] {
        all.push_str(&repo.section(&["generate", "--changed-only", "--base-ref", base]));
    }
    repo.git(&["branch", "-q", "-m", "main", "trunk"]);
    all.push_str(&repo.section(&["generate", "--changed-only"]));
    repo.git(&["remote", "rename", "upstream", "origin"]);
    all.push_str(&repo.section(&["generate", "--changed-only"]));
    // A SHA-256 repository is not "not a repository".
    let project = Project::fixture("example");
    git_at(project.path(), &["init", "-q", "--object-format=sha256"]);
    all.push_str(&format!(
        "$ terraci generate --changed-only (SHA-256 repository)\n{}",
        project.run(&["generate", "--changed-only"]).snapshot()
    ));
    assert_eq!(all.matches("exit: 1").count(), 7, "{all}");
    snap!("changes_git_errors", all);
}

/// The module ids `graph --format list` prints.
fn listed(repo: &Repo, env: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec!["graph", "--format", "levels"];
    if !repo.sub.is_empty() {
        args.extend(["-d", repo.sub]);
    }
    let out = repo.project.run_env(&args, env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split("  (").next())
        .map(str::to_owned)
        .filter(|l| l.starts_with("platform/"))
        .collect()
}

#[test]
fn discovery_honours_every_ignore_file_git_reads() {
    // A `.gitignore` above the project directory, with git's anchoring relative to it.
    let repo = Repo::fixture_in("example", "live");
    let all = listed(&repo, &[]);
    assert!(all.iter().any(|m| m.ends_with("/monitoring")), "{all:?}");
    repo.write(
        ".gitignore",
        "monitoring/\n/live/platform/stage/eu-central-1/rds/\n",
    );
    let ids = listed(&repo, &[]);
    assert!(!ids.iter().any(|m| m.contains("monitoring")), "{ids:?}");
    assert!(!ids.iter().any(|m| m == &format!("{STAGE}/rds")), "{ids:?}");
    assert!(ids.iter().any(|m| m == &format!("{PROD}/rds")), "{ids:?}");
    // `!` in the project's own `.gitignore` wins over the rule above it.
    repo.write("live/.gitignore", "!monitoring/\n");
    assert!(listed(&repo, &[]).iter().any(|m| m.contains("monitoring")));

    // `.git/info/exclude`.
    let repo = Repo::example();
    repo.write(".git/info/exclude", "platform/stage/eu-central-1/rds/\n");
    let ids = listed(&repo, &[]);
    assert!(!ids.iter().any(|m| m == &format!("{STAGE}/rds")), "{ids:?}");
    assert!(ids.iter().any(|m| m == &format!("{STAGE}/vpc")), "{ids:?}");

    // The global excludes file (`$XDG_CONFIG_HOME/git/ignore`).
    let repo = Repo::example();
    let xdg = Project::empty();
    xdg.write("git/ignore", "app/\n");
    let xdg_dir = xdg.path().to_str().expect("utf-8 temp dir");
    let ids = listed(&repo, &[("XDG_CONFIG_HOME", xdg_dir)]);
    assert!(!ids.iter().any(|m| m.ends_with("/app")), "{ids:?}");
    assert!(ids.iter().any(|m| m.ends_with("/eks")), "{ids:?}");
}

#[test]
fn what_a_local_run_leaves_behind_is_no_change() {
    let repo = Repo::example();
    // Not gitignored: the working tree holds what terraform and terraci wrote.
    repo.write(&format!("{STAGE}/vpc/.terraform/terraform.tfstate"), "{}\n");
    repo.write(&format!("{STAGE}/eks/plan.tfplan"), "plan\n");
    // The plan results a plan job (or `local-exec plan`) keeps beside it.
    repo.write(&format!("{STAGE}/rds/plan.txt"), "No changes.\n");
    repo.write(&format!("{STAGE}/rds/plan.json"), "{}\n");
    repo.write(
        &format!("{STAGE}/rds/plan.result.json"),
        "{\"exit_code\": 0, \"commit\": \"\"}\n",
    );
    repo.write(".terraci/logs/plan-x.log", "log\n");
    repo.write(&format!("{PROD}/app/.terraci/cache/facts.bin"), "x\n");
    let out = repo.project.run(&[
        "generate",
        "--changed-only",
        "--dry-run",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(
        doc["changed_modules"],
        serde_json::json!([]),
        "{}",
        out.stdout
    );
}

/// The outputs of the GitHub workflow's `terraci-affected` job, from its real script run
/// in the repository as GitHub would run it: the step's `env` evaluated in `github`,
/// `$GITHUB_OUTPUT` a file, terraci on PATH unless `without_terraci`.
fn affected_outputs(
    repo: &Repo,
    job: &serde_yaml::Value,
    github: &serde_json::Value,
    without_terraci: bool,
) -> std::collections::BTreeMap<String, String> {
    let step = job["steps"]
        .as_sequence()
        .expect("steps")
        .iter()
        .find(|s| s["id"].as_str() == Some("affected"))
        .expect("the affected step");
    let out = tempfile::tempdir().expect("temp dir");
    let output = out.path().join("github_output");
    std::fs::write(&output, "").expect("write");
    let terraci = std::path::Path::new(env!("CARGO_BIN_EXE_terraci"));
    let bin = out.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    if !without_terraci {
        std::os::unix::fs::symlink(terraci, bin.join("terraci")).expect("link");
    }
    // git and a shell, never a terraci from the machine's PATH.
    for tool in ["git", "bash", "sh", "cat", "tr"] {
        if let Some(found) = which(tool) {
            let _ = std::os::unix::fs::symlink(found, bin.join(tool));
        }
    }
    let mut cmd = Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(step["run"].as_str().expect("run"))
        .current_dir(repo.project.path())
        .env_clear()
        .env("PATH", &bin)
        .env("HOME", repo.project.path())
        .env("TERRACI_CACHE_HOME", repo.project.cache_home())
        .env("GITHUB_OUTPUT", &output);
    let context = serde_json::json!({ "github": github });
    for (k, v) in step["env"].as_mapping().expect("env") {
        let value = crate::github_expr::interpolate(v.as_str().expect("env value"), &context);
        cmd.env(k.as_str().expect("env name"), value);
    }
    let run = cmd.output().expect("bash runs");
    assert!(
        run.status.success(),
        "the affected step failed: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read_to_string(&output)
        .expect("read")
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').expect("name=value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(tool))
            .find(|p| p.is_file())
    })
}

/// The jobs of the generated GitHub workflow that run for `github` (an event's context).
fn github_run(
    repo: &Repo,
    workflow: &str,
    github: &serde_json::Value,
    without_terraci: bool,
) -> Vec<String> {
    let workflow: serde_yaml::Value = serde_yaml::from_str(workflow).expect("workflow YAML");
    let ran = crate::github_expr::run_workflow(&workflow, github, |id, job| {
        if id == "terraci-affected" {
            affected_outputs(repo, job, github, without_terraci)
        } else {
            Default::default()
        }
    });
    ran.into_iter().collect()
}

#[test]
fn the_github_workflow_runs_what_a_pull_request_or_a_push_affects() {
    let repo = Repo::example();
    // The workflow as committed on the default branch.
    let out = repo.run(&["generate", "--provider", "github"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let workflow = out.stdout;
    let main = repo.git(&["rev-parse", "main"]).trim().to_owned();
    repo.append(&format!("{STAGE}/eks/main.tf"), "# bigger nodes\n");
    repo.commit("eks");
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let plans = |modules: &[&str], kind: &str| -> Vec<String> {
        modules
            .iter()
            .map(|m| format!("{kind}-{}", m.replace('/', "-")))
            .collect()
    };
    let affected = [
        format!("{STAGE}/app"),
        format!("{STAGE}/eks"),
        format!("{STAGE}/eks/addons"),
    ];
    let affected: Vec<&str> = affected.iter().map(String::as_str).collect();

    // A pull request touching one module: its plan and its dependents' plans, no apply.
    let pull_request = serde_json::json!({
        "event_name": "pull_request",
        "sha": head,
        "event": {"pull_request": {"base": {"sha": main}, "head": {"sha": head}}},
    });
    let mut want = plans(&affected, "plan");
    want.push("terraci-affected".to_owned());
    want.push("terraci-summary".to_owned());
    want.sort();
    assert_eq!(github_run(&repo, &workflow, &pull_request, false), want);
    // The affected job reads the commit (`--from-commit`), as the jobs it selects for do:
    // a file a step before it wrote into the checkout (here one making rds read eks's
    // state) selects nothing more.
    let written = format!("{STAGE}/rds/written.tf");
    repo.write(
        &written,
        "data \"terraform_remote_state\" \"eks\" {\n  backend = \"s3\"\n  config = {\n    \
         bucket = \"acme-terraform-state\"\n    key    = \"platform/stage/eu-central-1/eks/terraform.tfstate\"\n    \
         region = \"eu-central-1\"\n  }\n}\n",
    );
    assert_eq!(github_run(&repo, &workflow, &pull_request, false), want);
    std::fs::remove_file(repo.project.path().join(&written)).expect("remove");

    // The same module set as `--changed-only` plans on GitLab.
    let dry = repo.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "modules",
    ]);
    let listed: Vec<String> = serde_json::from_str(&dry.stdout).expect("a JSON array");
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    assert_eq!(listed_sorted, affected);

    // The merge, pushed to main: plan and apply of the same modules, nothing else.
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&["merge", "-q", "--ff-only", "feature"]);
    let push = serde_json::json!({
        "event_name": "push",
        "sha": head,
        "event": {"before": main},
    });
    let mut want = plans(&affected, "plan");
    want.extend(plans(&affected, "apply"));
    want.push("terraci-affected".to_owned());
    want.sort();
    assert_eq!(github_run(&repo, &workflow, &push, false), want);

    // A manual run, a push that created its branch, or no terraci in the job: everything.
    let all_plans = plans(
        &[
            &format!("{PROD}/app"),
            &format!("{PROD}/eks"),
            &format!("{PROD}/monitoring"),
            &format!("{PROD}/rds"),
            &format!("{PROD}/vpc"),
            &format!("{STAGE}/app"),
            &format!("{STAGE}/eks"),
            &format!("{STAGE}/eks/addons"),
            &format!("{STAGE}/rds"),
            &format!("{STAGE}/vpc"),
        ],
        "plan",
    );
    let dispatch = serde_json::json!({"event_name": "workflow_dispatch", "sha": head, "event": {}});
    let created = serde_json::json!({
        "event_name": "push",
        "sha": head,
        "event": {"before": "0000000000000000000000000000000000000000"},
    });
    for (github, without_terraci) in [(&dispatch, false), (&created, false), (&push, true)] {
        let ran = github_run(&repo, &workflow, github, without_terraci);
        for plan in &all_plans {
            assert!(ran.contains(plan), "{plan} did not run: {ran:?}");
        }
    }

    // The plain workflow: no selection job, every plan on a pull request.
    let config = repo.project.read(".terraci.yaml");
    assert!(!config.contains("github:"));
    repo.write(
        ".terraci.yaml",
        &config.replacen(
            "extensions:\n",
            "extensions:\n  github:\n    affected_only: false\n",
            1,
        ),
    );
    let plain = repo.run(&["generate", "--provider", "github"]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(!plain.stdout.contains("terraci-affected"));
    let ran = github_run(&repo, &plain.stdout, &pull_request, false);
    for plan in &all_plans {
        assert!(ran.contains(plan), "{plan} did not run: {ran:?}");
    }
}

#[test]
fn unselected_modules_leave_out_ids_that_differ_only_in_case_from_a_selected_one() {
    // GitHub's `contains` ignores case: a skip list holding `app/net` would skip
    // `app/Net`'s jobs too. The list leaves such a module out (it runs: more, never less).
    let p = Project::empty();
    let backend = |key: &str| {
        format!("terraform {{\n  backend \"s3\" {{\n    bucket = \"b\"\n    key    = \"{key}\"\n  }}\n}}\n")
    };
    for m in ["app/Net", "app/net", "app/db"] {
        p.write(&format!("{m}/main.tf"), backend(&format!("{m}.tfstate")));
    }
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{service}/{module}\"\n",
    );
    git_at(p.path(), &["-c", "init.defaultBranch=main", "init", "-q"]);
    git_at(p.path(), &["add", "-A"]);
    git_at(p.path(), &["commit", "-q", "-m", "modules"]);
    git_at(p.path(), &["checkout", "-q", "-b", "feature"]);
    p.write(
        "app/Net/main.tf",
        format!("{}# more\n", backend("app/Net.tfstate")),
    );
    git_at(p.path(), &["commit", "-q", "-am", "Net"]);
    let out = p.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "unselected",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "[\"app/db\"]\n");
    let modules = p.run(&[
        "generate",
        "--changed-only",
        "--base-ref",
        "main",
        "--dry-run",
        "--format",
        "modules",
    ]);
    assert_eq!(modules.stdout, "[\"app/Net\"]\n");
    // Not a pipeline format.
    let refused = p.run(&["generate", "--format", "unselected"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
}
