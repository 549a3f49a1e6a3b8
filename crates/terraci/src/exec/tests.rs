//! local-exec against a fake `terraform` (a shell script) and a fake runner.
// The fixtures are real directories: local-exec runs real processes in them.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indexmap::IndexMap;

use super::*;
use terraci_db::config::Binary;
use terraci_engine::ir::{build_job_plan, PlanOptions, Target};

/// Logs `<module> <command> <start ns> <end ns>` to `$FAKE_LOG` after a short sleep,
/// writes the plan file on `plan`, needs it on `apply`, and fails `$FAIL_COMMAND`
/// (default `plan`) in the module `$FAIL_MODULE`.
const FAKE_TERRAFORM: &str = r#"#!/bin/sh
cmd="$1"
start=$(date +%s%N)
echo "stdout of $cmd in $TF_MODULE_PATH ($TF_ENV/$TF_MODULE) $*"
echo "stderr of $cmd" >&2
sleep 0.1
case "$cmd" in
  plan) echo "plan of $TF_MODULE_PATH" > plan.tfplan ;;
  apply) [ -f plan.tfplan ] || { echo "no plan file" >&2; exit 3; } ;;
esac
end=$(date +%s%N)
echo "$TF_MODULE_PATH $cmd $start $end" >> "$FAKE_LOG"
if [ "$TF_MODULE_PATH" = "$FAIL_MODULE" ] && [ "$cmd" = "${FAIL_COMMAND:-plan}" ]; then
  exit 1
fi
exit 0
"#;

/// vpc; eks and rds need vpc; app needs eks and rds; dns is on its own.
fn job_plan(options: PlanOptions, init_enabled: bool) -> JobPlan {
    let target = |module: &str, deps: &[&str]| Target {
        id: format!("prod/{module}"),
        components: IndexMap::from([
            ("env".to_owned(), "prod".to_owned()),
            ("module".to_owned(), module.to_owned()),
        ]),
        dependencies: deps.iter().map(|d| format!("prod/{d}")).collect(),
    };
    build_job_plan(
        &[
            target("app", &["eks", "rds"]),
            target("dns", &[]),
            target("eks", &["vpc"]),
            target("rds", &["vpc"]),
            target("vpc", &[]),
        ],
        options,
        Binary::Terraform,
        init_enabled,
        IndexMap::from([("TF_IN_AUTOMATION".to_owned(), "1".to_owned())]),
        vec!["env".to_owned(), "module".to_owned()],
    )
    .expect("no job name collisions")
}

struct Project {
    dir: tempfile::TempDir,
    root: Utf8PathBuf,
}

impl Project {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).expect("utf-8 temp dir");
        for module in ["app", "dns", "eks", "rds", "vpc"] {
            std::fs::create_dir_all(root.join("prod").join(module)).expect("module dir");
        }
        let fake = root.join("bin/terraform");
        std::fs::create_dir_all(root.join("bin")).expect("bin dir");
        std::fs::write(&fake, FAKE_TERRAFORM).expect("fake terraform");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Project { dir, root }
    }

    fn options(&self, mode: Mode, fail: Option<&str>) -> ExecOptions {
        let mut env = vec![("FAKE_LOG".to_owned(), self.root.join("calls.log").into())];
        if let Some(module) = fail {
            env.push(("FAIL_MODULE".to_owned(), module.to_owned()));
        }
        ExecOptions {
            project_dir: self.root.clone(),
            mode,
            parallelism: 4,
            dry_run: false,
            binary: Some(self.root.join("bin/terraform").into()),
            log_dir: ".terraci/logs".into(),
            progress: ProgressStyle::Plain,
            env,
            terraci: None,
            commit: String::new(),
        }
    }

    fn run(&self, plan: &JobPlan, options: &ExecOptions) -> (ExecSummary, String) {
        let mut out = Vec::new();
        let summary = run_with(
            plan,
            options,
            &terraci_db::system::OsSystem,
            &OsRunner,
            &Interrupt::new(),
            &mut out,
        )
        .expect("local-exec runs");
        (summary, String::from_utf8(out).expect("utf-8 output"))
    }

    /// `(module, command) -> (start, end)` from the fake's log, in nanoseconds.
    fn calls(&self) -> BTreeMap<(String, String), (u128, u128)> {
        let text = std::fs::read_to_string(self.root.join("calls.log")).unwrap_or_default();
        text.lines()
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                let n = |s: &str| s.parse::<u128>().expect("timestamp");
                ((f[0].to_owned(), f[1].to_owned()), (n(f[2]), n(f[3])))
            })
            .collect()
    }

    fn log(&self, job: &str) -> String {
        std::fs::read_to_string(self.root.join(format!(".terraci/logs/{job}.log")))
            .expect("job log")
            .replace(self.dir.path().to_str().expect("utf-8"), "[TMP]")
    }
}

fn status_of<'a>(summary: &'a ExecSummary, job: &str) -> &'a Status {
    &summary
        .results
        .iter()
        .find(|r| r.job == job)
        .expect("job in the summary")
        .status
}

fn overlap(a: (u128, u128), b: (u128, u128)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

#[test]
fn run_mode_follows_the_needs_and_runs_independent_modules_at_once() {
    let project = Project::new();
    let plan = job_plan(PlanOptions::default(), true);
    let (summary, out) = project.run(&plan, &project.options(Mode::Run, None));
    assert!(!summary.failed(), "{out}");
    assert_eq!(summary.results.len(), 10);
    assert!(summary
        .results
        .iter()
        .all(|r| r.status == Status::Succeeded && r.duration > Duration::ZERO));

    let calls = project.calls();
    // init runs once per module, in the plan job: the apply reuses the directory.
    let inits = calls.keys().filter(|(_, c)| c == "init").count();
    assert_eq!(inits, 5, "{calls:?}");
    // A job's first command starts after the last command of every job it needs ends.
    let span = |job: &str| {
        let (kind, module) = job.split_once('-').expect("kind-module");
        let module = module.replacen('-', "/", 1);
        let commands: &[&str] = if kind == "plan" {
            &["init", "plan"]
        } else {
            &["apply"]
        };
        let times: Vec<(u128, u128)> = commands
            .iter()
            .map(|c| calls[&(module.clone(), c.to_string())])
            .collect();
        (
            times.iter().map(|t| t.0).min().expect("a command"),
            times.iter().map(|t| t.1).max().expect("a command"),
        )
    };
    for job in plan.jobs.iter() {
        for need in &job.needs {
            assert!(
                span(&job.name).0 >= span(&need.job).1,
                "{} started before {} ended",
                job.name,
                need.job
            );
        }
    }
    // Independent modules run at the same time.
    assert!(overlap(span("plan-prod-vpc"), span("plan-prod-dns")));
    assert!(overlap(span("plan-prod-eks"), span("plan-prod-rds")));
    // Not level by level: dns is done early, app waits only for eks and rds.
    assert!(span("apply-prod-dns").1 < span("plan-prod-eks").1);

    assert!(out.contains("[10/10] ok"), "{out}");
    assert!(
        out.contains("10 succeeded, 0 failed, 0 skipped in "),
        "{out}"
    );
}

#[test]
fn a_failure_skips_its_dependents_and_the_rest_carries_on() {
    let project = Project::new();
    let plan = job_plan(PlanOptions::default(), false);
    let (summary, out) = project.run(&plan, &project.options(Mode::Run, Some("prod/eks")));
    assert!(summary.failed());
    assert!(!summary.interrupted);

    let statuses: Vec<String> = summary
        .results
        .iter()
        .map(|r| format!("{} {:?}", r.job, r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            "plan-prod-dns Succeeded",
            "plan-prod-vpc Succeeded",
            "apply-prod-dns Succeeded",
            "apply-prod-vpc Succeeded",
            "plan-prod-eks Failed { code: Some(1), reason: \"`terraform plan` exited with code 1\" }",
            "plan-prod-rds Succeeded",
            "apply-prod-eks Skipped { because: \"plan-prod-eks\" }",
            "apply-prod-rds Succeeded",
            "plan-prod-app Skipped { because: \"plan-prod-eks\" }",
            "apply-prod-app Skipped { because: \"plan-prod-eks\" }",
        ]
    );
    // Skipped jobs never ran.
    let calls = project.calls();
    assert!(!calls.contains_key(&("prod/app".into(), "plan".into())));
    assert!(calls.contains_key(&("prod/rds".into(), "apply".into())));

    assert!(out.contains(
        "FAILED  plan-prod-eks: `terraform plan` exited with code 1; log: .terraci/logs/plan-prod-eks.log"
    ), "{out}");
    assert!(
        out.contains("skipped apply-prod-eks: plan-prod-eks failed"),
        "{out}"
    );
    assert!(
        out.contains("6 succeeded, 1 failed, 3 skipped in "),
        "{out}"
    );

    assert_eq!(
        project.log("plan-prod-eks"),
        "# plan-prod-eks in prod/eks\n\
         $ [TMP]/bin/terraform plan -input=false -no-color -out=plan.tfplan\n\
         stdout of plan in prod/eks (prod/eks) plan -input=false -no-color -out=plan.tfplan\n\
         stderr of plan\n\
         `terraform plan` exited with code 1\n"
    );
    assert!(!project
        .root
        .join(".terraci/logs/plan-prod-app.log")
        .exists());
}

#[test]
fn plan_mode_plans_in_dependency_order_and_apply_mode_reads_the_plan_files() {
    let project = Project::new();
    let plan = job_plan(PlanOptions::default(), false);

    // apply before any plan: every module lacks its plan file.
    let (summary, out) = project.run(&plan, &project.options(Mode::Apply, None));
    assert!(summary.failed());
    assert_eq!(
        status_of(&summary, "apply-prod-vpc"),
        &Status::Failed {
            code: None,
            reason: "no plan.tfplan in prod/vpc: run `terraci local-exec plan` first".into()
        }
    );
    assert_eq!(
        status_of(&summary, "apply-prod-eks"),
        &Status::Skipped {
            because: "apply-prod-vpc".into()
        }
    );
    assert!(project.calls().is_empty(), "{out}");

    let (summary, out) = project.run(&plan, &project.options(Mode::Plan, None));
    assert!(!summary.failed(), "{out}");
    let jobs: Vec<&str> = summary.results.iter().map(|r| &*r.job).collect();
    assert_eq!(
        jobs,
        [
            "plan-prod-dns",
            "plan-prod-vpc",
            "plan-prod-eks",
            "plan-prod-rds",
            "plan-prod-app"
        ]
    );
    let calls = project.calls();
    assert!(
        calls[&("prod/eks".into(), "plan".into())].0
            >= calls[&("prod/vpc".into(), "plan".into())].1
    );
    assert!(
        calls[&("prod/app".into(), "plan".into())].0
            >= calls[&("prod/rds".into(), "plan".into())].1
    );
    assert!(project.root.join("prod/app/plan.tfplan").is_file());

    let (summary, out) = project.run(&plan, &project.options(Mode::Apply, None));
    assert!(!summary.failed(), "{out}");
    assert_eq!(summary.results.len(), 5);
    // eks, rds and app read modules this run applies first: their plans are stale, and
    // the run says so (plan mode said nothing of the kind).
    assert!(
        out.contains("warning: 3 module(s) read modules this run applies first, so their plan files were made against the state before those applies: prod/eks, prod/rds, prod/app;"),
        "{out}"
    );
    assert!(project
        .calls()
        .contains_key(&("prod/app".into(), "apply".into())));
}

#[test]
fn apply_mode_on_a_plan_only_pipeline_is_an_error() {
    let project = Project::new();
    let plan = job_plan(
        PlanOptions {
            plan_only: true,
            parallel_plans: false,
            ..PlanOptions::default()
        },
        true,
    );
    let err = run_with(
        &plan,
        &project.options(Mode::Apply, None),
        &terraci_db::system::OsSystem,
        &OsRunner,
        &Interrupt::new(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the pipeline has no apply jobs (it was built with --plan-only)"
    );
}

#[test]
fn dry_run_prints_the_commands_in_dependency_order() {
    let project = Project::new();
    let plan = job_plan(PlanOptions::default(), true);
    let mut options = project.options(Mode::Plan, None);
    options.dry_run = true;
    options.binary = None;
    options.env = vec![("EXTRA".into(), "a b".into())];
    let mut out = Vec::new();
    let summary = run(&plan, &options, &terraci_db::system::OsSystem, &mut out).expect("dry run");
    assert!(!summary.failed());
    assert!(project.calls().is_empty());
    assert!(!project.root.join(".terraci").exists());
    let block = |job: &str, module: &str, after: &str| {
        let (env, name) = module.split_once('/').expect("env/module");
        format!(
            "\n# {job}{after}\n(\n  cd {module}\n  export TF_MODULE_PATH={module}\n  \
             export TF_ENV={env}\n  export TF_MODULE={name}\n  export TF_IN_AUTOMATION=1\n  \
             export EXTRA='a b'\n  terraform init -input=false -no-color\n  \
             terraform plan -input=false -no-color -out=plan.tfplan\n)\n"
        )
    };
    let expected = [
        "# terraci local-exec plan --dry-run: 5 jobs, up to 4 at once, from the project directory\n"
            .to_owned(),
        block("plan-prod-dns", "prod/dns", ""),
        block("plan-prod-vpc", "prod/vpc", ""),
        block("plan-prod-eks", "prod/eks", " (after plan-prod-vpc)"),
        block("plan-prod-rds", "prod/rds", " (after plan-prod-vpc)"),
        block(
            "plan-prod-app",
            "prod/app",
            " (after plan-prod-vpc, plan-prod-eks, plan-prod-rds)",
        ),
    ]
    .concat();
    assert_eq!(String::from_utf8(out).expect("utf-8"), expected);
}

#[test]
fn the_summary_table_lists_every_job_with_its_time() {
    let result = |job: &str, kind, status, ms| ModuleResult {
        job: job.into(),
        kind: Some(kind),
        module: "platform/prod/eu-central-1/vpc".into(),
        status,
        duration: Duration::from_millis(ms),
    };
    let summary = ExecSummary {
        results: vec![
            result(
                "plan-platform-prod-eu-central-1-vpc",
                JobKind::Plan,
                Status::Succeeded,
                1234,
            ),
            result(
                "apply-platform-prod-eu-central-1-vpc",
                JobKind::Apply,
                Status::Failed {
                    code: Some(1),
                    reason: "`terraform apply` exited with code 1".into(),
                },
                125_000,
            ),
            result(
                "plan-x",
                JobKind::Plan,
                Status::Skipped {
                    because: "apply-platform-prod-eu-central-1-vpc".into(),
                },
                0,
            ),
            result("apply-x", JobKind::Apply, Status::NotStarted, 0),
        ],
        interrupted: true,
        elapsed: Duration::from_millis(126_400),
    };
    assert_eq!(
        summary.table(),
        "\
JOB                                   MODULE                          STATUS                                                TIME
plan-platform-prod-eu-central-1-vpc   platform/prod/eu-central-1/vpc  ok                                                    1.2s
apply-platform-prod-eu-central-1-vpc  platform/prod/eu-central-1/vpc  failed: `terraform apply` exited with code 1          2m05s
plan-x                                platform/prod/eu-central-1/vpc  skipped: apply-platform-prod-eu-central-1-vpc failed  -
apply-x                               platform/prod/eu-central-1/vpc  not started                                           -
1 succeeded, 1 failed, 1 skipped, 1 not started in 2m06s (interrupted)
"
    );
    assert!(summary.failed());
}

/// Records the jobs it runs; triggers Ctrl-C on `interrupt_on`.
struct FakeRunner {
    ran: Mutex<Vec<String>>,
    interrupt_on: Option<&'static str>,
}

impl ProcessRunner for FakeRunner {
    fn run(
        &self,
        dir: &Utf8Path,
        _env: &[(String, String)],
        command: &CommandLine,
        _out: &std::fs::File,
        _err: &std::fs::File,
        interrupt: &Interrupt,
    ) -> io::Result<Exit> {
        let module = dir.file_name().expect("module dir").to_owned();
        self.ran
            .lock()
            .expect("not poisoned")
            .push(format!("{} {module}", command.args[0]));
        if self.interrupt_on == Some(module.as_str()) {
            interrupt.trigger();
            // Terraform stops gracefully and exits non-zero.
            return Ok(Exit::Code(1));
        }
        Ok(Exit::Success)
    }
}

#[test]
fn one_worker_runs_the_jobs_in_ir_order() {
    let project = Project::new();
    let plan = job_plan(PlanOptions::default(), false);
    let mut options = project.options(Mode::Run, None);
    options.parallelism = 1;
    let runner = FakeRunner {
        ran: Mutex::default(),
        interrupt_on: None,
    };
    let summary = run_with(
        &plan,
        &options,
        &terraci_db::system::OsSystem,
        &runner,
        &Interrupt::new(),
        &mut Vec::new(),
    )
    .expect("runs");
    assert!(!summary.failed());
    let order: Vec<String> = plan
        .jobs
        .iter()
        .map(|j| {
            format!(
                "{} {}",
                j.kind.as_str(),
                j.module.trim_start_matches("prod/")
            )
        })
        .collect();
    assert_eq!(*runner.ran.lock().expect("not poisoned"), order);
}

#[test]
fn ctrl_c_starts_no_new_job_and_reports_the_rest_as_not_started() {
    let project = Project::new();
    let plan = job_plan(PlanOptions::default(), false);
    let mut options = project.options(Mode::Run, None);
    options.parallelism = 1;
    let runner = FakeRunner {
        ran: Mutex::default(),
        interrupt_on: Some("vpc"),
    };
    let interrupt = Interrupt::new();
    let mut out = Vec::new();
    let summary = run_with(
        &plan,
        &options,
        &terraci_db::system::OsSystem,
        &runner,
        &interrupt,
        &mut out,
    )
    .expect("runs");
    let out = String::from_utf8(out).expect("utf-8");
    assert!(summary.interrupted && summary.failed());
    assert_eq!(
        *runner.ran.lock().expect("not poisoned"),
        ["plan dns", "plan vpc"]
    );
    assert_eq!(summary.results[0].status, Status::Succeeded);
    assert_eq!(
        summary.results[1].status,
        Status::Failed {
            code: Some(1),
            reason: "`terraform plan` exited with code 1 (interrupted)".into()
        }
    );
    assert!(summary.results[2..]
        .iter()
        .all(|r| r.status == Status::NotStarted));
    assert!(out.contains("interrupted: starting no new jobs\n"), "{out}");
    assert!(out.contains("(interrupted)\n"), "{out}");
}

#[cfg(unix)]
#[test]
fn ctrl_c_forwards_sigint_to_running_commands_and_waits_for_them() {
    let project = Project::new();
    let slow = project.root.join("bin/slow");
    std::fs::write(
        &slow,
        // Python, not sh: a shell cannot trap a signal that was ignored when it started
        // (a suite run from a background job inherits SIGINT ignored, and this test
        // installs no handler of its own that exec would reset). `.ready` in the module
        // directory says the handler is set.
        "#!/usr/bin/env python3\nimport pathlib, signal, sys, time\n\
         def stop(*_):\n    print('got SIGINT', flush=True)\n    sys.exit(130)\n\
         signal.signal(signal.SIGINT, stop)\npathlib.Path('.ready').touch()\ntime.sleep(60)\n",
    )
    .expect("slow script");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let plan = job_plan(PlanOptions::default(), false);
    let mut options = project.options(Mode::Plan, None);
    options.binary = Some(slow.into());
    let interrupt = Interrupt::new();
    let (summary, triggered) = std::thread::scope(|scope| {
        // Ctrl-C once both running commands have set their trap (however slowly a loaded
        // machine starts them).
        let trigger = scope.spawn(|| {
            let ready = ["dns", "vpc"].map(|m| project.root.join("prod").join(m).join(".ready"));
            let waiting = Instant::now();
            while !ready.iter().all(|r| r.exists()) && waiting.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(10));
            }
            interrupt.trigger();
            Instant::now()
        });
        let summary = run_with(
            &plan,
            &options,
            &terraci_db::system::OsSystem,
            &OsRunner,
            &interrupt,
            &mut Vec::new(),
        )
        .expect("runs");
        (summary, trigger.join().expect("trigger thread"))
    });
    // The commands were ended, not waited out (`sleep 60`); the margin is for a machine
    // loaded by the rest of the suite.
    assert!(
        triggered.elapsed() < Duration::from_secs(20),
        "{:?} after Ctrl-C",
        triggered.elapsed()
    );
    assert!(summary.interrupted);
    // dns and vpc were running; the rest never started.
    for job in ["plan-prod-dns", "plan-prod-vpc"] {
        assert_eq!(
            status_of(&summary, job),
            &Status::Failed {
                code: Some(130),
                reason: "`slow plan` exited with code 130 (interrupted)".into()
            }
        );
    }
    assert_eq!(status_of(&summary, "plan-prod-app"), &Status::NotStarted);
    assert!(project.log("plan-prod-vpc").contains("got SIGINT"));
}

/// A review job (the summary) after the plans of `local-exec plan`: it runs once every
/// plan finished, also after a failed one and the plans that failure skipped, and sees
/// the plan results each plan wrote.
#[test]
fn a_review_job_runs_after_the_plans_whatever_their_outcome() {
    let project = Project::new();
    let mut review = terraci_engine::contrib::summary_contribution();
    review.commands = vec![vec![
        "sh".into(),
        "-c".into(),
        "cat prod/*/plan.result.json > review.out".into(),
    ]];
    let set = terraci_engine::contrib::ContributionSet::new(vec![review]).expect("valid");
    let plan =
        terraci_engine::ir::contribute(job_plan(PlanOptions::default(), true), &set, ".terraci")
            .expect("no clash");
    let mut options = project.options(Mode::Plan, Some("prod/vpc"));
    options.commit = "0123abcdefzz".into();
    let (summary, out) = project.run(&plan, &options);
    assert!(summary.failed(), "{out}");
    assert!(matches!(
        status_of(&summary, "plan-prod-vpc"),
        Status::Failed { code: Some(1), .. }
    ));
    assert!(matches!(
        status_of(&summary, "plan-prod-eks"),
        Status::Skipped { .. }
    ));
    assert_eq!(
        status_of(&summary, "terraci-summary"),
        &Status::Succeeded,
        "{out}"
    );
    let result = |module: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(project.root.join(module).join("plan.result.json"))
            .expect("plan.result.json");
        serde_json::from_str(&text).expect("JSON")
    };
    // The commit keeps hex digits only; a failed plan has no plan.json.
    assert_eq!(
        result("prod/vpc"),
        serde_json::json!({"exit_code": 1, "commit": "0123abcdef"})
    );
    assert_eq!(result("prod/dns")["exit_code"], 0);
    assert!(!project.root.join("prod/vpc/plan.json").exists());
    assert!(project.root.join("prod/dns/plan.json").exists());
    assert!(
        std::fs::read_to_string(project.root.join("prod/dns/plan.txt"))
            .expect("plan.txt")
            .contains("stdout of plan")
    );
    let seen = std::fs::read_to_string(project.root.join("review.out")).expect("review ran");
    assert_eq!(seen.lines().count(), 2, "{seen}");
    // `run` applies: no review job there.
    let (summary, _) = project.run(&plan, &project.options(Mode::Run, None));
    assert!(summary.results.iter().all(|r| r.job != "terraci-summary"));
}
