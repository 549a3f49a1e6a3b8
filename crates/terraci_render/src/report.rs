//! Text reports of a run for the terminal: `--explain` and
//! `generate --dry-run` (text and JSON).

use std::collections::BTreeSet;
use std::io::Write;

use crate::graph::{diagnostic_json, GraphView};
use terraci_db::diagnostic::Diagnostic;

/// How a report or pipeline is printed (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OutputFormat {
    /// YAML; the text report with `--dry-run` (`text` is the same, TerraCi's name)
    #[default]
    #[cfg_attr(feature = "clap", value(alias = "text"))]
    Yaml,
    Json,
    /// With `--dry-run`: the ids of the modules in the pipeline, one JSON array on one
    /// line (with `--changed-only`, the affected set)
    Modules,
    /// With `--dry-run`: the ids of the project's modules not in the pipeline, one JSON
    /// array on one line, leaving out any whose id differs only in case from one in it
    /// (what the GitHub workflow's first job reads: GitHub compares ids without case)
    Unselected,
}

impl OutputFormat {
    /// A format of the `--dry-run` report only, never of a pipeline.
    pub fn is_report_only(self) -> bool {
        matches!(self, OutputFormat::Modules | OutputFormat::Unselected)
    }
}

/// `--explain`: one line per module in the pipeline with why it is there.
pub fn explain(
    affected: &terraci_engine::changes::Affected,
    plan: &terraci_engine::ir::JobPlan,
    changed_files: Option<&[String]>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(files) = changed_files else {
        writeln!(out, "every module is in the pipeline (no --changed-only)")?;
        return Ok(());
    };
    if plan.is_empty() {
        writeln!(
            out,
            "no module is affected by the {} changed file(s)",
            files.len()
        )?;
    }
    let targets: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
    for (id, reasons) in &affected.affected {
        if targets.contains(id.as_str()) {
            let reasons = terraci_db::escape::printable(&reasons.join("; ")).into_owned();
            writeln!(out, "{}: {reasons}", terraci_db::escape::printable(id))?;
        }
    }
    Ok(())
}

/// What a `--dry-run` report is made of.
pub struct DryRun<'a> {
    /// Root modules in the graph.
    pub modules: usize,
    pub diagnostics: &'a [Diagnostic],
    pub affected: &'a terraci_engine::changes::Affected,
    pub plan: &'a terraci_engine::ir::JobPlan,
    /// `--changed-only`: the changed files.
    pub changed_files: Option<&'a [String]>,
}

/// The JSON dry-run report: the graph view's keys, then the run's, then TerraCi's
/// figures under its names. Serialized straight to text: a `serde_json::Value` of it
/// first was a second copy of the whole graph (10,000 modules: 14 MB of JSON).
#[derive(serde::Serialize)]
struct DryRunJson<'a> {
    modules: &'a [crate::graph::ModuleView],
    edges: &'a [crate::graph::EdgeView],
    levels: &'a [Vec<String>],
    cycles: &'a [Vec<String>],
    diagnostics: Vec<serde_json::Value>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    external_state: &'a [crate::graph::ExternalView],
    changed_files: Option<&'a [String]>,
    changed_modules: &'a [String],
    affected: Vec<AffectedJson<'a>>,
    jobs: Vec<JobJson<'a>>,
    #[serde(rename = "TotalModules")]
    total_modules: usize,
    #[serde(rename = "AffectedModules")]
    affected_modules: usize,
    #[serde(rename = "Stages")]
    stages: usize,
    #[serde(rename = "Jobs")]
    job_count: usize,
    /// Modules of the pipeline by level, TerraCi's `ExecutionOrder`.
    #[serde(rename = "ExecutionOrder")]
    execution_order: Vec<Vec<&'a str>>,
    /// Jobs by stage (job level), TerraCi's `JobGroups`.
    #[serde(rename = "JobGroups")]
    job_groups: Vec<Vec<&'a str>>,
}

#[derive(serde::Serialize)]
struct AffectedJson<'a> {
    id: &'a str,
    reasons: &'a [String],
}

#[derive(serde::Serialize)]
struct JobJson<'a> {
    name: &'a str,
    needs: Vec<&'a str>,
}

/// `--dry-run`: modules, affected, levels and jobs, as text or (with the graph view of
/// the project, which `view` builds) JSON.
pub fn dry_run(
    report: &DryRun<'_>,
    view: impl FnOnce() -> GraphView,
    format: OutputFormat,
) -> serde_json::Result<String> {
    let DryRun {
        modules,
        diagnostics,
        affected,
        plan,
        changed_files: changed_files_list,
    } = *report;
    let text = match format {
        OutputFormat::Modules => {
            // The plan's modules in job order (dependencies first), each once.
            let mut seen = BTreeSet::new();
            let ids: Vec<&str> = plan
                .jobs
                .iter()
                .map(|j| &*j.module)
                .filter(|m| seen.insert(*m))
                .collect();
            let mut s = serde_json::to_string(&ids)?;
            s.push('\n');
            s
        }
        OutputFormat::Unselected => {
            let selected: BTreeSet<String> =
                plan.jobs.iter().map(|j| j.module.to_lowercase()).collect();
            let graph_view = view();
            let ids: Vec<&str> = graph_view
                .modules
                .iter()
                .filter(|m| !m.library && !selected.contains(&m.id.to_lowercase()))
                .map(|m| m.id.as_str())
                .collect();
            let mut s = serde_json::to_string(&ids)?;
            s.push('\n');
            s
        }
        OutputFormat::Json => {
            let graph_view = view();
            let targets: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
            // Modules of the pipeline by level, TerraCi's `ExecutionOrder`.
            let order: Vec<Vec<&str>> = graph_view
                .levels
                .iter()
                .map(|l| {
                    l.iter()
                        .map(String::as_str)
                        .filter(|m| targets.contains(m))
                        .collect::<Vec<_>>()
                })
                .filter(|l| !l.is_empty())
                .collect();
            // Jobs by stage (job level), TerraCi's `JobGroups`.
            let mut groups: std::collections::BTreeMap<usize, Vec<&str>> = Default::default();
            for j in plan.jobs.iter() {
                groups.entry(j.level).or_default().push(&j.name);
            }
            let json = DryRunJson {
                modules: &graph_view.modules,
                edges: &graph_view.edges,
                levels: &graph_view.levels,
                cycles: &graph_view.cycles,
                diagnostics: diagnostics.iter().map(diagnostic_json).collect(),
                external_state: &graph_view.external_state,
                changed_files: changed_files_list,
                changed_modules: &affected.changed_modules,
                affected: affected
                    .affected
                    .iter()
                    .filter(|(id, _)| targets.contains(id.as_str()))
                    .map(|(id, reasons)| AffectedJson { id, reasons })
                    .collect(),
                jobs: plan
                    .jobs
                    .iter()
                    .map(|j| (&j.name, &j.needs))
                    .chain(plan.contributed.iter().map(|j| (&j.name, &j.needs)))
                    .map(|(name, needs)| JobJson {
                        name,
                        needs: needs.iter().map(|n| &*n.job).collect(),
                    })
                    .collect(),
                total_modules: modules,
                affected_modules: targets.len(),
                stages: groups.len(),
                job_count: plan.jobs.len(),
                execution_order: order,
                job_groups: groups.into_values().collect(),
            };
            let mut s = serde_json::to_string_pretty(&json)?;
            s.push('\n');
            s
        }
        OutputFormat::Yaml => {
            let mut s = String::new();
            // Text for a terminal: control characters in names are escaped.
            use terraci_db::escape::printable;
            let targets: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
            s.push_str(&format!("modules: {modules}\n"));
            if let Some(files) = changed_files_list {
                s.push_str(&format!("changed files: {}\n", files.len()));
                for f in files {
                    s.push_str(&format!("  {}\n", printable(f)));
                }
                let changed = &affected.changed_modules;
                s.push_str(&format!("changed modules: {}\n", changed.len()));
                for m in changed {
                    s.push_str(&format!("  {}\n", printable(m)));
                }
            }
            s.push_str(&format!("affected: {}\n", targets.len()));
            for (id, reasons) in &affected.affected {
                if targets.contains(id.as_str()) {
                    if reasons.is_empty() {
                        s.push_str(&format!("  {}\n", printable(id)));
                    } else {
                        s.push_str(&format!(
                            "  {}: {}\n",
                            printable(id),
                            printable(&reasons.join("; "))
                        ));
                    }
                }
            }
            s.push_str(&format!("levels: {}\n", plan.levels));
            s.push_str(&format!(
                "jobs: {}\n",
                plan.jobs.len() + plan.contributed.len()
            ));
            let jobs = plan
                .jobs
                .iter()
                .map(|j| (j.level, &j.name, &j.needs))
                .chain(
                    plan.contributed
                        .iter()
                        .map(|j| (j.level, &j.name, &j.needs)),
                );
            for (level, name, needs) in jobs {
                let needs: Vec<&str> = needs.iter().map(|n| &*n.job).collect();
                if needs.is_empty() {
                    s.push_str(&format!("  [{level}] {}\n", printable(name)));
                } else {
                    s.push_str(&format!(
                        "  [{level}] {} <- {}\n",
                        printable(name),
                        printable(&needs.join(", "))
                    ));
                }
            }
            s
        }
    };
    Ok(text)
}
