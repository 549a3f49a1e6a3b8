//! `validate`: the project's diagnostics, counts and levels; exit 3 when it is invalid.

use std::collections::BTreeMap;
use std::io::Write;

use crate::cli::{GlobalArgs, ValidateArgs};
use crate::workspace::{load_workspace_overlapped, Start, Workspace};
use terraci_db::diagnostic::Severity;
use terraci_db::exit;
use terraci_db::files::Role;
use terraci_engine::graph::dependency_graph;
use terraci_render::graph::render_levels;

use super::replayed::{replayed, KeyInputs, Produced};
use super::Io;

pub(super) fn validate(
    global: &GlobalArgs,
    args: &ValidateArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let inputs = KeyInputs::plain("validate", &args.eval.var_file);
    let system = io.system;
    replayed(global, io, inputs, None, |layout, err| {
        let mut out = Vec::new();
        let mut ws = load_workspace_overlapped(system, global, &args.eval, Start::walked(layout))?;
        // Its notices are printed with the diagnostics.
        ws.wait_for_cache();
        let code = report(&ws, global, args, &mut out, err)?;
        let (stamps, notices) = ws.take_run_inputs(false);
        ws.dismiss();
        Ok(Produced {
            output: String::from_utf8(out).expect("the report is UTF-8"),
            code,
            stamps,
            notices,
        })
    })
}

/// The report of a loaded project: the summary to `out`, diagnostics to `err`; the exit
/// code.
fn report(
    ws: &Workspace,
    global: &GlobalArgs,
    args: &ValidateArgs,
    out: &mut Vec<u8>,
    err: &mut Vec<u8>,
) -> anyhow::Result<u8> {
    ws.require_modules()?;
    let filters = ws.filters(&args.select)?;
    ws.require_selected(&filters)?;
    let mut diagnostics = ws.all_diagnostics();
    let db = &ws.db;
    diagnostics
        .extend(ws.finish_diagnostics(terraci_engine::changes::unused_libraries(db, ws.project)));
    diagnostics.extend(ws.text_diagnostics());
    let graph = dependency_graph(db, ws.project);
    let infos: Vec<_> = ws.project.modules(db).iter().map(|m| m.info(db)).collect();
    let roots = infos.iter().filter(|i| i.is_root()).count();
    let libraries = infos.iter().filter(|i| i.role == Role::Library).count();
    let submodules = infos
        .iter()
        .filter(|i| i.is_root() && i.submodule.is_some())
        .count();
    let targets = infos
        .iter()
        .filter(|i| i.is_root() && filters.allows(&i.id, &i.components))
        .count();
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .count();
    let mut by_code: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &diagnostics {
        *by_code.entry(d.code.as_str()).or_default() += 1;
    }
    let failed = !graph.cycles.is_empty() || errors > 0 || (args.strict && warnings > 0);
    if args.format == crate::cli::ValidateFormat::Json {
        let doc = serde_json::json!({
            "pattern": ws.config.pattern.to_string(),
            "modules": roots,
            "submodules": submodules,
            "libraries": libraries,
            "targets": targets,
            "edges": graph.edge_count(),
            "levels": graph.cycles.is_empty().then(|| graph.level_count()),
            "cycles": graph.cycles,
            "errors": errors,
            "warnings": warnings,
            "by_code": by_code,
            "diagnostics": diagnostics.iter().map(terraci_render::graph::diagnostic_json).collect::<Vec<_>>(),
            "valid": !failed,
        });
        let text = serde_json::to_string_pretty(&doc).expect("JSON of plain data");
        writeln!(out, "{text}")?;
        return Ok(if failed { exit::VALIDATION } else { exit::OK });
    }
    writeln!(out, "pattern: {}", ws.config.pattern)?;
    writeln!(
        out,
        "modules: {roots} ({submodules} submodules), libraries: {libraries}, targets after filters: {targets}"
    )?;
    writeln!(out, "edges: {}", graph.edge_count())?;
    ws.print_diagnostics(&diagnostics, global.quiet, err)?;
    writeln!(out, "diagnostics: {errors} errors, {warnings} warnings")?;
    for (code, n) in &by_code {
        writeln!(out, "  {code}: {n}")?;
    }
    if !graph.cycles.is_empty() {
        // Its `dependency-cycle` error is printed with the diagnostics.
        writeln!(out, "cycles: {}", graph.cycles.len())?;
        return Ok(exit::VALIDATION);
    }
    writeln!(out, "levels: {}", graph.level_count())?;
    if global.verbose > 0 {
        write!(out, "{}", render_levels(&ws.graph_view(Vec::new(), false)))?;
        let libraries = terraci_engine::changes::library_usage(db, ws.project);
        if !libraries.is_empty() {
            writeln!(out, "Libraries:")?;
        }
        for (id, usage) in libraries {
            use terraci_engine::changes::LibraryUse;
            match usage {
                LibraryUse::By(by) if by.len() == 1 => writeln!(out, "  {id} (used by 1 module)")?,
                LibraryUse::By(by) => writeln!(out, "  {id} (used by {} modules)", by.len())?,
                LibraryUse::PartOf(lib) => writeln!(out, "  {id} (part of {lib})")?,
                LibraryUse::Unused => writeln!(out, "  {id} (unused)")?,
            }
        }
    }
    if args.strict && (warnings > 0 || errors > 0) {
        writeln!(
            err,
            "error: validation failed (--strict): {errors} errors, {warnings} warnings"
        )?;
        return Ok(exit::VALIDATION);
    }
    if errors > 0 {
        return Ok(exit::VALIDATION);
    }
    Ok(exit::OK)
}
