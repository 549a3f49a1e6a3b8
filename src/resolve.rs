//! Resolution: module facts -> evaluated state references -> dependency edges.
//!
//! Input: [`module_facts`] of every module, the project's eval settings. Output, per
//! module: its [`StateIdentity`] (from its own backend block), its evaluated
//! [`StateReference`]s (one per `terraform_remote_state` instance), and the
//! [`ResolvedDependencies`] (edges + diagnostics) found by matching references against
//! every module (spec §4.3). Invalidated by the module's facts, and for matching by the
//! [`identity_index`], which changes only when some module's state identity or the module
//! set changes.

use std::collections::{BTreeMap, BTreeSet};

use camino::Utf8Path;
use indexmap::IndexMap;

use crate::db::Db;
use crate::diagnostic::{Anchor, Diagnostic};
use crate::eval::{evaluate, EvalContext, EvalError, NoFilesystem, Value};
use crate::facts::expr::{Expr, ExprKind, Traverser};
use crate::facts::{module_facts, AttrExpr, RemoteStateFact};
use crate::files::{Module, Project};
use crate::system::normalize;

/// Evaluated values a module's expressions can see.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleScope {
    /// `var`, `local`, `path`, `terraform`.
    pub scope: BTreeMap<String, Value>,
    pub diagnostics: Vec<Diagnostic>,
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
    for name in &order.sorted {
        let Some(e) = facts.locals.get(name.as_str()) else {
            continue;
        };
        scope.insert("local".to_owned(), Value::Map(locals.clone()));
        let ctx = EvalContext {
            scope: &scope,
            module_dir: dir.clone(),
            host: &NoFilesystem,
        };
        let v = match evaluate(&e.expr, &ctx) {
            Ok(v) => detach(v, &format!("local.{name}")),
            Err(err) => Value::unknown(format!("`local.{name}`: {}", err.message)),
        };
        locals.insert(name.clone(), v);
    }
    scope.insert("local".to_owned(), Value::Map(locals));
    ModuleScope { scope, diagnostics }
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
    for (_, text) in &settings.var_files {
        if let Ok(body) = hcl_edit::parser::parse_body(text) {
            for attr in body.attributes() {
                out.insert(
                    attr.key.as_str().to_owned(),
                    crate::parse::lower(&attr.value),
                );
            }
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

/// Calls `f` on every node of `e`, pre-order.
pub fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    use crate::facts::expr::{ObjectKey, TemplatePart};
    f(e);
    fn parts(ps: &[TemplatePart], f: &mut dyn FnMut(&Expr)) {
        for p in ps {
            match p {
                TemplatePart::Literal(_) => {}
                TemplatePart::Interpolation(e) => visit(e, f),
                TemplatePart::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    visit(cond, f);
                    parts(then, f);
                    parts(otherwise, f);
                }
                TemplatePart::For {
                    collection, body, ..
                } => {
                    visit(collection, f);
                    parts(body, f);
                }
            }
        }
    }
    match &e.kind {
        ExprKind::Template(ps) => parts(ps, f),
        ExprKind::Array(items) => items.iter().for_each(|i| visit(i, f)),
        ExprKind::Object(entries) => {
            for (k, v) in entries {
                if let ObjectKey::Expr(k) = k {
                    visit(k, f);
                }
                visit(v, f);
            }
        }
        ExprKind::Traversal(root, ops) => {
            visit(root, f);
            for op in ops {
                if let Traverser::Index(i) = op {
                    visit(i, f);
                }
            }
        }
        ExprKind::FuncCall { args, .. } => args.iter().for_each(|a| visit(a, f)),
        ExprKind::Conditional(a, b, c) => {
            visit(a, f);
            visit(b, f);
            visit(c, f);
        }
        ExprKind::Unary(_, a) | ExprKind::Paren(a) => visit(a, f),
        ExprKind::Binary(_, a, b) => {
            visit(a, f);
            visit(b, f);
        }
        ExprKind::For(fe) => {
            visit(&fe.collection, f);
            if let Some(k) = &fe.key_expr {
                visit(k, f);
            }
            visit(&fe.value_expr, f);
            if let Some(c) = &fe.cond {
                visit(c, f);
            }
        }
        ExprKind::Null
        | ExprKind::Bool(_)
        | ExprKind::Number(_)
        | ExprKind::String(_)
        | ExprKind::Variable(_) => {}
    }
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
        host: &NoFilesystem,
    };
    let config = match evaluate(&backend.config.expr, &ctx) {
        Ok(Value::Map(m)) => m,
        _ => BTreeMap::new(),
    };
    let mut identity = identity_of(&backend.kind, &config, &dir, root);
    if backend.kind == "local" && !config.contains_key("path") {
        identity = identity_of(
            "local",
            &BTreeMap::from([("path".to_owned(), Value::String("terraform.tfstate".into()))]),
            &dir,
            root,
        );
    }
    identity
}

/// One evaluated `terraform_remote_state` instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateReference {
    /// `vpc`, or `peers["eks"]` for a `for_each` instance, `x[0]` for `count`.
    pub name: String,
    pub backend: Option<String>,
    /// The identity (complete only when the backend and all its fields are known).
    pub identity: Option<StateIdentity>,
    /// The state path (key / prefix / path), known.
    pub path: String,
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
    for rs in &facts.remote_states {
        expand_remote_state(
            rs,
            &scope.scope,
            &dir,
            &root,
            &id,
            &module.info(db).components,
            &mut out,
        );
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
        format!("cannot resolve the state location of `data.terraform_remote_state.{name}`: {reason}; no dependency edge is created"),
    )
    .with_module(id)
    .with_anchor(attr.anchor(node.unwrap_or(attr.expr.id)))
}

fn eval_error(
    id: &str,
    components: &IndexMap<String, String>,
    attr: &AttrExpr,
    err: &EvalError,
    block: &str,
) -> Diagnostic {
    // TerraCi fills undeclared `local.<segment>` from the module's path. Terraform rejects
    // such a configuration, so terraci does not guess; it names the guess instead.
    let undeclared = err
        .message
        .strip_prefix("`local.")
        .and_then(|rest| rest.strip_suffix("` is not declared"));
    if let Some(value) = undeclared.and_then(|name| components.get(name).map(|v| (name, v))) {
        let (name, value) = value;
        return unresolved(
            id,
            attr,
            &format!(
                "`local.{name}` is not declared (TerraCi would have guessed \"{value}\" from the directory; declare `{name} = \"{value}\"` in a `locals` block)"
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
    .with_module(id)
    .with_anchor(attr.anchor(err.node))
}

fn expand_remote_state(
    rs: &RemoteStateFact,
    scope: &BTreeMap<String, Value>,
    dir: &Utf8Path,
    root: &Utf8Path,
    id: &str,
    components: &IndexMap<String, String>,
    out: &mut ModuleReferences,
) {
    fn ctx<'a>(scope: &'a BTreeMap<String, Value>, dir: &Utf8Path) -> EvalContext<'a> {
        EvalContext {
            scope,
            module_dir: dir.to_owned(),
            host: &NoFilesystem,
        }
    }
    // Instances: (display name, extra scope entries).
    let mut instances: Vec<(String, Vec<(String, Value)>)> = Vec::new();
    if let Some(fe) = &rs.for_each {
        match evaluate(&fe.expr, &ctx(scope, dir)) {
            Err(err) => {
                out.diagnostics
                    .push(eval_error(id, components, fe, &err, &rs.name));
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
        match evaluate(&count.expr, &ctx(scope, dir)) {
            Err(err) => {
                out.diagnostics
                    .push(eval_error(id, components, count, &err, &rs.name));
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
                    &rs.name,
                ));
            }
            continue;
        };
        let backend = match &rs.backend {
            None => None,
            Some(b) => match evaluate(&b.expr, &ctx(scope, dir)) {
                Ok(Value::String(s)) => Some(s),
                Ok(Value::Unknown(u)) => {
                    out.diagnostics
                        .push(unresolved(id, b, &u.reason, u.at, &rs.name));
                    continue;
                }
                Ok(_) => {
                    out.diagnostics.push(unresolved(
                        id,
                        b,
                        "`backend` must be a string",
                        None,
                        &rs.name,
                    ));
                    continue;
                }
                Err(err) => {
                    out.diagnostics
                        .push(eval_error(id, components, b, &err, &rs.name));
                    continue;
                }
            },
        };
        let config = match evaluate(&config_attr.expr, &ctx(scope, dir)) {
            Ok(Value::Map(m)) => m,
            Ok(Value::Unknown(u)) => {
                out.diagnostics
                    .push(unresolved(id, config_attr, &u.reason, u.at, &rs.name));
                continue;
            }
            Ok(_) => {
                out.diagnostics.push(unresolved(
                    id,
                    config_attr,
                    "`config` must be an object",
                    None,
                    &rs.name,
                ));
                continue;
            }
            Err(err) => {
                out.diagnostics
                    .push(eval_error(id, components, config_attr, &err, &rs.name));
                continue;
            }
        };
        let kind = backend.as_deref().unwrap_or("");
        let config = flatten_config(kind, &config);
        let Some(field) = path_field(backend.as_deref(), &config) else {
            out.diagnostics.push(unresolved(
                id,
                config_attr,
                &format!("`config` has no state path (expected one of `key`, `prefix`, `path` for backend `{}`)", if kind.is_empty() { "unspecified" } else { kind }),
                None,
                &rs.name,
            ));
            continue;
        };
        let path = match config.get(field) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Unknown(u)) => {
                out.diagnostics
                    .push(unresolved(id, config_attr, &u.reason, u.at, &rs.name));
                continue;
            }
            Some(other) => {
                out.diagnostics.push(unresolved(
                    id,
                    config_attr,
                    &format!(
                        "`config.{field}` must be a string, got {}",
                        type_name(other)
                    ),
                    None,
                    &rs.name,
                ));
                continue;
            }
            None => {
                out.diagnostics.push(unresolved(
                    id,
                    config_attr,
                    &format!("`config` has no `{field}`"),
                    None,
                    &rs.name,
                ));
                continue;
            }
        };
        let workspace = match rs
            .workspace
            .as_ref()
            .map(|w| evaluate(&w.expr, &ctx(scope, dir)))
        {
            None => "default".to_owned(),
            Some(Ok(Value::String(s))) => s,
            Some(Ok(Value::Unknown(u))) => {
                let w = rs.workspace.as_ref().expect("checked above");
                out.diagnostics
                    .push(unresolved(id, w, &u.reason, u.at, &rs.name));
                continue;
            }
            Some(_) => "default".to_owned(),
        };
        let identity = backend
            .as_deref()
            .map(|b| identity_of(b, &config, dir, root));
        let workspace_key_prefix = match config.get("workspace_key_prefix") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        out.references.push(StateReference {
            name,
            backend,
            identity,
            path,
            workspace,
            workspace_key_prefix,
            anchor: config_attr.anchor(entry_node(&config_attr.expr, field)),
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

#[salsa::tracked(returns(ref))]
pub fn identity_index(db: &dyn Db, project: Project) -> IdentityIndex {
    let mut index = IdentityIndex::default();
    for &m in project.modules(db) {
        let info = m.info(db);
        if !info.is_root() {
            continue;
        }
        index.ids.insert(info.id.clone());
        let identity = state_identity(db, project, m);
        if !identity.partial {
            index
                .by_identity
                .entry(identity.clone())
                .or_default()
                .push(info.id.clone());
        }
    }
    index
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
    let index = identity_index(db, project);
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
                        "`data.terraform_remote_state.{}` matches {} modules by {rule}: {}; no edge (two modules sharing one state is a bug)",
                        r.name,
                        candidates.len(),
                        candidates.join(", ")
                    ),
                )
                .with_module(&info.id)
                .with_anchor(r.anchor.clone()),
            ),
            Match::None(normalised) => out.diagnostics.push(
                Diagnostic::warning(
                    "unmatched-remote-state",
                    format!("no module for state path \"{normalised}\""),
                )
                .with_module(&info.id)
                .with_anchor(r.anchor.clone()),
            ),
        }
    }
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
    let normalised = normalise_state_path(r);
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

/// Spec §4.3 rule 2: strip workspace prefixes and state file suffixes.
pub fn normalise_state_path(r: &StateReference) -> String {
    let mut p = r
        .path
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
    p.trim_end_matches('/').to_owned()
}
