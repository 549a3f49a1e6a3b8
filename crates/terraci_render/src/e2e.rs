//! End to end: a generated GitLab pipeline run by gitlab-ci-local (shell executor, one
//! isolated build directory per job) on a three-module repository, vpc <- eks <- app,
//! with a fake `terraform` first on PATH.
//!
//! The fake logs `<module> <command>` to a shared log; `plan` writes a plan file naming
//! its module, `apply` fails unless it finds that file in its own build directory. So the
//! log proves the order (every apply after its plan and after the applies it depends on)
//! and that the plan file reached the apply job as a GitLab artifact, not through a shared
//! working tree.

// This test drives an external program on a temporary repository; the `System` boundary
// is for the library's own IO.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use indexmap::IndexMap;

use super::clients::{client, git};
use super::render_gitlab;
use super::tests::header;
use terraci_db::config::{Binary, Config};
use terraci_engine::ir::{build_job_plan, PlanOptions, Target};

const FAKE_TERRAFORM: &str = r#"#!/bin/sh
# Fake terraform for terraci's end-to-end test.
set -eu
log="__LOG__"
module="${TF_MODULE_PATH:?TF_MODULE_PATH is not set}"
case "$1" in
  init)
    echo "$module init" >> "$log"
    ;;
  plan)
    echo "plan of $module" > plan.tfplan
    echo "$module plan" >> "$log"
    ;;
  show)
    echo '{"format_version": "1.2"}'
    ;;
  apply)
    if [ ! -f "$2" ]; then
      echo "$module apply: no plan file $2 in $(pwd)" >> "$log"
      exit 1
    fi
    echo "$module apply [$(cat "$2")]" >> "$log"
    ;;
  *)
    echo "$module unexpected: $*" >> "$log"
    exit 1
    ;;
esac
"#;

fn target(id: &str, deps: &[&str]) -> Target {
    Target {
        id: id.into(),
        components: IndexMap::from([("module".to_owned(), id.to_owned())]),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
    }
}

/// What one gitlab-ci-local run left behind.
struct Run {
    success: bool,
    output: String,
    log: String,
    _work: tempfile::TempDir,
    repo: std::path::PathBuf,
}

fn three_module_pipeline() -> String {
    three_module_pipeline_with(&auto_approved())
}

/// The vpc/eks/app pipeline under `config`.
fn three_module_pipeline_with(config: &Config) -> String {
    let plan = build_job_plan(
        &[
            target("app", &["eks"]),
            target("eks", &["vpc"]),
            target("vpc", &[]),
        ],
        PlanOptions::default(),
        Binary::Terraform,
        true,
        IndexMap::new(),
        vec!["module".into()],
    )
    .expect("distinct job names");
    render_gitlab(&plan, config, &header())
        .expect("renders")
        .text
}

/// `extensions.gitlab.auto_approve: true`: applies run without a click (the default
/// makes them manual, which gitlab-ci-local, like GitLab, does not start by itself).
fn auto_approved() -> Config {
    let mut config = Config::default();
    let mut gitlab = terraci_db::config::GitLab::default();
    gitlab.auto_approve = Some(true);
    config.extensions.gitlab = Some(gitlab);
    config
}

/// Runs `pipeline` with gitlab-ci-local's shell executor on the vpc/eks/app repository.
fn run_pipeline(pipeline: &str) -> Run {
    run_pipeline_as(pipeline, "main", &[])
}

/// The same on branch `branch` (the default branch is `main`), with `variables`
/// (`CI_PIPELINE_SOURCE=merge_request_event` makes it a merge-request pipeline).
fn run_pipeline_as(pipeline: &str, branch: &str, variables: &[&str]) -> Run {
    let gitlab_ci_local = client("gitlab-ci-local");
    let work = tempfile::tempdir().expect("temp dir");
    let repo = work.path().join("repo");
    let bin = work.path().join("bin");
    let log = work.path().join("terraform.log");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let fake = bin.join("terraform");
    std::fs::write(
        &fake,
        FAKE_TERRAFORM.replace("__LOG__", log.to_str().expect("utf-8 temp path")),
    )
    .expect("write fake terraform");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for module in ["vpc", "eks", "app"] {
        std::fs::create_dir_all(repo.join(module)).expect("mkdir module");
        std::fs::write(repo.join(module).join("main.tf"), "# empty\n").expect("write main.tf");
    }
    std::fs::write(repo.join(".gitlab-ci.yml"), pipeline).expect("write pipeline");
    git(&repo, &["init", "-q", "-b", branch]);
    git(
        &repo,
        &[
            "remote",
            "add",
            "origin",
            "https://gitlab.example.com/infra/live.git",
        ],
    );
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=terraci",
            "-c",
            "user.email=terraci@example.com",
            "commit",
            "-q",
            "-m",
            "fixture",
        ],
    );

    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(gitlab_ci_local.as_str())
        .args([
            "--force-shell-executor",
            "--shell-isolation",
            "--artifacts-to-source=false",
            "--home",
        ])
        .arg(work.path().join("home"))
        .args(variables.iter().flat_map(|v| ["--variable", v]))
        .args(["--variable", "CI_DEFAULT_BRANCH=main"])
        .current_dir(&repo)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .expect("gitlab-ci-local runs");
    Run {
        success: out.status.success(),
        output: format!(
            "--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        log: std::fs::read_to_string(&log).unwrap_or_default(),
        _work: work,
        repo,
    }
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn gitlab_ci_local_runs_the_pipeline_in_dependency_order() {
    let run = run_pipeline(&three_module_pipeline());
    let log_text = &run.log;
    assert!(
        run.success,
        "gitlab-ci-local failed\n{}\n--- terraform log\n{log_text}",
        run.output
    );

    let lines: Vec<&str> = log_text.lines().collect();
    let at = |line: &str| {
        lines
            .iter()
            .position(|l| *l == line)
            .unwrap_or_else(|| panic!("`{line}` not in the terraform log:\n{log_text}"))
    };
    for (module, deps) in [
        ("vpc", &[][..]),
        ("eks", &["vpc"][..]),
        ("app", &["eks"][..]),
    ] {
        let init = at(&format!("{module} init"));
        let plan = at(&format!("{module} plan"));
        // The apply found the file its own plan job wrote: it came as an artifact.
        let apply = at(&format!("{module} apply [plan of {module}]"));
        assert!(
            init < plan && plan < apply,
            "{module} out of order:\n{log_text}"
        );
        for dep in deps {
            let dep_apply = at(&format!("{dep} apply [plan of {dep}]"));
            assert!(
                dep_apply < plan && dep_apply < apply,
                "{module} ran before {dep} was applied:\n{log_text}"
            );
        }
    }
    assert_eq!(
        lines.len(),
        12,
        "init + plan, init + apply per module:\n{log_text}"
    );
    // Shell isolation: jobs ran in their own copies, the checkout has no plan files.
    for module in ["vpc", "eks", "app"] {
        assert!(!run.repo.join(module).join("plan.tfplan").exists());
    }
}

/// By default (TerraCi's default) an apply waits for a click: gitlab-ci-local, which
/// cannot click, refuses to run the default-branch pipeline until told which manual
/// jobs to start (`--manual`), and starts no apply.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn by_default_applies_wait_for_a_click() {
    let pipeline = three_module_pipeline_with(&Config::default());
    let run = run_pipeline(&pipeline);
    assert!(!run.success, "{}\n{}", run.output, run.log);
    assert!(
        run.output.contains("apply-vpc is when:manual"),
        "{}",
        run.output
    );
    assert!(!run.log.contains("apply"), "{}", run.log);
}

/// The control experiment: without the plan artifact the apply job has no plan file, so
/// the test above cannot pass by accident through a shared directory.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn without_the_artifact_the_apply_fails() {
    let pipeline = three_module_pipeline().replace("artifacts: true", "artifacts: false");
    let run = run_pipeline(&pipeline);
    assert!(!run.success, "{}\n{}", run.output, run.log);
    assert!(
        run.log.contains("vpc apply: no plan file plan.tfplan"),
        "{}",
        run.log
    );
}

/// A merge-request pipeline, and a branch other than the default one, plan every module
/// and apply nothing: the applies' rules leave them out, and the plans' needs on them are
/// optional, so the pipeline is still valid.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn merge_requests_and_other_branches_plan_and_never_apply() {
    for (branch, variables) in [
        ("feature", &["CI_PIPELINE_SOURCE=merge_request_event"][..]),
        ("feature", &["CI_PIPELINE_SOURCE=push"][..]),
    ] {
        let run = run_pipeline_as(&three_module_pipeline(), branch, variables);
        assert!(run.success, "{variables:?}\n{}\n{}", run.output, run.log);
        let mut lines: Vec<&str> = run.log.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            ["app init", "app plan", "eks init", "eks plan", "vpc init", "vpc plan"],
            "{variables:?}: {}",
            run.log
        );
    }
}

/// In a merge-request pipeline the summary job runs after the plans, in an image without
/// terraci (none was chosen for it): the job says so and the pipeline still passes, as
/// the comment is an aid, not a gate.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn a_summary_job_without_terraci_warns_and_the_pipeline_passes() {
    let plan = build_job_plan(
        &[target("eks", &["vpc"]), target("vpc", &[])],
        PlanOptions::default(),
        Binary::Terraform,
        true,
        IndexMap::new(),
        vec!["module".into()],
    )
    .expect("distinct job names");
    let set = terraci_engine::contrib::ContributionSet::new(vec![
        terraci_engine::contrib::summary_contribution(),
    ])
    .expect("valid");
    let plan = terraci_engine::ir::contribute(plan, &set, ".terraci").expect("no clash");
    let pipeline = render_gitlab(&plan, &Config::default(), &header())
        .expect("renders")
        .text;
    let run = run_pipeline_as(
        &pipeline,
        "feature",
        &[
            "CI_PIPELINE_SOURCE=merge_request_event",
            "CI_MERGE_REQUEST_IID=7",
        ],
    );
    assert!(run.success, "{}\n{}", run.output, run.log);
    assert!(
        run.output
            .contains("terraci-summary: terraci is not on PATH in this job; set extensions.gitlab.mr.summary_job.image"),
        "{}",
        run.output
    );
    // The plans kept their results (the fake's `show`) for it.
    assert!(
        run.log.contains("vpc plan") && run.log.contains("eks plan"),
        "{}",
        run.log
    );
    // The control experiment: without `allow_failure` the same job fails the pipeline.
    let strict = pipeline.replace("  allow_failure:\n    exit_codes:\n      - 127\n", "");
    assert_ne!(strict, pipeline);
    let run = run_pipeline_as(
        &strict,
        "feature",
        &[
            "CI_PIPELINE_SOURCE=merge_request_event",
            "CI_MERGE_REQUEST_IID=7",
        ],
    );
    assert!(!run.success, "{}", run.output);
}
