//! What an estimate shows: text for people, JSON for scripts, and the report the
//! summary comment reads (`<service_dir>/cost-report.json`).
//!
//! Input: an [`Estimate`]. Output: bytes, the same for the same estimate.

use std::fmt::Write as _;

use serde_json::json;

use terraci_db::escape::printable;

use crate::estimate::{Estimate, Line, ModuleCost, ResourceCost, Side, Status};

/// `$7.59`.
pub fn money(x: f64) -> String {
    let cents = (x * 100.0).round() / 100.0;
    if cents < 0.0 {
        format!("-${:.2}", -cents)
    } else {
        format!("${:.2}", cents.abs())
    }
}

/// `+$7.59`, `-$7.59`, `$0.00`.
pub fn signed(x: f64) -> String {
    let cents = (x * 100.0).round() / 100.0;
    if cents > 0.0 {
        format!("+{}", money(cents))
    } else if cents < 0.0 {
        money(cents)
    } else {
        "$0.00".to_owned()
    }
}

/// A file's price without its trailing zeros (`0.0104000000` -> `0.0104`).
fn unit_price(price: &str) -> &str {
    if price.contains('.') {
        let t = price.trim_end_matches('0');
        t.strip_suffix('.').unwrap_or(t)
    } else {
        price
    }
}

fn line_text(l: &Line) -> String {
    // Labels and usage carry the plan's values (an instance type): the checkout's text.
    format!(
        "{}: ${}/{} x {}{} = {}",
        printable(&l.component),
        unit_price(&l.unit_price),
        printable(&l.unit),
        printable(&l.usage),
        if l.assumed { " (assumed usage)" } else { "" },
        money(l.monthly)
    )
}

fn sign(action: &str) -> &'static str {
    match action {
        "create" => "+",
        "delete" => "-",
        "replace" => "-/+",
        "update" => "~",
        _ => " ",
    }
}

fn resource_head(r: &ResourceCost) -> String {
    let figure = match r.status {
        Status::UsageBased => "usage-based, no fixed monthly cost".to_owned(),
        _ if r.action == "create" => money(r.after),
        _ if r.action == "delete" => format!("{} -> $0.00", money(r.before)),
        _ => format!(
            "{} -> {} ({})",
            money(r.before),
            money(r.after),
            signed(r.diff)
        ),
    };
    let status = match r.status {
        Status::UsageEstimated => ", usage estimated",
        _ => "",
    };
    format!(
        "{} {} ({}{status}): {figure}",
        sign(r.action),
        r.address,
        r.action
    )
}

fn module_text(out: &mut String, m: &ModuleCost) {
    let region = m
        .region
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{}{region}: before {}, after {}, diff {}",
        printable(&m.module),
        money(m.before),
        money(m.after),
        signed(m.diff)
    );
    if let Some(e) = &m.error {
        let _ = writeln!(out, "  error: {}", printable(e));
    }
    for r in &m.resources {
        let _ = writeln!(out, "  {}", resource_head(r));
        let both = r.lines.iter().any(|l| l.side == Side::Before)
            && r.lines.iter().any(|l| l.side == Side::After);
        for l in &r.lines {
            // One side suffices when the other is absent (a create or a delete) or the
            // same (a change elsewhere).
            let shown = both && r.before != r.after;
            if both && !shown && l.side == Side::Before {
                continue;
            }
            let side = match (shown, l.side) {
                (false, _) => "",
                (true, Side::Before) => "before: ",
                (true, Side::After) => "after: ",
            };
            let _ = writeln!(out, "      {side}{}", line_text(l));
        }
        for n in &r.notes {
            let _ = writeln!(out, "      note: {n}");
        }
    }
    if !m.unpriced.is_empty() {
        let _ = writeln!(out, "  not priced:");
        for u in &m.unpriced {
            let _ = writeln!(
                out,
                "    {}: {}",
                printable(&u.address),
                printable(&u.reason)
            );
        }
    }
}

/// The text output.
pub fn text(estimate: &Estimate) -> String {
    let mut out = String::new();
    for m in &estimate.modules {
        module_text(&mut out, m);
        out.push('\n');
    }
    let n = estimate.modules.len();
    let _ = writeln!(
        out,
        "total ({n} {}): before {}, after {}, diff {} (monthly, {}, 730 hours a month)",
        if n == 1 { "module" } else { "modules" },
        money(estimate.total_before),
        money(estimate.total_after),
        signed(estimate.total_diff),
        estimate.currency
    );
    out
}

/// The JSON output.
pub fn json(estimate: &Estimate) -> String {
    let mut text = serde_json::to_string_pretty(estimate).unwrap_or_default();
    text.push('\n');
    text
}

/// A report's `cost` figures: the summary shows them as Before / After / Diff columns.
fn figures(before: f64, after: f64, diff: f64) -> serde_json::Value {
    json!({"before": money(before), "after": money(after), "diff": signed(diff)})
}

/// The report the summary comment shows as its cost section (`producer: cost`):
/// one row per module, `before -> after (diff)`, with each resource as a detail. A
/// module that could not be estimated warns.
pub fn report(estimate: &Estimate, commit: &str) -> String {
    let modules: Vec<_> = estimate
        .modules
        .iter()
        .map(|m| {
            let mut details: Vec<String> = m.resources.iter().map(resource_head).collect();
            for u in &m.unpriced {
                details.push(format!("not priced: {}: {}", u.address, u.reason));
            }
            let (status, summary) = match &m.error {
                Some(e) => ("warn", format!("not estimated: {e}")),
                None => (
                    "pass",
                    format!(
                        "before {}, after {}, diff {}",
                        money(m.before),
                        money(m.after),
                        signed(m.diff)
                    ),
                ),
            };
            let mut module = json!({
                "module": m.module,
                "status": status,
                "summary": summary,
                "details": details,
            });
            if m.error.is_none() {
                module["cost"] = figures(m.before, m.after, m.diff);
            }
            module
        })
        .collect();
    let errors = estimate
        .modules
        .iter()
        .filter(|m| m.error.is_some())
        .count();
    let n = estimate.modules.len();
    let mut report = json!({
        "producer": "cost",
        "title": "Cost estimation",
        "status": if errors > 0 { "warn" } else { "pass" },
        "summary": format!(
            "{n} {}: monthly before {}, after {}, diff {}",
            if n == 1 { "module" } else { "modules" },
            money(estimate.total_before),
            money(estimate.total_after),
            signed(estimate.total_diff)
        ),
        "modules": modules,
        "cost": figures(estimate.total_before, estimate.total_after, estimate.total_diff),
    });
    if !commit.is_empty() {
        report["commit"] = json!(commit);
    }
    let mut text = serde_json::to_string_pretty(&report).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_rounded_to_cents_with_a_sign_for_differences() {
        assert_eq!(money(7.592), "$7.59");
        assert_eq!(signed(7.595), "+$7.60");
        assert_eq!(signed(-3.0), "-$3.00");
        assert_eq!(signed(0.001), "$0.00");
        assert_eq!(unit_price("0.0104000000"), "0.0104");
        assert_eq!(unit_price("1.0000000000"), "1");
    }
}
