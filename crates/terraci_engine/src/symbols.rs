//! Symbols with positions: what an editor points at and what `unknown-remote-output`
//! checks.
//!
//! Input: a [`File`]'s text (native syntax; JSON files have none). Output: its
//! [`FileSymbols`] (the `output` blocks, the `backend`/`cloud` block, the
//! `terraform_remote_state` blocks and every `data.terraform_remote_state.X...outputs.Y`
//! read, each with its byte range), and per root module the `unknown-remote-output`
//! diagnostics ([`unknown_remote_outputs`]) and what its remote-state blocks resolved to
//! ([`remote_state_links`]). Invalidated by the file's text, and for the check by the
//! module's resolution and the owner's files. Nothing here is on a cold run's path but
//! the check, which parses only modules with a resolved remote-state edge, and of their
//! owners only the files that hold the word `output`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use hcl_edit::expr::{Expression, Traversal, TraversalOperator};
use hcl_edit::structure::{Block, Body};
use hcl_edit::visit::{self, Visit};
use hcl_edit::Span as _;

use crate::parse::{label_str, line_col, parse_native, ParsedFile};
use crate::resolve::{module_summary, resolved_dependencies};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::files::{File, FileKind, Module, Project};

/// A named block and where it is: the whole block, and its name (the last label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedBlock {
    pub name: String,
    pub range: Range<usize>,
    pub name_range: Range<usize>,
}

/// `data.terraform_remote_state.X.outputs.Y` (or `X[...]`, `outputs["Y"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRead {
    /// The block name `X`.
    pub block: String,
    /// `Y`; `None` when the map is used whole or through a dynamic key.
    pub output: Option<String>,
    /// The whole traversal.
    pub range: Range<usize>,
    /// The output name's (`Y`, or the traversal's when there is none).
    pub output_range: Range<usize>,
}

/// The symbols of one native Terraform file, in source order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSymbols {
    pub outputs: Vec<NamedBlock>,
    /// `terraform { backend "TYPE" {...} }` or `cloud {...}`; the name is the type (or
    /// `cloud`).
    pub backend: Option<NamedBlock>,
    pub remote_states: Vec<NamedBlock>,
    pub output_reads: Vec<OutputRead>,
}

/// The symbols of `file`; empty for JSON files and unreadable ones. A file with a syntax
/// error gives those of the top-level blocks that parse.
#[salsa::tracked(returns(ref))]
pub fn file_symbols(db: &dyn Db, file: File) -> FileSymbols {
    if file.kind(db) != FileKind::Native {
        return FileSymbols::default();
    }
    let Some(text) = file.contents(db).text() else {
        return FileSymbols::default();
    };
    symbols_of(&text)
}

/// [`file_symbols`] of a text.
pub fn symbols_of(text: &str) -> FileSymbols {
    let mut out = FileSymbols::default();
    let ParsedFile::Native(tree) = parse_native(text, false) else {
        return out;
    };
    collect(&tree.body, &mut out);
    out
}

fn named(block: &Block, name: &str) -> NamedBlock {
    let range = block.span().unwrap_or(0..0);
    let name_range = block
        .labels
        .last()
        .and_then(|l| l.span())
        .or_else(|| block.ident.span())
        .unwrap_or_else(|| range.clone());
    NamedBlock {
        name: name.to_owned(),
        range,
        name_range,
    }
}

fn collect(body: &Body, out: &mut FileSymbols) {
    for block in body.blocks() {
        let labels: Vec<&str> = block.labels.iter().map(label_str).collect();
        match (block.ident.as_str(), labels.as_slice()) {
            ("output", [name]) => out.outputs.push(named(block, name)),
            ("data", ["terraform_remote_state", name]) => {
                out.remote_states.push(named(block, name));
            }
            ("terraform", []) => {
                for inner in block.body.blocks() {
                    match (inner.ident.as_str(), inner.labels.first()) {
                        ("backend", Some(kind)) => {
                            out.backend = Some(named(inner, label_str(kind)));
                        }
                        ("cloud", None) => out.backend = Some(named(inner, "cloud")),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let mut reads = Reads(Vec::new());
    reads.visit_body(body);
    out.output_reads = reads.0;
}

/// Finds the remote-state output reads of a body.
struct Reads(Vec<OutputRead>);

impl Visit for Reads {
    fn visit_traversal(&mut self, node: &Traversal) {
        if let Some(read) = output_read(node) {
            self.0.push(read);
        }
        visit::visit_traversal(self, node);
    }
}

fn output_read(node: &Traversal) -> Option<OutputRead> {
    let Expression::Variable(root) = &node.expr else {
        return None;
    };
    if root.as_str() != "data" {
        return None;
    }
    let range = node.span()?;
    let mut ops = node.operators.iter().map(|op| &**op).peekable();
    let attr = |op: Option<&TraversalOperator>| match op {
        Some(TraversalOperator::GetAttr(name)) => Some(name.as_str().to_owned()),
        _ => None,
    };
    if attr(ops.next())? != "terraform_remote_state" {
        return None;
    }
    let block = attr(ops.next())?;
    // An instance of a block with `count` or `for_each`.
    if matches!(
        ops.peek(),
        Some(TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_))
    ) {
        ops.next();
    }
    if attr(ops.next())? != "outputs" {
        return None;
    }
    let (output, output_range) = match ops.next() {
        Some(TraversalOperator::GetAttr(name)) => (
            Some(name.as_str().to_owned()),
            name.span().unwrap_or(range.clone()),
        ),
        Some(TraversalOperator::Index(Expression::String(key))) => (
            Some(key.as_str().to_owned()),
            key.span().unwrap_or(range.clone()),
        ),
        _ => (None, range.clone()),
    };
    Some(OutputRead {
        block,
        output,
        range,
        output_range,
    })
}

/// The module the state read by each of `module`'s own remote-state blocks belongs to,
/// by block name, with the rule that matched; only blocks every instance of which
/// resolved to one module.
pub fn resolved_owners(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> BTreeMap<String, (String, &'static str)> {
    let resolved = resolved_dependencies(db, project, module);
    let mut owners: BTreeMap<String, BTreeSet<(String, &'static str)>> = BTreeMap::new();
    for (target, sources) in &resolved.edges {
        for s in sources {
            if s.anchor.is_some() && s.via.is_empty() {
                owners
                    .entry(block_name(&s.name).to_owned())
                    .or_default()
                    .insert((target.clone(), s.rule.as_str()));
            }
        }
    }
    // A block some instance of which did not resolve (or resolved elsewhere) is unsure.
    let unsure: BTreeSet<&str> = resolved
        .diagnostics
        .iter()
        .filter_map(
            |d| match d.anchor.as_ref().map(|a| a.item.block.as_slice()) {
                Some([data, kind, name]) if data == "data" && kind == "terraform_remote_state" => {
                    Some(name.as_str())
                }
                _ => None,
            },
        )
        .chain(resolved.external.iter().map(|(_, s)| block_name(&s.name)))
        .collect();
    owners
        .into_iter()
        .filter(|(name, _)| !unsure.contains(name.as_str()))
        .filter_map(|(name, set)| {
            let mut set = set.into_iter();
            let one = set.next()?;
            set.next().is_none().then_some((name, one))
        })
        .collect()
}

/// The modules `module` depends on (found and declared edges), in id order.
pub fn dependencies_of(db: &dyn Db, project: Project, module: Module) -> Vec<String> {
    resolved_dependencies(db, project, module)
        .edges
        .keys()
        .cloned()
        .collect()
}

/// `peers["eks"]` -> `peers`.
fn block_name(instance: &str) -> &str {
    instance.split('[').next().unwrap_or(instance)
}

/// What one remote-state block of a module resolved to, for an editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStateLink {
    /// The instance: `vpc`, `peers["eks"]`.
    pub instance: String,
    /// The state location as evaluated: the state path, else the identity's fields.
    pub location: Option<String>,
    pub owner: Option<String>,
    pub rule: Option<&'static str>,
    /// Why there is no owner: the diagnostics that point into the block.
    pub why: Vec<String>,
}

/// Every instance of the remote-state block `name` of `module` (its own, not those read
/// through module calls), with its evaluated location and owner.
pub fn remote_state_links(
    db: &dyn Db,
    project: Project,
    module: Module,
    name: &str,
) -> Vec<RemoteStateLink> {
    let resolved = resolved_dependencies(db, project, module);
    let summary = module_summary(db, project, module);
    let mut out = Vec::new();
    let Some(root) = &summary.root else {
        return out;
    };
    for r in &root.references.references {
        if !r.via.is_empty() || block_name(&r.name) != name {
            continue;
        }
        let location = r.target.path.clone().or_else(|| {
            r.target.identity.as_ref().map(|i| {
                let fields: Vec<String> =
                    i.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{} {}", i.backend, fields.join(" "))
            })
        });
        let (owner, rule) = resolved
            .edges
            .iter()
            .find_map(|(target, sources)| {
                sources
                    .iter()
                    .find(|s| s.name == r.name && s.via.is_empty() && s.anchor.is_some())
                    .map(|s| (target.clone(), s.rule.as_str()))
            })
            .unzip();
        let why = resolved
            .diagnostics
            .iter()
            .filter(|d| d.anchor.as_ref() == Some(&r.anchor))
            .map(|d| format!("{}: {}", d.code.as_str(), d.message))
            .chain(
                r.unresolved
                    .iter()
                    .map(|d| format!("{}: {}", d.code.as_str(), d.message)),
            )
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        out.push(RemoteStateLink {
            instance: r.name.clone(),
            location,
            owner,
            rule,
            why,
        });
    }
    out
}

/// The root module with id `id`.
pub fn root_module(db: &dyn Db, project: Project, id: &str) -> Option<Module> {
    let roots = crate::chunk::roots(db, project);
    let at = roots.ids.binary_search_by(|m| m.as_str().cmp(id)).ok()?;
    roots.modules.get(at).copied()
}

/// The names of the `output` blocks of `module`, in name order; `None` when they cannot
/// all be known: the text of one of its Terraform files is not at hand (unreadable, or
/// changed on disk since discovery read it), or it has a JSON file (whose outputs are not
/// read here), so that no output is taken for missing.
pub fn module_outputs(db: &dyn Db, module: Module) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for &file in module.files(db) {
        match file.kind(db) {
            FileKind::Native => {}
            FileKind::Json => return None,
            FileKind::VarsNative | FileKind::VarsJson => continue,
        }
        out.extend(file_output_names(db, file).as_ref()?.iter().cloned());
    }
    Some(out)
}

/// The names of a native file's top-level `output` blocks, found in its text without a
/// parse ([`scan_output_names`]); `None` when its text is not at hand.
#[salsa::tracked(returns(ref))]
pub fn file_output_names(db: &dyn Db, file: File) -> Option<Vec<String>> {
    let text = file.contents(db).text()?;
    Some(scan_output_names(&text))
}

/// A native file's `data.terraform_remote_state.X...outputs.Y` reads, found in its text
/// without a parse ([`scan_output_reads`]); empty when its text is not at hand.
#[salsa::tracked(returns(ref))]
pub fn file_output_reads(db: &dyn Db, file: File) -> Vec<OutputRead> {
    match file.contents(db).text() {
        Some(text) => scan_output_reads(&text),
        None => Vec::new(),
    }
}

/// The labels of the `output "NAME" {` blocks that open a line (top-level blocks do, in
/// any formatted file), outside comments and strings.
pub fn scan_output_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, in_code) in code_positions(text, b"output") {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        if !in_code || !text[line_start..at].trim().is_empty() {
            continue;
        }
        let rest = text[at + "output".len()..].trim_start_matches([' ', '\t']);
        let Some(rest) = rest.strip_prefix('"') else {
            continue;
        };
        let Some(end) = rest.find('"') else {
            continue;
        };
        out.push(rest[..end].to_owned());
    }
    out
}

/// Every `data.terraform_remote_state.X` traversal outside comments and string text
/// (interpolations count) that goes on to `.outputs`: `X[...]` and `X.N` instances,
/// then `.Y` or `["Y"]` (the output), or anything else (no output: the map whole or a
/// dynamic key).
pub fn scan_output_reads(text: &str) -> Vec<OutputRead> {
    const ROOT: &[u8] = b"data.terraform_remote_state.";
    let bytes = text.as_bytes();
    let ident = |from: usize| {
        let len = bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-')
            .count();
        (len > 0).then(|| (text[from..from + len].to_owned(), from + len))
    };
    let mut out = Vec::new();
    for (start, in_code) in code_positions(text, ROOT) {
        let before = start.checked_sub(1).map(|i| bytes[i]);
        if !in_code || before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
            continue;
        }
        let Some((block, mut at)) = ident(start + ROOT.len()) else {
            continue;
        };
        // An instance: `[key]` (balanced) or `.0`.
        if bytes.get(at) == Some(&b'[') {
            let Some(close) = closing_bracket(bytes, at) else {
                continue;
            };
            at = close + 1;
        } else if bytes.get(at) == Some(&b'.') && bytes.get(at + 1).is_some_and(u8::is_ascii_digit)
        {
            at += 1 + bytes[at + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
        }
        let Some(rest) = text[at..].strip_prefix(".outputs") else {
            continue;
        };
        at = text.len() - rest.len();
        if bytes
            .get(at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            continue;
        }
        let named = match bytes.get(at) {
            Some(b'.') => ident(at + 1).map(|(name, end)| (name, at + 1, end)),
            Some(b'[') if bytes.get(at + 1) == Some(&b'"') => {
                let key = &text[at + 2..];
                let end = key
                    .find('"')
                    .filter(|&e| !key[..e].contains(['$', '%', '\\']));
                end.filter(|&e| bytes.get(at + 2 + e + 1) == Some(&b']'))
                    .map(|e| (key[..e].to_owned(), at + 2, at + 2 + e + 2))
            }
            _ => None,
        };
        let (output, output_range, end) = match named {
            Some((name, from, end)) => (Some(name), from..end, end),
            None => (None, start..at, at),
        };
        out.push(OutputRead {
            block,
            output,
            range: start..end,
            output_range,
        });
    }
    out
}

/// The index of the `]` that closes the `[` at `open`, skipping strings.
fn closing_bracket(bytes: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut i) = (0usize, false, open);
    while i < bytes.len() {
        match (bytes[i], in_string) {
            (b'\\', true) => i += 1,
            (b'"', _) => in_string = !in_string,
            (b'[', false) => depth += 1,
            (b']', false) => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            (b'\n', _) => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The byte offsets where `needle` starts in `text`, each with whether it is code: not
/// in a comment (`#`, `//`, `/* */`) nor in the literal text of a string or heredoc
/// (inside `${ }` is code).
fn code_positions<'t>(text: &'t str, needle: &'t [u8]) -> impl Iterator<Item = (usize, bool)> + 't {
    let bytes = text.as_bytes();
    let mut found = memchr::memmem::find_iter(bytes, needle).peekable();
    // States: code; a string, with the interpolation depth of the code around it.
    let mut i = 0;
    let mut strings: Vec<usize> = Vec::new(); // for each open string: brace depth inside its `${`
    let mut braces = 0usize;
    let mut in_string = false;
    std::iter::from_fn(move || {
        let &next = found.peek()?;
        while i < next {
            let b = bytes[i];
            if in_string {
                match b {
                    b'\\' => i += 1,
                    b'"' => in_string = false,
                    b'$' if bytes.get(i + 1) == Some(&b'{') => {
                        strings.push(braces);
                        braces = 0;
                        in_string = false;
                        i += 1;
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            match b {
                b'#' => i = line_end(bytes, i),
                b'/' if bytes.get(i + 1) == Some(&b'/') => i = line_end(bytes, i),
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    i = memchr::memmem::find(&bytes[i + 2..], b"*/")
                        .map_or(bytes.len(), |e| i + 2 + e + 2);
                }
                b'"' => {
                    in_string = true;
                    i += 1;
                }
                b'{' => {
                    braces += 1;
                    i += 1;
                }
                b'}' => {
                    match (braces, strings.pop()) {
                        // The end of an interpolation: back in its string.
                        (0, Some(outer)) => {
                            braces = outer;
                            in_string = true;
                        }
                        (0, None) => {}
                        (_, popped) => {
                            braces -= 1;
                            strings.extend(popped);
                        }
                    }
                    i += 1;
                }
                _ => i += 1,
            }
        }
        found.next();
        // Skipped past it (a comment or string swallowed it): not code.
        let code = i == next && !in_string;
        Some((next, code))
    })
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    memchr::memchr(b'\n', &bytes[from..]).map_or(bytes.len(), |e| from + e)
}

/// `unknown-remote-output`: each `data.terraform_remote_state.X.outputs.Y` of `module`'s
/// own files where `X` resolved to one module that declares no `output "Y"`, pointed at
/// `Y`, with the closest declared name as a hint. Blocks that did not resolve, and
/// `outputs` used whole or through a dynamic key, are not checked.
#[salsa::tracked(returns(ref))]
pub fn unknown_remote_outputs(db: &dyn Db, project: Project, module: Module) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let owners = resolved_owners(db, project, module);
    if owners.is_empty() {
        return out;
    }
    let id = &module.info(db).id;
    let mut declared: BTreeMap<&str, Option<BTreeSet<String>>> = BTreeMap::new();
    for &file in module.files(db) {
        let Some(text) = file.contents(db).text() else {
            continue;
        };
        if memchr::memmem::find(text.as_bytes(), b"terraform_remote_state").is_none() {
            continue;
        }
        for read in file_output_reads(db, file) {
            let (Some(output), Some((owner, _))) = (&read.output, owners.get(&read.block)) else {
                continue;
            };
            let names = declared
                .entry(owner.as_str())
                .or_insert_with(|| module_outputs(db, root_module(db, project, owner)?));
            let Some(names) = names else {
                continue;
            };
            if names.contains(output) {
                continue;
            }
            let hint = match closest(output, names) {
                Some(near) => format!(" (hint: the closest output there is `{near}`)"),
                None => " (it declares no outputs)".to_owned(),
            };
            let (line, column) = line_col(&text, read.output_range.start);
            let mut d = Diagnostic::warning(
                Code::UnknownRemoteOutput,
                format!(
                    "`data.terraform_remote_state.{}.outputs.{output}`: the module `{owner}`, which owns that state, has no `output \"{output}\"`{hint}",
                    read.block
                ),
            )
            .with_module(id.clone())
            .with_file(file.path(db).as_str());
            d.line = Some(line);
            d.column = Some(column);
            out.push(d);
        }
    }
    out
}

/// Every `unknown-remote-output` of the project's root modules.
pub fn project_unknown_remote_outputs(db: &dyn Db, project: Project) -> Vec<Diagnostic> {
    crate::chunk::roots(db, project)
        .modules
        .iter()
        .flat_map(|&m| unknown_remote_outputs(db, project, m).iter().cloned())
        .collect()
}

/// The declared name nearest to `name` by edit distance (the first in name order on a
/// tie).
fn closest<'a>(name: &str, names: &'a BTreeSet<String>) -> Option<&'a str> {
    names
        .iter()
        .min_by_key(|n| terraci_db::config::edit_distance(name, n))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(text: &str) -> Vec<(String, Option<String>)> {
        symbols_of(text)
            .output_reads
            .into_iter()
            .map(|r| (r.block, r.output))
            .collect()
    }

    /// Reads in every kind of expression: attribute, string, instance, whole, dynamic, for.
    const READS: &str = r#"
locals {
  a = data.terraform_remote_state.vpc.outputs.vpc_id
  b = "${data.terraform_remote_state.vpc.outputs["subnet"]}"
  c = data.terraform_remote_state.peers["x"].outputs.id
  d = data.terraform_remote_state.vpc.outputs
  e = data.terraform_remote_state.vpc.outputs[var.k]
  f = [for s in data.terraform_remote_state.db.outputs.list : s]
"#;

    #[test]
    fn output_reads_are_found_in_every_expression() {
        let text = &format!("{READS}}}\n");
        let owned = |b: &str, o: Option<&str>| (b.to_owned(), o.map(str::to_owned));
        assert_eq!(
            reads(text),
            vec![
                owned("vpc", Some("vpc_id")),
                owned("vpc", Some("subnet")),
                owned("peers", Some("id")),
                owned("vpc", None),
                owned("vpc", None),
                owned("db", Some("list")),
            ]
        );
    }

    #[test]
    fn the_scan_finds_the_reads_the_parser_finds_and_none_in_comments_or_strings() {
        let text = &format!(
            "{READS}{}",
            r#"  # g = data.terraform_remote_state.vpc.outputs.old
  h = "data.terraform_remote_state.vpc.outputs.text" /* data.terraform_remote_state.x.outputs.y */
  i = data.terraform_remote_state.peers.0.outputs.id // data.terraform_remote_state.z.outputs.w
}
"#
        );
        let scanned: Vec<(String, Option<String>)> = scan_output_reads(text)
            .into_iter()
            .map(|r| (r.block, r.output))
            .collect();
        assert_eq!(scanned, reads(text));
        let at = scan_output_reads(text)[0].output_range.clone();
        assert_eq!(&text[at], "vpc_id");
    }

    #[test]
    fn output_names_are_the_blocks_that_open_a_line() {
        let text = "output \"a\" {\n  value = 1\n}\n# output \"b\" {}\n  output   \"c\" {\n}\nx = \"output \\\"d\\\"\"\n";
        assert_eq!(scan_output_names(text), ["a", "c"]);
    }

    #[test]
    fn a_half_typed_file_keeps_the_blocks_that_parse() {
        let text = "output \"id\" {\n  value = 1\n}\n\nresource \"x\" \"y\" {\n  a = \n";
        let symbols = symbols_of(text);
        assert_eq!(symbols.outputs.len(), 1);
        assert_eq!(symbols.outputs[0].name, "id");
    }
}
