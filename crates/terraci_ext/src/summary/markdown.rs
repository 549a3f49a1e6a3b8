//! The comment: Markdown as GitLab and GitHub render it.
//!
//! Input: a [`Summary`] and [`RenderOptions`]. Output: the comment text, deterministic
//! (no clock, everything sorted). Every value that comes from the repository or a plan
//! (module ids, environments, addresses, report texts, plan output) goes through one of
//! [`code`], [`text`], [`html`] or [`fenced`]: nothing of it can open a link, an image, raw
//! HTML, a mention (`@name`), a table cell or a code block of its own.

use std::fmt::Write as _;

use super::report::{Report, ReportStatus};
use super::{labels, Action, ModuleResult, Status, Summary};

/// Resources listed per module before `... and N more`.
const MAX_RESOURCES: usize = 100;

/// GitHub refuses a comment over 65,536 characters (HTTP 422): a margin under it.
pub const GITHUB_MAX_CHARS: usize = 65_000;
/// GitLab refuses a note over 1,000,000 characters: a margin under it.
pub const GITLAB_MAX_CHARS: usize = 999_000;
/// GitHub shows a step summary of at most 1 MiB.
pub const STEP_SUMMARY_MAX_BYTES: usize = 1 << 20;

/// The most the comment may be: characters (GitHub and GitLab count those) or bytes (the
/// GitHub step summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Chars(usize),
    Bytes(usize),
}

impl Default for Limit {
    fn default() -> Limit {
        Limit::Chars(GITHUB_MAX_CHARS)
    }
}

impl Limit {
    /// The limit of the provider's comments (GitHub's when unknown, the smaller).
    pub fn for_provider(provider: Option<terraci_db::config::CommentProvider>) -> Limit {
        match provider {
            Some(terraci_db::config::CommentProvider::GitLab) => Limit::Chars(GITLAB_MAX_CHARS),
            _ => Limit::Chars(GITHUB_MAX_CHARS),
        }
    }

    fn size(self, text: &str) -> usize {
        match self {
            Limit::Chars(_) => text.chars().count(),
            Limit::Bytes(_) => text.len(),
        }
    }

    fn max(self) -> usize {
        match self {
            Limit::Chars(n) | Limit::Bytes(n) => n,
        }
    }

    fn fits(self, text: &str) -> bool {
        self.size(text) <= self.max()
    }

    /// `65,000 characters`.
    fn describe(self) -> String {
        let unit = match self {
            Limit::Chars(_) => "characters",
            Limit::Bytes(_) => "bytes",
        };
        format!("{} {unit}", thousands(self.max()))
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// A `<details>` section per module (and per report module).
    pub include_details: bool,
    /// The labels terraci manages now, recorded in the comment so the next run removes
    /// only those (`None`: no label line).
    pub managed_labels: Option<Vec<String>>,
    /// The pipeline (run) the plans come from, for the footer.
    pub pipeline: Option<String>,
    /// The most the comment may be (the provider's limit).
    pub limit: Limit,
    /// The part of a split pipeline the comment is for (its own marker and title).
    pub part: Option<String>,
}

/// What one rendering shows: the comment is rendered with less and less until it fits.
#[derive(Debug, Clone, Copy)]
struct Shape {
    details: bool,
    graph: bool,
    /// Rows of modules without changes (stale ones) and of report modules that pass.
    quiet_rows: bool,
    /// The most rows per table (`None`: all); the rest is one `… and N more` row.
    max_rows: Option<usize>,
}

/// What a rendering left out, to say so.
#[derive(Debug, Default)]
struct Left {
    quiet_modules: usize,
    quiet_report_rows: usize,
    cut_rows: usize,
}

/// The comment: everything, or, when that is over `options.limit`, the most that fits, in
/// steps: without the per-module details, without the graph, without the rows of modules
/// without changes (and of passing report modules), with fewer rows per table, and last
/// a cut at a line. A line before the footer says what was left out.
pub fn render(summary: &Summary, options: &RenderOptions) -> String {
    let limit = options.limit;
    let full = Shape {
        details: options.include_details,
        graph: true,
        quiet_rows: true,
        max_rows: None,
    };
    let (text, _) = render_with(summary, options, full, None);
    if limit.fits(&text) {
        return text;
    }
    let has_graph = summary.modules.iter().filter(|m| m.is_visible()).count() >= 2;
    let steps = [
        Shape {
            details: false,
            ..full
        },
        Shape {
            details: false,
            graph: false,
            ..full
        },
        Shape {
            details: false,
            graph: false,
            quiet_rows: false,
            max_rows: None,
        },
    ];
    let note = |shape: Shape, left: &Left| -> String {
        // Each part left out, and whether it is plural.
        let mut parts: Vec<(String, bool)> = Vec::new();
        let counted = |n: usize, one: &str, many: &str| {
            (
                format!("{} {}", thousands(n), if n == 1 { one } else { many }),
                n != 1,
            )
        };
        if options.include_details && !shape.details {
            parts.push(("the per-module details".to_owned(), true));
        }
        if has_graph && !shape.graph {
            parts.push(("the graph".to_owned(), false));
        }
        if left.quiet_modules > 0 {
            parts.push(counted(
                left.quiet_modules,
                "unchanged module",
                "unchanged modules",
            ));
        }
        if left.quiet_report_rows > 0 {
            parts.push(counted(
                left.quiet_report_rows,
                "passing report row",
                "passing report rows",
            ));
        }
        if left.cut_rows > 0 {
            parts.push(counted(left.cut_rows, "more table row", "more table rows"));
        }
        let plural = parts.len() != 1 || parts[0].1;
        let names: Vec<String> = parts.into_iter().map(|(p, _)| p).collect();
        let what = match names.as_slice() {
            [] => "parts of the comment".to_owned(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        };
        format!(
            "\n_{} {} left out: the comment would be over {}. The plan jobs' artifacts have them._\n",
            capitalise(&what),
            if plural { "are" } else { "is" },
            limit.describe()
        )
    };
    for shape in steps {
        let (text, _) = render_with(summary, options, shape, Some(&|l: &Left| note(shape, l)));
        if limit.fits(&text) {
            return text;
        }
    }
    // Fewer rows per table: the most that fits.
    let last = steps[2];
    let fit = |rows: usize| {
        let shape = Shape {
            max_rows: Some(rows),
            ..last
        };
        render_with(summary, options, shape, Some(&|l: &Left| note(shape, l))).0
    };
    let most = summary.modules.len()
        + summary
            .reports
            .iter()
            .map(|r| r.modules.len())
            .sum::<usize>();
    let (mut lo, mut hi) = (0usize, most);
    if limit.fits(&fit(0)) {
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if limit.fits(&fit(mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return fit(lo);
    }
    cut(&fit(0), limit)
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The last resort: `text` cut at a line so that it fits, keeping its first lines (the
/// marker and the label line) and its footer, saying so.
fn cut(text: &str, limit: Limit) -> String {
    let footer_at = text.rfind("\n---\n").map_or(text.len(), |i| i + 1);
    let (body, footer) = text.split_at(footer_at);
    let note = format!(
        "\n_The rest of the comment is left out: it would be over {}. The plan jobs' artifacts have it._\n\n",
        limit.describe()
    );
    let room = limit
        .max()
        .saturating_sub(limit.size(footer) + limit.size(&note));
    let mut kept = String::new();
    let mut size = 0;
    // The header (the marker and the label line, up to the first blank line) is kept
    // whatever its size: the next run finds the comment and its labels by it.
    let mut header = true;
    for line in body.split_inclusive('\n') {
        let n = limit.size(line);
        header &= line != "\n";
        if !header && size + n > room {
            break;
        }
        kept.push_str(line);
        size += n;
    }
    // An open code fence would swallow the rest: close it.
    if kept
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count()
        % 2
        == 1
    {
        kept.push_str("```\n");
    }
    format!("{kept}{note}{footer}")
}

fn render_with(
    summary: &Summary,
    options: &RenderOptions,
    shape: Shape,
    note: Option<&dyn Fn(&Left) -> String>,
) -> (String, Left) {
    let details = shape.details;
    let mut left = Left::default();
    let mut out = String::new();
    out.push_str(&super::marker(options.part.as_deref()));
    out.push('\n');
    if let Some(managed) = &options.managed_labels {
        out.push_str(&labels::encode_managed(managed));
        out.push('\n');
    }
    out.push_str("\n## Terraform plan summary");
    if let Some(part) = &options.part {
        out.push_str(&format!(" ({part})"));
    }
    out.push_str("\n\n");
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
    let shown: Vec<&ModuleResult> = visible
        .iter()
        .copied()
        .filter(|m| shape.quiet_rows || m.status != Status::NoChanges)
        .collect();
    left.quiet_modules = visible.len() - shown.len();
    let mut environments: Vec<&str> = shown.iter().map(|m| m.environment()).collect();
    environments.sort_unstable();
    environments.dedup();
    for env in environments {
        let _ = writeln!(out, "### Environment {}\n", code(env));
        out.push_str("| Module | Status | Add | Change | Replace | Destroy |\n");
        out.push_str("| --- | --- | ---: | ---: | ---: | ---: |\n");
        let modules: Vec<&&ModuleResult> =
            shown.iter().filter(|m| m.environment() == env).collect();
        let rows = shape.max_rows.unwrap_or(usize::MAX).min(modules.len());
        for m in &modules[..rows] {
            let counts = match (&m.plan, m.status) {
                _ if m.plan_note.is_some() => {
                    "too large | too large | too large | too large".to_owned()
                }
                (Some(p), Status::Changes | Status::NoChanges) => format!(
                    "{} | {} | {} | {}",
                    p.counts.add, p.counts.change, p.counts.replace, p.counts.destroy
                ),
                _ => "- | - | - | -".to_owned(),
            };
            let _ = writeln!(out, "| {} | {} | {counts} |", code(&m.id), status_cell(m));
        }
        if rows < modules.len() {
            let more = modules.len() - rows;
            left.cut_rows += more;
            let _ = writeln!(
                out,
                "| … and {} more {} | | | | | |",
                thousands(more),
                if more == 1 { "module" } else { "modules" }
            );
        }
        out.push('\n');
        if details {
            for m in &modules {
                module_details(&mut out, m, summary.head.as_deref());
            }
        }
    }

    if shape.graph {
        mermaid(&mut out, &visible, &summary.edges);
    }

    for report in &summary.reports {
        report_section(&mut out, report, shape, &mut left);
    }

    if let Some(note) = note {
        out.push_str(&note(&left));
        out.push('\n');
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
    (out, left)
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
        (count(Status::Unknown), "not summarised"),
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
        Status::Unknown => "❔ not summarised",
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
        _ if m.plan_note.is_some() => "plan.json too large to summarise".to_owned(),
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
    if m.stale && m.commit.is_empty() {
        out.push_str(
            "⏳ This plan names no commit: no plan job of this pipeline made it (its files \
             may be committed in the merge request); run the pipeline again for a current \
             plan.\n\n",
        );
    } else if m.stale {
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
    if let Some(note) = &m.plan_note {
        let _ = writeln!(out, "{}\n", text(note));
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
            Status::NoChanges | Status::Unknown => {}
        }
        if m.stale {
            let _ = writeln!(body, "  class m{i} stale");
        }
    }
    out.push_str("### Affected modules\n\n");
    out.push_str(&fenced(&body, "mermaid"));
    out.push('\n');
}

fn report_section(out: &mut String, report: &Report, shape: Shape, left: &mut Left) {
    let details = shape.details;
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
    if !shape.quiet_rows {
        let all = modules.len();
        modules.retain(|m| m.status != ReportStatus::Pass);
        left.quiet_report_rows += all - modules.len();
    }
    // A cost report: its figures in columns, and its totals.
    let costs = !modules.is_empty() && modules.iter().all(|m| m.cost.is_some());
    if !modules.is_empty() {
        out.push_str(if costs {
            "| Module | Before | After | Diff |\n| --- | ---: | ---: | ---: |\n"
        } else {
            "| Module | Status | Summary |\n| --- | --- | --- |\n"
        });
        let rows = shape.max_rows.unwrap_or(usize::MAX).min(modules.len());
        for m in &modules[..rows] {
            match &m.cost {
                Some(c) if costs => {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} |",
                        code(&m.module),
                        text(&c.before),
                        text(&c.after),
                        text(&c.diff)
                    );
                }
                _ => {
                    let _ = writeln!(
                        out,
                        "| {} | {} {} | {} |",
                        code(&m.module),
                        report_icon(m.status),
                        m.status.word(),
                        text(&m.summary)
                    );
                }
            }
        }
        if rows < modules.len() {
            let more = modules.len() - rows;
            left.cut_rows += more;
            let _ = writeln!(
                out,
                "| … and {} more {} | |{}",
                thousands(more),
                if more == 1 { "module" } else { "modules" },
                if costs { " | |" } else { " |" }
            );
        }
        if let Some(total) = report.cost.as_ref().filter(|_| costs) {
            let _ = writeln!(
                out,
                "| **Total** | **{}** | **{}** | **{}** |",
                text(&total.before),
                text(&total.after),
                text(&total.diff)
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
