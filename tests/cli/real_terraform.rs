//! With real terraform (from PATH; `.ci/run` fails when it is missing): a two-module
//! repository of built-in `terraform_data` resources and local backends with absolute
//! state paths, where `app` reads `vpc`'s outputs through `terraform_remote_state`.
//! Its generated GitLab pipeline runs under gitlab-ci-local (shell executor, one isolated
//! build directory per job) as a default-branch pipeline, which plans and applies in
//! order, then as a merge-request pipeline, which plans and applies nothing; and
//! `local-exec run` runs it under a pseudo-terminal. A variable given only with `--var`
//! reaches terraform in both.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{client, commit_all, Project};

/// terraform on PATH; the suite needs it (no provider is downloaded: `terraform_data` and
/// the local backend are built in).
pub(crate) fn terraform_dir() -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| dir.join("terraform").is_file())
        .expect("terraform is not on PATH: the end-to-end tests run real terraform (1.11)")
}

fn module(state: &Path, name: &str, body: &str) -> String {
    format!(
        "terraform {{\n  backend \"local\" {{\n    path = \"{}/{name}.tfstate\"\n  }}\n}}\n\n{body}",
        state.display()
    )
}

fn repository(state: &Path) -> Project {
    let p = Project::empty();
    // The summary job runs where gitlab-ci-local can run it: in the merge-request-like
    // pipeline, without `CI_MERGE_REQUEST_IID` (which would make it post to a GitLab), so
    // `terraci summary` prints the comment. Its rules come from an overwrite of its type.
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{env}/{module}\"\nextensions:\n  gitlab:\n    overwrites:\n      - type: terraci-summary\n        rules:\n          - if: $CI_PIPELINE_SOURCE == \"merge_request_event\"\n            when: always\n",
    );
    p.write(
        "live/vpc/main.tf",
        module(
            state,
            "vpc",
            // `suffix` has no default: only `--var` gives it, so the jobs must get it.
            "variable \"suffix\" {}\n\nresource \"terraform_data\" \"net\" {\n  input = \"net-${var.suffix}\"\n}\n\noutput \"id\" {\n  value = terraform_data.net.output\n}\n",
        ),
    );
    p.write(
        "live/app/main.tf",
        module(
            state,
            "app",
            &format!(
                "data \"terraform_remote_state\" \"vpc\" {{\n  backend = \"local\"\n  config = {{\n    path = \"{}/vpc.tfstate\"\n  }}\n}}\n\nresource \"terraform_data\" \"app\" {{\n  input = \"app in ${{data.terraform_remote_state.vpc.outputs.id}}\"\n}}\n",
                state.display()
            ),
        ),
    );
    p.write(
        ".gitignore",
        ".terraform/\n.terraform.lock.hcl\n*.tfplan\n.terraci/\n",
    );
    p
}

/// The directory of the terraci under test: the summary job runs it from PATH.
fn terraci_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_terraci"))
        .parent()
        .expect("the binary has a directory")
        .to_path_buf()
}

fn gitlab_ci_local(repo: &Path, home: &Path, variables: &[&str]) -> (bool, String) {
    gitlab_ci_local_with(repo, home, variables, &[])
}

/// gitlab-ci-local's run of the pipeline of `repo` (its shell executor, one isolated
/// build directory per job) with `variables` and further arguments `args` (`--file`).
pub(crate) fn gitlab_ci_local_with(
    repo: &Path,
    home: &Path,
    variables: &[&str],
    args: &[&str],
) -> (bool, String) {
    let path = format!(
        "{}:{}:{}",
        terraform_dir().display(),
        terraci_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(client("gitlab-ci-local"))
        .args([
            "--force-shell-executor",
            "--shell-isolation",
            "--artifacts-to-source=false",
            "--home",
        ])
        .arg(home)
        .args(variables.iter().flat_map(|v| ["--variable", v]))
        .args(["--variable", "CI_DEFAULT_BRANCH=main"])
        .args(args)
        .current_dir(repo)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .expect("gitlab-ci-local runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The `input` of the state's `terraform_data` resource, or `None` before an apply.
pub(crate) fn applied_input(state: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(state.join(format!("{name}.tfstate"))).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    // The managed resource (the state also holds the remote-state data source).
    doc["resources"]
        .as_array()?
        .iter()
        .find(|r| r["type"] == "terraform_data")?["instances"][0]["attributes"]["input"]["value"]
        .as_str()
        .map(str::to_owned)
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn the_gitlab_pipeline_plans_and_applies_with_real_terraform() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir state");
    let p = repository(&state);
    let out = p.run(&[
        "generate",
        "-o",
        ".gitlab-ci.yml",
        "--var",
        "suffix=1",
        "--auto-approve",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    commit_all(p.path());
    let home = work.path().join("home");

    // The default branch: vpc is applied before app reads it.
    let (ok, output) = gitlab_ci_local(p.path(), &home, &[]);
    assert!(ok, "the default-branch pipeline failed:\n{output}");
    assert_eq!(applied_input(&state, "vpc").as_deref(), Some("net-1"));
    assert_eq!(
        applied_input(&state, "app").as_deref(),
        Some("app in net-1")
    );

    // A merge request that changes vpc: every module plans, nothing is applied.
    let vpc = p.read("live/vpc/main.tf").replace("net-$", "net-2-$");
    p.write("live/vpc/main.tf", vpc);
    let (ok, output) =
        gitlab_ci_local(p.path(), &home, &["CI_PIPELINE_SOURCE=merge_request_event"]);
    assert!(ok, "the merge-request pipeline failed:\n{output}");
    assert!(output.contains("plan-live-vpc"), "{output}");
    assert!(!output.contains("apply-live-vpc"), "{output}");
    assert_eq!(applied_input(&state, "vpc").as_deref(), Some("net-1"));

    // The plan jobs kept their plans as data: vpc changes (exit 2 is not a failure), app
    // does not (it reads vpc's applied state, which the merge request does not change).
    let vpc = artifacts(p.path(), "plan-live-vpc", "live/vpc");
    assert_eq!(vpc.result["exit_code"], 2, "{output}");
    assert_eq!(
        vpc.result["commit"].as_str().map(str::len),
        Some(40),
        "{:?}",
        vpc.result
    );
    let change = &vpc.plan["resource_changes"][0];
    assert_eq!(change["address"], "terraform_data.net");
    assert_eq!(change["change"]["actions"][0], "update", "{change}");
    assert!(vpc.text.contains("1 to change"), "{}", vpc.text);
    let app = artifacts(p.path(), "plan-live-app", "live/app");
    assert_eq!(app.result["exit_code"], 0);
    // The summary job ran after the plans, with their artifacts, and printed the comment.
    let summary = job_log(&output, "terraci-summary");
    assert!(
        summary.contains("## Terraform plan summary"),
        "the summary job printed no comment:\n{output}"
    );
    assert!(
        summary.contains("| `live/vpc` | 🔄 changes | 0 | 1 | 0 | 0 |"),
        "{summary}"
    );
}

/// The plan files a plan job left as its artifact.
struct PlanArtifacts {
    text: String,
    plan: serde_json::Value,
    result: serde_json::Value,
}

/// `job`'s artifacts for `module`, as gitlab-ci-local keeps them
/// (`.gitlab-ci-local/artifacts/<job>/<path>`).
fn artifacts(repo: &Path, job: &str, module: &str) -> PlanArtifacts {
    let dir = repo
        .join(".gitlab-ci-local/artifacts")
        .join(job)
        .join(module);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("{job} kept no {module}/{name}: {e}"))
    };
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{module}/{name}: {e}"))
    };
    PlanArtifacts {
        text: read("plan.txt"),
        plan: json("plan.json"),
        result: json("plan.result.json"),
    }
}

/// The lines gitlab-ci-local printed for `job` (each starts with the job's name).
fn job_log(output: &str, job: &str) -> String {
    output
        .lines()
        .filter(|l| l.trim_start().starts_with(job))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn local_exec_runs_real_terraform_in_a_terminal() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir state");
    let p = repository(&state);
    let path = format!(
        "{}:{}",
        terraform_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (mut child, text) = crate::terminal::spawn_in_terminal(
        &p,
        &["local-exec", "run", "--var", "suffix=1", "--auto-approve"],
        &path,
    );
    let code = crate::terminal::wait(&mut child, "run");
    let log = std::fs::read_to_string(p.path().join(".terraci/logs/plan-live-vpc.log"))
        .unwrap_or_default();
    assert_eq!(
        code,
        0,
        "{}\n--- plan-live-vpc.log\n{log}",
        text.lock().expect("not poisoned")
    );
    assert_eq!(
        applied_input(&state, "app").as_deref(),
        Some("app in net-1")
    );
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn local_exec_plan_keeps_the_plans_as_data_and_prints_the_summary() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir state");
    let p = repository(&state);
    commit_all(p.path());
    let path = format!(
        "{}:{}",
        terraform_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = p.command(&["local-exec", "plan", "--var", "suffix=1"]);
    cmd.env("PATH", &path);
    let out = cmd.output().expect("run terraci");
    let text = String::from_utf8_lossy(&out.stdout);
    // Nothing is applied yet: vpc plans a create (exit 2, not a failure); app cannot
    // read vpc's state yet, so its plan fails (exit 1), and the summary still runs.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("ok      terraci-summary"), "{text}");
    let result = |module: &str| -> serde_json::Value {
        serde_json::from_str(&p.read(&format!("{module}/plan.result.json"))).expect("JSON")
    };
    let head = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(p.path())
            .output()
            .expect("git")
            .stdout,
    )
    .expect("utf-8");
    assert_eq!(result("live/vpc")["exit_code"], 2);
    assert_eq!(result("live/vpc")["commit"], head.trim());
    let plan: serde_json::Value =
        serde_json::from_str(&p.read("live/vpc/plan.json")).expect("plan.json");
    assert_eq!(
        plan["resource_changes"][0]["change"]["actions"][0],
        "create"
    );
    assert!(p.read("live/vpc/plan.txt").contains("1 to add"));
    assert_eq!(result("live/app")["exit_code"], 1);
    assert!(!p.path().join("live/app/plan.json").exists());
    assert!(p.read("live/app/plan.txt").contains("Error"));
    let log = p.read(".terraci/logs/terraci-summary.log");
    assert!(log.contains("## Terraform plan summary"), "{log}");
    assert!(log.contains("`live/vpc`"), "{log}");
}

/// The repository with a policy that denies app's plan, blocking (not committed yet).
fn denying_repository(state: &Path) -> Project {
    let p = repository(state);
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{env}/{module}\"\nextensions:\n  summary:\n    enabled: false\n  policy:\n    enabled: true\n    sources:\n      - type: path\n        path: policies\n    namespaces: [terraform]\n    decisions:\n      deny: block\n",
    );
    p.write(
        "policies/terraform.rego",
        "package terraform\n\nimport rego.v1\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  rc.name == \"app\"\n  msg := sprintf(\"%s may not be created here\", [rc.address])\n}\n",
    );
    p
}

/// A policy decision of `block` holds the apply of the module whose plan it denies: the
/// apply job checks its own module's plan first (here in `local-exec run`, the same
/// commands the generated GitLab and GitHub apply jobs run), and fails without applying.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn a_blocking_policy_stops_the_apply_of_the_module_it_denies() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir state");
    let p = denying_repository(&state);
    commit_all(p.path());
    let path = format!(
        "{}:{}",
        terraform_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = p.command(&["local-exec", "run", "--var", "suffix=1", "--auto-approve"]);
    cmd.env("PATH", &path);
    let out = cmd.output().expect("run terraci");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // vpc passes its check and is applied; app's plan is denied, so it is never applied.
    assert!(state.join("vpc.tfstate").is_file(), "{text}");
    let app_state = std::fs::read_to_string(state.join("app.tfstate")).unwrap_or_default();
    assert!(
        !app_state.contains("terraform_data"),
        "app was applied:\n{app_state}"
    );
    let log = p.read(".terraci/logs/apply-live-app.log");
    assert!(
        log.contains("terraform_data.app may not be created here"),
        "{log}"
    );
    assert!(!log.contains("Apply complete"), "{log}");
}

/// The same gate in the generated GitLab pipeline, run by gitlab-ci-local: app's apply
/// job runs `terraci policy check` over its plan artifact and fails before applying.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn a_blocking_policy_stops_the_gitlab_apply_job_of_the_module_it_denies() {
    let work = tempfile::tempdir().expect("temp dir");
    let state = work.path().join("state");
    std::fs::create_dir_all(&state).expect("mkdir state");
    let p = denying_repository(&state);
    let out = p.run(&[
        "generate",
        "-o",
        ".gitlab-ci.yml",
        "--var",
        "suffix=1",
        "--auto-approve",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    commit_all(p.path());
    let home = work.path().join("home");
    let (ok, output) = gitlab_ci_local(p.path(), &home, &[]);
    assert!(!ok, "the pipeline passed although app is denied:\n{output}");
    assert_eq!(
        applied_input(&state, "vpc").as_deref(),
        Some("net-1"),
        "{output}"
    );
    assert_eq!(
        applied_input(&state, "app"),
        None,
        "app was applied:\n{output}"
    );
    let apply = job_log(&output, "apply-live-app");
    assert!(
        apply.contains("terraform_data.app may not be created here"),
        "{output}"
    );
    assert!(!apply.contains("Apply complete"), "{apply}");
}
