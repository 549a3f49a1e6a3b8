//! GitLab's size limits: a pipeline GitLab would refuse (`max_yaml_size_bytes`, measured
//! on the loaded YAML, or `max_jobs`) is never written silently.

use std::process::Command;

use crate::gitlab_split::configure;
use crate::support::{synthetic_monorepo, Project};

/// The size terraci's warning names for the pipeline it wrote under `--force`.
fn estimated_size(stderr: &str) -> u64 {
    let (_, rest) = stderr
        .split_once("pipeline is about ")
        .unwrap_or_else(|| panic!("no size in: {stderr}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("a size")
}

#[test]
fn a_pipeline_over_gitlabs_size_limit_is_an_error_naming_its_size_and_the_limit() {
    let (p, _) = synthetic_monorepo(200);
    // The 200-module workload loads to about 1.07 MB: under GitLab's default 2 MiB.
    let out = p.run(&["generate", "-o", ".gitlab-ci.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("pipeline-limit"), "{}", out.stderr);

    // Under an instance's smaller limit, without splitting into child pipelines, it is
    // refused, and nothing is written.
    configure(
        &p,
        "    max_yaml_size_bytes: 1000000\n    split_pipelines: false\n",
    );
    p.remove(".gitlab-ci.yml");
    let out = p.run(&["generate", "-o", ".gitlab-ci.yml"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let size = estimated_size(&out.stderr);
    assert!((1_000_001..1_150_000).contains(&size), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("over extensions.gitlab.max_yaml_size_bytes (1000000)")
            && out.stderr.contains("(pipeline-limit)")
            && out.stderr.contains("--force"),
        "{}",
        out.stderr
    );
    assert!(!p.path().join(".gitlab-ci.yml").exists());

    // `--force` writes it, with a warning.
    let out = p.run(&["generate", "--force", "-o", ".gitlab-ci.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("warning[pipeline-limit]")
            && out.stderr.contains("GitLab will refuse to run it"),
        "{}",
        out.stderr
    );
    assert!(p.read(".gitlab-ci.yml").contains("plan-svc0-dev-r0-m0:"));

    // Within 7% of the limit it is refused too: GitLab on Ruby 3.2 and later counts
    // more than the Ruby 3.1 figure the estimate follows.
    let limit = size + size * 5 / 100;
    configure(
        &p,
        &format!("    max_yaml_size_bytes: {limit}\n    split_pipelines: false\n"),
    );
    p.remove(".gitlab-ci.yml");
    let out = p.run(&["generate", "-o", ".gitlab-ci.yml"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("headroom"), "{}", out.stderr);
    assert!(!p.path().join(".gitlab-ci.yml").exists());
}

#[test]
fn a_pipeline_over_the_jobs_limit_is_an_error_unless_forced() {
    let (p, _) = synthetic_monorepo(20);
    configure(&p, "    max_jobs: 41\n");
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // 20 plans, 20 applies and the summary job.
    configure(&p, "    max_jobs: 40\n");
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("has 41 jobs, over extensions.gitlab.max_jobs (40)"),
        "{}",
        out.stderr
    );
    let out = p.run(&["generate", "--force"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("warning[pipeline-limit]"),
        "{}",
        out.stderr
    );
}

/// GitLab's measure, by `tools/gitlab-yaml-size/deep_size.rb` (Ruby's Psych and
/// `ObjectSpace.memsize_of`, as GitLab's loader), of the file `path` of `p`.
pub(crate) fn ruby_size(p: &Project, path: &str) -> u64 {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/gitlab-yaml-size/deep_size.rb"
    );
    let out = Command::new("ruby")
        .arg(script)
        .arg(p.path().join(path))
        .output()
        .expect("ruby runs: bash .ci/clients.sh installs it");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {stdout:?}"))
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn the_size_estimate_is_never_below_gitlabs_measure_and_close_to_it() {
    for n in [200, 2000] {
        let (p, _) = synthetic_monorepo(n);
        // A limit of one byte makes the forced run's warning name the estimate.
        configure(&p, "    max_yaml_size_bytes: 1\n");
        let out = p.run(&["generate", "--force", "-o", ".gitlab-ci.yml"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let estimate = estimated_size(&out.stderr);
        let measured = ruby_size(&p, ".gitlab-ci.yml");
        assert!(
            estimate >= measured && estimate <= measured + measured / 100,
            "{n} modules: estimate {estimate}, GitLab's measure {measured}"
        );
        if n == 2000 {
            // Over GitLab's default: refused without --force (or splitting).
            configure(&p, "    split_pipelines: false\n");
            assert!(measured > 2 * 1024 * 1024);
            let out = p.run(&["generate", "-o", "refused.yml"]);
            assert_eq!(out.code, 1, "{}", out.stderr);
            assert!(out.stderr.contains("(2097152)"), "{}", out.stderr);
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn gitlab_ci_local_lists_every_job_of_the_templated_workload_and_no_template() {
    let (p, _) = synthetic_monorepo(200);
    let out = p.run(&["generate", "-o", ".gitlab-ci.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pipeline = p.read(".gitlab-ci.yml");
    assert!(
        pipeline.contains("\n.terraci-plan:\n") && pipeline.contains("\n.terraci-apply:\n"),
        "{pipeline}"
    );
    let listed = crate::support::gitlab_ci_local_list(&pipeline).unwrap_or_else(|e| panic!("{e}"));
    // The modules' jobs (the summary job runs in merge-request pipelines only).
    let jobs = crate::support::gitlab_merged_jobs(&pipeline)
        .into_iter()
        .filter(|(name, _)| name.starts_with("plan-") || name.starts_with("apply-"));
    for (name, job) in jobs {
        assert!(
            listed.lines().any(|line| line.starts_with(&name)),
            "{name} is not listed:\n{listed}"
        );
        // What the template holds reaches the job: the applies' rules, the plans'
        // artifact expiry.
        if name.starts_with("apply-") {
            assert!(
                job["rules"].as_sequence().is_some_and(|r| r.len() == 2),
                "{name}: {job:?}"
            );
        }
        if name.starts_with("plan-") {
            assert_eq!(
                job["artifacts"]["expire_in"].as_str(),
                Some("1 day"),
                "{name}"
            );
        }
    }
    assert!(!listed.contains(".terraci-"), "{listed}");
}

#[test]
fn a_json_pipeline_holds_each_script_whole() {
    // JSON has no tags: where the YAML has a `!reference` to the template's lines, the
    // JSON has the lines.
    let p = Project::fixture("example");
    let yaml = p.run(&["generate"]);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    let out = p.run(&["generate", "--format", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("!reference"), "{}", out.stdout);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let jobs = crate::support::gitlab_merged_jobs(&yaml.stdout);
    assert!(jobs.iter().any(|(name, _)| name.starts_with("plan-")));
    for (name, job) in jobs {
        let script = serde_json::to_value(&job["script"]).expect("a script");
        assert_eq!(json[&name]["script"], script, "{name}");
    }
}
