//! Resolution: module facts -> evaluated state references -> dependency edges.
//!
//! Input: [`module_facts`] of every module, the project's eval settings. Output, per
//! module: its [`StateIdentity`] (from its own backend block), its evaluated
//! [`StateReference`]s (one per `terraform_remote_state` instance), and the
//! [`ResolvedDependencies`] (edges + diagnostics) found by matching references against
//! every module (spec §4.3). Invalidated by the module's facts, and for matching by the
//! project's owners input (a copy of [`identity_index`] that [`sync_owners`] refreshes),
//! which changes only when some module's state identity or the module set changes.
//!
//! Filesystem functions (`file`, `templatefile`, `fileexists`, `fileset`) read through
//! on-demand salsa inputs ([`Db::extra_file`], [`Db::extra_dir`]), created by the database
//! through its `System` the first time an evaluation asks; a reference that reads a file
//! is invalidated by that file and nothing else (`Database::refresh_extra` re-reads them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use camino::Utf8Path;
use indexmap::IndexMap;

use crate::db::Db;
use crate::diagnostic::{Anchor, Diagnostic};
use crate::eval::{evaluate, EvalContext, EvalError, EvalHost, NoFilesystem, Value};
use crate::facts::expr::{visit, Expr, ExprKind, Traverser};
use crate::facts::{module_facts, AttrExpr, RemoteStateFact};
use crate::files::{FileContents, Module, Project};
use crate::system::normalize;

/// Evaluated values a module's expressions can see.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleScope {
    /// `var`, `local`, `path`, `terraform`.
    pub scope: BTreeMap<String, Value>,
    pub diagnostics: Vec<Diagnostic>,
    /// Locals whose evaluation failed (they are unknown in `scope`). Reported by the
    /// references that use them, so an unused broken local stays quiet.
    pub local_errors: BTreeMap<String, EvalError>,
}

/// The filesystem functions' view of the disk: every read goes through an on-demand salsa
/// input ([`Db::extra_file`], [`Db::extra_dir`]), so the query that evaluated `file(...)`
/// depends on that file and re-runs when it changes, and on nothing else.
struct TrackedFilesystem<'db> {
    db: &'db dyn Db,
    /// The project directory: messages name paths relative to it.
    root: &'db Utf8Path,
}

impl EvalHost for TrackedFilesystem<'_> {
    fn read_file(&self, path: &Utf8Path) -> Result<String, String> {
        let path = &normalize(path);
        let file = self.db.extra_file(path);
        let path = path.strip_prefix(self.root).unwrap_or(path);
        match file.contents(self.db) {
            Some(FileContents::Text(text)) => Ok(text.to_string()),
            Some(FileContents::NotUtf8 { line, column }) => Err(format!(
                "`{path}` is not valid UTF-8 (line {line}, column {column})"
            )),
            Some(FileContents::Unreadable(err)) => Err(format!("cannot read `{path}`: {err}")),
            None => Err(format!("no file `{path}`")),
        }
    }

    fn file_exists(&self, path: &Utf8Path) -> bool {
        self.db
            .extra_file(&normalize(path))
            .contents(self.db)
            .is_some()
    }

    fn list_files(&self, dir: &Utf8Path) -> Vec<String> {
        self.db.extra_dir(&normalize(dir)).files(self.db).clone()
    }
}

fn module_dir(db: &dyn Db, project: Project, module: Module) -> camino::Utf8PathBuf {
    project.root(db).join(&module.info(db).id)
}

/// Variables (defaults, tfvars, `--var-file`, `--var`) and locals, evaluated.
#[salsa::tracked(returns(ref))]
pub fn module_scope(db: &dyn Db, project: Project, module: Module) -> ModuleScope {
    let facts = module_facts(db, module);
    let dir = module_dir(db, project, module);
    let settings = project.eval_settings(db);
    let workspace = if settings.workspace.is_empty() {
        "default".to_owned()
    } else {
        settings.workspace.clone()
    };
    let mut scope = BTreeMap::new();
    scope.insert(
        "path".to_owned(),
        Value::Map(
            [
                ("module", dir.as_str()),
                ("root", dir.as_str()),
                ("cwd", dir.as_str()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
            .collect(),
        ),
    );
    scope.insert(
        "terraform".to_owned(),
        Value::Map(BTreeMap::from([(
            "workspace".to_owned(),
            Value::String(workspace),
        )])),
    );
    let mut diagnostics = Vec::new();
    let empty = BTreeMap::new();
    let ctx_for_literals = EvalContext {
        scope: &empty,
        module_dir: dir.clone(),
        host: &NoFilesystem,
    };

    // Variables: lowest priority first, later layers replace earlier ones.
    let cli = cli_variables(db, project);
    let mut vars = BTreeMap::new();
    for (name, var) in &facts.variables {
        let mut value: Option<Value> = var
            .default
            .as_ref()
            .map(|d| eval_or_unknown(&d.expr, &ctx_for_literals));
        for layer in &facts.tfvars {
            if let Some((_, e)) = layer.iter().rev().find(|(n, _)| n == name) {
                value = Some(eval_or_unknown(&e.expr, &ctx_for_literals));
            }
        }
        if let Some(e) = cli.get(name) {
            value = Some(eval_or_unknown(e, &ctx_for_literals));
        }
        let value = match value {
            Some(v) => match &var.type_constraint {
                Some(t) => crate::eval::convert_to_type(v.clone(), t).unwrap_or(v),
                None => v,
            },
            None => Value::unknown(format!(
                "`var.{name}` has no default, no tfvars value and no --var"
            )),
        };
        vars.insert(name.clone(), value);
    }
    scope.insert("var".to_owned(), Value::Map(vars));

    // Locals in dependency order; a cycle makes its members unknown.
    let deps: BTreeMap<&str, BTreeSet<String>> = facts
        .locals
        .iter()
        .map(|(name, e)| (name.as_str(), local_references(&e.expr)))
        .collect();
    let order = topo_order(&deps);
    let mut locals: BTreeMap<String, Value> = BTreeMap::new();
    let mut local_errors = BTreeMap::new();
    for name in &order.cyclic {
        let chain = order.cycle_chain(name);
        locals.insert(
            name.clone(),
            Value::unknown(format!("`local.{name}` refers to itself ({chain})")),
        );
        if let Some(e) = facts.locals.get(name.as_str()) {
            diagnostics.push(
                Diagnostic::error(
                    "local-cycle",
                    format!("`local.{name}` refers to itself: {chain}"),
                )
                .with_anchor(e.anchor(e.expr.id)),
            );
        }
    }
    // Each local sees the ones before it in the order: they are added to the scope's
    // `local` map in place as they are evaluated.
    scope.insert("local".to_owned(), Value::Map(locals));
    let host = TrackedFilesystem {
        db,
        root: project.root(db),
    };
    for name in &order.sorted {
        let Some(e) = facts.locals.get(name.as_str()) else {
            continue;
        };
        let ctx = EvalContext {
            scope: &scope,
            module_dir: dir.clone(),
            host: &host,
        };
        let v = match evaluate(&e.expr, &ctx) {
            Ok(v) => detach(v, &format!("local.{name}")),
            Err(err) => {
                let v = Value::unknown(format!("`local.{name}`: {}", err.message));
                local_errors.insert(name.clone(), err);
                v
            }
        };
        if let Some(Value::Map(locals)) = scope.get_mut("local") {
            locals.insert(name.clone(), v);
        }
    }
    ModuleScope {
        scope,
        diagnostics,
        local_errors,
    }
}

/// An unknown inside a stored value loses its node (it belongs to another expression),
/// and names the declaration it came through.
fn detach(v: Value, via: &str) -> Value {
    match v {
        Value::Unknown(mut u) => {
            if u.at.is_some() && !u.reason.contains(via) {
                u.reason = format!("`{via}` is unknown: {}", u.reason);
            }
            u.at = None;
            Value::Unknown(u)
        }
        Value::List(items) => Value::List(items.into_iter().map(|i| detach(i, via)).collect()),
        Value::Set(items) => Value::Set(items.into_iter().map(|i| detach(i, via)).collect()),
        Value::Map(m) => Value::Map(m.into_iter().map(|(k, i)| (k, detach(i, via))).collect()),
        other => other,
    }
}

fn eval_or_unknown(e: &Expr, ctx: &EvalContext<'_>) -> Value {
    evaluate(e, ctx).unwrap_or_else(|err| Value::unknown(err.message))
}

/// `--var-file` and `--var` assignments, parsed once per project.
#[salsa::tracked(returns(ref))]
pub fn cli_variables(db: &dyn Db, project: Project) -> BTreeMap<String, Expr> {
    let settings = project.eval_settings(db);
    let mut out = BTreeMap::new();
    for (name, text) in &settings.var_files {
        // The driver has already reported a file that does not parse.
        if let Ok(assignments) = var_file_assignments(name, text) {
            out.extend(assignments);
        }
    }
    for (name, raw) in &settings.vars {
        // Terraform reads `-var` values of complex types as HCL; a plain word is a string.
        let expr = match hcl_edit::parser::parse_expr(raw) {
            Ok(
                e @ (hcl_edit::expr::Expression::Array(_)
                | hcl_edit::expr::Expression::Object(_)
                | hcl_edit::expr::Expression::Number(_)
                | hcl_edit::expr::Expression::Bool(_)),
            ) => crate::parse::lower(&e),
            _ => Expr::string(Default::default(), raw.clone()),
        };
        out.insert(name.clone(), expr);
    }
    out
}

/// The locals a remote-state block reads, directly or through other locals.
fn locals_used_by(rs: &RemoteStateFact, locals: &BTreeMap<String, AttrExpr>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = [
        &rs.for_each,
        &rs.count,
        &rs.backend,
        &rs.config,
        &rs.workspace,
    ]
    .into_iter()
    .flatten()
    .flat_map(|a| local_references(&a.expr))
    .collect();
    while let Some(name) = stack.pop() {
        if let Some(attr) = locals.get(&name) {
            if seen.insert(name) {
                stack.extend(local_references(&attr.expr));
            }
        }
    }
    seen
}

/// The assignments of a `--var-file`: JSON syntax when the name ends in `.json` (as
/// Terraform decides), native syntax otherwise. The error names the position.
pub fn var_file_assignments(name: &str, text: &str) -> Result<Vec<(String, Expr)>, String> {
    if name.ends_with(".json") {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("{}:{}: {e}", e.line(), e.column()))?;
        let serde_json::Value::Object(top) = value else {
            return Err("1:1: a JSON variables file must hold an object".into());
        };
        return Ok(top
            .iter()
            .map(|(k, v)| (k.clone(), crate::facts::json_literal(v)))
            .collect());
    }
    let body = hcl_edit::parser::parse_body(text).map_err(|e| {
        format!(
            "{}:{}: {}",
            e.location().line(),
            e.location().column(),
            e.message()
        )
    })?;
    Ok(body
        .attributes()
        .map(|attr| {
            (
                attr.key.as_str().to_owned(),
                crate::parse::lower(&attr.value),
            )
        })
        .collect())
}

fn local_references(e: &Expr) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit(e, &mut |e| {
        if let ExprKind::Traversal(root, ops) = &e.kind {
            if let (ExprKind::Variable(v), Some(Traverser::Attr(name))) = (&root.kind, ops.first())
            {
                if v == "local" {
                    out.insert(name.clone());
                }
            }
        }
    });
    out
}

struct TopoOrder {
    sorted: Vec<String>,
    cyclic: Vec<String>,
    deps: BTreeMap<String, BTreeSet<String>>,
}

impl TopoOrder {
    /// `local.a -> local.b -> local.a` for a member of a cycle.
    fn cycle_chain(&self, start: &str) -> String {
        let mut chain = vec![start.to_owned()];
        let mut cur = start.to_owned();
        for _ in 0..self.deps.len() + 1 {
            let next = self
                .deps
                .get(&cur)
                .and_then(|d| d.iter().find(|n| self.cyclic.contains(n)))
                .cloned();
            let Some(next) = next else { break };
            chain.push(next.clone());
            if next == start || chain[..chain.len() - 1].contains(&next) {
                break;
            }
            cur = next;
        }
        chain
            .iter()
            .map(|n| format!("local.{n}"))
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

/// Kahn over locals; names left over are in or behind a cycle.
fn topo_order(deps: &BTreeMap<&str, BTreeSet<String>>) -> TopoOrder {
    let names: BTreeSet<&str> = deps.keys().copied().collect();
    let mut pending: BTreeMap<String, BTreeSet<String>> = deps
        .iter()
        .map(|(n, d)| {
            (
                (*n).to_owned(),
                d.iter()
                    .filter(|x| names.contains(x.as_str()))
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    let all = pending.clone();
    let mut sorted = Vec::new();
    loop {
        let ready: Vec<String> = pending
            .iter()
            .filter(|(_, d)| d.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        if ready.is_empty() {
            break;
        }
        for n in &ready {
            pending.remove(n);
        }
        for d in pending.values_mut() {
            for n in &ready {
                d.remove(n);
            }
        }
        sorted.extend(ready);
    }
    // What is left: cycle members, and locals that only depend on them. The latter are
    // evaluated after the members are set to unknown, so they report the cycle as reason.
    let mut cyclic = Vec::new();
    let mut behind = Vec::new();
    for name in pending.keys() {
        if reaches(&all, name, name) {
            cyclic.push(name.clone());
        } else {
            behind.push(name.clone());
        }
    }
    // Order the ones behind a cycle so their own dependencies come first.
    let mut ordered_behind: Vec<String> = Vec::new();
    while ordered_behind.len() < behind.len() {
        let before = ordered_behind.len();
        for n in &behind {
            if ordered_behind.contains(n) {
                continue;
            }
            let ok = all[n]
                .iter()
                .all(|d| !behind.contains(d) || ordered_behind.contains(d));
            if ok {
                ordered_behind.push(n.clone());
            }
        }
        if ordered_behind.len() == before {
            break;
        }
    }
    sorted.extend(ordered_behind);
    TopoOrder {
        sorted,
        cyclic,
        deps: all,
    }
}

fn reaches(deps: &BTreeMap<String, BTreeSet<String>>, from: &str, target: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = deps
        .get(from)
        .map(|d| d.iter().map(String::as_str).collect())
        .unwrap_or_default();
    while let Some(n) = stack.pop() {
        if n == target {
            return true;
        }
        if seen.insert(n) {
            if let Some(d) = deps.get(n) {
                stack.extend(d.iter().map(String::as_str));
            }
        }
    }
    false
}

/// A state location: backend type plus the identity fields of spec §4.2.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateIdentity {
    pub backend: String,
    pub fields: BTreeMap<String, String>,
    /// Some identity field is missing or unknown (e.g. supplied by `-backend-config`).
    pub partial: bool,
}

/// The identity fields of each backend type.
pub fn identity_fields(backend: &str) -> &'static [&'static str] {
    match backend {
        "s3" => &["bucket", "key"],
        "gcs" => &["bucket", "prefix"],
        "azurerm" => &["storage_account_name", "container_name", "key"],
        "consul" => &["path"],
        "http" => &["address"],
        "local" => &["path"],
        "pg" => &["conn_str", "schema_name"],
        "kubernetes" => &["secret_suffix", "namespace"],
        "remote" | "cloud" => &["organization", "workspace"],
        "oss" | "cos" => &["bucket", "prefix", "key"],
        _ => &[],
    }
}

/// The field that holds the state path used by the path and context rules.
fn path_field(backend: Option<&str>, config: &BTreeMap<String, Value>) -> Option<&'static str> {
    match backend {
        Some("s3" | "azurerm" | "oss" | "cos") => Some("key"),
        Some("gcs") => Some("prefix"),
        Some("local" | "consul") => Some("path"),
        Some("remote" | "cloud") => Some("workspace"),
        Some(_) => None,
        None => ["key", "prefix", "path"]
            .into_iter()
            .find(|f| config.contains_key(*f)),
    }
}

/// Flattens a backend/config object to the string fields the rules use. `remote`/`cloud`
/// keep `workspaces.name` as `workspace`.
fn flatten_config(backend: &str, value: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    let mut out = value.clone();
    if backend == "remote" || backend == "cloud" {
        if let Some(Value::Map(ws)) = value.get("workspaces") {
            if let Some(name) = ws.get("name") {
                out.insert("workspace".into(), name.clone());
            }
        }
    }
    if backend == "gcs" {
        if let Some(Value::String(p)) = out.get("prefix").cloned() {
            out.insert(
                "prefix".into(),
                Value::String(p.trim_end_matches('/').to_owned()),
            );
        }
    }
    out
}

/// `cloud` is the `remote` backend under another name (a `cloud {}` block is read as
/// `remote` too), so both sides of a match use one spelling.
fn canonical_backend(backend: &str) -> &str {
    match backend {
        "cloud" => "remote",
        other => other,
    }
}

/// Fills the identity fields a backend defaults when they are omitted, so that a module
/// and a reference that both leave one out still agree (values from each backend's docs).
fn with_defaults(backend: &str, mut config: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    let defaults: &[(&str, &str)] = match backend {
        "gcs" => &[("prefix", "")],
        "pg" => &[("schema_name", "terraform_remote_state")],
        "kubernetes" => &[("namespace", "default")],
        "local" => &[("path", "terraform.tfstate")],
        "oss" | "cos" => &[("prefix", "env:"), ("key", "terraform.tfstate")],
        _ => &[],
    };
    for (field, value) in defaults {
        config
            .entry((*field).to_owned())
            .or_insert_with(|| Value::String((*value).to_owned()));
    }
    config
}

fn identity_of(
    backend: &str,
    config: &BTreeMap<String, Value>,
    module_dir: &Utf8Path,
    root: &Utf8Path,
) -> StateIdentity {
    let config = flatten_config(backend, config);
    let mut fields = BTreeMap::new();
    let mut partial = false;
    for &f in identity_fields(backend) {
        match config.get(f) {
            Some(Value::String(s)) => {
                let v = if backend == "local" && f == "path" {
                    relative_to_root(&normalize(&module_dir.join(s)), root)
                } else {
                    s.clone()
                };
                fields.insert(f.to_owned(), v);
            }
            Some(Value::Number(n)) => {
                fields.insert(f.to_owned(), n.to_string());
            }
            _ => partial = true,
        }
    }
    if identity_fields(backend).is_empty() {
        partial = true;
    }
    StateIdentity {
        backend: backend.to_owned(),
        fields,
        partial,
    }
}

fn relative_to_root(path: &Utf8Path, root: &Utf8Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) => rel.as_str().to_owned(),
        Err(_) => path.as_str().to_owned(),
    }
}

/// The state identity of a module's own backend (spec §4.2).
#[salsa::tracked(returns(ref))]
pub fn state_identity(db: &dyn Db, project: Project, module: Module) -> StateIdentity {
    let facts = module_facts(db, module);
    let dir = module_dir(db, project, module);
    let root = project.root(db);
    let Some(backend) = &facts.backend else {
        return identity_of(
            "local",
            &BTreeMap::from([("path".to_owned(), Value::String("terraform.tfstate".into()))]),
            &dir,
            root,
        );
    };
    let scope = module_scope(db, project, module);
    let ctx = EvalContext {
        scope: &scope.scope,
        module_dir: dir.clone(),
        host: &TrackedFilesystem {
            db,
            root: project.root(db),
        },
    };
    let config = match evaluate(&backend.config.expr, &ctx) {
        Ok(Value::Map(m)) => m,
        _ => BTreeMap::new(),
    };
    let kind = canonical_backend(&backend.kind);
    identity_of(
        kind,
        &with_defaults(kind, flatten_config(kind, &config)),
        &dir,
        root,
    )
}

/// One evaluated `terraform_remote_state` instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateReference {
    /// `vpc`, or `peers["eks"]` for a `for_each` instance, `x[0]` for `count`.
    pub name: String,
    pub backend: Option<String>,
    /// The identity (complete only when the backend and all its fields are known).
    pub identity: Option<StateIdentity>,
    /// The state path (key / prefix / path), known; `None` for backends that have none
    /// (http, pg, kubernetes), which match by identity only.
    pub path: Option<String>,
    pub workspace: String,
    pub workspace_key_prefix: Option<String>,
    /// The config attribute, for pointing diagnostics at it.
    pub anchor: Anchor,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleReferences {
    pub references: Vec<StateReference>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Every `terraform_remote_state` instance of a module, evaluated.
#[salsa::tracked(returns(ref))]
pub fn module_references(db: &dyn Db, project: Project, module: Module) -> ModuleReferences {
    let facts = module_facts(db, module);
    let mut out = ModuleReferences::default();
    if facts.remote_states.is_empty() {
        return out;
    }
    let id = module.info(db).id.clone();
    let dir = module_dir(db, project, module);
    let root = project.root(db).clone();
    let scope = module_scope(db, project, module);
    let site = Site {
        id: &id,
        dir: &dir,
        root: &root,
        components: &module.info(db).components,
        locals: &facts.locals,
        host: &TrackedFilesystem {
            db,
            root: project.root(db),
        },
    };
    let mut reported = BTreeSet::new();
    for rs in &facts.remote_states {
        // A local that failed to evaluate (unknown function, evaluation limit...) is
        // reported at the local, once, when a reference depends on it.
        if !scope.local_errors.is_empty() {
            for name in locals_used_by(rs, &facts.locals) {
                if let (Some(err), Some(attr)) =
                    (scope.local_errors.get(&name), facts.locals.get(&name))
                {
                    if reported.insert(name.clone()) {
                        out.diagnostics.push(eval_error(&site, attr, err, &rs.name));
                    }
                }
            }
        }
        expand_remote_state(rs, &scope.scope, &site, &mut out);
    }
    out
}

fn unresolved(
    id: &str,
    attr: &AttrExpr,
    reason: &str,
    node: Option<crate::facts::expr::NodeId>,
    name: &str,
) -> Diagnostic {
    Diagnostic::warning(
        "unresolved-remote-state",
        format!(
            "cannot resolve the state location of `data.terraform_remote_state.{name}`: {}; no dependency edge is created",
            reason.trim_end_matches('.')
        ),
    )
    .with_module(id)
    .with_anchor(attr.anchor(node.unwrap_or(attr.expr.id)))
}

fn eval_error(site: &Site<'_>, attr: &AttrExpr, err: &EvalError, block: &str) -> Diagnostic {
    // TerraCi fills undeclared `local.<segment>` from the module's path. Terraform rejects
    // such a configuration, so terraci does not guess; it names every guess instead.
    let undeclared = err
        .message
        .strip_prefix("`local.")
        .and_then(|rest| rest.strip_suffix("` is not declared"));
    if undeclared.is_some_and(|name| site.components.contains_key(name)) {
        let used = local_references(&attr.expr);
        // In pattern order: service, environment, region...
        let guesses: Vec<(&String, &String)> = site
            .components
            .iter()
            .filter(|(name, _)| used.contains(*name) && !site.locals.contains_key(*name))
            .collect();
        let names: Vec<String> = guesses
            .iter()
            .map(|(n, _)| format!("`local.{n}`"))
            .collect();
        let values: Vec<String> = guesses.iter().map(|(_, v)| format!("\"{v}\"")).collect();
        let decls: Vec<String> = guesses
            .iter()
            .map(|(n, v)| format!("{n} = \"{v}\""))
            .collect();
        let (verb, pronoun) = if guesses.len() == 1 {
            ("is", "it")
        } else {
            ("are", "them")
        };
        return unresolved(
            site.id,
            attr,
            &format!(
                "{} {verb} not declared (TerraCi would have guessed {} from the directory; declare {pronoun} in a `locals` block: {})",
                names.join(", "),
                values.join(", "),
                decls.join(", ")
            ),
            Some(err.node),
            block,
        );
    }
    Diagnostic::new(
        crate::diagnostic::Severity::Warning,
        err.code,
        err.message.clone(),
    )
    .with_module(site.id)
    .with_anchor(attr.anchor(err.node))
}

/// Where a module's references are evaluated.
struct Site<'a> {
    id: &'a str,
    dir: &'a Utf8Path,
    root: &'a Utf8Path,
    components: &'a IndexMap<String, String>,
    /// Declared locals (their names tell a guessed path local from a declared one).
    locals: &'a BTreeMap<String, AttrExpr>,
    host: &'a dyn EvalHost,
}

impl Site<'_> {
    fn ctx<'s>(&'s self, scope: &'s BTreeMap<String, Value>) -> EvalContext<'s> {
        EvalContext {
            scope,
            module_dir: self.dir.to_owned(),
            host: self.host,
        }
    }
}

fn expand_remote_state(
    rs: &RemoteStateFact,
    scope: &BTreeMap<String, Value>,
    site: &Site<'_>,
    out: &mut ModuleReferences,
) {
    let Site { id, dir, root, .. } = *site;
    // Instances: (display name, extra scope entries).
    let mut instances: Vec<(String, Vec<(String, Value)>)> = Vec::new();
    if let Some(fe) = &rs.for_each {
        match evaluate(&fe.expr, &site.ctx(scope)) {
            Err(err) => {
                out.diagnostics.push(eval_error(site, fe, &err, &rs.name));
                return;
            }
            Ok(v) => {
                let items: Vec<(String, Value)> = match v {
                    Value::Map(m) => m.into_iter().collect(),
                    Value::Set(items) => {
                        let mut keyed = Vec::new();
                        for item in items {
                            match &item {
                                Value::String(s) => keyed.push((s.clone(), item.clone())),
                                Value::Unknown(u) => {
                                    out.diagnostics
                                        .push(unresolved(id, fe, &u.reason, u.at, &rs.name));
                                    return;
                                }
                                _ => {
                                    out.diagnostics.push(unresolved(
                                        id,
                                        fe,
                                        "`for_each` over a set needs strings",
                                        None,
                                        &rs.name,
                                    ));
                                    return;
                                }
                            }
                        }
                        keyed
                    }
                    Value::Unknown(u) => {
                        out.diagnostics.push(unresolved(
                            id,
                            fe,
                            &format!("`for_each` is unknown: {}", u.reason),
                            u.at,
                            &rs.name,
                        ));
                        return;
                    }
                    Value::Null => {
                        out.diagnostics.push(unresolved(
                            id,
                            fe,
                            "`for_each` is null",
                            None,
                            &rs.name,
                        ));
                        return;
                    }
                    Value::List(_) => {
                        out.diagnostics.push(unresolved(id, fe, "`for_each` needs a map or a set of strings, got a list (wrap it in toset())", None, &rs.name));
                        return;
                    }
                    _ => {
                        out.diagnostics.push(unresolved(
                            id,
                            fe,
                            "`for_each` needs a map or a set of strings",
                            None,
                            &rs.name,
                        ));
                        return;
                    }
                };
                for (key, value) in items {
                    let each = Value::Map(BTreeMap::from([
                        ("key".to_owned(), Value::String(key.clone())),
                        ("value".to_owned(), value),
                    ]));
                    instances.push((
                        format!("{}[\"{key}\"]", rs.name),
                        vec![("each".into(), each)],
                    ));
                }
            }
        }
    } else if let Some(count) = &rs.count {
        // `count` is a number; Terraform converts a numeric string ("2") to one.
        let value = evaluate(&count.expr, &site.ctx(scope)).map(|v| match v {
            Value::String(s) => s.parse::<f64>().map_or(Value::String(s), Value::Number),
            other => other,
        });
        match value {
            Err(err) => {
                out.diagnostics
                    .push(eval_error(site, count, &err, &rs.name));
                return;
            }
            Ok(Value::Number(n)) if n >= 0.0 && n.fract() == 0.0 && n <= 1024.0 => {
                for i in 0..n as u64 {
                    let c = Value::Map(BTreeMap::from([(
                        "index".to_owned(),
                        Value::Number(i as f64),
                    )]));
                    instances.push((format!("{}[{i}]", rs.name), vec![("count".into(), c)]));
                }
            }
            Ok(Value::Unknown(u)) => {
                out.diagnostics.push(unresolved(
                    id,
                    count,
                    &format!("`count` is unknown: {}", u.reason),
                    u.at,
                    &rs.name,
                ));
                return;
            }
            Ok(Value::Null) => {
                out.diagnostics
                    .push(unresolved(id, count, "`count` is null", None, &rs.name));
                return;
            }
            Ok(_) => {
                out.diagnostics.push(unresolved(
                    id,
                    count,
                    "`count` must be a whole number between 0 and 1024",
                    None,
                    &rs.name,
                ));
                return;
            }
        }
    } else {
        instances.push((rs.name.clone(), Vec::new()));
    }

    for (name, extra) in instances {
        let mut local_scope;
        let scope = if extra.is_empty() {
            scope
        } else {
            local_scope = scope.clone();
            local_scope.extend(extra);
            &local_scope
        };
        let Some(config_attr) = &rs.config else {
            let anchor_attr = rs.backend.as_ref().or(rs.for_each.as_ref());
            if let Some(attr) = anchor_attr {
                out.diagnostics.push(unresolved(
                    id,
                    attr,
                    "the block has no `config`",
                    None,
                    &name,
                ));
            }
            continue;
        };
        let backend = match &rs.backend {
            None => None,
            Some(b) => match evaluate(&b.expr, &site.ctx(scope)) {
                Ok(Value::String(s)) => Some(s),
                Ok(Value::Unknown(u)) => {
                    out.diagnostics
                        .push(unresolved(id, b, &u.reason, u.at, &name));
                    continue;
                }
                Ok(_) => {
                    out.diagnostics.push(unresolved(
                        id,
                        b,
                        "`backend` must be a string",
                        None,
                        &name,
                    ));
                    continue;
                }
                Err(err) => {
                    out.diagnostics.push(eval_error(site, b, &err, &name));
                    continue;
                }
            },
        };
        let config = match evaluate(&config_attr.expr, &site.ctx(scope)) {
            Ok(Value::Map(m)) => m,
            Ok(Value::Unknown(u)) => {
                out.diagnostics
                    .push(unresolved(id, config_attr, &u.reason, u.at, &name));
                continue;
            }
            Ok(_) => {
                out.diagnostics.push(unresolved(
                    id,
                    config_attr,
                    "`config` must be an object",
                    None,
                    &name,
                ));
                continue;
            }
            Err(err) => {
                out.diagnostics
                    .push(eval_error(site, config_attr, &err, &name));
                continue;
            }
        };
        let backend = backend.map(|b| canonical_backend(&b).to_owned());
        let kind = backend.as_deref().unwrap_or("");
        let config = with_defaults(kind, flatten_config(kind, &config));
        // The state path feeds rules 2 and 3; backends without one (http, pg, kubernetes)
        // match by identity only.
        let field = path_field(backend.as_deref(), &config);
        if field.is_none() && backend.is_none() {
            out.diagnostics.push(unresolved(
                id,
                config_attr,
                "`config` has no state path (`key`, `prefix` or `path`) and there is no `backend`",
                None,
                &name,
            ));
            continue;
        }
        let path = match field.map(|f| (f, config.get(f))) {
            None => None,
            Some((_, Some(Value::String(s)))) => Some(s.clone()),
            Some((_, Some(Value::Unknown(u)))) => {
                out.diagnostics
                    .push(unresolved(id, config_attr, &u.reason, u.at, &name));
                continue;
            }
            Some((field, Some(other))) => {
                out.diagnostics.push(unresolved(
                    id,
                    config_attr,
                    &format!(
                        "`config.{field}` must be a string, got {}",
                        type_name(other)
                    ),
                    None,
                    &name,
                ));
                continue;
            }
            Some((field, None)) => {
                out.diagnostics.push(unresolved(
                    id,
                    config_attr,
                    &format!("`config` has no `{field}`"),
                    None,
                    &name,
                ));
                continue;
            }
        };
        let identity = backend
            .as_deref()
            .map(|b| identity_of(b, &config, dir, root));
        if path.is_none() {
            // Identity is all there is: every field has to be known.
            if let Some(u) = identity_fields(kind)
                .iter()
                .find_map(|f| match config.get(*f) {
                    Some(Value::Unknown(u)) => Some(u.clone()),
                    _ => None,
                })
            {
                out.diagnostics
                    .push(unresolved(id, config_attr, &u.reason, u.at, &name));
                continue;
            }
        }
        let workspace = match rs
            .workspace
            .as_ref()
            .map(|w| evaluate(&w.expr, &site.ctx(scope)))
        {
            None => "default".to_owned(),
            Some(Ok(Value::String(s))) => s,
            Some(Ok(Value::Unknown(u))) => {
                let w = rs.workspace.as_ref().expect("checked above");
                out.diagnostics
                    .push(unresolved(id, w, &u.reason, u.at, &name));
                continue;
            }
            Some(_) => "default".to_owned(),
        };
        let workspace_key_prefix = match config.get("workspace_key_prefix") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let node = field.map_or(config_attr.expr.id, |f| entry_node(&config_attr.expr, f));
        out.references.push(StateReference {
            name,
            backend,
            identity,
            path,
            workspace,
            workspace_key_prefix,
            anchor: config_attr.anchor(node),
        });
    }
}

/// The node of `field`'s value in a literal `config` object (where a diagnostic about the
/// state path should point), else the whole expression.
fn entry_node(config: &Expr, field: &str) -> crate::facts::expr::NodeId {
    crate::facts::object_entries(config)
        .into_iter()
        .find(|(k, _)| *k == field)
        .map_or(config.id, |(_, v)| v.id)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Unknown(_) => "an unknown value",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::List(_) => "a list",
        Value::Set(_) => "a set",
        Value::Map(_) => "an object",
    }
}

/// Who could own a state: complete identities and ids of non-library modules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityIndex {
    pub by_identity: BTreeMap<StateIdentity, Vec<String>>,
    pub ids: BTreeSet<String>,
}

/// Shared ([`Arc`]) so that [`sync_owners`] can tell an index it has already copied
/// into the owners input by its address.
#[salsa::tracked(returns(ref))]
pub fn identity_index(db: &dyn Db, project: Project) -> Arc<IdentityIndex> {
    let mut index = IdentityIndex::default();
    // By chunks (see `crate::chunk`): an edit that keeps every identity checks one chunk.
    for chunk in crate::chunk::chunks(db, project) {
        for (id, identity) in crate::chunk::chunk_identities(db, chunk) {
            index.ids.insert(id.clone());
            if !identity.partial {
                index
                    .by_identity
                    .entry(identity.clone())
                    .or_default()
                    .push(id.clone());
            }
        }
    }
    Arc::new(index)
}

/// Copies [`identity_index`] into the project's owners input when it differs; whether
/// it did. Called after every change of inputs, before anything reads a resolution.
///
/// The input is a firewall: [`identity_index`] reads every module's state identity, so
/// it is as volatile as the most recently edited file. A query reading it directly would
/// be as volatile too, and salsa would verify all of them, one per module, after any
/// edit. The input is set (at medium durability) only when the index really changed.
pub fn sync_owners(db: &mut crate::db::Database, project: Project) -> bool {
    use salsa::Setter;
    let index = identity_index(db, project);
    let owners = project.owners(db);
    // An index that salsa recomputed but found equal (backdated) is a new allocation with
    // the old contents: compared once, then known by its address.
    let checked = db.owners_checked.as_ref();
    if Arc::ptr_eq(owners, index) || checked.is_some_and(|c| Arc::ptr_eq(c, index)) {
        return false;
    }
    let index = index.clone();
    if *owners == index {
        db.owners_checked = Some(index);
        return false;
    }
    project
        .set_owners(db)
        .with_durability(salsa::Durability::MEDIUM)
        .to(index);
    true
}

/// Where an edge came from: the block instance and its config attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EdgeSource {
    pub name: String,
    pub anchor: Anchor,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedDependencies {
    /// Dependency id -> the references that created the edge (in block order).
    pub edges: BTreeMap<String, Vec<EdgeSource>>,
    /// The dependencies' indices among the root modules ([`crate::graph::roots`]), in
    /// the order of `edges`: what the graph is built from.
    pub targets: Vec<u32>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Matches each reference of `module` against all modules (spec §4.3).
#[salsa::tracked(returns(ref))]
pub fn resolved_dependencies(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> ResolvedDependencies {
    let refs = module_references(db, project, module);
    let mut out = ResolvedDependencies {
        diagnostics: refs.diagnostics.clone(),
        ..Default::default()
    };
    if refs.references.is_empty() {
        return out;
    }
    let info = module.info(db);
    let index = project.owners(db);
    let depth = project.pattern(db).depth();
    for r in &refs.references {
        match match_reference(r, &info.id, depth, index) {
            Match::One(target) if target == info.id => out.diagnostics.push(
                Diagnostic::warning(
                    "self-reference",
                    format!(
                        "`data.terraform_remote_state.{}` reads this module's own state; no edge",
                        r.name
                    ),
                )
                .with_module(&info.id)
                .with_anchor(r.anchor.clone()),
            ),
            Match::One(target) => out.edges.entry(target).or_default().push(EdgeSource {
                name: r.name.clone(),
                anchor: r.anchor.clone(),
            }),
            Match::Ambiguous(rule, candidates) => out.diagnostics.push(
                Diagnostic::warning(
                    "ambiguous-remote-state",
                    format!(
                        "`data.terraform_remote_state.{}` matches {} modules by {rule}: {}; no edge ({})",
                        r.name,
                        candidates.len(),
                        candidates.join(", "),
                        if rule == "state identity" {
                            "two modules sharing one state is a bug"
                        } else {
                            "write the full state path to pick one"
                        }
                    ),
                )
                .with_module(&info.id)
                .with_anchor(r.anchor.clone()),
            ),
            Match::None(normalised) => out.diagnostics.push(
                Diagnostic::warning(
                    "unmatched-remote-state",
                    if r.path.is_some() {
                        format!("no module for state path \"{normalised}\"")
                    } else {
                        format!("no module with the state identity `{normalised}`")
                    },
                )
                .with_module(&info.id)
                .with_anchor(r.anchor.clone()),
            ),
        }
    }
    let ids = &crate::graph::roots(db, project).ids;
    // Resolution only ever names root modules, so each has an index.
    out.targets = out
        .edges
        .keys()
        .filter_map(|to| ids.binary_search(to).ok().map(|i| i as u32))
        .collect();
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Match {
    One(String),
    Ambiguous(&'static str, Vec<String>),
    None(String),
}

fn match_reference(r: &StateReference, from: &str, depth: usize, index: &IdentityIndex) -> Match {
    // Rule 1: identity.
    if let Some(identity) = &r.identity {
        if !identity.partial {
            if let Some(owners) = index.by_identity.get(identity) {
                match owners.as_slice() {
                    [one] => return Match::One(one.clone()),
                    [] => {}
                    many => return Match::Ambiguous("state identity", many.to_vec()),
                }
            }
        }
    }
    // Rule 2: path.
    let Some(normalised) = normalise_state_path(r) else {
        return Match::None(describe_identity(r));
    };
    if index.ids.contains(&normalised) {
        return Match::One(normalised);
    }
    let parts: Vec<&str> = normalised.split('/').collect();
    for start in 1..parts.len() {
        let suffix = parts[start..].join("/");
        if index.ids.contains(&suffix) {
            return Match::One(suffix);
        }
    }
    // Rule 3: context.
    if (1..=2).contains(&parts.len()) && !normalised.is_empty() {
        let mut contexts = Vec::new();
        if let Some((ctx, _)) = from.rsplit_once('/') {
            contexts.push(ctx.to_owned());
        }
        let from_parts: Vec<&str> = from.split('/').collect();
        if from_parts.len() > depth {
            contexts.push(from_parts[..depth - 1].join("/"));
        }
        let mut found: Vec<String> = contexts
            .iter()
            .map(|c| {
                if c.is_empty() {
                    normalised.clone()
                } else {
                    format!("{c}/{normalised}")
                }
            })
            .filter(|c| index.ids.contains(c))
            .collect();
        found.sort();
        found.dedup();
        match found.len() {
            0 => {}
            1 => return Match::One(found.remove(0)),
            _ => return Match::Ambiguous("context", found),
        }
    }
    Match::None(normalised)
}

/// How an identity-only reference is named in `unmatched-remote-state`.
fn describe_identity(r: &StateReference) -> String {
    match &r.identity {
        Some(identity) => {
            let fields: Vec<String> = identity
                .fields
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{} {}", identity.backend, fields.join(" "))
        }
        None => String::new(),
    }
}

/// Spec §4.3 rule 2: strip workspace prefixes and state file suffixes. `None` for a
/// reference without a state path.
pub fn normalise_state_path(r: &StateReference) -> Option<String> {
    let mut p = r
        .path
        .as_deref()?
        .trim()
        .trim_start_matches("./")
        .trim_start_matches('/')
        .to_owned();
    if let Some(rest) = p.strip_prefix("env:/") {
        p = rest
            .split_once('/')
            .map(|(_, r)| r.to_owned())
            .unwrap_or_default();
    } else if let Some(prefix) = &r.workspace_key_prefix {
        if let Some(rest) = p.strip_prefix(&format!("{prefix}/")) {
            p = rest
                .split_once('/')
                .map(|(_, r)| r.to_owned())
                .unwrap_or_default();
        }
    }
    if let Some(i) = p.rfind("env:") {
        if r.backend.as_deref() == Some("azurerm") && !p[i..].contains('/') {
            p.truncate(i);
        }
    }
    for suffix in ["/terraform.tfstate", "/default.tfstate", ".tfstate"] {
        if let Some(stripped) = p.strip_suffix(suffix) {
            p = stripped.to_owned();
            break;
        }
    }
    Some(p.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use crate::cli::{EvalArgs, GlobalArgs};
    use crate::graph::dependency_graph;
    use crate::run::{load_workspace, Workspace};
    use crate::system::MemorySystem;

    const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\n";
    const APP: &str = "data \"terraform_remote_state\" \"dep\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = chomp(file(\"${path.module}/dep.txt\"))\n  }\n}\n";

    fn backend(id: &str) -> String {
        format!("terraform {{\n  backend \"s3\" {{\n    bucket = \"b\"\n    key    = \"{id}/terraform.tfstate\"\n  }}\n}}\n")
    }

    fn load(fs: &MemorySystem) -> Workspace {
        let global = GlobalArgs {
            config: None,
            dir: Some("/p".into()),
            verbose: 0,
            quiet: false,
            color: crate::cli::ColorChoice::Never,
            log_level: "warn".into(),
            no_cache: true,
            cache_dir: None,
            max_file_size: crate::system::DEFAULT_MAX_FILE_SIZE,
        };
        load_workspace(fs, &global, &EvalArgs::default()).expect("in-memory project loads")
    }

    fn edges(ws: &Workspace) -> Vec<String> {
        dependency_graph(&ws.db, ws.project)
            .edges()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect()
    }

    #[test]
    fn a_file_read_by_file_is_a_tracked_input() {
        let fs = MemorySystem::new();
        fs.write_file("/p/.terraci.yaml", CONFIG);
        fs.write_file("/p/stage/vpc/main.tf", backend("stage/vpc"));
        fs.write_file("/p/stage/dns/main.tf", backend("stage/dns"));
        fs.write_file("/p/stage/app/main.tf", APP);
        fs.write_file("/p/stage/app/dep.txt", "stage/vpc/terraform.tfstate\n");
        let mut ws = load(&fs);
        assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);

        // Nothing changed on disk: nothing to refresh, nothing re-runs.
        ws.db.start_logging();
        assert!(ws.db.refresh_extra().is_empty());
        assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);
        assert!(ws.db.take_log().is_empty());

        fs.write_file("/p/stage/app/dep.txt", "stage/dns/terraform.tfstate\n");
        assert_eq!(ws.db.refresh_extra(), ["/p/stage/app/dep.txt"]);
        assert_eq!(edges(&ws), ["stage/app -> stage/dns"]);
        let log = ws.db.take_log();
        let ran = |q: &str| log.iter().filter(|l| l.contains(q)).count();
        assert_eq!(ran("module_references"), 1, "{log:?}");
        assert_eq!(ran("module_facts"), 0, "no Terraform file changed: {log:?}");
    }

    #[test]
    fn fileset_lists_through_the_system() {
        let fs = MemorySystem::new();
        fs.write_file("/p/.terraci.yaml", CONFIG);
        fs.write_file("/p/stage/vpc/main.tf", backend("stage/vpc"));
        fs.write_file("/p/stage/dns/main.tf", backend("stage/dns"));
        fs.write_file(
            "/p/stage/app/main.tf",
            "data \"terraform_remote_state\" \"dep\" {\n  for_each = fileset(path.module, \"deps/*\")\n  backend  = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/${basename(each.key)}/terraform.tfstate\"\n  }\n}\n",
        );
        fs.write_file("/p/stage/app/deps/vpc", "");
        let mut ws = load(&fs);
        assert_eq!(edges(&ws), ["stage/app -> stage/vpc"]);
        fs.write_file("/p/stage/app/deps/dns", "");
        assert_eq!(ws.db.refresh_extra(), ["/p/stage/app"]);
        assert_eq!(
            edges(&ws),
            ["stage/app -> stage/dns", "stage/app -> stage/vpc"]
        );
    }
}
