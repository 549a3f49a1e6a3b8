//! The examples of the original "How it works" page: locals in keys, `for_each`, levels,
//! the cycle message and the job chain.
use crate::support::Project;

#[test]
fn levels_of_the_page() {
    let p = Project::fixture("how-it-works");
    let out = p.run(&["graph", "--format", "levels"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "", "no diagnostics expected");
    assert_eq!(
        out.stdout,
        "Level 0 (4 modules):\n  platform/stage/eu-central-1/api\n  \
         platform/stage/eu-central-1/auth\n  platform/stage/eu-central-1/vpc\n  \
         platform/stage/eu-central-1/web\n\nLevel 1 (3 modules):\n  \
         platform/stage/eu-central-1/eks  (← vpc)\n  \
         platform/stage/eu-central-1/gateway  (← api, auth, web)\n  \
         platform/stage/eu-central-1/rds  (← vpc)\n\nLevel 2 (1 module):\n  \
         platform/stage/eu-central-1/app  (← eks, rds)\n\n"
    );
}

#[test]
fn locals_in_keys_and_for_each_give_the_documented_edges() {
    let p = Project::fixture("how-it-works");
    let out = p.run(&["graph", "--format", "list"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    // rds builds its key from `local.env`; gateway expands `for_each` over three services.
    assert_eq!(lines[0], "[platform/stage]");
    assert!(lines.contains(&"  eu-central-1/rds → eu-central-1/vpc"));
    assert!(lines.contains(
        &"  eu-central-1/gateway → eu-central-1/api, eu-central-1/auth, eu-central-1/web"
    ));
    assert!(lines.contains(&"  eu-central-1/app → eu-central-1/eks, eu-central-1/rds"));
}

#[test]
fn the_job_chain() {
    let p = Project::fixture("how-it-works");
    let out = p.run(&["generate", "-i", "**/vpc", "-i", "**/eks"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let chain: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| {
            l.starts_with("plan-")
                || l.starts_with("apply-")
                || l.starts_with("terraci-summary:")
                || l.starts_with("  stage:")
                || l.starts_with("    - job:")
        })
        .collect();
    assert_eq!(
        chain,
        [
            "plan-platform-stage-eu-central-1-vpc:",
            "  stage: deploy-0",
            "apply-platform-stage-eu-central-1-vpc:",
            "  stage: deploy-1",
            "    - job: plan-platform-stage-eu-central-1-vpc",
            "plan-platform-stage-eu-central-1-eks:",
            "  stage: deploy-2",
            "    - job: apply-platform-stage-eu-central-1-vpc",
            "apply-platform-stage-eu-central-1-eks:",
            "  stage: deploy-3",
            "    - job: plan-platform-stage-eu-central-1-eks",
            "    - job: apply-platform-stage-eu-central-1-vpc",
            // The merge-request summary reads every plan, after the last one.
            "terraci-summary:",
            "  stage: deploy-3",
            "    - job: plan-platform-stage-eu-central-1-vpc",
            "    - job: plan-platform-stage-eu-central-1-eks",
        ]
    );
}

#[test]
fn the_cycle_message() {
    let p = Project::fixture("cycle");
    let out = p.run(&["validate"]);
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains(
            "error[dependency-cycle]: circular dependency detected\n  stage/app -> stage/eks -> stage/vpc -> stage/app\n"
        ),
        "{}",
        out.stderr
    );
}
