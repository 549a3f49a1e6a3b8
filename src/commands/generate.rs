//! `generate`: the pipeline file, replayed from the run record when nothing it read has
//! changed ([`crate::replay`]).

use std::io::Write;

use crate::cli::{GenerateArgs, GlobalArgs};
use crate::config::find_config_file;
use crate::exit;
use crate::files::Selection;
use crate::graph::dependency_graph;
use crate::pipeline::{
    build_pipeline, header, plan_options, select_provider, PendingChanges, PipelineRequest,
};
use crate::system::System;
use crate::workspace::{load_workspace_overlapped, project_dir};

use super::{write_output, Io};

pub(super) fn generate(
    global: &GlobalArgs,
    args: &GenerateArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    // Before any stamp is taken: a run records only files that changed before it began.
    let started = io.system.now();
    // `--changed-only`: git runs on its own thread from here, beside the replay check
    // and the load.
    let mut changes =
        PendingChanges::start(io.system, &project_dir(io.system, global)?, &args.changes)?;
    let key = replay_key(io.system, global, args, &io.argv);
    let mut layout = None;
    if let Some(key) = &key {
        match key.lookup(io.system) {
            Ok(crate::replay::Lookup::Hit(record, walked)) => {
                if record.changes == current_changes(&mut changes, key) {
                    io.stderr.write_all(&record.stderr)?;
                    if global.verbose > 0 {
                        writeln!(
                            io.stderr,
                            "note: replayed the last run (`{}`): none of its inputs changed",
                            key.record_path()
                        )?;
                    }
                    write_output(io, args.output.as_deref(), &record.output)?;
                    return Ok(exit::OK);
                }
                layout = Some(walked);
            }
            Ok(crate::replay::Lookup::Miss(walked)) => layout = walked,
            Err(notice) if !global.quiet => writeln!(io.stderr, "notice: {notice}")?,
            Err(_) => {}
        }
    }
    // Everything for stderr goes through a buffer, so a recorded run replays it exactly.
    let mut stderr = Vec::new();
    let outcome = generate_pipeline(
        global,
        args,
        io.system,
        &io.argv,
        layout,
        changes.as_mut(),
        &mut stderr,
    );
    io.stderr.write_all(&stderr)?;
    let (text, stamps, notices, used) = outcome?;
    write_output(io, args.output.as_deref(), &text)?;
    if let (Some(key), Some(stamps)) = (key, stamps) {
        // A cache notice is about this run (the fact cache it found damaged is rewritten
        // now): a replay of the run must not repeat it.
        let mut replayed = String::from_utf8_lossy(&stderr).into_owned();
        for notice in notices {
            replayed = replayed.replacen(&format!("notice: {notice}\n"), "", 1);
        }
        let used = used
            .as_ref()
            .map(|c| crate::replay::encode_changes(&c.files, &c.submodules));
        if let Err(e) = key.save(
            io.system,
            started,
            stamps,
            used.as_deref(),
            &text,
            replayed.as_bytes(),
        ) {
            if !global.quiet {
                writeln!(io.stderr, "notice: cannot write the run record: {e}")?;
            }
        }
    }
    Ok(exit::OK)
}

/// The change set this run would use, as a run record holds it; `None` without
/// `--changed-only`, and when git fails (the run then goes the normal way and reports
/// it), which no record matches.
fn current_changes(
    changes: &mut Option<PendingChanges>,
    key: &crate::replay::RunKey,
) -> Option<Vec<u8>> {
    let (files, submodules) = changes.as_mut()?.paths(Some(key.cache_dir())).ok()?;
    Some(crate::replay::encode_changes(&files, &submodules))
}

/// The key under which this `generate` may be replayed ([`crate::replay`]): `None`
/// with `--no-cache`, or when something it needs cannot be read (the run then goes the
/// normal way and reports it).
fn replay_key(
    system: &dyn System,
    global: &GlobalArgs,
    args: &GenerateArgs,
    argv: &[String],
) -> Option<crate::replay::RunKey> {
    let root = project_dir(system, global).ok()?;
    let settings =
        crate::cache::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref())?;
    settings.check(system, &root).ok()?;
    let config = find_config_file(system, &root, global.config.as_deref());
    crate::replay::RunKey::new(
        system,
        &settings,
        "generate",
        &root,
        config.as_deref(),
        &args.pipeline.eval.var_file,
        argv,
        &consumed(global, args),
        &[format!(
            "color={}",
            crate::workspace::use_color(system, global.color)
        )],
    )
}

/// The parsed command line as the run acts on it, for the replay key: every flag and
/// every value clap took from the environment (`TERRACI_CONFIG`, `TERRACI_DIR`...). A
/// flag added later enters the key without anyone remembering to add it.
fn consumed(global: &GlobalArgs, args: &GenerateArgs) -> String {
    format!("{global:?}\n{args:?}")
}

/// The pipeline text, the stamps of the files read when the run can be replayed, the
/// notices printed (which a replay leaves out) and the change set used.
type Generated = (
    String,
    Option<Vec<(String, Option<crate::system::Stamp>)>>,
    Vec<String>,
    Option<crate::files::ChangeInput>,
);

/// `generate` up to the text to write. Everything for stderr goes to `err`.
fn generate_pipeline(
    global: &GlobalArgs,
    args: &GenerateArgs,
    system: &dyn System,
    argv: &[String],
    layout: Option<crate::discover::Layout>,
    pending: Option<&mut PendingChanges>,
    err: &mut Vec<u8>,
) -> anyhow::Result<Generated> {
    let pipeline_args = &args.pipeline;
    let mut ws = load_workspace_overlapped(system, global, &pipeline_args.eval, layout)?;
    ws.require_modules()?;
    let filters = ws.filters(&pipeline_args.select)?;
    ws.require_selected(&filters)?;
    let diagnostics = ws.all_diagnostics();
    let graph = dependency_graph(&ws.db, ws.project);
    if !graph.cycles.is_empty() {
        // The `dependency-cycle` error is among the diagnostics.
        ws.wait_for_cache();
        ws.print_diagnostics(&diagnostics, global.quiet, err)?;
        return Err(exit::reported(exit::VALIDATION));
    }
    let cache_dir =
        crate::cache::CacheSettings::new(&ws.root, global.no_cache, global.cache_dir.as_deref())
            .map(|s| s.dir);
    let changes = match pending {
        Some(pending) => {
            Some(pending.input(&args.changes, &ws.config.config, cache_dir.as_deref())?)
        }
        None => None,
    };
    let provider = select_provider(system, pipeline_args.provider.as_deref(), &ws.config.config)?;
    let options = plan_options(pipeline_args, provider, &ws.config.config);
    if pipeline_args.parallel_plans && !options.plan_only && !global.quiet {
        writeln!(
            err,
            "notice: --parallel-plans has no effect without --plan-only: each plan waits \
             for the applies of the modules it reads, so plans keep the dependency order"
        )?;
    }
    let selection = Selection::new(&ws.db, filters, options, changes.clone());
    let header = header(argv);
    let generation = build_pipeline(
        &ws,
        diagnostics,
        &PipelineRequest {
            args: pipeline_args,
            provider,
            selection,
            explain: args.explain,
            header: &header,
            job_texts: None,
        },
    );
    ws.wait_for_cache();
    ws.print_diagnostics(&generation.diagnostics, global.quiet, err)?;
    if let Some(text) = &generation.explain {
        err.write_all(text.as_bytes())?;
    }
    let pipeline = generation.output?;
    if !global.quiet {
        for w in &pipeline.warnings {
            write!(err, "{}", w.render_human_styled(None, ws.color))?;
        }
    }
    let (stamps, notices) = ws.take_run_inputs();
    ws.dismiss();
    Ok((pipeline.text.into_string(), stamps, notices, changes))
}
