//! The comment: Markdown as GitLab and GitHub render it.
//!
//! Input: a [`Summary`] and [`RenderOptions`]. Output: the comment text, deterministic
//! (no clock, everything sorted). Every value that comes from the repository or a plan
//! (module ids, environments, addresses, report texts, plan output) goes through one of
//! [`code`], [`text`], [`html`] or [`fenced`]: nothing of it can open a link, an image, raw
//! HTML, a mention (`@name`), a table cell or a code block of its own.

use std::fmt::Write as _;

use super::report::{Report, ReportStatus};
use super::{labels, Action, ModuleResult, Status, Summary, MARKER};

/// Resources listed per module before `... and N more`.
const MAX_RESOURCES: usize = 100;
/// GitHub refuses comments over 65536 characters; past this the details are left out.
pub(crate) const MAX_COMMENT_CHARS: usize = 60_000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// A `<details>` section per module (and per report module).
    pub include_details: bool,
    /// The labels terraci manages now, recorded in the comment so the next run removes
    /// only those (`None`: no label line).
    pub managed_labels: Option<Vec<String>>,
    /// The pipeline (run) the plans come from, for the footer.
    pub pipeline: Option<String>,
}

/// The comment.
pub fn render(summary: &Summary, options: &RenderOptions) -> String {
    let full = render_with(summary, options, options.include_details);
    if full.chars().count() <= MAX_COMMENT_CHARS || !options.include_details {
        return full;
    }
    let mut short = render_with(summary, options, false);
    short.push_str(
        "\n_The per-module details are left out: with them the comment would be too long. \
         The plan jobs' `plan.txt` artifacts have them._\n",
    );
    short
}

fn render_with(summary: &Summary, options: &RenderOptions, details: bool) -> String {
    let mut out = String::new();
    out.push_str(MARKER);
    out.push('\n');
    if let Some(managed) = &options.managed_labels {
        out.push_str(&labels::encode_managed(managed));
        out.push('\n');
    }
    out.push_str("\n## Terraform plan summary\n\n");
    out.push_str(&stats_line(&summary.modules));
    out.push_str("\n\n");
    for report in &summary.reports {
        let _ = writeln!(
            out,
            "- {} {}{}",
            report_icon(report.status),
            text(&report.title),
            if report.summary.is_empty() {
                String::new()
            } else {
                format!(": {}", text(&report.summary))
            }
        );
    }
    if !summary.reports.is_empty() {
        out.push('\n');
    }

    let visible: Vec<&ModuleResult> = summary.modules.iter().filter(|m| m.is_visible()).collect();
    let mut environments: Vec<&str> = visible.iter().map(|m| m.environment()).collect();
    environments.sort_unstable();
    environments.dedup();
    for env in environments {
        let _ = writeln!(out, "### Environment {}\n", code(env));
        out.push_str("| Module | Status | Add | Change | Replace | Destroy |\n");
        out.push_str("| --- | --- | ---: | ---: | ---: | ---: |\n");
        let modules: Vec<&&ModuleResult> =
            visible.iter().filter(|m| m.environment() == env).collect();
        for m in &modules {
            let counts = match (&m.plan, m.status) {
                (Some(p), Status::Changes | Status::NoChanges) => format!(
                    "{} | {} | {} | {}",
                    p.counts.add, p.counts.change, p.counts.replace, p.counts.destroy
                ),
                _ => "- | - | - | -".to_owned(),
            };
            let _ = writeln!(out, "| {} | {} | {counts} |", code(&m.id), status_cell(m));
        }
        out.push('\n');
        if details {
            for m in &modules {
                module_details(&mut out, m, summary.head.as_deref());
            }
        }
    }

    mermaid(&mut out, &visible, &summary.edges);

    for report in &summary.reports {
        report_section(&mut out, report, details);
    }

    out.push_str("---\n");
    let mut footer = String::from("<sub>Made by terraci");
    if let Some(pipeline) = &options.pipeline {
        let _ = write!(footer, " from pipeline {}", html_code(pipeline));
    }
    if let Some(head) = summary.head.as_deref().filter(|h| !h.is_empty()) {
        let _ = write!(footer, " for commit {}", html_code(short_sha(head)));
    }
    footer.push_str(".</sub>\n");
    out.push_str(&footer);
    out
}

fn short_sha(sha: &str) -> &str {
    sha.get(..8).unwrap_or(sha)
}

fn stats_line(modules: &[ModuleResult]) -> String {
    if modules.is_empty() {
        return "No plan results were found.".to_owned();
    }
    let count = |s: Status| modules.iter().filter(|m| m.status == s).count();
    let stale = modules.iter().filter(|m| m.stale).count();
    let mut parts = Vec::new();
    for (n, what) in [
        (count(Status::Changes), "with changes"),
        (count(Status::NoChanges), "without changes"),
        (count(Status::Failed), "failed"),
        (stale, "stale"),
    ] {
        if n > 0 {
            parts.push(format!("**{n}** {what}"));
        }
    }
    let noun = if modules.len() == 1 {
        "module"
    } else {
        "modules"
    };
    format!("**{}** {noun} planned: {}", modules.len(), parts.join(", "))
}

fn status_word(status: Status) -> &'static str {
    match status {
        Status::Changes => "🔄 changes",
        Status::NoChanges => "✅ no changes",
        Status::Failed => "❌ failed",
    }
}

fn status_cell(m: &ModuleResult) -> String {
    let mut cell = status_word(m.status).to_owned();
    if m.stale {
        cell.push_str(", ⏳ stale");
    }
    cell
}

fn report_icon(status: ReportStatus) -> &'static str {
    match status {
        ReportStatus::Pass => "✅",
        ReportStatus::Warn => "⚠️",
        ReportStatus::Fail => "❌",
    }
}

fn module_details(out: &mut String, m: &ModuleResult, head: Option<&str>) {
    let what = match (m.status, &m.plan) {
        (Status::Failed, _) => "the plan failed".to_owned(),
        (_, Some(p)) => p.counts.terraform_line(),
        (_, None) => "no plan.json".to_owned(),
    };
    let _ = writeln!(
        out,
        "<details><summary>{} {}: {}</summary>\n",
        status_word(m.status),
        html_code(&m.id),
        html(&what)
    );
    if m.stale {
        let _ = writeln!(
            out,
            "⏳ This plan was made for commit {}, not for the head of the merge request{}: \
             run the pipeline again for a current plan.\n",
            code(short_sha(&m.commit)),
            head.map(|h| format!(" ({})", code(short_sha(h))))
                .unwrap_or_default()
        );
    }
    if let Some(error) = &m.error {
        out.push_str(&fenced(error, "text"));
        out.push('\n');
    }
    if let Some(plan) = &m.plan {
        let shown: Vec<_> = plan
            .resources
            .iter()
            .filter(|r| r.action.is_change() || r.action == Action::Read)
            .collect();
        if !shown.is_empty() {
            out.push_str("| Action | Resource |\n| --- | --- |\n");
            for r in shown.iter().take(MAX_RESOURCES) {
                let _ = writeln!(out, "| {} | {} |", text(r.action.word()), code(&r.address));
            }
            if shown.len() > MAX_RESOURCES {
                let _ = writeln!(out, "| | … and {} more |", shown.len() - MAX_RESOURCES);
            }
            out.push('\n');
        }
        if !plan.outputs.is_empty() {
            out.push_str("| Action | Output |\n| --- | --- |\n");
            for (name, action) in &plan.outputs {
                let _ = writeln!(out, "| {} | {} |", text(action.word()), code(name));
            }
            out.push('\n');
        }
    }
    out.push_str("</details>\n\n");
}

/// The affected modules (those in the table) and the edges between them, in the order
/// they apply: an arrow goes from a dependency to the module that reads it.
fn mermaid(out: &mut String, visible: &[&ModuleResult], edges: &[(String, String)]) {
    if visible.len() < 2 {
        return;
    }
    let index = |id: &str| visible.iter().position(|m| m.id == id);
    let mut body = String::from("flowchart LR\n");
    for (i, m) in visible.iter().enumerate() {
        let _ = writeln!(
            body,
            "  m{i}[\"{}\"]",
            terraci_render::graph::mermaid_label(&m.id)
        );
    }
    for (from, to) in edges {
        if let (Some(a), Some(b)) = (index(from), index(to)) {
            let _ = writeln!(body, "  m{b} --> m{a}");
        }
    }
    body.push_str("  classDef changes fill:#fff3cd,stroke:#b58900\n");
    body.push_str("  classDef failed fill:#f8d7da,stroke:#c0392b\n");
    body.push_str("  classDef stale stroke-dasharray:4 3\n");
    for (i, m) in visible.iter().enumerate() {
        match m.status {
            Status::Changes => {
                let _ = writeln!(body, "  class m{i} changes");
            }
            Status::Failed => {
                let _ = writeln!(body, "  class m{i} failed");
            }
            Status::NoChanges => {}
        }
        if m.stale {
            let _ = writeln!(body, "  class m{i} stale");
        }
    }
    out.push_str("### Affected modules\n\n");
    out.push_str(&fenced(&body, "mermaid"));
    out.push('\n');
}

fn report_section(out: &mut String, report: &Report, details: bool) {
    let _ = writeln!(
        out,
        "### {} {}\n",
        report_icon(report.status),
        text(&report.title)
    );
    if !report.summary.is_empty() {
        let _ = writeln!(out, "{}\n", text(&report.summary));
    }
    let mut modules: Vec<_> = report.modules.iter().collect();
    modules.sort_by(|a, b| a.module.cmp(&b.module));
    if !modules.is_empty() {
        out.push_str("| Module | Status | Summary |\n| --- | --- | --- |\n");
        for m in &modules {
            let _ = writeln!(
                out,
                "| {} | {} {} | {} |",
                code(&m.module),
                report_icon(m.status),
                m.status.word(),
                text(&m.summary)
            );
        }
        out.push('\n');
    }
    if details {
        for m in modules.iter().filter(|m| !m.details.is_empty()) {
            let _ = writeln!(
                out,
                "<details><summary>{} {}</summary>\n",
                report_icon(m.status),
                html_code(&m.module)
            );
            for line in &m.details {
                let _ = writeln!(out, "- {}", text(line));
            }
            out.push_str("\n</details>\n\n");
        }
    }
}

/// Breaks what GitLab and GitHub would take for a mention or reference (`@name`,
/// `#12`, `!12`, `~label`): a zero-width space after the sign.
fn break_references(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        out.push(c);
        if matches!(c, '@' | '#' | '!' | '~') {
            out.push('\u{200b}');
        }
    }
    out
}

/// `s` as plain text in a Markdown paragraph, list item or table cell: one line
/// (controls escaped), every ASCII punctuation character backslash-escaped (no emphasis,
/// link, image, HTML, autolink, table pipe or math), references broken.
pub(crate) fn text(s: &str) -> String {
    let line = break_references(&terraci_db::escape::printable(s));
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `s` as an inline code span that also works in a table cell: one line, a delimiter
/// longer than any backtick run inside, `|` escaped.
pub(crate) fn code(s: &str) -> String {
    let line = terraci_db::escape::printable(s).replace('|', "\\|");
    let longest = longest_run(&line, '`');
    let fence = "`".repeat(longest + 1);
    let pad = if line.starts_with('`') || line.ends_with('`') || line.is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{line}{pad}{fence}")
}

/// `s` as HTML text (inside `<summary>`, where Markdown is not read): one line, `&`, `<`,
/// `>`, `"`, `'` as entities, references broken.
pub(crate) fn html(s: &str) -> String {
    let line = break_references(&terraci_db::escape::printable(s));
    let mut out = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// [`html`] in `<code>`.
fn html_code(s: &str) -> String {
    format!("<code>{}</code>", html(s))
}

/// `body` as a fenced code block: a fence longer than any backtick run in it, lines
/// kept, other controls escaped.
pub(crate) fn fenced(body: &str, info: &str) -> String {
    let lines: Vec<String> = body
        .lines()
        .map(|l| terraci_db::escape::printable(l).into_owned())
        .collect();
    let longest = lines.iter().map(|l| longest_run(l, '`')).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let mut out = format!("{fence}{info}\n");
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&fence);
    out.push('\n');
    out
}

fn longest_run(s: &str, c: char) -> usize {
    let mut best = 0;
    let mut run = 0;
    for ch in s.chars() {
        if ch == c {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}
