//! `terraci summary`: the merge-request / pull-request comment made from the plan jobs'
//! results.
//!
//! Input: the project's root modules (ids, pattern segments) and the dependency edges
//! between them, the files each plan job left in its module directory (`plan.result.json`,
//! `plan.json`, `plan.txt`), the reports of other producers
//! (`<service_dir>/*-report.json`) and the CI environment. Output: one Markdown comment
//! ([`markdown`]), the labels it manages ([`labels`]), and what [`post`] does with them on
//! GitLab or GitHub. Every file is read confined to the project directory; a file that
//! cannot be read or parsed makes its module "failed" with the reason, never a panic. A
//! `plan.json` has its own size bound ([`plan::DEFAULT_MAX_PLAN_SIZE`]); over it the module
//! is shown with its plan job's exit code and "too large", not as failed.

pub mod labels;
pub mod markdown;
pub mod plan;
pub mod post;
pub mod report;

use camino::{Utf8Path, Utf8PathBuf};
use indexmap::IndexMap;

use terraci_db::system::{ReadPolicy, System};

pub(crate) use plan::{Action, Plan};
pub(crate) use report::Report;

/// The hidden first line of the comment, by which a later run finds it again.
pub(crate) const MARKER: &str = "<!-- terraci-summary -->";

/// The first line of the comment of `part` of a split pipeline (a child pipeline's
/// summary, [`terraci_engine::contrib::SUMMARY_PART_VARIABLE`]), or [`MARKER`]: each part
/// finds its own comment again and leaves the others alone.
pub(crate) fn marker(part: Option<&str>) -> std::borrow::Cow<'static, str> {
    match part {
        Some(part) => format!("<!-- terraci-summary part={part} -->").into(),
        None => MARKER.into(),
    }
}

/// A part name as [`marker`] may write it: letters, digits, `.`, `_` and `-`, at most 64
/// (nothing that could end the HTML comment).
pub(crate) fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= 64
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// What a module's plan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    Changes,
    NoChanges,
    Failed,
    /// Nothing says: the plan.json is too large to read and no plan.result.json has the
    /// plan's exit code.
    Unknown,
}

/// One root module's plan, as its job left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleResult {
    pub(crate) id: String,
    /// Pattern segment -> value (`environment` -> `prod`).
    pub(crate) components: IndexMap<String, String>,
    pub(crate) status: Status,
    /// The plan was made for another commit than the merge request's head.
    pub(crate) stale: bool,
    /// The commit the plan was made for (empty when unknown).
    pub(crate) commit: String,
    /// The parsed `plan.json`, when there is one.
    pub(crate) plan: Option<Plan>,
    /// Why the plan failed or could not be read: the error part of `plan.txt`, or what is
    /// wrong with the files.
    pub(crate) error: Option<String>,
    /// Why the plan is not summarised though it did not fail (its plan.json is over the
    /// size bound).
    pub(crate) plan_note: Option<String>,
}

impl ModuleResult {
    /// Shown in the module table: changes, failures and stale plans.
    pub(crate) fn is_visible(&self) -> bool {
        self.status != Status::NoChanges || self.stale
    }

    /// The environment the comment groups it under (`default` without one).
    pub(crate) fn environment(&self) -> &str {
        self.components
            .get("environment")
            .map(String::as_str)
            .filter(|e| !e.is_empty())
            .unwrap_or("default")
    }
}

/// A root module of the project: where to look for its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleRef {
    pub id: String,
    pub components: IndexMap<String, String>,
}

/// Everything the comment is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Sorted by id.
    pub modules: Vec<ModuleResult>,
    /// Dependent -> dependency edges between the modules with results, sorted.
    pub(crate) edges: Vec<(String, String)>,
    /// Sorted by producer.
    pub(crate) reports: Vec<Report>,
    /// The merge request's head commit, when known.
    pub(crate) head: Option<String>,
    /// Problems with files that were skipped (a report that does not parse), for stderr.
    pub warnings: Vec<String>,
}

impl Summary {
    /// Whether there is anything a reviewer must see: a change, a failure, or a report
    /// that warns or fails (what `on_changes_only` waits for).
    pub fn has_reportable_changes(&self) -> bool {
        self.modules.iter().any(|m| m.status != Status::NoChanges)
            || self
                .reports
                .iter()
                .any(|r| r.status != report::ReportStatus::Pass)
    }
}

/// Limits of what is read from a plan job's files.
const PLAN_TEXT_LINES: usize = 40;
const PLAN_TEXT_CHARS: usize = 4000;

/// Reads the results of `modules` (those without any result file are left out) and the
/// reports in `service_dir`. `edges` are the project's dependency edges; those between
/// modules with results are kept. `current`: the commits a plan may have been made for
/// without being stale, the merge request's head first (empty: staleness unknown).
/// `max_plan` bounds each `plan.json` (the other files have `policy`'s bound).
pub fn collect(
    system: &dyn System,
    policy: &ReadPolicy,
    max_plan: u64,
    modules: &[ModuleRef],
    edges: &[(String, String)],
    service_dir: &Utf8Path,
    current: &[String],
) -> Summary {
    let root = policy.root.clone();
    let plan_policy = ReadPolicy::new(system, &root, max_plan);
    let policies = Policies {
        files: policy,
        plan: &plan_policy,
    };
    let mut results: Vec<ModuleResult> = modules
        .iter()
        .filter_map(|m| read_module(system, &policies, &root, m, current))
        .collect();
    results.sort_by(|a, b| a.id.cmp(&b.id));
    let with_results: std::collections::BTreeSet<&str> =
        results.iter().map(|m| m.id.as_str()).collect();
    let mut kept: Vec<(String, String)> = edges
        .iter()
        .filter(|(from, to)| {
            with_results.contains(from.as_str()) && with_results.contains(to.as_str())
        })
        .cloned()
        .collect();
    kept.sort();
    kept.dedup();
    let (reports, warnings) =
        report::read_reports(system, policy, &root.join(service_dir), current);
    Summary {
        modules: results,
        edges: kept,
        reports,
        head: current.first().cloned(),
        warnings,
    }
}

/// Reads one file of a module directory; `Ok(None)` when it is not there.
fn read_file(
    system: &dyn System,
    policy: &ReadPolicy,
    path: &Utf8Path,
) -> Result<Option<Vec<u8>>, terraci_db::system::ReadError> {
    if !system.is_file(path) && !system.is_dir(path) {
        return Ok(None);
    }
    system
        .read_confined(path, policy, false)
        .map(|(bytes, _)| Some(bytes))
}

/// The read bounds: `files` for a module's files, `plan` for its plan.json.
struct Policies<'a> {
    files: &'a ReadPolicy,
    plan: &'a ReadPolicy,
}

fn read_module(
    system: &dyn System,
    policies: &Policies<'_>,
    root: &Utf8Path,
    module: &ModuleRef,
    current: &[String],
) -> Option<ModuleResult> {
    let dir: Utf8PathBuf = root.join(&module.id);
    let cannot = |name: &str, why| format!("cannot read {}/{name}: {why}", module.id);
    let file = |name: &str| {
        read_file(system, policies.files, &dir.join(name)).map_err(|why| cannot(name, why))
    };
    let result = file("plan.result.json");
    // A plan.json over its bound is a plan terraci does not summarise, not a failed one.
    let mut plan_note = None;
    let plan_json = match read_file(system, policies.plan, &dir.join("plan.json")) {
        Err(terraci_db::system::ReadError::TooLarge { limit }) => {
            plan_note = Some(format!(
                "plan.json is too large to summarise: over the {} terraci reads (--max-plan-size, TERRACI_MAX_PLAN_SIZE)",
                shown_size(limit)
            ));
            Ok(None)
        }
        other => other.map_err(|why| cannot("plan.json", why)),
    };
    if plan_note.is_none() && matches!((&result, &plan_json), (Ok(None), Ok(None))) {
        return None;
    }
    let mut errors = Vec::new();
    let result = parse_read(
        result,
        "plan.result.json",
        plan::parse_result,
        module,
        &mut errors,
    );
    let plan = parse_read(
        plan_json,
        "plan.json",
        plan::parse_plan,
        module,
        &mut errors,
    );
    let failed_exit = result
        .as_ref()
        .is_some_and(|r| r.exit_code != 0 && r.exit_code != 2);
    let status = if failed_exit || !errors.is_empty() || plan.as_ref().is_some_and(|p| p.errored) {
        Status::Failed
    } else {
        match (&result, &plan) {
            (Some(r), _) if r.exit_code == 2 => Status::Changes,
            (Some(_), _) => Status::NoChanges,
            (None, _) if plan_note.is_some() => Status::Unknown,
            (None, Some(p)) if p.has_changes() => Status::Changes,
            (None, _) => Status::NoChanges,
        }
    };
    let mut error = (!errors.is_empty()).then(|| errors.join("\n"));
    if status == Status::Failed {
        if let Ok(Some(text)) = file("plan.txt") {
            let text = String::from_utf8_lossy(&text);
            let part = error_part(&text);
            error = Some(match error {
                Some(e) => format!("{e}\n{part}"),
                None => part,
            });
        }
        if error.is_none() {
            let code = result.as_ref().map_or(0, |r| r.exit_code);
            error = Some(format!("the plan exited with code {code}"));
        }
    }
    let commit = result.map(|r| r.commit).unwrap_or_default();
    // In CI every plan job of terraci's records the pipeline's commit: a plan naming
    // another commit, or none (no plan.result.json, an empty `commit`, as a file committed
    // in the checkout beside a module with no plan job in this pipeline), is flagged.
    let stale = !current.is_empty() && !current.contains(&commit);
    Some(ModuleResult {
        id: module.id.clone(),
        components: module.components.clone(),
        status,
        stale,
        commit,
        plan,
        error,
        plan_note,
    })
}

/// `bytes` for messages: in MiB when it is a whole number of them.
fn shown_size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// Parses what [`read_file`] gave; a problem goes to `errors`, naming the file.
fn parse_read<T, E: std::fmt::Display>(
    read: Result<Option<Vec<u8>>, String>,
    name: &str,
    parse: fn(&[u8]) -> Result<T, E>,
    module: &ModuleRef,
    errors: &mut Vec<String>,
) -> Option<T> {
    match read {
        Ok(Some(bytes)) => parse(&bytes)
            .map_err(|e| errors.push(format!("{}/{name}: {e}", module.id)))
            .ok(),
        Ok(None) => None,
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

/// The part of a failed plan's output that says why: from the first `Error:` line (box
/// drawing and colour codes removed), at most [`PLAN_TEXT_LINES`] lines and
/// [`PLAN_TEXT_CHARS`] characters; the last lines when no line says `Error:`.
pub(crate) fn error_part(text: &str) -> String {
    let clean: Vec<String> = text
        .lines()
        .map(|line| {
            let line = strip_ansi(line);
            // Terraform frames each diagnostic with `╷`, `│ ` and `╵`.
            let framed: String = match line.chars().next() {
                Some('│' | '╷' | '╵') => line.chars().skip(1).collect(),
                _ => return line.trim_end().to_owned(),
            };
            framed
                .strip_prefix(' ')
                .unwrap_or(&framed)
                .trim_end()
                .to_owned()
        })
        .collect();
    let start = clean
        .iter()
        .position(|l| l.starts_with("Error:"))
        .unwrap_or_else(|| clean.len().saturating_sub(PLAN_TEXT_LINES));
    let mut out = String::new();
    for line in clean[start..].iter().take(PLAN_TEXT_LINES) {
        if out.len() + line.len() > PLAN_TEXT_CHARS {
            out.push_str("...\n");
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// `s` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
