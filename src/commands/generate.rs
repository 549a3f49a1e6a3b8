//! `generate`: the pipeline file, replayed from the run record when nothing it read has
//! changed ([`crate::replay`]).

use std::io::Write;

use crate::cli::{GenerateArgs, GlobalArgs};
use crate::exit::{self, fail};
use crate::files::Selection;
use crate::graph::dependency_graph;
use crate::pipeline::{
    build_pipeline, change_input, header, plan_options, select_provider, PipelineRequest,
};
use crate::render::report::cycle_text;
use crate::system::System;
use crate::workspace::load_workspace_overlapped;

use super::replayed::{replayed, KeyInputs, Produced};
use super::Io;

pub(super) fn generate(
    global: &GlobalArgs,
    args: &GenerateArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let inputs = KeyInputs {
        command: "generate",
        changed_only: args.changes.changed_only,
        var_files: &args.pipeline.eval.var_file,
        extra: Vec::new(),
    };
    let (system, argv) = (io.system, io.argv.clone());
    replayed(global, io, inputs, args.output.as_deref(), |layout, err| {
        let (output, stamps, notices) =
            generate_pipeline(global, args, system, &argv, layout, err)?;
        Ok(Produced {
            output,
            code: exit::OK,
            stamps,
            notices,
        })
    })
}

/// The pipeline text, the stamps of the files read when the run can be replayed, and the
/// notices printed (which a replay leaves out).
type Generated = (String, Option<crate::workspace::FileStamps>, Vec<String>);

/// `generate` up to the text to write. Everything for stderr goes to `err`.
fn generate_pipeline(
    global: &GlobalArgs,
    args: &GenerateArgs,
    system: &dyn System,
    argv: &[String],
    layout: Option<crate::discover::Layout>,
    err: &mut Vec<u8>,
) -> anyhow::Result<Generated> {
    let pipeline_args = &args.pipeline;
    let mut ws = load_workspace_overlapped(system, global, &pipeline_args.eval, layout)?;
    ws.require_modules()?;
    if args.changes.changed_only {
        // Change detection lists untracked files: it must not meet the cache writer's
        // temp files in `.terraci/cache/`.
        ws.wait_for_cache();
    }
    let filters = ws.filters(&pipeline_args.select)?;
    ws.require_selected(&filters)?;
    let diagnostics = ws.all_diagnostics();
    let graph = dependency_graph(&ws.db, ws.project);
    if !graph.cycles.is_empty() {
        let cycles = cycle_text(&graph.cycles);
        ws.wait_for_cache();
        ws.print_diagnostics(&diagnostics, global.quiet, err)?;
        return Err(fail(exit::VALIDATION, cycles));
    }
    let changes = change_input(system, &ws.root, &args.changes, &ws.config.config)?;
    let provider = select_provider(system, pipeline_args.provider.as_deref(), &ws.config.config)?;
    let options = plan_options(pipeline_args, provider, &ws.config.config);
    if pipeline_args.parallel_plans && !options.plan_only && !global.quiet {
        writeln!(
            err,
            "notice: --parallel-plans has no effect without --plan-only: each plan waits \
             for the applies of the modules it reads, so plans keep the dependency order"
        )?;
    }
    let selection = Selection::new(&ws.db, filters, options, changes);
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
            writeln!(err, "{w}")?;
        }
    }
    let (stamps, notices) = ws.take_run_inputs();
    ws.dismiss();
    Ok((pipeline.text.into_string(), stamps, notices))
}
