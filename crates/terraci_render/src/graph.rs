//! Graph output formats: dot, plantuml, mermaid, list, levels, json (spec §8).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use terraci_db::diagnostic::Diagnostic;
use terraci_db::escape::printable;

/// The graph as printed: already resolved to file/line positions, deterministic.
#[derive(Debug, Clone, Serialize)]
pub struct GraphView {
    pub modules: Vec<ModuleView>,
    pub edges: Vec<EdgeView>,
    pub levels: Vec<Vec<String>>,
    pub cycles: Vec<Vec<String>>,
    pub diagnostics: Vec<Diagnostic>,
    /// References to state other repositories own (`external_state` in the config).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_state: Vec<ExternalView>,
    /// Uses-library links (caller, library directory) between listed modules, sorted.
    /// Not part of the JSON formats, whose shape is fixed by the spec.
    #[serde(skip)]
    pub uses: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExternalView {
    /// The module that reads it.
    pub from: String,
    /// `s3://bucket/key`...
    pub state: String,
    pub source: SourceView,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleView {
    pub id: String,
    /// The module directory relative to the project dir.
    pub path: String,
    pub components: indexmap::IndexMap<String, String>,
    pub library: bool,
    pub submodule: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct EdgeView {
    pub from: String,
    pub to: String,
    pub sources: Vec<SourceView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceView {
    pub name: String,
    pub file: String,
    pub line: u32,
    /// The matching rule that found the edge (`state identity`, `partial state
    /// identity`, `state path`, `context`, `tail of the state path`).
    pub rule: &'static str,
    /// The local module calls the block was read through, outermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
}

impl GraphView {
    /// Keeps only `keep` (modules, edges between them, levels, cycles).
    pub fn restrict(&mut self, keep: &BTreeSet<String>) {
        // Libraries stay when a kept module reaches them.
        let mut reached: BTreeSet<&str> = keep.iter().map(String::as_str).collect();
        let mut stack: Vec<&str> = reached.iter().copied().collect();
        while let Some(from) = stack.pop() {
            for (_, to) in self.uses.iter().filter(|(f, _)| f == from) {
                if reached.insert(to) {
                    stack.push(to);
                }
            }
        }
        let libraries: BTreeSet<String> = self
            .modules
            .iter()
            .filter(|m| m.library && reached.contains(m.id.as_str()))
            .map(|m| m.id.clone())
            .collect();
        self.modules
            .retain(|m| keep.contains(&m.id) || libraries.contains(&m.id));
        self.uses.retain(|(from, to)| {
            (keep.contains(from) || libraries.contains(from))
                && (keep.contains(to) || libraries.contains(to))
        });
        self.edges
            .retain(|e| keep.contains(&e.from) && keep.contains(&e.to));
        for l in &mut self.levels {
            l.retain(|m| keep.contains(m));
        }
        self.levels.retain(|l| !l.is_empty());
        self.cycles.retain(|c| c.iter().any(|m| keep.contains(m)));
    }

    fn targets(&self) -> impl Iterator<Item = &ModuleView> {
        self.modules.iter().filter(|m| !m.library)
    }

    fn libraries(&self) -> impl Iterator<Item = &ModuleView> {
        self.modules.iter().filter(|m| m.library)
    }
}

pub fn render_json(view: &GraphView) -> String {
    /// The document, serialized straight from the view: a `serde_json::Value` of it
    /// first was a second copy of the graph (50 MB at 10,000 modules) at the peak.
    #[derive(Serialize)]
    struct Document<'a> {
        modules: &'a [ModuleView],
        edges: &'a [EdgeView],
        levels: &'a [Vec<String>],
        cycles: &'a [Vec<String>],
        diagnostics: Vec<DiagnosticJson<'a>>,
        #[serde(skip_serializing_if = "<[ExternalView]>::is_empty")]
        external_state: &'a [ExternalView],
    }
    let document = Document {
        modules: &view.modules,
        edges: &view.edges,
        levels: &view.levels,
        cycles: &view.cycles,
        diagnostics: view.diagnostics.iter().map(DiagnosticJson::of).collect(),
        external_state: &view.external_state,
    };
    let mut s = serde_json::to_string_pretty(&document).expect("JSON of plain data");
    s.push('\n');
    s
}

/// A diagnostic in the JSON outputs.
#[derive(Serialize)]
struct DiagnosticJson<'a> {
    severity: &'static str,
    code: &'a terraci_db::diagnostic::Code,
    module: &'a Option<String>,
    file: &'a Option<String>,
    line: Option<u32>,
    column: Option<u32>,
    message: std::borrow::Cow<'a, str>,
}

impl<'a> DiagnosticJson<'a> {
    fn of(d: &'a Diagnostic) -> Self {
        DiagnosticJson {
            severity: d.severity.as_str(),
            code: &d.code,
            module: &d.module,
            file: &d.file,
            line: d.line,
            column: d.column,
            message: d.full_message(),
        }
    }
}

pub fn diagnostic_json(d: &Diagnostic) -> serde_json::Value {
    serde_json::to_value(DiagnosticJson::of(d)).expect("JSON of plain data")
}

/// DOT in TerraCi's layout: left to right, one dashed cluster per context (the first
/// two path segments), nodes labelled with their last two segments; library modules as
/// dashed components with `uses` edges.
pub fn render_dot(view: &GraphView) -> String {
    let q = |id: &str| dot_quoted(id);
    let mut out = String::from(
        "digraph dependencies {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n  edge [color=\"#666666\"];\n\n",
    );
    for (i, (context, ids)) in contexts(view.targets().map(|m| m.id.as_str()))
        .iter()
        .enumerate()
    {
        let _ = writeln!(out, "  subgraph cluster_{i} {{");
        let _ = writeln!(out, "    label={};", q(context));
        out.push_str("    style=dashed;\n    color=\"#999999\";\n");
        for id in ids {
            let _ = writeln!(out, "    {} [label={}];", q(id), q(&tail(id, 2)));
        }
        out.push_str("  }\n\n");
    }
    for m in view.libraries() {
        let _ = writeln!(out, "  {} [shape=component, style=dashed];", q(&m.id));
    }
    for e in &view.edges {
        let _ = writeln!(out, "  {} -> {};", q(&e.from), q(&e.to));
    }
    for (from, to) in &view.uses {
        let _ = writeln!(
            out,
            "  {} -> {} [style=dashed, label=\"uses\"];",
            q(from),
            q(to)
        );
    }
    out.push_str("}\n");
    out
}

/// PlantUML in TerraCi's layout: a package per context, a sub-package per region (the
/// third segment) when a context spans several, components labelled with the rest of
/// the path; library modules as components of their own.
pub fn render_plantuml(view: &GraphView) -> String {
    let aliases = Aliases::of(view);
    let mut out = String::from(
        "@startuml\nleft to right direction\nskinparam componentStyle rectangle\nskinparam packageStyle frame\nskinparam defaultFontSize 11\n\n",
    );
    for (context, ids) in contexts(view.targets().map(|m| m.id.as_str())) {
        let _ = writeln!(out, "package \"{}\" {{", plantuml_label(&context));
        let mut regions: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for id in &ids {
            regions
                .entry(id.split('/').nth(2).unwrap_or("default"))
                .or_default()
                .push(id);
        }
        let nested = regions.len() > 1;
        for (region, ids) in regions {
            let indent = if nested { "    " } else { "  " };
            if nested {
                let _ = writeln!(out, "  package \"{}\" {{", plantuml_label(region));
            }
            for id in ids {
                let segments: Vec<&str> = id.split('/').collect();
                let label = if segments.len() > 3 {
                    segments[3..].join("/")
                } else {
                    segments.last().copied().unwrap_or(id).to_owned()
                };
                let _ = writeln!(
                    out,
                    "{indent}[{}] as {}",
                    plantuml_label(&label),
                    aliases.get(id)
                );
            }
            if nested {
                out.push_str("  }\n");
            }
        }
        out.push_str("}\n\n");
    }
    for m in view.libraries() {
        let _ = writeln!(
            out,
            "component \"{}\" as {}",
            plantuml_label(&m.id),
            aliases.get(&m.id)
        );
    }
    for e in &view.edges {
        let _ = writeln!(out, "{} --> {}", aliases.get(&e.from), aliases.get(&e.to));
    }
    for (from, to) in &view.uses {
        let _ = writeln!(out, "{} ..> {} : uses", aliases.get(from), aliases.get(to));
    }
    out.push_str("\n@enduml\n");
    out
}

/// Module ids grouped by context, the first two path segments (`other` for a shorter
/// id), both sorted.
fn contexts<'a>(ids: impl Iterator<Item = &'a str>) -> Vec<(String, Vec<&'a str>)> {
    let mut groups: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for id in ids {
        let segments: Vec<&str> = id.split('/').collect();
        let key = if segments.len() >= 2 {
            format!("{}/{}", segments[0], segments[1])
        } else {
            "other".to_owned()
        };
        groups.entry(key).or_default().push(id);
    }
    groups
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_unstable();
            (k, v)
        })
        .collect()
}

/// The last `n` path segments of an id (all of it when it has fewer).
fn tail(id: &str, n: usize) -> String {
    let segments: Vec<&str> = id.split('/').collect();
    segments[segments.len().saturating_sub(n)..].join("/")
}

pub fn render_mermaid(view: &GraphView) -> String {
    let aliases = Aliases::of(view);
    let mut out = String::from("graph BT\n");
    for m in view.targets() {
        let _ = writeln!(
            out,
            "  {}[\"{}\"]",
            aliases.get(&m.id),
            mermaid_label(&m.id)
        );
    }
    for m in view.libraries() {
        let _ = writeln!(
            out,
            "  {}[[\"{}\"]]",
            aliases.get(&m.id),
            mermaid_label(&m.id)
        );
    }
    for e in &view.edges {
        let _ = writeln!(out, "  {} --> {}", aliases.get(&e.from), aliases.get(&e.to));
    }
    for (from, to) in &view.uses {
        let _ = writeln!(
            out,
            "  {} -. uses .-> {}",
            aliases.get(from),
            aliases.get(to)
        );
    }
    out
}

/// Node names for formats whose node ids are bare words: each id's alphanumerics with
/// `_` for anything else, and `_2`, `_3`, ... after an alias an earlier id (in sorted
/// order) already has, so `app-v2` and `app_v2` stay two nodes.
struct Aliases(std::collections::BTreeMap<String, String>);

impl Aliases {
    fn of(view: &GraphView) -> Aliases {
        let ids: BTreeSet<&str> = view
            .modules
            .iter()
            .map(|m| m.id.as_str())
            .chain(
                view.edges
                    .iter()
                    .flat_map(|e| [e.from.as_str(), e.to.as_str()]),
            )
            .chain(view.uses.iter().flat_map(|(f, t)| [f.as_str(), t.as_str()]))
            .collect();
        let mut used = BTreeSet::new();
        let mut map = std::collections::BTreeMap::new();
        for id in ids {
            let base = alias(id);
            let mut name = base.clone();
            let mut n = 2;
            while !used.insert(name.clone()) {
                name = format!("{base}_{n}");
                n += 1;
            }
            map.insert(id.to_owned(), name);
        }
        Aliases(map)
    }

    fn get(&self, id: &str) -> String {
        self.0.get(id).cloned().unwrap_or_else(|| alias(id))
    }
}

fn alias(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A DOT quoted string: `"` and `\` escaped, line breaks and controls as `\u{..}` text.
fn dot_quoted(id: &str) -> String {
    let text = terraci_db::escape::printable(id);
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A PlantUML label in `"..."`: quotes and backslashes as `<U+..>` code points, which
/// PlantUML prints as the character.
fn plantuml_label(id: &str) -> String {
    let mut out = String::new();
    for c in id.chars() {
        if c == '"' || c == '\\' || terraci_db::escape::is_unsafe_char(c) {
            let _ = write!(out, "<U+{:04X}>", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// A Mermaid label in `["..."]`: quotes, markup and `#` as Mermaid's `#...;` entities,
/// line breaks and controls as `\u{..}` text.
pub fn mermaid_label(id: &str) -> String {
    let mut out = String::new();
    for c in terraci_db::escape::printable(id).chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            c => out.push(c),
        }
    }
    out
}

/// Each module's direct dependencies, sorted, from the view's edges (computed once: a
/// scan of every edge per module is quadratic at 10,000 modules).
fn dependencies(view: &GraphView) -> std::collections::BTreeMap<&str, Vec<&str>> {
    let mut deps: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for e in &view.edges {
        deps.entry(e.from.as_str()).or_default().push(e.to.as_str());
    }
    deps
}

/// Each module's dependents.
fn dependents(view: &GraphView) -> std::collections::BTreeMap<&str, usize> {
    let mut n: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in &view.edges {
        *n.entry(e.to.as_str()).or_default() += 1;
    }
    n
}

/// TerraCi's list: one `[context]` block per context (the first two path segments),
/// each module in execution order under it by the rest of its path, with `→` and the
/// modules it reads (by the rest of their path in the same context, by their id in
/// another); then `[library_modules]`. Control characters in ids are escaped:
/// the text is for a terminal.
pub fn render_list(view: &GraphView) -> String {
    let deps = dependencies(view);
    let short = |id: &str| {
        let segments: Vec<&str> = id.split('/').collect();
        if segments.len() > 2 {
            segments[2..].join("/")
        } else {
            id.to_owned()
        }
    };
    // Execution order: by level, then id; modules on a cycle (no level) last.
    let level: std::collections::BTreeMap<&str, usize> = view
        .levels
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let mut out = String::new();
    for (context, mut ids) in contexts(view.targets().map(|m| m.id.as_str())) {
        ids.sort_by_key(|id| (level.get(id).copied().unwrap_or(usize::MAX), *id));
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "[{}]", printable(&context));
        for id in ids {
            match deps.get(id) {
                None => {
                    let _ = writeln!(out, "  {}", printable(&short(id)));
                }
                Some(to) => {
                    // A module of another context keeps its whole id: shortened, prod's
                    // and stage's `eu-central-1/vpc` would read the same.
                    let to: Vec<String> = to
                        .iter()
                        .map(|t| {
                            if t.starts_with(&format!("{context}/")) {
                                short(t)
                            } else {
                                (*t).to_owned()
                            }
                        })
                        .collect();
                    let _ = writeln!(
                        out,
                        "  {} → {}",
                        printable(&short(id)),
                        printable(&to.join(", "))
                    );
                }
            }
        }
    }
    let libraries: Vec<&ModuleView> = view.libraries().collect();
    if !libraries.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("[library_modules]\n");
        for m in libraries {
            let users: Vec<&str> = view
                .uses
                .iter()
                .filter(|(_, to)| *to == m.id)
                .map(|(from, _)| from.as_str())
                .collect();
            if users.is_empty() {
                let _ = writeln!(out, "  {} (unused)", printable(&m.id));
            } else {
                let _ = writeln!(
                    out,
                    "  {} ← {}",
                    printable(&m.id),
                    printable(&users.join(", "))
                );
            }
        }
    }
    out
}

/// TerraCi's levels: `Level N (K modules):`, then each module with the last segment of
/// each module it reads (the whole id where two would read the same); then any cycles.
pub fn render_levels(view: &GraphView) -> String {
    let deps = dependencies(view);
    let mut out = String::new();
    for (i, level) in view.levels.iter().enumerate() {
        let count = if level.len() == 1 {
            "1 module".to_owned()
        } else {
            format!("{} modules", level.len())
        };
        let _ = writeln!(out, "Level {i} ({count}):");
        for m in level {
            match deps.get(m.as_str()) {
                None => {
                    let _ = writeln!(out, "  {}", printable(m));
                }
                Some(to) => {
                    // The last segment of each, unless two of them share it (prod's and
                    // stage's `vpc`): those keep their whole id.
                    let last = |t: &str| t.rsplit('/').next().unwrap_or(t).to_owned();
                    let names: Vec<String> = to
                        .iter()
                        .map(|t| {
                            let name = last(t);
                            if to.iter().filter(|o| last(o) == name).count() > 1 {
                                (*t).to_owned()
                            } else {
                                name
                            }
                        })
                        .collect();
                    let _ = writeln!(
                        out,
                        "  {}  (← {})",
                        printable(m),
                        printable(&names.join(", "))
                    );
                }
            }
        }
        out.push('\n');
    }
    for c in &view.cycles {
        let mut path: Vec<_> = c.iter().map(|m| printable(m)).collect();
        path.push(printable(&c[0]));
        let _ = writeln!(out, "Cycle: {}", path.join(" -> "));
    }
    out
}

/// `--stats`, TerraCi's figures: modules, edges, root modules (no dependencies), leaf
/// modules (no dependents), max and average depth (a module's level), cycles; then
/// terraci's: libraries, levels and the widest level.
pub fn render_stats(view: &GraphView) -> String {
    let deps = dependencies(view);
    let dependents = dependents(view);
    let targets: Vec<&ModuleView> = view.targets().collect();
    let roots = targets
        .iter()
        .filter(|m| !deps.contains_key(m.id.as_str()))
        .count();
    let leaves = targets
        .iter()
        .filter(|m| !dependents.contains_key(m.id.as_str()))
        .count();
    let placed: usize = view.levels.iter().map(Vec::len).sum();
    let depth_sum: usize = view
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| i * l.len())
        .sum();
    let average = if placed == 0 {
        0.0
    } else {
        depth_sum as f64 / placed as f64
    };
    let mut out = String::from("Dependency Graph Statistics:\n");
    let _ = writeln!(out, "  Total modules:     {}", targets.len());
    let _ = writeln!(out, "  Total edges:       {}", view.edges.len());
    let _ = writeln!(out, "  Root modules:      {roots} (no dependencies)");
    let _ = writeln!(out, "  Leaf modules:      {leaves} (no dependents)");
    let _ = writeln!(
        out,
        "  Max depth:         {}",
        view.levels.len().saturating_sub(1)
    );
    let _ = writeln!(out, "  Average depth:     {average:.2}");
    if view.cycles.is_empty() {
        out.push_str("  Cycles:            none\n");
    } else {
        let _ = writeln!(out, "  Cycles detected:   {} (WARNING!)", view.cycles.len());
    }
    let _ = writeln!(
        out,
        "  Libraries:         {}",
        view.modules.len() - targets.len()
    );
    let _ = writeln!(out, "  Levels:            {}", view.levels.len());
    let _ = writeln!(
        out,
        "  Widest level:      {}",
        view.levels.iter().map(Vec::len).max().unwrap_or(0)
    );
    if !view.cycles.is_empty() {
        out.push_str("\nCycles:\n");
        for (i, c) in view.cycles.iter().enumerate() {
            let path: Vec<_> = c.iter().map(|m| printable(m)).collect();
            let _ = writeln!(out, "  {}: {}", i + 1, path.join(" -> "));
        }
    }
    out
}
