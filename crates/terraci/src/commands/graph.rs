//! `graph`: the dependency graph in one of its formats, or its statistics.

use std::collections::BTreeSet;

use crate::cli::{GlobalArgs, GraphArgs, GraphFormat};
use crate::workspace::{load_workspace_overlapped, Start, Workspace};
use terraci_db::exit::{self, fail};
use terraci_engine::graph::dependency_graph;
use terraci_render::graph::{
    render_dot, render_json, render_levels, render_list, render_mermaid, render_plantuml,
    render_stats,
};

use super::replayed::{replayed, KeyInputs, Produced};
use super::Io;

pub(super) fn graph(global: &GlobalArgs, args: &GraphArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let inputs = KeyInputs::plain("graph", &args.eval.var_file);
    let system = io.system;
    replayed(global, io, inputs, args.output.as_deref(), |layout, err| {
        let start = Start {
            keep_texts: args.format == GraphFormat::Json && !args.stats,
            ..Start::walked(layout)
        };
        let mut ws = load_workspace_overlapped(system, global, &args.eval, start)?;
        ws.wait_for_cache();
        let output = render(&ws, global, args, err)?;
        let (stamps, notices) = ws.take_run_inputs(false);
        ws.dismiss();
        Ok(Produced {
            output,
            code: exit::OK,
            stamps,
            notices,
        })
    })
}

/// The graph of a loaded project in the format asked for; diagnostics to `err`.
fn render(
    ws: &Workspace,
    global: &GlobalArgs,
    args: &GraphArgs,
    err: &mut Vec<u8>,
) -> anyhow::Result<String> {
    ws.require_modules()?;
    let diagnostics = ws.all_diagnostics();
    if args.format != GraphFormat::Json {
        ws.print_diagnostics(&diagnostics, global.quiet, err)?;
    }
    let json = args.format == GraphFormat::Json && !args.stats;
    let mut view = ws.graph_view(diagnostics, json);
    let select = &args.select();
    if !(select.exclude.is_empty() && select.include.is_empty() && select.filter.is_empty()) {
        let filters = ws.filters(select)?;
        ws.require_selected(&filters)?;
        let db = &ws.db;
        let keep: BTreeSet<String> = ws
            .project
            .modules(db)
            .iter()
            .map(|m| m.info(db))
            .filter(|i| i.is_root() && filters.allows(&i.id, &i.components))
            .map(|i| i.id.clone())
            .collect();
        view.restrict(&keep);
    }
    if let Some(m) = &args.module {
        let graph = dependency_graph(&ws.db, ws.project);
        let id = m.trim_end_matches('/').to_owned();
        if !graph.modules.contains(&id) {
            return Err(fail(exit::ERROR, format!("no module `{id}`")));
        }
        let keep = graph.transitive(&[id], !args.dependents);
        view.restrict(&keep);
    }
    let text = if args.stats {
        render_stats(&view)
    } else {
        match args.format {
            GraphFormat::Dot => render_dot(&view),
            GraphFormat::Plantuml => render_plantuml(&view),
            GraphFormat::Mermaid => render_mermaid(&view),
            GraphFormat::List => render_list(&view),
            GraphFormat::Levels => render_levels(&view),
            GraphFormat::Json => render_json(&view),
        }
    };
    Ok(text)
}
