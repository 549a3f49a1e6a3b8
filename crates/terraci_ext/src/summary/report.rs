//! Reports of other producers (policy checks, cost): `<service_dir>/<producer>-report.json`.
//!
//! Input: the service directory. Output: the reports sorted by producer, and a warning
//! for each file that cannot be read or parsed (that report is left out).

use camino::Utf8Path;
use serde::Deserialize;

use terraci_db::system::{EntryKind, ReadPolicy, System};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ReportStatus {
    Pass,
    Warn,
    Fail,
}

impl ReportStatus {
    pub(crate) fn word(self) -> &'static str {
        match self {
            ReportStatus::Pass => "pass",
            ReportStatus::Warn => "warn",
            ReportStatus::Fail => "fail",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Report {
    pub(crate) producer: String,
    pub(crate) title: String,
    pub(crate) status: ReportStatus,
    #[serde(default)]
    pub(crate) summary: String,
    #[serde(default)]
    pub modules: Vec<ModuleReport>,
    /// The commit the report was made for (the pipeline's `CI_COMMIT_SHA` or
    /// `GITHUB_SHA`). Where the pipeline's commits are known, a report that names none of
    /// them is left out: a report committed in the checkout cannot name the commit that
    /// contains it.
    #[serde(default)]
    pub(crate) commit: String,
    /// A cost report's monthly totals: the last row of its Module / Before / After / Diff
    /// table.
    #[serde(default)]
    pub(crate) cost: Option<Costs>,
}

/// Monthly cost figures as shown (`$8.39`, `+$7.59`): a report whose every module has
/// them is shown as a Module / Before / After / Diff table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Costs {
    pub(crate) before: String,
    pub(crate) after: String,
    pub(crate) diff: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModuleReport {
    pub(crate) module: String,
    pub(crate) status: ReportStatus,
    #[serde(default)]
    pub(crate) summary: String,
    #[serde(default)]
    pub(crate) details: Vec<String>,
    #[serde(default)]
    pub(crate) cost: Option<Costs>,
}

/// The reports in `dir` (absolute), sorted by producer, then file name; with `current`
/// (the pipeline's commits) known, only those made for one of them.
pub(crate) fn read_reports(
    system: &dyn System,
    policy: &ReadPolicy,
    dir: &Utf8Path,
    current: &[String],
) -> (Vec<Report>, Vec<String>) {
    let mut reports = Vec::new();
    let mut warnings = Vec::new();
    let Ok(entries) = system.read_dir(dir) else {
        return (reports, warnings);
    };
    for entry in entries {
        if entry.kind != EntryKind::File && !matches!(entry.kind, EntryKind::Symlink { .. }) {
            continue;
        }
        if !entry.name.ends_with("-report.json") {
            continue;
        }
        let path = dir.join(&entry.name);
        let shown = path
            .strip_prefix(&policy.root)
            .map(|p| p.to_string())
            .unwrap_or_else(|_| path.to_string());
        let parsed = system
            .read_confined(&path, policy, false)
            .map_err(|e| e.to_string())
            .and_then(|(bytes, _)| {
                serde_json::from_slice::<Report>(&bytes).map_err(|e| e.to_string())
            });
        match parsed {
            Ok(report) if !current.is_empty() && !current.contains(&report.commit) => {
                let made_for = match report.commit.as_str() {
                    "" => "it names no commit".to_owned(),
                    c => format!("it was made for {}", terraci_db::escape::printable(c)),
                };
                warnings.push(format!(
                    "the report {} is left out: {made_for}, not this pipeline's (a producer writes `\"commit\": \"$CI_COMMIT_SHA\"`, or `$GITHUB_SHA`; a report committed in the checkout is never shown)",
                    terraci_db::escape::printable(&shown)
                ));
            }
            Ok(report) => reports.push(report),
            Err(why) => warnings.push(format!(
                "the report {} is left out: {why}",
                terraci_db::escape::printable(&shown)
            )),
        }
    }
    reports.sort_by(|a, b| a.producer.cmp(&b.producer));
    (reports, warnings)
}
