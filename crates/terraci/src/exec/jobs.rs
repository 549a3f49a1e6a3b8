//! From IR jobs to tasks: the jobs a mode selects, their needs among those, and the
//! exact commands and variables each one runs.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Write};

use camino::Utf8PathBuf;

use super::{ExecOptions, Mode};
use terraci_db::escape::{printable, sh_cd, sh_word};
use terraci_engine::ir::{ContributedJob, Job, JobKind, JobPlan};

pub(super) const PLAN_FILE: &str = "plan.tfplan";

/// One program invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandLine {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
}

impl CommandLine {
    /// The full command line, shell-quoted.
    pub(crate) fn display(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|s| sh_word(s))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `terraform plan`: the program's file name and the subcommand, for messages.
    /// Why the command did not start, after its short form: a binary that is not found
    /// is named as such, with where terraci takes it from.
    pub(crate) fn start_failure(&self, e: &std::io::Error) -> String {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "could not start: `{}` is not on PATH (install it, or name the binary in `execution.binary` of .terraci.yaml: terraform or tofu)",
                self.program
            )
        } else {
            format!("could not start: {e}")
        }
    }

    pub(crate) fn display_short(&self) -> String {
        let program = self.program.rsplit('/').next().unwrap_or(&self.program);
        match self.args.first() {
            Some(sub) => format!("{program} {sub}"),
            None => program.to_owned(),
        }
    }
}

/// A job as local-exec runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Task {
    pub(crate) job: String,
    /// `None`: a contributed job (summary, policy...), run from the project directory.
    pub kind: Option<JobKind>,
    /// Empty for a contributed job.
    pub(crate) module: String,
    /// `project_dir/module`.
    pub(crate) dir: Utf8PathBuf,
    /// Added to the inherited environment, in order (later wins).
    pub(crate) env: Vec<(String, String)>,
    pub(crate) commands: Vec<CommandLine>,
    /// Indices of the tasks this one waits for.
    pub(crate) needs: Vec<usize>,
    /// An apply without its plan in the same run reads the plan file of an earlier one.
    pub(crate) needs_plan_file: bool,
    /// The plan keeps its results as data: `plan.txt`, `plan.json`, `plan.result.json`.
    pub(crate) plan_results: bool,
    /// Runs once every job it needs finished, whatever their outcome.
    pub(crate) always: bool,
}

fn selected(mode: Mode, kind: JobKind) -> bool {
    match mode {
        Mode::Plan => kind == JobKind::Plan,
        Mode::Apply => kind == JobKind::Apply,
        Mode::Run => true,
    }
}

/// An IR job: a module's plan or apply, or a contributed job.
#[derive(Clone, Copy)]
enum Entry<'a> {
    Module(&'a Job),
    Contributed(&'a ContributedJob),
}

impl Entry<'_> {
    fn name(&self) -> &str {
        match self {
            Entry::Module(j) => &j.name,
            Entry::Contributed(j) => &j.name,
        }
    }

    fn needs(&self) -> &[terraci_engine::ir::Need] {
        match self {
            Entry::Module(j) => &j.needs,
            Entry::Contributed(j) => &j.needs,
        }
    }

    fn selected(&self, mode: Mode) -> bool {
        match self {
            Entry::Module(j) => selected(mode, j.kind),
            // Contributed jobs read plans (and reports): they run with the plans; review
            // jobs (the summary) only in `plan`, where the plans are what is reviewed.
            Entry::Contributed(j) => {
                j.spec.local
                    && match j.spec.when {
                        terraci_engine::contrib::When::ReviewAlways => mode == Mode::Plan,
                        terraci_engine::contrib::When::OnSuccess => mode != Mode::Apply,
                    }
            }
        }
    }
}

/// The tasks of `plan` that `options.mode` selects, in level order (a topological
/// order: a job's needs sit on lower levels), contributed jobs after the module jobs of
/// their level.
pub(super) fn tasks(plan: &JobPlan, options: &ExecOptions) -> Vec<Task> {
    let mut entries: Vec<(usize, Entry<'_>)> = Vec::with_capacity(plan.jobs.len());
    entries.extend(plan.jobs.iter().map(|j| (j.level, Entry::Module(j))));
    entries.extend(
        plan.contributed
            .iter()
            .map(|j| (j.level, Entry::Contributed(j))),
    );
    // Stable: module jobs keep their IR order within a level.
    entries.sort_by_key(|(level, _)| *level);
    let index: std::collections::HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, (_, e))| (e.name(), i))
        .collect();
    // For every IR job, the selected jobs it waits for, looking through left-out jobs:
    // in `plan` mode `plan-B -> apply-A -> plan-A` becomes `plan-B -> plan-A`.
    let mut waits: Vec<BTreeSet<usize>> = Vec::with_capacity(entries.len());
    for (_, entry) in &entries {
        let mut set = BTreeSet::new();
        for need in entry.needs() {
            // The IR never names a job outside itself, and needs point backwards.
            let Some(&n) = index.get(&*need.job) else {
                continue;
            };
            if n >= waits.len() {
                continue;
            }
            if entries[n].1.selected(options.mode) {
                set.insert(n);
            } else {
                set.extend(waits[n].iter().copied());
            }
        }
        waits.push(set);
    }

    let mut position = vec![usize::MAX; entries.len()];
    let mut tasks = Vec::new();
    for (i, (_, entry)) in entries.iter().enumerate() {
        if !entry.selected(options.mode) {
            continue;
        }
        position[i] = tasks.len();
        let needs = waits[i].iter().map(|&n| position[n]).collect();
        tasks.push(match entry {
            Entry::Module(job) => task(plan, job, needs, options),
            Entry::Contributed(job) => contributed_task(plan, job, needs, options),
        });
    }
    tasks
}

/// A contributed job: its commands from the project directory, `terraci` being the
/// running terraci.
fn contributed_task(
    plan: &JobPlan,
    job: &ContributedJob,
    needs: Vec<usize>,
    options: &ExecOptions,
) -> Task {
    let commands = job
        .spec
        .commands
        .iter()
        .filter_map(|argv| {
            let (program, args) = argv.split_first()?;
            let program = match (program.as_str(), &options.terraci) {
                ("terraci", Some(me)) => me.clone(),
                _ => program.clone(),
            };
            Some(CommandLine {
                program,
                args: args.to_vec(),
            })
        })
        .collect();
    let mut env: Vec<(String, String)> = plan
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.extend(options.env.iter().cloned());
    Task {
        job: job.name.to_string(),
        kind: None,
        module: String::new(),
        dir: options.project_dir.clone(),
        env,
        commands,
        needs,
        needs_plan_file: false,
        plan_results: false,
        always: job.spec.when == terraci_engine::contrib::When::ReviewAlways,
    }
}

fn task(plan: &JobPlan, job: &Job, needs: Vec<usize>, options: &ExecOptions) -> Task {
    let program = options
        .binary
        .clone()
        .unwrap_or_else(|| plan.binary.command().to_owned());
    let command = |args: &[&str]| CommandLine {
        program: program.clone(),
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    // In `run` the plan job just initialised this directory.
    let init = plan.init_enabled && !(options.mode == Mode::Run && job.kind == JobKind::Apply);
    let mut commands = Vec::new();
    if init {
        commands.push(command(&["init", "-input=false", "-no-color"]));
    }
    if job.kind == JobKind::Apply {
        // The apply's checks (policies over its module's plan), from the project root.
        for check in &plan.apply_checks {
            let Some((program, args)) = check.split_first() else {
                continue;
            };
            let program = match (program.as_str(), &options.terraci) {
                ("terraci", Some(me)) => me.clone(),
                _ => program.clone(),
            };
            let mut all = vec!["-d".to_owned(), options.project_dir.to_string()];
            all.extend(args.iter().map(|a| {
                if a == terraci_engine::contrib::MODULE_PLACEHOLDER {
                    job.module.to_string()
                } else {
                    a.clone()
                }
            }));
            commands.push(CommandLine { program, args: all });
        }
    }
    let plan_out = format!("-out={PLAN_FILE}");
    let plan_results = plan.plan_results && job.kind == JobKind::Plan;
    commands.push(match job.kind {
        JobKind::Plan if plan_results => command(&[
            "plan",
            "-input=false",
            "-no-color",
            &plan_out,
            "-detailed-exitcode",
        ]),
        JobKind::Plan => command(&["plan", "-input=false", "-no-color", &plan_out]),
        JobKind::Apply => command(&["apply", "-input=false", "-no-color", PLAN_FILE]),
    });

    let mut env = vec![("TF_MODULE_PATH".to_owned(), job.module.to_string())];
    for segment in &plan.segments {
        if let Some(value) = job.components.get(segment) {
            env.push((format!("TF_{}", segment.to_uppercase()), value.clone()));
        }
    }
    env.extend(plan.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(options.env.iter().cloned());

    Task {
        job: job.name.to_string(),
        kind: Some(job.kind),
        module: job.module.to_string(),
        dir: options.project_dir.join(&*job.module),
        env,
        commands,
        needs,
        needs_plan_file: options.mode == Mode::Apply,
        plan_results,
        always: false,
    }
}

/// What a plan that keeps its results does, as the shell lines a CI job runs.
fn plan_results_lines(text: &mut String, plan: &CommandLine, commit: &str) {
    let show = CommandLine {
        program: plan.program.clone(),
        args: vec!["show".into(), "-json".into(), PLAN_FILE.into()],
    };
    let hex: String = commit.chars().filter(char::is_ascii_hexdigit).collect();
    let _ = writeln!(
        text,
        "  rc=0; {} > plan.txt 2>&1 || rc=$?; cat plan.txt",
        plan.display()
    );
    let _ = writeln!(
        text,
        "  if [ \"$rc\" -eq 0 ] || [ \"$rc\" -eq 2 ]; then {} > plan.json || {{ rc=$?; rm -f plan.json; }}; fi",
        show.display()
    );
    let _ = writeln!(
        text,
        "  printf '{{\"exit_code\": %d, \"commit\": \"%s\"}}\\n' \"$rc\" '{hex}' > plan.result.json"
    );
    let _ = writeln!(text, "  [ \"$rc\" -eq 0 ] || [ \"$rc\" -eq 2 ]");
}

/// `--dry-run`: each task as a shell block, in the order a single worker would run them.
pub(super) fn print_dry_run(
    tasks: &[Task],
    options: &ExecOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut text = format!(
        "# terraci local-exec {} --dry-run: {} jobs, up to {} at once, from the project directory\n",
        options.mode.as_str(),
        tasks.len(),
        options.parallelism.max(1)
    );
    for task in tasks {
        let needs: Vec<&str> = task.needs.iter().map(|&n| tasks[n].job.as_str()).collect();
        text.push('\n');
        if needs.is_empty() {
            let _ = writeln!(text, "# {}", printable(&task.job));
        } else {
            let _ = writeln!(
                text,
                "# {} (after {})",
                printable(&task.job),
                printable(&needs.join(", "))
            );
        }
        text.push_str("(\n");
        if !task.module.is_empty() {
            let _ = writeln!(text, "  {}", sh_cd(&task.module));
        }
        for (key, value) in &task.env {
            let _ = writeln!(text, "  export {key}={}", sh_word(value));
        }
        for command in &task.commands {
            if task.plan_results && command.args.first().map(String::as_str) == Some("plan") {
                plan_results_lines(&mut text, command, &options.commit);
            } else {
                let _ = writeln!(text, "  {}", command.display());
            }
        }
        text.push_str(")\n");
    }
    out.write_all(text.as_bytes())
}
