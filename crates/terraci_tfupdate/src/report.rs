//! The result for people (text), for programs (JSON, TerraCi's shape) and for the
//! summary comment (`<service_dir>/tfupdate-report.json`, the report format
//! `terraci summary` reads for every producer).
//!
//! Input: an [`UpdateResult`]. Output: text, deterministic to the byte.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::plan::{Status, UpdateResult};

fn current(constraint: &str, resolved: &str) -> String {
    match (constraint, resolved) {
        (c, "") => c.to_owned(),
        ("", r) => r.to_owned(),
        (c, r) if c == r => c.to_owned(),
        (c, r) => format!("{c} ({r})"),
    }
}

/// One line per dependency: module, kind, name, current, the version it moves to (or
/// `-`), the newest, the status and why.
struct Line {
    module: String,
    what: String,
    current: String,
    to: String,
    latest: String,
    status: Status,
    issue: String,
}

fn lines(result: &UpdateResult) -> Vec<Line> {
    let providers = result.providers.iter().map(|p| Line {
        module: p.dependency.module_path.clone(),
        what: format!("provider {}", p.dependency.provider_source),
        current: current(&p.dependency.constraint, &p.outcome.current_version),
        to: p.outcome.bumped_version.clone(),
        latest: p.outcome.latest_version.clone(),
        status: p.outcome.status,
        issue: p.outcome.issue.clone(),
    });
    let modules = result.modules.iter().map(|m| Line {
        module: m.dependency.module_path.clone(),
        what: format!(
            "module {} ({})",
            m.dependency.call_name, m.dependency.source
        ),
        current: current(&m.dependency.constraint, &m.outcome.current_version),
        to: m.outcome.bumped_version.clone(),
        latest: m.outcome.latest_version.clone(),
        status: m.outcome.status,
        issue: m.outcome.issue.clone(),
    });
    providers.chain(modules).collect()
}

/// The text output.
pub fn render_text(result: &UpdateResult) -> String {
    let mut out = String::new();
    let mut by_module: BTreeMap<&str, Vec<&Line>> = BTreeMap::new();
    let all = lines(result);
    for line in &all {
        by_module
            .entry(line.module.as_str())
            .or_default()
            .push(line);
    }
    for (module, list) in by_module {
        let _ = writeln!(out, "{}", if module.is_empty() { "." } else { module });
        for l in list {
            let to = if l.to.is_empty() { "-" } else { l.to.as_str() };
            let _ = write!(
                out,
                "  {}: {} -> {to} (latest {}): {}",
                l.what,
                l.current,
                if l.latest.is_empty() { "-" } else { &l.latest },
                l.status.label()
            );
            if !l.issue.is_empty() {
                let _ = write!(out, ": {}", l.issue);
            }
            out.push('\n');
        }
    }
    for problem in &result.problems {
        let _ = writeln!(out, "error: {problem}");
    }
    let s = &result.summary;
    let _ = writeln!(
        out,
        "{} checked, {} updates available, {} applied, {} skipped, {} errors",
        s.total_checked, s.updates_available, s.updates_applied, s.skipped, s.errors
    );
    out
}

/// The JSON output (TerraCi's `modules`, `providers`, `summary`).
pub fn render_json(result: &UpdateResult) -> String {
    let mut text = serde_json::to_string_pretty(result).expect("the result is always JSON");
    text.push('\n');
    text
}

/// `tfupdate-report.json` for the summary comment; `commit` is the pipeline's commit.
pub fn summary_report(result: &UpdateResult, commit: &str) -> String {
    let word = |s: Status| match s {
        Status::Error => "fail",
        Status::UpdateAvailable | Status::Skipped => "warn",
        Status::UpToDate | Status::Applied => "pass",
    };
    let s = &result.summary;
    let status = if s.errors > 0 || s.updates_available > 0 {
        "warn"
    } else {
        "pass"
    };
    let mut modules: BTreeMap<String, (usize, Vec<String>, &str)> = BTreeMap::new();
    for line in lines(result) {
        let entry = modules
            .entry(line.module.clone())
            .or_insert((0, Vec::new(), "pass"));
        let w = word(line.status);
        if w == "fail" || (w == "warn" && entry.2 == "pass") {
            entry.2 = w;
        }
        if line.status == Status::UpdateAvailable {
            entry.0 += 1;
        }
        if line.status != Status::UpToDate {
            let mut detail = format!("{}: {} -> {}", line.what, line.current, line.to);
            if line.to.is_empty() {
                detail = format!("{}: {}", line.what, line.current);
            }
            detail.push_str(&format!(" ({})", line.status.label()));
            if !line.issue.is_empty() {
                detail.push_str(&format!(": {}", line.issue));
            }
            entry.1.push(detail);
        }
    }
    let modules: Vec<serde_json::Value> = modules
        .into_iter()
        .map(|(module, (available, details, status))| {
            serde_json::json!({
                "module": module,
                "status": status,
                "summary": match available {
                    1 => "1 update available".to_owned(),
                    n => format!("{n} updates available"),
                },
                "details": details,
            })
        })
        .collect();
    let mut report = serde_json::json!({
        "producer": "tfupdate",
        "title": "Dependency Update Check",
        "status": status,
        "summary": format!(
            "{} checked, {} updates available, {} applied, {} errors",
            s.total_checked, s.updates_available, s.updates_applied, s.errors
        ),
        "modules": modules,
    });
    if !commit.is_empty() {
        report["commit"] = serde_json::Value::String(commit.to_owned());
    }
    let mut text = serde_json::to_string_pretty(&report).expect("the report is always JSON");
    text.push('\n');
    text
}
