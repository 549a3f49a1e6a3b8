//! `local-exec`: the job plan run on this machine, in dependency order.

use crate::cli::{ExecMode, GlobalArgs, LocalExecArgs};
use crate::exec::{ExecOptions, Mode, ProgressStyle};
use crate::pipeline::change_input;
use crate::workspace::{load_workspace, load_workspace_overlapped, Start, Workspace};
use terraci_db::exit::{self, fail};
use terraci_db::files::Selection;
use terraci_db::system::System;
use terraci_engine::graph::dependency_graph;
use terraci_engine::ir::JobPlan;
use terraci_engine::ir::{job_plan, PlanOptions};

use super::replayed::{replayed, KeyInputs, Produced};
use super::Io;

pub(super) fn local_exec(
    global: &GlobalArgs,
    args: &LocalExecArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    if !args.dry_run {
        let ws = load_workspace(io.system, global, &args.eval)?;
        let (plan, options) = prepare(&ws, global, args, io.system, io.stderr)?;
        if matches!(args.mode, ExecMode::Apply | ExecMode::Run) && !args.auto_approve {
            confirm_applies(&plan, io.system, io.stderr)?;
        }
        return execute(&plan, &options, io.system, io.stdout);
    }
    // A dry run prints commands only: it is replayed like `generate`. Besides the
    // project, its text depends on the checked-out commit and this binary's path.
    let system = io.system;
    let root = crate::workspace::project_dir(system, global).ok();
    let commit = root
        .as_deref()
        .and_then(terraci_vcs::checked_out_commit)
        .unwrap_or_default();
    let inputs = KeyInputs {
        command: "local-exec",
        changed_only: args.changes.changed_only,
        var_files: &args.eval.var_file,
        extra: vec![
            format!("commit={commit}"),
            format!("terraci={}", system.current_exe().unwrap_or_default()),
        ],
    };
    replayed(global, io, inputs, None, |layout, err| {
        let mut ws = load_workspace_overlapped(system, global, &args.eval, Start::walked(layout))?;
        ws.wait_for_cache();
        let (plan, options) = prepare(&ws, global, args, system, err)?;
        let mut out = Vec::new();
        let code = execute(&plan, &options, system, &mut out)?;
        let (stamps, notices) = ws.take_run_inputs(false);
        ws.dismiss();
        Ok(Produced {
            output: String::from_utf8_lossy(&out).into_owned(),
            code,
            stamps,
            notices,
        })
    })
}

/// Asks once before `apply`/`run` applies anything, as `terraform apply` does: the
/// modules it will apply are listed, and only `yes` goes on. Without a terminal to ask
/// on, it refuses (exit 2) unless `--auto-approve`: a script never applies production
/// by default.
fn confirm_applies(
    plan: &JobPlan,
    system: &dyn System,
    err: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let modules: Vec<&str> = plan
        .jobs
        .iter()
        .filter(|j| j.kind == terraci_engine::ir::JobKind::Apply)
        .map(|j| &*j.module)
        .collect();
    if modules.is_empty() {
        return Ok(());
    }
    let Some(mut input) = system.interactive_stdin() else {
        let shown = modules.len().min(3);
        let more = match modules.len() - shown {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        return Err(fail(
            exit::USAGE,
            format!(
                "local-exec would apply {} modules ({}{more}) and there is no terminal to ask on: pass --auto-approve to apply them",
                modules.len(),
                modules[..shown].join(", ")
            ),
        ));
    };
    writeln!(err, "local-exec will apply {} modules:", modules.len())?;
    for m in &modules {
        writeln!(err, "  {}", terraci_db::escape::printable(m))?;
    }
    write!(err, "Apply them? Only 'yes' is accepted: ")?;
    err.flush()?;
    let mut answer = String::new();
    input.read_line(&mut answer)?;
    if answer.trim() != "yes" {
        return Err(fail(exit::ERROR, "apply cancelled: nothing was run"));
    }
    Ok(())
}

/// The job plan of a loaded project and how to run it; diagnostics to `err`.
fn prepare(
    ws: &Workspace,
    global: &GlobalArgs,
    args: &LocalExecArgs,
    system: &dyn System,
    err: &mut dyn std::io::Write,
) -> anyhow::Result<(JobPlan, ExecOptions)> {
    ws.require_modules()?;
    let mut select = args.select.clone();
    select.include.extend(
        args.module
            .iter()
            .map(|m| m.trim_end_matches('/').to_owned()),
    );
    let filters = ws.filters(&select)?;
    let diagnostics = ws.all_diagnostics();
    ws.print_diagnostics(&diagnostics, global.quiet, err)?;
    let graph = dependency_graph(&ws.db, ws.project);
    // A `-m` that names no module is a typo, as in `graph -m`, not an empty run.
    for m in &args.module {
        let m = m.trim_end_matches('/');
        if !graph
            .modules
            .iter()
            .any(|id| terraci_db::filter::glob_matches(m, id))
        {
            return Err(fail(
                exit::ERROR,
                format!("no module `{}`", terraci_db::escape::printable(m)),
            ));
        }
    }
    ws.require_selected(&filters)?;
    if !graph.cycles.is_empty() {
        // Its `dependency-cycle` error is printed with the diagnostics above.
        return Err(exit::reported(exit::VALIDATION));
    }
    let changes = change_input(system, &ws.root, &args.changes, &ws.config.config)?;
    let selection = Selection::new(&ws.db, filters, PlanOptions::default(), changes);
    let plan = match job_plan(&ws.db, ws.project, selection) {
        Ok(plan) => plan.clone(),
        Err(e) => {
            let Some(d) = e.diagnostic() else {
                return Err(exit::coded(e.clone()));
            };
            ws.print_diagnostics(&[d], global.quiet, err)?;
            return Err(fail(
                exit::ERROR,
                "nothing was run: a contributed job is invalid (see above)",
            ));
        }
    };
    let ci = system.env_var("CI").is_some();
    let options = ExecOptions {
        project_dir: ws.root.clone(),
        mode: match args.mode {
            ExecMode::Plan => Mode::Plan,
            ExecMode::Apply => Mode::Apply,
            ExecMode::Run => Mode::Run,
        },
        parallelism: args
            .parallelism
            .unwrap_or(ws.config.config.execution.parallelism)
            .max(1),
        dry_run: args.dry_run,
        binary: args.binary.clone(),
        log_dir: camino::Utf8Path::new(ws.config.config.service_dir()).join("logs"),
        progress: ProgressStyle::detect(global.quiet || ci),
        env: Vec::new(),
        // Contributed jobs that run `terraci` run this one.
        terraci: system.current_exe(),
        commit: terraci_vcs::checked_out_commit(&ws.root).unwrap_or_default(),
    };
    Ok((plan, options))
}

/// Runs (or prints) the plan; the exit code.
fn execute(
    plan: &JobPlan,
    options: &ExecOptions,
    system: &dyn terraci_db::system::System,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<u8> {
    let summary = crate::exec::run(plan, options, system, out)
        .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    Ok(if summary.interrupted {
        130
    } else if summary.failed() {
        exit::ERROR
    } else {
        exit::OK
    })
}
