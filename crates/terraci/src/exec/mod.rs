//! `local-exec`: runs the pipeline IR on this machine.
//!
//! Input: a [`JobPlan`] (the same job DAG the CI renderers read) and [`ExecOptions`].
//! Output: an [`ExecSummary`], live progress and a summary table on the given writer,
//! and one log file per job. Nothing is cached, so nothing is invalidated: every call
//! runs (or, with `dry_run`, prints) the selected jobs afresh.
//!
//! # API for the CLI driver
//! ```ignore
//! let options = ExecOptions {
//!     project_dir,                       // absolute, the `-d` directory
//!     mode: Mode::Run,                   // `local-exec plan|apply|run`
//!     parallelism: config.execution.parallelism,
//!     dry_run,                           // `--dry-run`
//!     binary: None,                      // `--binary` override, else `plan.binary`
//!     log_dir: ".terraci/logs".into(),   // relative: under `project_dir`
//!     progress: ProgressStyle::detect(quiet || ci),
//!     env: vec![],                       // extra `KEY=VALUE`s, override everything
//! };
//! let summary = terraci::exec::run(&plan, &options, &OsSystem, &mut stdout)?;
//! exit(if summary.interrupted { 130 } else if summary.failed() { 1 } else { 0 })
//! ```
//! Build the plan with `plan_only: false` for `apply` and `run`; `plan` works on any.
//! `run` installs a SIGINT/SIGTERM handler for its duration; [`run_with`] takes the
//! process runner and the interrupt flag instead, for tests and embedding.
//!
//! # Behaviour
//! - Modes select jobs from the IR: `plan` the plan jobs, `apply` the apply jobs, `run`
//!   both. Needs on jobs left out are replaced by what those jobs need, so in `plan` mode
//!   `plan-B` waits for `plan-A` when B reads A's state, and in `apply` mode `apply-B`
//!   waits for `apply-A`.
//! - Commands, in `<project_dir>/<module>`, stdin closed:
//!   `<bin> init -input=false -no-color` (when `init_enabled`; not before the apply of a
//!   `run`, whose plan just initialised the same directory),
//!   `<bin> plan -input=false -no-color -out=plan.tfplan`,
//!   `<bin> apply -input=false -no-color plan.tfplan` (a saved plan applies without a
//!   prompt). `apply` mode needs the `plan.tfplan` of an earlier `plan`: a module
//!   without one fails with that reason before anything runs in it.
//! - Environment: inherited unchanged, plus `TF_MODULE_PATH`, `TF_<SEGMENT>` (segment
//!   names upper-cased), `execution.env`, then `ExecOptions::env`, later ones winning.
//! - Scheduling: `parallelism` workers; a job starts as soon as every job it needs has
//!   succeeded (not level by level), lowest IR position first. A failed job skips its
//!   transitive dependents, naming the failed job; independent jobs carry on.
//! - Logs: `<log_dir>/<job>.log` holds each command line and its stdout and stderr.
//!   The logs of the selected jobs are removed first, so a skipped job has none.
//! - Files are written following no symlink below the project (or below a log dir
//!   outside it): a linked directory on the way is an error naming it, a linked
//!   `plan.txt`, `plan.json`, `plan.result.json` or log is replaced by a new file
//!   ([`System::write_beneath`](terraci_db::system::System::write_beneath)).
//! - Progress: [`ProgressStyle::Terminal`] draws an indicatif bar on stderr (done,
//!   running, failed, skipped, the running jobs) and prints failures above it;
//!   [`ProgressStyle::Plain`] writes one line per event to the writer. Both end with the
//!   summary table on the writer.
//! - Ctrl-C: no new job starts, the running commands get one SIGINT each (they run in
//!   their own process group, so a terminal Ctrl-C is not delivered twice — Terraform
//!   treats a second interrupt as "stop now" and may leave the state locked), and are
//!   waited for. Jobs that never started are [`Status::NotStarted`] and the summary has
//!   `interrupted: true`. A second Ctrl-C is forwarded too.
//! - `dry_run`: prints every selected job's commands (`cd`, exported variables, command
//!   lines) in dependency order, and runs nothing.

mod jobs;
mod process;
mod report;
mod schedule;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, Seek as _, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use terraci_db::system::System;
use terraci_engine::ir::{JobKind, JobPlan};

pub(crate) use jobs::{CommandLine, Task};
pub(crate) use process::{Exit, Interrupt, OsRunner, ProcessRunner};

use schedule::Event;

/// Which jobs of the IR run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Only plan jobs (`plan -out=plan.tfplan`).
    Plan,
    /// Only apply jobs (`apply plan.tfplan`); needs the plan files of an earlier `plan`.
    Apply,
    /// Plan then apply per module, in dependency order.
    Run,
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Plan => "plan",
            Mode::Apply => "apply",
            Mode::Run => "run",
        }
    }
}

/// How progress is shown while jobs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProgressStyle {
    /// A live indicatif bar on stderr.
    Terminal,
    /// One line per event on the output writer (CI logs, pipes, `--quiet`).
    Plain,
}

impl ProgressStyle {
    /// `Terminal` when stderr is a terminal and `plain` is false (pass `quiet || CI`).
    pub(crate) fn detect(plain: bool) -> Self {
        use std::io::IsTerminal;
        if !plain && io::stderr().is_terminal() {
            ProgressStyle::Terminal
        } else {
            ProgressStyle::Plain
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ExecOptions {
    /// Module ids are relative to this directory.
    pub(crate) project_dir: Utf8PathBuf,
    pub(crate) mode: Mode,
    /// Worker pool size (`execution.parallelism`); 0 counts as 1.
    pub(crate) parallelism: usize,
    pub(crate) dry_run: bool,
    /// Overrides `execution.binary` (a name on `PATH` or a path).
    pub(crate) binary: Option<String>,
    /// Per-job logs; a relative path is under `project_dir`.
    pub(crate) log_dir: Utf8PathBuf,
    pub(crate) progress: ProgressStyle,
    /// Added to every job's environment after everything else.
    pub(crate) env: Vec<(String, String)>,
    /// The running terraci, for contributed jobs that run `terraci` (`None`: from PATH).
    pub(crate) terraci: Option<String>,
    /// The commit plans are made for (`git rev-parse HEAD`), written to
    /// `plan.result.json`; empty when unknown.
    pub(crate) commit: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    Succeeded,
    /// `code` is `None` when the command was killed by a signal or never started.
    Failed {
        code: Option<i32>,
        reason: String,
    },
    /// A job it needs, directly or not, failed: `because` names that job.
    Skipped {
        because: String,
    },
    /// Ctrl-C came before the job could start.
    NotStarted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleResult {
    pub(crate) job: String,
    /// `None`: a contributed job.
    pub kind: Option<JobKind>,
    pub module: String,
    pub(crate) status: Status,
    /// Zero for jobs that did not run.
    pub(crate) duration: Duration,
}

/// One result per selected job, in IR order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ExecSummary {
    pub(crate) results: Vec<ModuleResult>,
    pub(crate) interrupted: bool,
    /// Wall time of the whole run.
    pub(crate) elapsed: Duration,
}

impl ExecSummary {
    /// True when any job failed or the run was interrupted: exit non-zero.
    pub(crate) fn failed(&self) -> bool {
        self.interrupted
            || self
                .results
                .iter()
                .any(|r| matches!(r.status, Status::Failed { .. }))
    }

    /// The summary table printed at the end of a run.
    pub(crate) fn table(&self) -> String {
        report::summary_table(self)
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ExecError {
    #[error("the pipeline has no apply jobs (it was built with --plan-only)")]
    NoApplyJobs,
    #[error("cannot create the log directory {path}: {source}")]
    LogDir {
        path: Utf8PathBuf,
        source: io::Error,
    },
    #[error("cannot install the Ctrl-C handler: {0}")]
    Signals(io::Error),
    #[error("cannot write the output: {0}")]
    Output(#[from] io::Error),
}

/// Runs (or with `dry_run` prints) the jobs of `plan` selected by `options.mode`, with
/// the real process runner and a SIGINT/SIGTERM handler installed for the duration.
pub(crate) fn run(
    plan: &JobPlan,
    options: &ExecOptions,
    system: &dyn System,
    out: &mut dyn Write,
) -> Result<ExecSummary, ExecError> {
    if options.dry_run {
        return run_with(plan, options, system, &OsRunner, &Interrupt::new(), out);
    }
    let interrupt = Arc::new(Interrupt::new());
    let on_signal = interrupt.clone();
    let guard = terraci_db::system::SignalGuard::install(move || on_signal.trigger())
        .map_err(ExecError::Signals)?;
    let result = run_with(plan, options, system, &OsRunner, &interrupt, out);
    drop(guard);
    result
}

/// `local-exec apply` applies plan files made by an earlier `local-exec plan`; a module
/// that reads another module applied in the same run was planned before that apply,
/// against the state it replaces, and terraform does not notice (its own state did not
/// change). Said once, before anything runs.
fn stale_plans_warning(tasks: &[jobs::Task], out: &mut dyn Write) -> std::io::Result<()> {
    let stale: Vec<&str> = tasks
        .iter()
        .filter(|t| !t.needs.is_empty())
        .map(|t| t.module.as_str())
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "warning: {} module(s) read modules this run applies first, so their plan files were made against the state before those applies: {}; `local-exec run` plans each module after the modules it reads are applied",
        stale.len(),
        terraci_db::diagnostic::first_few(stale.iter().copied())
    )
}

/// [`run`] with an explicit process runner and interrupt flag (tests, embedding).
pub(crate) fn run_with(
    plan: &JobPlan,
    options: &ExecOptions,
    system: &dyn System,
    runner: &dyn ProcessRunner,
    interrupt: &Interrupt,
    out: &mut dyn Write,
) -> Result<ExecSummary, ExecError> {
    if options.mode == Mode::Apply && !plan.jobs.iter().any(|j| j.kind == JobKind::Apply) {
        if plan.jobs.is_empty() {
            writeln!(out, "no modules to run")?;
            return Ok(ExecSummary::default());
        }
        return Err(ExecError::NoApplyJobs);
    }
    let tasks = jobs::tasks(plan, options);
    if options.dry_run {
        jobs::print_dry_run(&tasks, options, out)?;
        return Ok(ExecSummary {
            results: tasks
                .iter()
                .map(|t| result_of(t, Status::NotStarted, Duration::ZERO))
                .collect(),
            interrupted: false,
            elapsed: Duration::ZERO,
        });
    }
    if tasks.is_empty() {
        writeln!(out, "no modules to run")?;
        return Ok(ExecSummary::default());
    }
    if options.mode == Mode::Apply {
        stale_plans_warning(&tasks, out)?;
    }

    let log_dir = resolve(&options.project_dir, &options.log_dir);
    // Logs and plan files are written following no symlink below the project (or below
    // a log dir outside it): a committed link is an error or is replaced, never followed.
    let places = Places {
        project: &options.project_dir,
        log_root: terraci_db::system::write_root(&options.project_dir, &log_dir),
        log_dir,
        commit: &options.commit,
    };
    system
        .create_dir_beneath(&places.log_root, &places.log_dir)
        .map_err(|source| ExecError::LogDir {
            path: places.log_dir.clone(),
            source,
        })?;

    // A log left by an earlier run would pass for this run's log of a skipped job.
    for task in &tasks {
        let _ = system.remove_beneath(&places.log_root, &places.log(task));
    }

    let started = Instant::now();
    let mut progress = report::progress(options.progress, &tasks, &options.log_dir);
    let (events, received) = mpsc::channel::<Event>();
    let mut write_error = None;
    let outcomes = std::thread::scope(|scope| {
        let workers = scope.spawn(|| {
            schedule::schedule(
                &tasks,
                options.parallelism.max(1),
                interrupt,
                |task| execute(task, &places, system, runner, interrupt),
                events,
            )
        });
        // The writer is not `Send`: events come back to this thread to be shown.
        for event in received {
            if let Err(e) = progress.event(&event, out) {
                write_error.get_or_insert(e);
            }
        }
        workers.join().expect("the scheduler does not panic")
    });
    progress.finish();

    let summary = ExecSummary {
        results: tasks
            .iter()
            .zip(outcomes)
            .map(|(t, (status, duration))| result_of(t, status, duration))
            .collect(),
        interrupted: interrupt.is_set(),
        elapsed: started.elapsed(),
    };
    if let Some(e) = write_error {
        return Err(e.into());
    }
    write!(out, "{}", summary.table())?;
    Ok(summary)
}

/// Where a job's files go, each written following no symlink below its root.
struct Places<'a> {
    /// The plan files' root: `plan.txt` and the rest go beneath it, in the module.
    project: &'a Utf8Path,
    /// Where writing the logs starts following no link ([`terraci_db::system::write_root`]).
    log_root: Utf8PathBuf,
    log_dir: Utf8PathBuf,
    /// The commit plans are made for.
    commit: &'a str,
}

impl Places<'_> {
    fn log(&self, task: &Task) -> Utf8PathBuf {
        self.log_dir.join(format!("{}.log", task.job))
    }
}

/// The plan of a job that keeps its results: the output goes to `plan.txt` (and then
/// the log), exit 2 is a plan with changes, `show -json` of a good plan goes to
/// `plan.json`, and `plan.result.json` records the exit code and `commit`, also for a
/// failed plan, which then fails the job.
fn plan_with_results(
    task: &Task,
    command: &CommandLine,
    system: &dyn System,
    log: &mut File,
    runner: &dyn ProcessRunner,
    interrupt: &Interrupt,
    places: &Places<'_>,
) -> Result<(), Status> {
    let cannot = |what: &str, e: io::Error| Status::Failed {
        code: None,
        reason: format!("cannot write {what} in {}: {e}", task.module),
    };
    let project = places.project;
    for stale in ["plan.json", "plan.result.json"] {
        let _ = system.remove_beneath(project, &task.dir.join(stale));
    }
    let mut text = system
        .create_output_beneath(project, &task.dir.join("plan.txt"))
        .map_err(|e| cannot("plan.txt", e))?;
    let exit = runner.run(&task.dir, &task.env, command, &text, &text, interrupt);
    // The log shows what the plan printed, as it would have without plan.txt: read back
    // through the file made for it, never by its name again.
    if text.seek(io::SeekFrom::Start(0)).is_ok() {
        let _ = io::copy(&mut text, log);
    }
    drop(text);
    let mut code = match exit {
        Ok(Exit::Success) => 0,
        Ok(Exit::Code(code)) => code,
        Ok(Exit::Signal(signal)) => {
            return Err(Status::Failed {
                code: None,
                reason: format!("`{}` killed by signal {signal}", command.display_short()),
            })
        }
        Err(e) => {
            return Err(Status::Failed {
                code: None,
                reason: format!(
                    "`{}` {}",
                    command.display_short(),
                    command.start_failure(&e)
                ),
            })
        }
    };
    if code == 0 || code == 2 {
        let show = CommandLine {
            program: command.program.clone(),
            args: vec!["show".into(), "-json".into(), jobs::PLAN_FILE.into()],
        };
        let _ = writeln!(log, "$ {} > plan.json", show.display());
        let json_path = task.dir.join("plan.json");
        let json = system
            .create_output_beneath(project, &json_path)
            .map_err(|e| cannot("plan.json", e))?;
        // The JSON alone: terraform's warnings (on stderr) go to the log.
        let shown = runner.run(&task.dir, &task.env, &show, &json, log, interrupt);
        drop(json);
        if !matches!(shown, Ok(Exit::Success)) {
            let _ = system.remove_beneath(project, &json_path);
            let _ = writeln!(log, "`{}` failed", show.display_short());
            code = 1;
        }
    }
    let hex: String = places
        .commit
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    let result = format!(
        "{}\n",
        serde_json::json!({"exit_code": code, "commit": hex})
    );
    system
        .replace_beneath(
            project,
            &task.dir.join("plan.result.json"),
            &[result.as_bytes()],
        )
        .map_err(|e| cannot("plan.result.json", e))?;
    if code == 0 || code == 2 {
        Ok(())
    } else {
        let reason = format!("`{}` exited with code {code}", command.display_short());
        let _ = writeln!(log, "{reason}");
        Err(Status::Failed {
            code: Some(code),
            reason,
        })
    }
}

fn result_of(task: &Task, status: Status, duration: Duration) -> ModuleResult {
    ModuleResult {
        job: task.job.clone(),
        kind: task.kind,
        module: task.module.clone(),
        status,
        duration,
    }
}

fn resolve(base: &Utf8Path, path: &Utf8Path) -> Utf8PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        base.join(path)
    }
}

/// Runs the commands of one job in order, stopping at the first failure.
fn execute(
    task: &Task,
    places: &Places<'_>,
    system: &dyn System,
    runner: &dyn ProcessRunner,
    interrupt: &Interrupt,
) -> Status {
    let log_path = places.log(task);
    let mut log = match system.create_output_beneath(&places.log_root, &log_path) {
        Ok(f) => f,
        Err(e) => {
            return Status::Failed {
                code: None,
                reason: format!("cannot create {log_path}: {e}"),
            }
        }
    };
    // The log is best effort: a full disk must not turn a good apply into a failure.
    let _ = writeln!(log, "# {} in {}", task.job, task.module);
    if task.needs_plan_file && !system.is_file(&task.dir.join(jobs::PLAN_FILE)) {
        let reason = format!(
            "no {} in {}: run `terraci local-exec plan` first",
            jobs::PLAN_FILE,
            task.module
        );
        let _ = writeln!(log, "{reason}");
        return Status::Failed { code: None, reason };
    }
    for command in &task.commands {
        if interrupt.is_set() {
            let reason = format!("interrupted before `{}`", command.display_short());
            let _ = writeln!(log, "{reason}");
            return Status::Failed { code: None, reason };
        }
        let _ = writeln!(log, "$ {}", command.display());
        let _ = log.flush();
        if task.plan_results && command.args.first().map(String::as_str) == Some("plan") {
            match plan_with_results(task, command, system, &mut log, runner, interrupt, places) {
                Ok(()) => continue,
                Err(status) => return status,
            }
        }
        let exit = runner.run(&task.dir, &task.env, command, &log, &log, interrupt);
        let failure = match exit {
            Ok(Exit::Success) => continue,
            Ok(Exit::Code(code)) => (Some(code), format!("exited with code {code}")),
            Ok(Exit::Signal(signal)) => (None, format!("killed by signal {signal}")),
            Err(e) => (None, command.start_failure(&e)),
        };
        let (code, what) = failure;
        let interrupted = if interrupt.is_set() {
            " (interrupted)"
        } else {
            ""
        };
        let reason = format!("`{}` {what}{interrupted}", command.display_short());
        let _ = writeln!(log, "{reason}");
        return Status::Failed { code, reason };
    }
    Status::Succeeded
}
