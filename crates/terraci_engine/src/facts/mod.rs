//! Module facts: what terraci needs from a module's files, without spans.
//!
//! Input: [`fact_source`] of each file of a [`Module`]. Output: [`FileFacts`] per file and
//! the merged [`ModuleFacts`] per module: locals, variables, tfvars, the backend block,
//! `terraform_remote_state` blocks and `module` calls. Facts are `Eq` and span-free, so an
//! edit that changes no fact (a comment, whitespace, a resource) stops here.

pub mod cache;
mod json;

pub(crate) use json::literal as json_literal;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::parse::{fact_source, FactSource, SyntaxError};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Anchor, Code, Diagnostic, ItemPath};
use terraci_db::files::{File, FileKind, Module};
use terraci_db::syntax::{Expr, ExprKind, FactBlock, FactBody, FactItem, Name, NodeId, ObjectKey};

/// An attribute's expression and where it came from, shared: a module's merged facts
/// and everything evaluated from them hold the file's facts, not copies of them (at
/// 10,000 modules the copies were a quarter of a cold run's memory).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AttrExpr(Arc<AttrExprData>);

/// What an [`AttrExpr`] shares.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct AttrExprData {
    pub(crate) expr: Expr,
    pub(crate) file: File,
    pub(crate) item: ItemPath,
}

impl std::ops::Deref for AttrExpr {
    type Target = AttrExprData;
    fn deref(&self) -> &AttrExprData {
        &self.0
    }
}

impl From<AttrExprData> for AttrExpr {
    fn from(data: AttrExprData) -> Self {
        AttrExpr(Arc::new(data))
    }
}

impl AttrExpr {
    pub(crate) fn anchor(&self, node: NodeId) -> Anchor {
        Anchor {
            file: self.file,
            item: self.item.clone(),
            node,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct VariableFact {
    pub(crate) name: Name,
    pub(crate) default: Option<AttrExpr>,
    pub(crate) type_constraint: Option<Expr>,
}

/// `terraform { backend "TYPE" {...} }`, or `cloud {...}` as type `remote`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct BackendFact {
    pub kind: Name,
    /// The block body as an object expression.
    pub config: AttrExpr,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RemoteStateFact {
    pub(crate) name: Name,
    pub(crate) file: File,
    pub(crate) backend: Option<AttrExpr>,
    pub config: Option<AttrExpr>,
    pub(crate) workspace: Option<AttrExpr>,
    pub(crate) for_each: Option<AttrExpr>,
    pub(crate) count: Option<AttrExpr>,
}

impl RemoteStateFact {
    /// The attributes that say which state the block reads.
    pub(crate) fn attributes(&self) -> impl Iterator<Item = &AttrExpr> {
        [
            &self.for_each,
            &self.count,
            &self.backend,
            &self.config,
            &self.workspace,
        ]
        .into_iter()
        .flatten()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ModuleCallFact {
    pub(crate) name: Name,
    pub(crate) source: Option<AttrExpr>,
    pub(crate) count: Option<AttrExpr>,
    pub(crate) for_each: Option<AttrExpr>,
    /// The arguments that set the child's variables: every attribute but the
    /// meta-arguments, in source order.
    pub(crate) arguments: Vec<(Name, AttrExpr)>,
}

/// Attributes of a `module` block that are not input variables of the child.
pub(crate) const MODULE_META_ARGUMENTS: &[&str] = &[
    "source",
    "version",
    "count",
    "for_each",
    "providers",
    "depends_on",
];

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FileFacts {
    pub(crate) locals: Vec<(Name, AttrExpr)>,
    pub(crate) variables: Vec<VariableFact>,
    pub(crate) backend: Option<BackendFact>,
    pub(crate) remote_states: Vec<RemoteStateFact>,
    pub(crate) module_calls: Vec<ModuleCallFact>,
    /// Assignments of a tfvars file.
    pub(crate) tfvars: Vec<(Name, AttrExpr)>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// The facts of one file.
#[salsa::tracked(returns(ref))]
pub fn file_facts(db: &dyn Db, file: File) -> FileFacts {
    let mut facts = match cache::cached_facts(db, file) {
        Some(facts) => facts,
        None => extract(db, file),
    };
    // Kept for the whole run, one per file: no growth slack.
    facts.locals.shrink_to_fit();
    facts.variables.shrink_to_fit();
    facts.remote_states.shrink_to_fit();
    facts.module_calls.shrink_to_fit();
    for call in &mut facts.module_calls {
        call.arguments.shrink_to_fit();
    }
    facts.tfvars.shrink_to_fit();
    facts.diagnostics.shrink_to_fit();
    facts
}

/// [`file_facts`] from the file's text.
fn extract(db: &dyn Db, file: File) -> FileFacts {
    let kind = file.kind(db);
    let body_facts = |body| {
        if kind.is_vars() {
            tfvars_facts(file, body)
        } else {
            native_facts(file, body)
        }
    };
    let syntax_error = |err: SyntaxError| {
        let d = Diagnostic::error(Code::SyntaxError, err.message).with_file(file.path(db).as_str());
        match err.line {
            0 => d,
            line => d.at(line, err.column),
        }
    };
    match fact_source(db, file) {
        FactSource::Native(body) => body_facts(body),
        FactSource::Partial(body, err) => {
            // Spec 2.2: the module keeps what parsed.
            let mut facts = body_facts(body);
            facts.diagnostics.push(syntax_error(err));
            facts
        }
        FactSource::Json(value) => json::json_facts(file, kind, &value),
        FactSource::Error(err) => FileFacts {
            diagnostics: vec![syntax_error(err)],
            ..FileFacts::default()
        },
        FactSource::NotText(why) => {
            let path = file.path(db);
            // A git-crypt'd tfvars file usually holds secrets, not state locations: the
            // module is evaluated without it. A Terraform file that is not text is an
            // error: Terraform cannot load the module either, and its blocks (remote
            // states among them) are unknown.
            let d = if kind.is_vars() {
                Diagnostic::warning(
                    Code::BinaryFile,
                    format!("not a text file ({why}): encrypted (git-crypt?) or binary; the module is evaluated without its values"),
                )
            } else {
                Diagnostic::error(
                    Code::BinaryFile,
                    format!("not a text file ({why}): encrypted (git-crypt?) or binary; Terraform cannot load it either, and its blocks are not read"),
                )
            };
            FileFacts {
                diagnostics: vec![d.with_file(path.as_str())],
                ..FileFacts::default()
            }
        }
        FactSource::Unreadable => FileFacts::default(),
    }
}

fn item(block: &[&str], attr: &[&str]) -> ItemPath {
    ItemPath {
        block: block.iter().map(|s| Name::from(*s)).collect(),
        attr: attr.iter().map(|s| Name::from(*s)).collect(),
    }
}

fn block_path(block: &FactBlock) -> Vec<Name> {
    std::iter::once(block.ident.clone())
        .chain(block.labels.iter().cloned())
        .collect()
}

/// The attribute `attr` of `block` (`body`: the block's body), with where it came from.
fn attr_expr(file: File, block: &FactBlock, attr: &str, body: &FactBody) -> Option<AttrExpr> {
    let value = body.attribute(attr)?;
    Some(AttrExpr::from(AttrExprData {
        expr: value.clone(),
        file,
        item: ItemPath {
            block: block_path(block),
            attr: vec![attr.into()],
        },
    }))
}

fn tfvars_facts(file: File, body: FactBody) -> FileFacts {
    let mut facts = FileFacts::default();
    for entry in body.items {
        if let FactItem::Attribute(key, expr) = entry {
            let item = item(&[], &[&key]);
            facts
                .tfvars
                .push((key, AttrExpr::from(AttrExprData { expr, file, item })));
        }
    }
    facts
}

pub(crate) fn native_facts(file: File, body: FactBody) -> FileFacts {
    let mut facts = FileFacts::default();
    for structure in body.items {
        let FactItem::Block(block) = structure else {
            continue;
        };
        let labels: Vec<&str> = block.labels.iter().map(Name::as_str).collect();
        match (block.ident.as_str(), labels.as_slice()) {
            ("locals", []) => {
                for entry in block.body.items {
                    if let FactItem::Attribute(key, expr) = entry {
                        let item = item(&["locals"], &[&key]);
                        facts
                            .locals
                            .push((key, AttrExpr::from(AttrExprData { expr, file, item })));
                    }
                }
            }
            ("variable", [name]) => facts.variables.push(VariableFact {
                name: (*name).into(),
                default: attr_expr(file, &block, "default", &block.body),
                type_constraint: block.body.attribute("type").cloned(),
            }),
            ("terraform", []) => {
                for inner in block.body.blocks() {
                    let kind = match (inner.ident.as_str(), inner.labels.as_slice()) {
                        ("backend", [kind]) => kind.clone(),
                        ("cloud", []) => "remote".into(),
                        _ => continue,
                    };
                    facts.backend = Some(BackendFact {
                        kind,
                        config: AttrExpr::from(AttrExprData {
                            expr: inner.as_object(),
                            file,
                            item: ItemPath {
                                block: vec!["terraform".into()],
                                attr: vec![inner.ident.clone()],
                            },
                        }),
                    });
                }
            }
            ("data", ["terraform_remote_state", name]) => {
                let get = |attr: &str| attr_expr(file, &block, attr, &block.body);
                let config = get("config").or_else(|| {
                    block.body.blocks().find(|b| b.ident == "config").map(|b| {
                        AttrExpr::from(AttrExprData {
                            expr: b.as_object(),
                            file,
                            item: ItemPath {
                                block: block_path(&block),
                                attr: vec!["config".into()],
                            },
                        })
                    })
                });
                facts.remote_states.push(RemoteStateFact {
                    name: (*name).into(),
                    file,
                    backend: get("backend"),
                    config,
                    workspace: get("workspace"),
                    for_each: get("for_each"),
                    count: get("count"),
                });
            }
            ("module", [name]) => {
                let get = |attr: &str| attr_expr(file, &block, attr, &block.body);
                let arguments = block
                    .body
                    .attributes()
                    .filter(|(k, _)| !MODULE_META_ARGUMENTS.contains(k))
                    .filter_map(|(k, _)| Some((k.into(), get(k)?)))
                    .collect();
                facts.module_calls.push(ModuleCallFact {
                    name: (*name).into(),
                    source: get("source"),
                    count: get("count"),
                    for_each: get("for_each"),
                    arguments,
                })
            }
            _ => {}
        }
    }
    facts
}

/// Declarations by name, in name order: kept for the whole run per module (as
/// `BTreeMap`s, a module's five variables took a kilobyte).
pub(crate) type ByName<T> = terraci_db::sorted::SortedMap<Name, T>;

/// Everything a module declares, merged over its files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct ModuleFacts {
    pub(crate) locals: ByName<AttrExpr>,
    pub(crate) variables: ByName<VariableFact>,
    pub(crate) backend: Option<BackendFact>,
    /// Sorted by block name.
    pub(crate) remote_states: Vec<RemoteStateFact>,
    pub(crate) module_calls: Vec<ModuleCallFact>,
    /// tfvars layers, lowest priority first: `terraform.tfvars`, `terraform.tfvars.json`,
    /// then `*.auto.tfvars(.json)` in lexical order.
    pub(crate) tfvars: Vec<Vec<(Name, AttrExpr)>>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

fn is_override(name: &str) -> bool {
    let stem = name
        .strip_suffix(".tf.json")
        .or_else(|| name.strip_suffix(".tofu.json"))
        .or_else(|| name.strip_suffix(".tf"))
        .or_else(|| name.strip_suffix(".tofu"))
        .unwrap_or(name);
    stem == "override" || stem.ends_with("_override")
}

/// The merged facts of a module. Override files (`override.tf`, `*_override.tf`) are
/// applied after the others, in lexical order: a local, variable or backend they declare
/// replaces the original; a remote-state block's attributes replace those of the block
/// with the same name.
#[salsa::tracked(returns(ref))]
pub(crate) fn module_facts(db: &dyn Db, module: Module) -> ModuleFacts {
    let mut facts = ModuleFacts::default();
    // Merged in maps, kept as exact-length vectors.
    let mut declared = Declared::default();
    let mut overrides = Vec::new();
    let mut vars_files: Vec<(u8, &str, File)> = Vec::new();
    for &file in module.files(db) {
        let name = file.path(db).file_name().unwrap_or_default();
        match file.kind(db) {
            FileKind::VarsNative | FileKind::VarsJson => {
                let rank = match name {
                    "terraform.tfvars" => 0,
                    "terraform.tfvars.json" => 1,
                    _ => 2,
                };
                vars_files.push((rank, name, file));
            }
            _ if is_override(name) => overrides.push(file),
            _ => merge(&mut facts, &mut declared, file_facts(db, file), false),
        }
    }
    for file in overrides {
        merge(&mut facts, &mut declared, file_facts(db, file), true);
    }
    vars_files.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (_, _, file) in vars_files {
        let f = file_facts(db, file);
        facts.diagnostics.extend(f.diagnostics.iter().cloned());
        facts.tfvars.push(f.tfvars.clone());
    }
    facts.remote_states.sort_by(|a, b| a.name.cmp(&b.name));
    facts.locals = declared.locals.into();
    facts.variables = declared.variables.into();
    facts
}

/// A module's locals and variables while its files are merged.
#[derive(Default)]
struct Declared {
    locals: BTreeMap<Name, AttrExpr>,
    variables: BTreeMap<Name, VariableFact>,
}

fn merge(facts: &mut ModuleFacts, declared: &mut Declared, file: &FileFacts, is_override: bool) {
    for (name, e) in &file.locals {
        declared.locals.insert(name.clone(), e.clone());
    }
    for v in &file.variables {
        match declared.variables.get_mut(&v.name) {
            Some(existing) if is_override => {
                if v.default.is_some() {
                    existing.default = v.default.clone();
                }
                if v.type_constraint.is_some() {
                    existing.type_constraint = v.type_constraint.clone();
                }
            }
            _ => {
                declared.variables.insert(v.name.clone(), v.clone());
            }
        }
    }
    if file.backend.is_some() {
        facts.backend = file.backend.clone();
    }
    for rs in &file.remote_states {
        match facts.remote_states.iter_mut().find(|r| r.name == rs.name) {
            Some(existing) if is_override => {
                for (slot, new) in [
                    (&mut existing.backend, &rs.backend),
                    (&mut existing.config, &rs.config),
                    (&mut existing.workspace, &rs.workspace),
                    (&mut existing.for_each, &rs.for_each),
                    (&mut existing.count, &rs.count),
                ] {
                    if new.is_some() {
                        *slot = new.clone();
                    }
                }
            }
            _ => facts.remote_states.push(rs.clone()),
        }
    }
    facts.module_calls.extend(file.module_calls.iter().cloned());
    facts.diagnostics.extend(file.diagnostics.iter().cloned());
}

/// A literal string, if the expression is one (module `source`, `backend` names).
pub(crate) fn literal_string(expr: &Expr) -> Option<&str> {
    match &expr.kind {
        ExprKind::String(s) => Some(s),
        _ => None,
    }
}

/// The object entries of an object expression with identifier or literal keys.
pub(crate) fn object_entries(expr: &Expr) -> Vec<(&str, &Expr)> {
    match &expr.kind {
        ExprKind::Object(entries) => entries
            .iter()
            .filter_map(|(k, v)| match k {
                ObjectKey::Ident(s) => Some((s.as_str(), v)),
                ObjectKey::Expr(e) => literal_string(e).map(|s| (s, v)),
            })
            .collect(),
        _ => Vec::new(),
    }
}
