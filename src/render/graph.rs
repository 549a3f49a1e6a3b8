//! Graph output formats: dot, plantuml, mermaid, list, levels, json (spec §8).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::json;

use crate::diagnostic::Diagnostic;
use crate::escape::printable;

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
    let mut value = json!({
        "modules": view.modules,
        "edges": view.edges,
        "levels": view.levels,
        "cycles": view.cycles,
        "diagnostics": view.diagnostics.iter().map(diagnostic_json).collect::<Vec<_>>(),
    });
    if !view.external_state.is_empty() {
        value["external_state"] = json!(view.external_state);
    }
    let mut s = serde_json::to_string_pretty(&value).expect("JSON of plain data");
    s.push('\n');
    s
}

pub fn diagnostic_json(d: &Diagnostic) -> serde_json::Value {
    json!({
        "severity": d.severity.as_str(),
        "code": d.code,
        "module": d.module,
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "message": d.message,
    })
}

pub fn render_dot(view: &GraphView) -> String {
    let q = |id: &str| dot_quoted(id);
    let mut out = String::from("digraph terraci {\n  rankdir=BT;\n  node [shape=box];\n");
    for m in view.targets() {
        let _ = writeln!(out, "  {};", q(&m.id));
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

pub fn render_plantuml(view: &GraphView) -> String {
    let aliases = Aliases::of(view);
    let mut out = String::from("@startuml\n");
    for m in view.targets() {
        let _ = writeln!(
            out,
            "rectangle \"{}\" as {}",
            plantuml_label(&m.id),
            aliases.get(&m.id)
        );
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
    out.push_str("@enduml\n");
    out
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
    let text = crate::escape::printable(id);
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A PlantUML label in `"..."`: quotes and backslashes as `<U+..>` code points, which
/// PlantUML prints as the character.
fn plantuml_label(id: &str) -> String {
    let mut out = String::new();
    for c in id.chars() {
        if c == '"' || c == '\\' || crate::escape::is_unsafe_char(c) {
            let _ = write!(out, "<U+{:04X}>", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// A Mermaid label in `["..."]`: quotes, markup and `#` as Mermaid's `#...;` entities,
/// line breaks and controls as `\u{..}` text.
pub(crate) fn mermaid_label(id: &str) -> String {
    let mut out = String::new();
    for c in crate::escape::printable(id).chars() {
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

/// One module per line with what it depends on (control characters in ids escaped: the
/// text is for a terminal).
pub fn render_list(view: &GraphView) -> String {
    let mut out = String::new();
    for m in view.targets() {
        let deps: Vec<_> = view
            .edges
            .iter()
            .filter(|e| e.from == m.id)
            .map(|e| printable(&e.to))
            .collect();
        if deps.is_empty() {
            let _ = writeln!(out, "{}", printable(&m.id));
        } else {
            let _ = writeln!(out, "{} -> {}", printable(&m.id), deps.join(", "));
        }
    }
    for m in view.libraries() {
        let users: Vec<_> = view
            .uses
            .iter()
            .filter(|(_, to)| *to == m.id)
            .map(|(from, _)| printable(from))
            .collect();
        if users.is_empty() {
            let _ = writeln!(out, "{} (library, unused)", printable(&m.id));
        } else {
            let _ = writeln!(
                out,
                "{} (library) <- {}",
                printable(&m.id),
                users.join(", ")
            );
        }
    }
    out
}

pub fn render_levels(view: &GraphView) -> String {
    let mut out = String::new();
    for (i, level) in view.levels.iter().enumerate() {
        let _ = writeln!(out, "Level {i}:");
        for m in level {
            let _ = writeln!(out, "  {}", printable(m));
        }
    }
    for c in &view.cycles {
        let mut path: Vec<_> = c.iter().map(|m| printable(m)).collect();
        path.push(printable(&c[0]));
        let _ = writeln!(out, "Cycle: {}", path.join(" -> "));
    }
    out
}

pub fn render_stats(view: &GraphView) -> String {
    let targets = view.targets().count();
    let libraries = view.modules.len() - targets;
    let roots = view
        .targets()
        .filter(|m| !view.edges.iter().any(|e| e.from == m.id))
        .count();
    let mut out = String::new();
    let _ = writeln!(out, "modules:     {targets}");
    let _ = writeln!(out, "libraries:   {libraries}");
    let _ = writeln!(out, "edges:       {}", view.edges.len());
    let _ = writeln!(out, "levels:      {}", view.levels.len());
    let _ = writeln!(out, "no deps:     {roots}");
    let _ = writeln!(out, "cycles:      {}", view.cycles.len());
    let _ = writeln!(
        out,
        "max width:   {}",
        view.levels.iter().map(Vec::len).max().unwrap_or(0)
    );
    out
}
