//! Which jobs of the generated GitHub workflow run on which event: the workflow's `if:`
//! and `needs` evaluated the way GitHub does (a job runs when its `if:` holds; without
//! one, when every job it needs succeeded; `failure()` is true when any ancestor failed).

use std::collections::BTreeMap;

use serde_yaml::Value;

use crate::support::{actionlint, Project};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Success,
    Failure,
    Skipped,
}

/// A job's `if:`, evaluated for `event` with `failed` (an ancestor failed) and
/// `needs_ok` (every need succeeded, for a job without `if:`). The affected job says that
/// every module runs (as it does without terraci, or on `workflow_dispatch`): which
/// modules it selects is `changes::the_github_workflow_runs_what_a_pull_request_or_a_push_affects`.
fn holds(condition: Option<&str>, event: &str, failed: bool, needs_ok: bool) -> bool {
    let Some(condition) = condition else {
        return needs_ok;
    };
    let context = serde_json::json!({
        "github": {"event_name": event},
        "needs": {"terraci-affected": {"outputs": {"skip": "[]"}}},
    });
    let value =
        crate::github_expr::truthy(&crate::github_expr::evaluate(condition, &context, failed));
    // Without a status function, GitHub adds `success()`: every need succeeded.
    let status = ["success(", "failure(", "cancelled(", "always("]
        .iter()
        .any(|f| condition.contains(f));
    value && (status || needs_ok)
}

/// Runs the workflow for `event`; `failing` jobs fail when they run.
fn simulate(workflow: &Value, event: &str, failing: &[&str]) -> BTreeMap<String, Status> {
    let jobs = workflow["jobs"].as_mapping().expect("jobs");
    let mut status: BTreeMap<String, Status> = BTreeMap::new();
    let mut ancestors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    while status.len() < jobs.len() {
        let before = status.len();
        for (name, job) in jobs {
            let name = name.as_str().expect("job id").to_owned();
            if status.contains_key(&name) {
                continue;
            }
            let needs: Vec<String> = job["needs"]
                .as_sequence()
                .map(|s| {
                    s.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if !needs.iter().all(|n| status.contains_key(n)) {
                continue;
            }
            let mut all: Vec<String> = needs.clone();
            for n in &needs {
                all.extend(ancestors[n].iter().cloned());
            }
            let failed = all.iter().any(|a| status[a] == Status::Failure);
            let needs_ok = needs.iter().all(|n| status[n] == Status::Success);
            let runs = holds(job["if"].as_str(), event, failed, needs_ok);
            let s = match (runs, failing.contains(&name.as_str())) {
                (false, _) => Status::Skipped,
                (true, true) => Status::Failure,
                (true, false) => Status::Success,
            };
            ancestors.insert(name.clone(), all);
            status.insert(name, s);
        }
        assert!(status.len() > before, "needs form a cycle");
    }
    status
}

fn with_status(status: &BTreeMap<String, Status>, want: Status) -> Vec<&str> {
    status
        .iter()
        .filter(|(_, s)| **s == want)
        .map(|(n, _)| n.as_str())
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn pull_requests_plan_every_module_and_apply_nothing_pushes_apply_in_order() {
    let p = Project::fixture("example");
    let out = p.run_env(&["generate"], &[("TERRACI_PROVIDER", "github")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(actionlint(&out.stdout), "");
    let workflow: Value = serde_yaml::from_str(&out.stdout).expect("YAML");
    // The affected job, the module jobs, then the summary job.
    let jobs = workflow["jobs"].as_mapping().expect("jobs").len() - 2;

    let pr = simulate(&workflow, "pull_request", &[]);
    let ran = with_status(&pr, Status::Success);
    assert_eq!(
        ran.len(),
        jobs / 2 + 2,
        "every module plans on a pull request, then the summary: {pr:?}"
    );
    assert!(
        ran.iter()
            .all(|j| j.starts_with("plan-") || *j == "terraci-summary" || *j == "terraci-affected"),
        "{pr:?}"
    );
    assert!(with_status(&pr, Status::Skipped)
        .iter()
        .all(|j| j.starts_with("apply-")));
    // A failed plan is what a review must see: the summary still runs.
    let failed_pr = simulate(
        &workflow,
        "pull_request",
        &["plan-platform-stage-eu-central-1-vpc"],
    );
    assert_eq!(failed_pr["terraci-summary"], Status::Success);

    let push = simulate(&workflow, "push", &[]);
    assert_eq!(
        with_status(&push, Status::Success).len(),
        jobs + 1,
        "{push:?}"
    );
    assert_eq!(
        push["terraci-summary"],
        Status::Skipped,
        "no comment without a pull request"
    );

    // A failed plan stops its apply and everything after it, and nothing else.
    let failed = simulate(&workflow, "push", &["plan-platform-stage-eu-central-1-vpc"]);
    let skipped = with_status(&failed, Status::Skipped);
    assert!(skipped.contains(&"apply-platform-stage-eu-central-1-vpc"));
    assert!(skipped.contains(&"plan-platform-stage-eu-central-1-eks"));
    assert!(skipped.contains(&"apply-platform-stage-eu-central-1-app"));
    // prod's modules do not read stage's vpc (but prod's monitoring does).
    for job in [
        "apply-platform-prod-eu-central-1-app",
        "apply-platform-prod-eu-central-1-rds",
    ] {
        assert_eq!(failed[job], Status::Success, "{job}");
    }
    assert_eq!(
        failed["plan-platform-prod-eu-central-1-monitoring"],
        Status::Skipped
    );

    // Applies run in an environment that can be protected.
    for (name, job) in workflow["jobs"].as_mapping().expect("jobs") {
        let name = name.as_str().unwrap_or_default();
        if name.starts_with("apply-") {
            assert_eq!(job["environment"].as_str(), Some("terraform"), "{name}");
            assert!(
                job.get("concurrency").is_none(),
                "an apply is never cancelled: {name}"
            );
        }
    }
}
