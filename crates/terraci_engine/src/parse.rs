//! Parsing: file text -> syntax tree (with spans), and lowering to the span-free [`Expr`].
//!
//! Input: a [`File`] input's contents. Output: [`ParsedFile`]. [`crate::facts::file_facts`]
//! reads a file through [`fact_source`] and keeps only the facts; [`parsed_file`]
//! (`no_eq`) keeps a tree for [`locate`], computed only for files a diagnostic points
//! into. Native files are skimmed first ([`skim`]): top-level blocks that hold no fact
//! never reach a parser. What remains goes to [`fast`], which lowers the common syntax
//! straight into a [`FactBody`], and what it declines to hcl-edit.
//! Lowering assigns [`NodeId`]s in pre-order and records each node's byte span, so
//! [`locate`] can turn a diagnostic's node id back into a line and column.
//! What Terraform accepts and hcl-edit refuses (a byte order mark, a repeated object
//! key) is rewritten into text of the same length first, so spans stay valid; a file with
//! a syntax error keeps the top-level blocks that parse without it ([`recover`]).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use hcl_edit::expr::{Expression, ObjectKey as HclObjectKey, TraversalOperator};
use hcl_edit::structure::{Block, BlockLabel, Body, Structure};
use hcl_edit::template::{Directive, Element, Template};
use hcl_edit::Span;

use terraci_db::db::Db;
use terraci_db::diagnostic::{Anchor, ItemPath};
use terraci_db::files::{File, FileContents, FileKind};
use terraci_db::syntax::{
    BinaryOp, Expr, ExprKind, ForExpr, Name, NodeId, Num, ObjectKey, TemplatePart, Traverser,
    UnaryOp,
};
// Kept here too: the fast parser (`fast`) builds the same bodies.
pub(crate) use terraci_db::syntax::{number_nodes, FactBlock, FactBody, FactItem};

mod fast;
mod skim;

/// A syntax error with its 1-based position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParsedFile {
    /// Native syntax.
    Native(Arc<NativeTree>),
    /// JSON syntax (`*.tf.json`, `*.tfvars.json`).
    Json(Arc<serde_json::Value>),
    Error(SyntaxError),
    /// Not text (invalid UTF-8, or a NUL byte where parsing failed): an encrypted or
    /// binary file. Why, with the position of the first bad byte.
    NotText(String),
    /// Unreadable: the discovery diagnostic already reported it.
    Unreadable,
}

/// A native file's syntax tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NativeTree {
    pub(crate) body: Body,
    /// Object keys that repeat an earlier key of their object, which Terraform accepts
    /// (the later value wins) and hcl-edit refuses: each was replaced in the text given to
    /// hcl-edit by a placeholder of the same length, so spans are unchanged. Lowering puts
    /// the key back. (byte offset, the key as written), in the order they were found.
    renamed_keys: Vec<(usize, String)>,
    /// The file's syntax error, when the tree holds only the top-level blocks that parse
    /// without it (see [`recover`]).
    pub(crate) error: Option<SyntaxError>,
}

/// The parse tree of `file`, or its syntax error, kept for [`locate`].
///
/// Fact extraction does not read this query: it calls [`parse_file`] and drops the tree
/// once the facts are out, so a cold run never holds every syntax tree at once. Only a
/// file with something to point at (a diagnostic, an edge's source line) is parsed again
/// here, and that tree is the same because parsing is deterministic.
#[salsa::tracked(returns(ref), no_eq)]
pub(crate) fn parsed_file(db: &dyn Db, file: File) -> ParsedFile {
    parse_file(db, file)
}

/// Parses `file` outside any memo (see [`parsed_file`]).
pub(crate) fn parse_file(db: &dyn Db, file: File) -> ParsedFile {
    let contents = file.contents(db);
    match contents {
        FileContents::Text(_) | FileContents::Unread(_) => {
            // An unread file is read now; one that changed since is as if unreadable.
            let Some(text) = contents.text() else {
                return ParsedFile::Unreadable;
            };
            let text = &*text;
            let parsed = match file.kind(db) {
                FileKind::Native => parse_native(text, true),
                FileKind::VarsNative => parse_native(text, false),
                FileKind::Json | FileKind::VarsJson => match serde_json::from_str(text) {
                    Ok(v) => ParsedFile::Json(Arc::new(v)),
                    Err(e) => ParsedFile::Error(SyntaxError {
                        line: e.line() as u32,
                        column: e.column() as u32,
                        message: format!("invalid JSON: {e}"),
                    }),
                },
            };
            or_not_text(parsed, text)
        }
        FileContents::NotUtf8 { line, column } => {
            ParsedFile::NotText(format!("invalid UTF-8 at {line}:{column}"))
        }
        FileContents::Unreadable(_) => ParsedFile::Unreadable,
    }
}

/// `parsed`, or [`ParsedFile::NotText`] for valid UTF-8 that did not parse and holds a
/// NUL byte (which no Terraform file does): looked for only once parsing failed, so text
/// files cost nothing.
fn or_not_text(parsed: ParsedFile, text: &str) -> ParsedFile {
    let failed = match &parsed {
        ParsedFile::Error(_) => true,
        ParsedFile::Native(tree) => tree.error.is_some(),
        _ => false,
    };
    match text.find('\0').filter(|_| failed) {
        Some(at) => {
            let (line, column) = line_col(text, at);
            ParsedFile::NotText(format!("a NUL byte at {line}:{column}"))
        }
        None => parsed,
    }
}

/// Parses native syntax. With `skim`, top-level blocks that hold no fact are blanked out
/// first (see [`skim`]); offsets and lines are unchanged, so the tree's spans are valid
/// against `text`.
pub(crate) fn parse_native(text: &str, skim: bool) -> ParsedFile {
    match prepare(text, skim) {
        Ok(prepared) => parse_prepared(&prepared),
        Err(err) => ParsedFile::Error(err),
    }
}

/// A UTF-8 byte order mark. Terraform skips one at the start of a native file (and
/// counts no column for it); JSON files with one are an error in Terraform too.
const BOM: &str = "\u{feff}";

/// The text the parsers are given for a native file.
struct Prepared<'a> {
    text: Cow<'a, str>,
    /// The file starts with a byte order mark, blanked in `text` into three spaces (the
    /// same bytes, so spans are unchanged).
    bom: bool,
}

/// The text hcl-edit is given for `text`: the byte order mark blanked, skimmed (with
/// `skim`), after the nesting check.
fn prepare(text: &str, skim: bool) -> Result<Prepared<'_>, SyntaxError> {
    // hcl-edit's parser recurses per nesting level; deeply nested input must not overflow
    // the stack, so pathological nesting is refused before parsing.
    if let Some(err) = nesting_too_deep(text, 200) {
        return Err(err);
    }
    let (text, bom) = match text.strip_prefix(BOM) {
        Some(rest) => (Cow::Owned(format!("   {rest}")), true),
        None => (Cow::Borrowed(text), false),
    };
    let skimmed = if skim { skim::skim(&text) } else { None };
    Ok(Prepared {
        text: skimmed.map_or(text, Cow::Owned),
        bom,
    })
}

fn parse_prepared(prepared: &Prepared<'_>) -> ParsedFile {
    match parse_tree(&prepared.text) {
        Ok(tree) => ParsedFile::Native(Arc::new(tree)),
        Err(e) => {
            let loc = e.location();
            let mut column = loc.column() as u32;
            if prepared.bom && loc.line() == 1 {
                // The three blanks stand for a mark Terraform gives no column.
                column = column.saturating_sub(3).max(1);
            }
            let error = SyntaxError {
                line: loc.line() as u32,
                column,
                message: e.message().to_owned(),
            };
            match recover(&prepared.text, loc.offset()) {
                Some(tree) => ParsedFile::Native(Arc::new(NativeTree {
                    error: Some(error),
                    ..tree
                })),
                None => ParsedFile::Error(error),
            }
        }
    }
}

/// Parses a file with a syntax error after `offset` cost at most this many more parses.
const MAX_RECOVERY_PARSES: usize = 16;

/// The top-level blocks of `text` (which does not parse: the error is at `offset`) that
/// parse without the damaged ones, or `None` when none do. A top-level block starts on a
/// line that starts with an identifier; the part of the file around the error is blanked
/// (spaces, line breaks kept, so spans and positions are unchanged) and the rest parsed
/// again. An error in a part already blanked means the damage lies before it (an
/// unclosed bracket), so the part before is blanked next.
fn recover(text: &str, mut offset: usize) -> Option<NativeTree> {
    let b = text.as_bytes();
    let starts: Vec<usize> = std::iter::once(0)
        .chain((1..b.len()).filter(|&i| b[i - 1] == b'\n' && skim::is_ident_start(b[i])))
        .collect();
    let mut blanked = vec![false; starts.len()];
    let mut out = b.to_vec();
    for _ in 0..MAX_RECOVERY_PARSES {
        let at = starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let part = (0..=at).rev().find(|&k| !blanked[k])?;
        blanked[part] = true;
        if blanked.iter().all(|&b| b) {
            return None;
        }
        let end = starts.get(part + 1).copied().unwrap_or(b.len());
        for c in &mut out[starts[part]..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        // Parts start and end at line starts: what is left is still UTF-8.
        let rest = std::str::from_utf8(&out).ok()?;
        match parse_tree(rest) {
            Ok(tree) => return Some(tree),
            Err(e) => offset = e.location().offset(),
        }
    }
    None
}

/// How many duplicate object keys a file may have before the first one left is a
/// syntax error: each costs a parse of the whole file.
const MAX_RENAMED_KEYS: usize = 64;

/// hcl-edit's tree of `text`, with duplicate object keys accepted as Terraform accepts
/// them (see [`NativeTree::renamed_keys`]).
fn parse_tree(text: &str) -> Result<NativeTree, hcl_edit::parser::Error> {
    let mut text = Cow::Borrowed(text);
    let mut renamed_keys: Vec<(usize, String)> = Vec::new();
    // Placeholders tried at the offset of the last renamed key.
    let mut attempt = 0;
    loop {
        let err = match hcl_edit::parser::parse_body(&text) {
            Ok(body) => {
                return Ok(NativeTree {
                    body,
                    renamed_keys,
                    error: None,
                })
            }
            Err(err) => err,
        };
        let offset = err.location().offset();
        if !err.message().contains("redefined object key") || renamed_keys.len() >= MAX_RENAMED_KEYS
        {
            return Err(err);
        }
        // A placeholder that happens to equal another key of the object is refused at the
        // same offset: the next one is tried.
        match renamed_keys.last() {
            Some((at, _)) if *at == offset => attempt += 1,
            _ => attempt = 0,
        }
        let Some(original) = rename_key(text.to_mut(), offset, attempt) else {
            return Err(err);
        };
        if attempt == 0 {
            renamed_keys.push((offset, original));
        }
    }
}

/// Replaces the object key at `offset` (an identifier, or a quoted string without
/// interpolation) by the `attempt`-th placeholder of the same length, one letter repeated
/// (never a keyword). Returns the key as written, or `None` for a key of another form or
/// when the placeholders are used up.
fn rename_key(text: &mut String, offset: usize, attempt: usize) -> Option<String> {
    const LETTERS: &[u8] = b"qxzjkvwyubcdfghlmnprstaeio";
    let letter = char::from(*LETTERS.get(attempt)?);
    let rest = text.get(offset..)?.as_bytes();
    let (len, inner) = match *rest.first()? {
        b'"' => {
            let mut i = 1;
            loop {
                match *rest.get(i)? {
                    b'"' => break,
                    b'\\' => i += 2,
                    b'\n' => return None,
                    b'{' if matches!(rest[i - 1], b'$' | b'%') => return None,
                    _ => i += 1,
                }
            }
            (i + 1, 1..i)
        }
        c if skim::is_ident_start(c) => {
            let len = rest
                .iter()
                .position(|&c| !skim::is_ident_continue(c))
                .unwrap_or(rest.len());
            (len, 0..len)
        }
        _ => return None,
    };
    if inner.is_empty() {
        return None;
    }
    let original = text[offset..offset + len].to_owned();
    let at = offset + inner.start..offset + inner.end;
    let placeholder: String = std::iter::repeat_n(letter, at.len()).collect();
    text.replace_range(at, &placeholder);
    Some(original)
}

/// What fact extraction reads from a file: [`ParsedFile`] with a native body as a
/// [`FactBody`].
pub(crate) enum FactSource {
    Native(FactBody),
    /// The blocks that parse, in a file with a syntax error.
    Partial(FactBody, SyntaxError),
    Json(Arc<serde_json::Value>),
    Error(SyntaxError),
    NotText(String),
    Unreadable,
}

/// The facts' view of `file`. Native text is first given to [`fast::parse`], which
/// handles the common syntax directly; whatever it declines (or what does not parse) goes
/// through hcl-edit as before, so the outcome is the same either way (the differential
/// tests compare both paths).
pub(crate) fn fact_source(db: &dyn Db, file: File) -> FactSource {
    let kind = file.kind(db);
    if let (Some(text), FileKind::Native | FileKind::VarsNative) = (file.contents(db).text(), kind)
    {
        let text = &*text;
        let parsed = match prepare(text, kind == FileKind::Native) {
            Ok(prepared) => match fast::parse(&prepared.text) {
                Some(body) => return FactSource::Native(body),
                None => parse_prepared(&prepared),
            },
            Err(err) => ParsedFile::Error(err),
        };
        return FactSource::from(or_not_text(parsed, text));
    }
    FactSource::from(parse_file(db, file))
}

impl From<ParsedFile> for FactSource {
    fn from(parsed: ParsedFile) -> Self {
        match parsed {
            ParsedFile::Native(tree) => match &tree.error {
                None => FactSource::Native(lower_tree(&tree)),
                Some(err) => FactSource::Partial(lower_tree(&tree), err.clone()),
            },
            ParsedFile::Json(value) => FactSource::Json(value),
            ParsedFile::Error(err) => FactSource::Error(err),
            ParsedFile::NotText(why) => FactSource::NotText(why),
            ParsedFile::Unreadable => FactSource::Unreadable,
        }
    }
}

/// Lowers an hcl-edit body (the fact tree is the ground crate's; its lowering is here).
#[cfg(test)]
pub(crate) fn lower_hcl(body: &Body) -> FactBody {
    lower_body(body, &[])
}

/// Lowers a file's tree.
pub(crate) fn lower_tree(tree: &NativeTree) -> FactBody {
    lower_body(&tree.body, &tree.renamed_keys)
}

fn lower_body(body: &Body, renamed_keys: &[(usize, String)]) -> FactBody {
    FactBody {
        items: body
            .iter()
            .map(|s| match s {
                Structure::Attribute(a) => FactItem::Attribute(
                    a.key.as_str().into(),
                    Lowerer::new(renamed_keys).expr(&a.value),
                ),
                Structure::Block(b) => FactItem::Block(FactBlock {
                    ident: b.ident.as_str().into(),
                    labels: b.labels.iter().map(|l| label_str(l).into()).collect(),
                    body: lower_body(&b.body, renamed_keys),
                }),
            })
            .collect(),
    }
}

fn nesting_too_deep(text: &str, limit: usize) -> Option<SyntaxError> {
    // A file with at most `limit` opening brackets cannot nest deeper; only a file with
    // more is scanned, strings and comments aware. The count goes by runs of 255 bytes
    // into a `u8`, which the compiler counts 32 bytes at a time (into a `usize` it took 3
    // instructions a byte: 5% of a cold run's).
    let openers = text
        .as_bytes()
        .chunks(255)
        .map(|run| {
            let count: u8 = run
                .iter()
                .map(|&b| u8::from(matches!(b, b'(' | b'[' | b'{')))
                .sum();
            usize::from(count)
        })
        .sum::<usize>();
    if openers <= limit {
        return None;
    }
    let at = skim::too_deep(text, limit)?;
    let (line, column) = line_col(text, at);
    Some(SyntaxError {
        line,
        column,
        message: format!("nesting deeper than {limit} levels"),
    })
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (u32, u32) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_text = &before[line_start..];
    // A byte order mark takes no column (as in Terraform).
    let line_text = match line_start {
        0 => line_text.strip_prefix(BOM).unwrap_or(line_text),
        _ => line_text,
    };
    let column = line_text.chars().count() as u32 + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The line and column of an anchored node, looked up in the current parse tree.
pub fn locate(db: &dyn Db, anchor: &Anchor) -> Option<(u32, u32)> {
    locate_in(db, anchor, parsed_file(db, anchor.file))
}

/// [`locate`] for many anchors at once (the sources of every edge) without keeping a tree
/// per file in the database: the files are parsed outside any memo and only the last few
/// trees are kept, since anchors come grouped by module. At 10,000 modules the memo of
/// every file with an edge was 310 MB of `graph --format json`'s 700 MB.
#[derive(Default)]
pub struct Locator {
    recent: Vec<(File, ParsedFile)>,
}

impl Locator {
    /// How many trees are kept: more than a module's files with anchors, usually.
    const KEEP: usize = 8;

    pub fn locate(&mut self, db: &dyn Db, anchor: &Anchor) -> Option<(u32, u32)> {
        let at = match self.recent.iter().position(|(f, _)| *f == anchor.file) {
            Some(at) => at,
            None => {
                if self.recent.len() == Self::KEEP {
                    self.recent.remove(0);
                }
                self.recent.push((anchor.file, parse_file(db, anchor.file)));
                self.recent.len() - 1
            }
        };
        locate_in(db, anchor, &self.recent[at].1)
    }
}

fn locate_in(db: &dyn Db, anchor: &Anchor, parsed: &ParsedFile) -> Option<(u32, u32)> {
    let text = anchor.file.contents(db).text()?;
    let text = &*text;
    match parsed {
        ParsedFile::Native(tree) => {
            let spans = item_spans(tree, &anchor.item)?;
            let span = spans.get(anchor.node.0 as usize).cloned().flatten()?;
            Some(line_col(text, span.start))
        }
        ParsedFile::Json(_) => json_position(text, &anchor.item),
        _ => None,
    }
}

/// JSON has no spans in the tree: point at the first occurrence of the innermost key.
fn json_position(text: &str, item: &ItemPath) -> Option<(u32, u32)> {
    let mut from = 0;
    for key in item.block.iter().chain(&item.attr) {
        let needle = format!("\"{key}\"");
        from += text[from..].find(&needle)?;
    }
    Some(line_col(text, from))
}

fn block_matches(block: &Block, path: &[Name]) -> bool {
    let Some((ident, labels)) = path.split_first() else {
        return false;
    };
    block.ident.as_str() == ident
        && block.labels.len() == labels.len()
        && block
            .labels
            .iter()
            .zip(labels)
            .all(|(l, want)| label_str(l) == want)
}

pub(crate) fn label_str(label: &BlockLabel) -> &str {
    match label {
        BlockLabel::Ident(i) => i.as_str(),
        BlockLabel::String(s) => s.as_str(),
    }
}

fn item_spans(tree: &NativeTree, item: &ItemPath) -> Option<Vec<Option<Range<usize>>>> {
    let block = tree
        .body
        .iter()
        .filter_map(|s| match s {
            Structure::Block(b) => Some(b),
            _ => None,
        })
        .find(|b| block_matches(b, &item.block))?;
    let mut body = &block.body;
    let (last, nested) = item.attr.split_last()?;
    for name in nested {
        body = &body.blocks().find(|b| b.ident.as_str() == name)?.body;
    }
    let mut lowerer = Lowerer::new(&tree.renamed_keys);
    if let Some(attr) = body.get_attribute(last) {
        lowerer.expr(&attr.value);
    } else {
        let b = body.blocks().find(|b| b.ident.as_str() == last)?;
        lowerer.block_as_object(b);
    }
    Some(lowerer.spans)
}

/// Lowers one attribute expression; ids start at 0.
pub(crate) fn lower(expr: &Expression) -> Expr {
    Lowerer::default().expr(expr)
}

#[derive(Default)]
struct Lowerer<'k> {
    spans: Vec<Option<Range<usize>>>,
    /// See [`NativeTree::renamed_keys`].
    renamed_keys: &'k [(usize, String)],
}

impl<'k> Lowerer<'k> {
    fn new(renamed_keys: &'k [(usize, String)]) -> Self {
        Lowerer {
            spans: Vec::new(),
            renamed_keys,
        }
    }

    /// The key as written, if the key spanning `span` was renamed for hcl-edit.
    fn renamed(&self, span: Option<Range<usize>>) -> Option<&'k str> {
        let start = span?.start;
        let keys: &'k [(usize, String)] = self.renamed_keys;
        keys.iter()
            .find(|(at, _)| *at == start)
            .map(|(_, key)| key.as_str())
    }

    fn next(&mut self, span: Option<Range<usize>>) -> NodeId {
        let id = NodeId(self.spans.len() as u32);
        self.spans.push(span);
        id
    }

    fn block_as_object(&mut self, block: &Block) -> Expr {
        let id = self.next(block.span());
        let mut entries = Vec::new();
        for s in block.body.iter() {
            match s {
                Structure::Attribute(a) => {
                    entries.push((ObjectKey::Ident(a.key.as_str().into()), self.expr(&a.value)));
                }
                Structure::Block(b) => {
                    entries.push((
                        ObjectKey::Ident(b.ident.as_str().into()),
                        self.block_as_object(b),
                    ));
                }
            }
        }
        Expr {
            id,
            kind: ExprKind::Object(entries),
        }
    }

    fn expr(&mut self, e: &Expression) -> Expr {
        let id = self.next(e.span());
        let kind = match e {
            Expression::Null(_) => ExprKind::Null,
            Expression::Bool(b) => ExprKind::Bool(*b.value()),
            Expression::Number(n) => {
                ExprKind::Number(Num::new(n.value().as_f64().unwrap_or(f64::NAN)))
            }
            Expression::String(s) => ExprKind::String(s.value().as_str().into()),
            Expression::Array(items) => {
                ExprKind::Array(items.iter().map(|i| self.expr(i)).collect())
            }
            Expression::Object(obj) => {
                let mut entries = Vec::new();
                for (k, v) in obj.iter() {
                    let key = match k {
                        HclObjectKey::Ident(i) => {
                            ObjectKey::Ident(self.renamed(i.span()).unwrap_or(i.as_str()).into())
                        }
                        HclObjectKey::Expression(e) => {
                            let mut key = self.expr(e);
                            // A renamed quoted key: the string as written, unescaped.
                            if let Some(Ok(original)) =
                                self.renamed(e.span()).map(hcl_edit::parser::parse_expr)
                            {
                                key.kind = lower(&original).kind;
                            }
                            ObjectKey::Expr(key)
                        }
                    };
                    entries.push((key, self.expr(v.expr())));
                }
                ExprKind::Object(entries)
            }
            Expression::StringTemplate(t) => self.template_kind(t),
            Expression::HeredocTemplate(h) => {
                let mut h = (**h).clone();
                if h.indent().is_some() {
                    h.dedent();
                }
                self.template_kind(&h.template)
            }
            Expression::Parenthesis(p) => ExprKind::Paren(Box::new(self.expr(p.inner()))),
            Expression::Variable(v) => ExprKind::Variable(v.as_str().into()),
            Expression::Conditional(c) => ExprKind::Conditional(
                Box::new(self.expr(&c.cond_expr)),
                Box::new(self.expr(&c.true_expr)),
                Box::new(self.expr(&c.false_expr)),
            ),
            Expression::FuncCall(f) => {
                let mut name = Name::default();
                for ns in &f.name.namespace {
                    name.push_str(ns.as_str());
                    name.push_str("::");
                }
                name.push_str(f.name.name.as_str());
                terraci_db::syntax::Call::kind(
                    name,
                    f.args.iter().map(|a| self.expr(a)).collect(),
                    f.args.expand_final(),
                )
            }
            Expression::Traversal(t) => {
                let root = self.expr(&t.expr);
                let ops = t
                    .operators
                    .iter()
                    .map(|op| match op.value() {
                        TraversalOperator::AttrSplat(_) => Traverser::AttrSplat,
                        TraversalOperator::FullSplat(_) => Traverser::FullSplat,
                        TraversalOperator::GetAttr(i) => Traverser::Attr(i.as_str().into()),
                        TraversalOperator::Index(e) => Traverser::Index(self.expr(e)),
                        TraversalOperator::LegacyIndex(i) => Traverser::LegacyIndex(*i.value()),
                    })
                    .collect();
                ExprKind::Traversal(Box::new(root), ops)
            }
            Expression::UnaryOp(u) => {
                let op = match u.operator.value() {
                    hcl_edit::expr::UnaryOperator::Neg => UnaryOp::Neg,
                    hcl_edit::expr::UnaryOperator::Not => UnaryOp::Not,
                };
                ExprKind::Unary(op, Box::new(self.expr(&u.expr)))
            }
            Expression::BinaryOp(b) => {
                use hcl_edit::expr::BinaryOperator as B;
                let op = match b.operator.value() {
                    B::Eq => BinaryOp::Eq,
                    B::NotEq => BinaryOp::NotEq,
                    B::LessEq => BinaryOp::LessEq,
                    B::GreaterEq => BinaryOp::GreaterEq,
                    B::Less => BinaryOp::Less,
                    B::Greater => BinaryOp::Greater,
                    B::Plus => BinaryOp::Plus,
                    B::Minus => BinaryOp::Minus,
                    B::Mul => BinaryOp::Mul,
                    B::Div => BinaryOp::Div,
                    B::Mod => BinaryOp::Mod,
                    B::And => BinaryOp::And,
                    B::Or => BinaryOp::Or,
                };
                ExprKind::Binary(
                    op,
                    Box::new(self.expr(&b.lhs_expr)),
                    Box::new(self.expr(&b.rhs_expr)),
                )
            }
            Expression::ForExpr(f) => ExprKind::For(Box::new(ForExpr {
                key_var: f.intro.key_var.as_ref().map(|k| k.as_str().into()),
                value_var: f.intro.value_var.as_str().into(),
                collection: self.expr(&f.intro.collection_expr),
                key_expr: f.key_expr.as_ref().map(|k| self.expr(k)),
                value_expr: self.expr(&f.value_expr),
                cond: f.cond.as_ref().map(|c| self.expr(&c.expr)),
                grouping: f.grouping,
            })),
        };
        Expr { id, kind }
    }

    fn template_kind(&mut self, t: &Template) -> ExprKind {
        let parts = self.template(t);
        match parts.as_slice() {
            [] => ExprKind::String(Name::default()),
            [TemplatePart::Literal(s)] => ExprKind::String(s.clone()),
            _ => ExprKind::Template(parts),
        }
    }

    /// A template's parts, with Terraform's `~` strip markers applied to the neighbouring
    /// literals and adjacent literals merged.
    fn template(&mut self, t: &Template) -> Vec<TemplatePart> {
        // (part, strip whitespace before it, strip whitespace after it)
        let mut parts: Vec<(TemplatePart, bool, bool)> = Vec::new();
        for el in t.iter() {
            match el {
                Element::Literal(s) => parts.push((
                    TemplatePart::Literal(s.value().as_str().into()),
                    false,
                    false,
                )),
                Element::Interpolation(i) => parts.push((
                    TemplatePart::Interpolation(self.expr(&i.expr)),
                    i.strip.strip_start(),
                    i.strip.strip_end(),
                )),
                Element::Directive(d) => match &**d {
                    Directive::If(dir) => {
                        let cond = self.expr(&dir.if_expr.cond_expr);
                        let mut then = self.template(&dir.if_expr.template);
                        let mut otherwise = dir
                            .else_expr
                            .as_ref()
                            .map(|e| self.template(&e.template))
                            .unwrap_or_default();
                        if dir.if_expr.strip.strip_end() {
                            strip_first(&mut then);
                        }
                        match &dir.else_expr {
                            Some(e) => {
                                if e.strip.strip_start() {
                                    strip_last(&mut then);
                                }
                                if e.strip.strip_end() {
                                    strip_first(&mut otherwise);
                                }
                                if dir.endif_expr.strip.strip_start() {
                                    strip_last(&mut otherwise);
                                }
                            }
                            None => {
                                if dir.endif_expr.strip.strip_start() {
                                    strip_last(&mut then);
                                }
                            }
                        }
                        parts.push((
                            TemplatePart::If {
                                cond,
                                then,
                                otherwise,
                            },
                            dir.if_expr.strip.strip_start(),
                            dir.endif_expr.strip.strip_end(),
                        ));
                    }
                    Directive::For(dir) => {
                        let f = &dir.for_expr;
                        let collection = self.expr(&f.collection_expr);
                        let mut body = self.template(&f.template);
                        if f.strip.strip_end() {
                            strip_first(&mut body);
                        }
                        if dir.endfor_expr.strip.strip_start() {
                            strip_last(&mut body);
                        }
                        parts.push((
                            TemplatePart::For {
                                key_var: f.key_var.as_ref().map(|k| k.as_str().into()),
                                value_var: f.value_var.as_str().into(),
                                collection,
                                body,
                            },
                            f.strip.strip_start(),
                            dir.endfor_expr.strip.strip_end(),
                        ));
                    }
                },
            }
        }
        finish_template(parts)
    }
}

/// A template's parts after Terraform's `~` strip markers: each part comes with whether
/// whitespace before it and after it is stripped from the neighbouring literals; then
/// adjacent literals are merged and empty ones dropped.
pub(crate) fn finish_template(mut parts: Vec<(TemplatePart, bool, bool)>) -> Vec<TemplatePart> {
    for i in 0..parts.len() {
        let (before, after) = (parts[i].1, parts[i].2);
        if before && i > 0 {
            if let TemplatePart::Literal(s) = &mut parts[i - 1].0 {
                *s = s.trim_end().into();
            }
        }
        if after && i + 1 < parts.len() {
            if let TemplatePart::Literal(s) = &mut parts[i + 1].0 {
                *s = s.trim_start().into();
            }
        }
    }
    let mut out: Vec<TemplatePart> = Vec::with_capacity(parts.len());
    for (part, _, _) in parts {
        match (out.last_mut(), part) {
            (Some(TemplatePart::Literal(prev)), TemplatePart::Literal(s)) => prev.push_str(&s),
            (_, TemplatePart::Literal(s)) if s.is_empty() => {}
            (_, part) => out.push(part),
        }
    }
    out
}

fn strip_first(parts: &mut [TemplatePart]) {
    if let Some(TemplatePart::Literal(s)) = parts.first_mut() {
        *s = s.trim_start().into();
    }
}

fn strip_last(parts: &mut [TemplatePart]) {
    if let Some(TemplatePart::Literal(s)) = parts.last_mut() {
        *s = s.trim_end().into();
    }
}

/// Parses and lowers template text that exists only at evaluation time (the contents of a
/// `templatefile` file, a `templatestring` argument). Node ids point into that text.
pub(crate) fn parse_template_text(
    text: &str,
) -> Result<Vec<TemplatePart>, hcl_edit::parser::Error> {
    let template = hcl_edit::parser::parse_template(text)?;
    Ok(Lowerer::default().template(&template))
}

/// Parses and lowers one expression written as text (tests, `-var` values).
pub fn parse_expr_text(text: &str) -> Result<Expr, hcl_edit::parser::Error> {
    let expr = hcl_edit::parser::parse_expr(text)?;
    Ok(lower(&expr))
}

/// Lowers a template parsed from a JSON string (`"${local.a}/b"`).
pub(crate) fn lower_template(template: &Template) -> Expr {
    let mut lowerer = Lowerer::default();
    let id = lowerer.next(None);
    Expr {
        id,
        kind: lowerer.template_kind(template),
    }
}

/// What discovery needs to know of a Terraform file before any query runs: the literal
/// `source` of each of its module calls, and its `backend "<type>"` or `cloud` block.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FileOutline {
    pub(crate) sources: Vec<String>,
    /// `backend "s3"` or `cloud`.
    pub(crate) backend: Option<String>,
}

/// The [`FileOutline`] of a Terraform file's text (a file that does not parse gives what
/// its parsed top-level blocks hold).
pub(crate) fn outline(text: &str, kind: FileKind) -> FileOutline {
    let mut out = FileOutline::default();
    match kind {
        FileKind::Native => {
            let body = match prepare(text, true) {
                Ok(prepared) => match fast::parse(&prepared.text) {
                    Some(body) => body,
                    None => match parse_prepared(&prepared) {
                        ParsedFile::Native(tree) => lower_tree(&tree),
                        _ => return out,
                    },
                },
                Err(_) => return out,
            };
            for block in body.blocks() {
                match block.ident.as_str() {
                    "module" => {
                        if let Some(source) =
                            block.body.attribute("source").and_then(|e| match &e.kind {
                                ExprKind::String(s) => Some(s),
                                _ => None,
                            })
                        {
                            out.sources.push(source.to_string());
                        }
                    }
                    "terraform" => {
                        for inner in block.body.blocks() {
                            match inner.ident.as_str() {
                                "backend" => {
                                    let kind = inner.labels.first().map_or("", |l| l.as_str());
                                    out.backend = Some(format!("backend \"{kind}\""));
                                }
                                "cloud" => out.backend = Some("cloud".to_owned()),
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        FileKind::Json => {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
                return out;
            };
            // `module` is an object of calls, or a list of such objects.
            let groups = |v: Option<&serde_json::Value>| -> Vec<serde_json::Value> {
                match v {
                    Some(serde_json::Value::Array(items)) => items.clone(),
                    Some(v) => vec![v.clone()],
                    None => Vec::new(),
                }
            };
            for group in groups(value.get("module")) {
                let Some(calls) = group.as_object() else {
                    continue;
                };
                for call in calls.values() {
                    for call in groups(Some(call)) {
                        if let Some(source) = call.get("source").and_then(|s| s.as_str()) {
                            out.sources.push(source.to_owned());
                        }
                    }
                }
            }
            for terraform in groups(value.get("terraform")) {
                for backend in groups(terraform.get("backend")) {
                    if let Some(kind) = backend.as_object().and_then(|o| o.keys().next()) {
                        out.backend = Some(format!("backend \"{kind}\""));
                    }
                }
                if terraform.get("cloud").is_some() {
                    out.backend = Some("cloud".to_owned());
                }
            }
        }
        FileKind::VarsNative | FileKind::VarsJson => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_attr(text: &str) -> Expression {
        let body = hcl_edit::parser::parse_body(text).unwrap();
        let value = body.attributes().next().unwrap().value.clone();
        value
    }

    #[test]
    fn nesting_limit_counts_depth_not_brackets() {
        let nested = |n: usize| format!("x = {}1{}\n", "[".repeat(n), "]".repeat(n));
        assert_eq!(nesting_too_deep(&nested(200), 200), None);
        let err = nesting_too_deep(&nested(201), 200).expect("201 levels are refused");
        assert_eq!((err.line, err.column), (1, 205));
        // Many brackets side by side are not deep.
        let wide = "x = [".to_owned() + &"[1], ".repeat(500) + "]\n";
        assert_eq!(nesting_too_deep(&wide, 200), None);
        // Brackets in strings and comments are text, not nesting.
        let text = format!(
            "x = \"{}\" # {}\n/* {} */\ny = 1 // {}\n",
            "{".repeat(300),
            "[".repeat(300),
            "(".repeat(300),
            "{".repeat(300)
        );
        assert_eq!(nesting_too_deep(&text, 200), None);
        // Interpolations nest: their brackets count.
        let text = format!("x = \"a${{{}1{}}}\"\n", "[".repeat(200), "]".repeat(200));
        let err = nesting_too_deep(&text, 200).expect("201 levels are refused");
        assert_eq!((err.line, err.column), (1, 208));
        // What the scanner does not understand counts bracket by bracket.
        let text = format!("x = \"unterminated {}\n", "{".repeat(201));
        assert!(nesting_too_deep(&text, 200).is_some());
        let text = format!("x = <<EOT\n{}\nEOT\n", "{".repeat(201));
        assert!(nesting_too_deep(&text, 200).is_some());
    }

    #[test]
    fn lowering_ignores_whitespace_and_comments() {
        let a = lower(&first_attr("x = \"${local.a}/b\"\n"));
        let b = lower(&first_attr("x   =   \"${ local.a }/b\" # note\n"));
        assert_eq!(a, b);
    }

    #[test]
    fn node_ids_are_preorder() {
        let e = lower(&first_attr("x = join(\"/\", [var.a, local.b])\n"));
        let ExprKind::FuncCall(call) = &e.kind else {
            panic!("{e:?}")
        };
        let args = &call.args;
        assert_eq!(e.id, NodeId(0));
        assert_eq!(args[0].id, NodeId(1));
        assert_eq!(args[1].id, NodeId(2));
        let ExprKind::Array(items) = &args[1].kind else {
            panic!()
        };
        // var.a is a traversal (3) over the variable `var` (4)
        assert_eq!(items[0].id, NodeId(3));
        assert_eq!(items[1].id, NodeId(5));
    }

    #[test]
    fn strip_markers_trim_neighbouring_literals_in_configuration_templates() {
        let e = lower(&first_attr("x = \"a  ${~ local.b ~}  c\"\n"));
        let ExprKind::Template(parts) = &e.kind else {
            panic!("{e:?}")
        };
        assert_eq!(parts.first(), Some(&TemplatePart::Literal("a".into())));
        assert_eq!(parts.last(), Some(&TemplatePart::Literal("c".into())));
    }

    /// The facts' view of native text, as [`fact_source`] builds it.
    fn fact_body(text: &str, skim: bool) -> Result<FactBody, SyntaxError> {
        let prepared = prepare(text, skim)?;
        if let Some(body) = fast::parse(&prepared.text) {
            return Ok(body);
        }
        match parse_prepared(&prepared) {
            ParsedFile::Native(tree) => match &tree.error {
                None => Ok(lower_tree(&tree)),
                Some(err) => Err(err.clone()),
            },
            ParsedFile::Error(err) => Err(err),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_byte_order_mark_is_skipped_with_no_column() {
        let text = "locals {\n  a = \"x\"\n}\nresource \"r\" \"x\" {}\n";
        for skim in [true, false] {
            let with_bom = fact_body(&format!("\u{feff}{text}"), skim);
            assert_eq!(with_bom, fact_body(text, skim));
            assert!(with_bom.is_ok());
        }
        // Terraform 1.11 reports this error at 1:14 with and without the mark.
        for text in ["\u{feff}locals { a = = 1 }\n", "locals { a = = 1 }\n"] {
            let err = fact_body(text, true).expect_err("a syntax error");
            assert_eq!((err.line, err.column), (1, 14), "{text:?}");
        }
        assert_eq!(line_col("\u{feff}ab", 4), (1, 2));
        assert_eq!(line_col("\u{feff}ab\ncd", 7), (2, 2));
    }

    /// The keys of the object assigned to the first attribute of the first block.
    fn object_keys(text: &str) -> Vec<String> {
        let body = fact_body(text, false).expect("parses");
        let FactItem::Attribute(_, e) = &body.blocks().next().expect("a block").body.items[0]
        else {
            panic!("{body:?}")
        };
        let ExprKind::Object(entries) = &e.kind else {
            panic!("{e:?}")
        };
        entries
            .iter()
            .map(|(k, _)| match k {
                ObjectKey::Ident(i) => i.as_str().to_owned(),
                ObjectKey::Expr(e) => format!("{:?}", e.kind),
            })
            .collect()
    }

    #[test]
    fn duplicate_object_keys_are_kept_in_order() {
        // Terraform 1.11 accepts these (`terraform validate`, `terraform console`), the
        // later value winning: `{ a = 1, a = 2 }` is `{ "a" = 2 }`.
        assert_eq!(
            object_keys("locals {\n  o = { a = 1, a = 2 }\n}\n"),
            ["a", "a"]
        );
        assert_eq!(
            object_keys(
                "locals {\n  o = {\n    a = \"first\"\n    b = 2\n    a = \"second\"\n  }\n}\n"
            ),
            ["a", "b", "a"]
        );
        // The first placeholder for `a` is `q`, taken: the next one is used.
        assert_eq!(
            object_keys("locals {\n  o = { q = 0, a = 1, a = 2, a = 3 }\n}\n"),
            ["q", "a", "a", "a"]
        );
        let quoted = r#"String("b\n")"#;
        assert_eq!(
            object_keys("locals {\n  o = { \"b\\n\" = 1, x = { y = 1 }, \"b\\n\" = 2 }\n}\n"),
            [quoted, "x", quoted]
        );
        // Positions after a renamed key are unchanged.
        let err = fact_body("locals {\n  o = { a = 1, a = 2 }\n  p = = 1\n}\n", true)
            .expect_err("a syntax error");
        assert_eq!((err.line, err.column), (3, 7));
        // A key that is neither an identifier nor a plain string is still refused.
        let err = fact_body("locals {\n  o = { \"${x}\" = 1, \"${x}\" = 2 }\n}\n", true)
            .expect_err("not renamed");
        assert!(err.message.contains("redefined object key"), "{err:?}");
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé d", 7), (2, 4));
        assert_eq!(line_col("x", 0), (1, 1));
    }
}
