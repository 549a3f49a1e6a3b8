//! A module's scope: `var`, `local`, `path` and `terraform`, evaluated.
//!
//! Input: the module's facts and the project's eval settings (`--var`, `--var-file`,
//! `--workspace`). Output: [`ModuleScope`]. Invalidated by the module's facts, the eval
//! settings and the files its locals read.

use crate::eval::Object;
use std::collections::{BTreeMap, BTreeSet};

use camino::Utf8Path;
use indexmap::IndexMap;

use crate::eval::{evaluate, EvalContext, EvalError, EvalHost, NoFilesystem, Value};
use crate::facts::{module_facts, AttrExpr, ByName, ModuleFacts, RemoteStateFact, VariableFact};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::files::{FileContents, Module, Project};
use terraci_db::syntax::{visit, Expr, ExprKind, Traverser};
use terraci_db::system::normalize;

/// Evaluated values a module's expressions can see.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleScope {
    /// `var`, `local`, `path`, `terraform`.
    pub(crate) scope: Object,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Locals whose evaluation failed (they are unknown in `scope`). Reported by the
    /// references that use them, so an unused broken local stays quiet.
    pub(crate) local_errors: BTreeMap<String, EvalError>,
    /// `backend_config:` fields for this module (merged over its backend block).
    pub(crate) backend_config: Object,
}

/// The filesystem functions' view of the disk: every read goes through an on-demand salsa
/// input ([`Db::extra_file`], [`Db::extra_dir`]), so the query that evaluated `file(...)`
/// depends on that file and re-runs when it changes, and on nothing else.
pub(super) struct TrackedFilesystem<'db> {
    pub(super) db: &'db dyn Db,
    /// The project directory: messages name paths relative to it.
    pub(super) root: &'db Utf8Path,
}

impl EvalHost for TrackedFilesystem<'_> {
    fn read_file(&self, path: &Utf8Path) -> Result<String, String> {
        let path = &normalize(path);
        let file = self.db.extra_file(path);
        let path = path.strip_prefix(self.root).unwrap_or(path);
        match file.contents(self.db) {
            // An extra file is always read (never `Unread`, which `text` reads now).
            Some(contents @ (FileContents::Text(_) | FileContents::Unread(_))) => contents
                .text()
                .map(|text| text.to_owned())
                .ok_or_else(|| format!("cannot read `{path}`: it changed during the run")),
            Some(FileContents::NotUtf8 { line, column }) => Err(format!(
                "`{path}` is not valid UTF-8 (line {line}, column {column})"
            )),
            Some(FileContents::Unreadable(err)) => Err(format!("cannot read `{path}`: {err}")),
            None => Err(format!("no file `{path}`")),
        }
    }

    fn file_exists(&self, path: &Utf8Path) -> Result<bool, String> {
        let path = &normalize(path);
        match self.db.extra_file(path).contents(self.db) {
            None => Ok(false),
            Some(FileContents::Unreadable(err)) => {
                let path = path.strip_prefix(self.root).unwrap_or(path);
                Err(format!("cannot tell whether `{path}` exists: {err}"))
            }
            Some(_) => Ok(true),
        }
    }

    fn list_files(&self, dir: &Utf8Path) -> Vec<String> {
        self.db.extra_dir(&normalize(dir)).files(self.db).clone()
    }
}

pub(super) fn module_dir(db: &dyn Db, project: Project, module: Module) -> camino::Utf8PathBuf {
    project.root(db).join(&module.info(db).id)
}

/// Variables (defaults, tfvars, `--var-file`, `--var`) and the locals that something
/// reads (see [`needed_locals`]), evaluated.
#[salsa::tracked(returns(ref))]
pub fn module_scope(db: &dyn Db, project: Project, module: Module) -> ModuleScope {
    let facts = module_facts(db, module);
    let dir = module_dir(db, project, module);
    let empty = Object::new();
    let ctx_for_literals = EvalContext {
        scope: &empty,
        extra: &[],
        module_dir: dir.clone(),
        host: &NoFilesystem,
    };

    // Variables: lowest priority first, later layers replace earlier ones (Terraform's
    // order: defaults < TF_VAR_ environment (`execution.env`) < terraform.tfvars <
    // *.auto.tfvars < `variables:` entries of the config, in order < --var-file < --var).
    let cli = cli_variables(db, project);
    let config = project.config(db);
    let info = module.info(db);
    let host = TrackedFilesystem {
        db,
        root: project.root(db),
    };
    let env = super::declared::env_variables(config);
    let declared = if config.variables.is_empty() {
        None
    } else {
        Some(super::declared::variable_layers(config, info, &dir, &host))
    };
    let mut vars = Object::new();
    for (name, var) in &facts.variables {
        let mut value: Option<Value> = var
            .default
            .as_ref()
            .map(|d| eval_or_unknown(&d.expr, &ctx_for_literals));
        if let Some((_, e)) = env.iter().rev().find(|(n, _)| n == name) {
            value = Some(eval_or_unknown(e, &ctx_for_literals));
        }
        for layer in &facts.tfvars {
            if let Some((_, e)) = layer.iter().rev().find(|(n, _)| n == name) {
                value = Some(eval_or_unknown(&e.expr, &ctx_for_literals));
            }
        }
        if let Some(layer) = &declared {
            if let Some((_, e)) = layer.assignments.iter().rev().find(|(n, _)| n == name) {
                value = Some(eval_or_unknown(e, &ctx_for_literals));
            }
        }
        if let Some(e) = cli.get(name.as_str()) {
            value = Some(eval_or_unknown(e, &ctx_for_literals));
        }
        let value = match value {
            Some(v) => convert_variable(v, var),
            None => Value::unknown(no_value(name)),
        };
        vars.insert(name.as_str().to_owned(), value);
    }
    let mut scope = evaluate_scope(&ScopeInputs {
        facts,
        dir: &dir,
        root_dir: &dir,
        workspace: &workspace(db, project),
        vars,
        host: &host,
    });
    let mut problems: Vec<(Code, String)> = Vec::new();
    if let Some(layer) = declared {
        problems.extend(
            layer
                .problems
                .into_iter()
                .map(|p| (Code::ConfigVariables, p)),
        );
    }
    if facts.backend.is_some() && !config.backend_config.is_empty() {
        let vars = match scope.scope.get("var") {
            Some(Value::Map(vars)) => vars.clone(),
            _ => Object::new(),
        };
        let (fields, backend_problems) =
            super::declared::backend_fields(config, info, &dir, &vars, &host);
        scope.backend_config = fields;
        problems.extend(
            backend_problems
                .into_iter()
                .map(|p| (Code::ConfigBackend, p)),
        );
    }
    for (code, message) in problems {
        scope.diagnostics.push(
            Diagnostic::warning(code, message)
                .with_module(&info.id)
                .with_file(".terraci.yaml"),
        );
    }
    scope
}

/// `terraform.workspace`: `--workspace`, else `"default"`.
pub(super) fn workspace(db: &dyn Db, project: Project) -> String {
    let settings = project.eval_settings(db);
    if settings.workspace.is_empty() {
        "default".to_owned()
    } else {
        settings.workspace.clone()
    }
}

/// A variable's value converted to its type constraint where Terraform would.
pub(super) fn convert_variable(v: Value, var: &VariableFact) -> Value {
    match &var.type_constraint {
        Some(t) => crate::eval::convert_to_type(v.clone(), t).unwrap_or(v),
        None => v,
    }
}

/// What a scope is evaluated from: a root module's (its variables from defaults, tfvars
/// and the command line) or a called module's (its variables from the call's arguments).
pub(super) struct ScopeInputs<'a> {
    pub(crate) facts: &'a ModuleFacts,
    /// `path.module`.
    pub(crate) dir: &'a Utf8Path,
    /// `path.root` and `path.cwd`: the root module's directory.
    pub(crate) root_dir: &'a Utf8Path,
    pub(crate) workspace: &'a str,
    pub(crate) vars: Object,
    pub(crate) host: &'a dyn EvalHost,
}

/// The locals anything that can make an edge reads, directly or through other locals:
/// the backend, every `terraform_remote_state` block and every `module` call. Other
/// locals are never evaluated: real modules hold hundreds that no state location needs,
/// and one that fails to evaluate is no concern of terraci's.
pub(super) fn needed_locals(facts: &ModuleFacts) -> BTreeSet<String> {
    let roots = facts
        .backend
        .iter()
        .map(|b| &b.config)
        .chain(
            facts
                .remote_states
                .iter()
                .flat_map(RemoteStateFact::attributes),
        )
        .chain(facts.module_calls.iter().flat_map(|c| {
            [&c.source, &c.count, &c.for_each]
                .into_iter()
                .flatten()
                .chain(c.arguments.iter().map(|(_, a)| a))
        }));
    closure_of_locals(roots, &facts.locals)
}

/// The locals `roots` read, directly or through other locals.
pub(super) fn closure_of_locals<'a>(
    roots: impl Iterator<Item = &'a AttrExpr>,
    locals: &ByName<AttrExpr>,
) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = roots.flat_map(|a| local_references(&a.expr)).collect();
    while let Some(name) = stack.pop() {
        if let Some(attr) = locals.get(name.as_str()) {
            if seen.insert(name) {
                stack.extend(local_references(&attr.expr));
            }
        }
    }
    seen
}

/// `path`, `terraform`, `var` and the needed locals, in dependency order; a cycle makes
/// its members unknown (and is reported: a needed local that refers to itself).
pub(super) fn evaluate_scope(inputs: &ScopeInputs<'_>) -> ModuleScope {
    let ScopeInputs {
        facts, dir, host, ..
    } = *inputs;
    let mut scope = Object::new();
    scope.insert(
        "path".to_owned(),
        Value::Map(
            [
                ("module", dir.as_str()),
                ("root", inputs.root_dir.as_str()),
                ("cwd", inputs.root_dir.as_str()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
            .collect(),
        ),
    );
    scope.insert(
        "terraform".to_owned(),
        Value::Map(Object::from([(
            "workspace".to_owned(),
            Value::String(inputs.workspace.to_owned()),
        )])),
    );
    scope.insert("var".to_owned(), Value::Map(inputs.vars.clone()));
    let mut diagnostics = Vec::new();
    let needed = needed_locals(facts);
    let deps: BTreeMap<&str, BTreeSet<String>> = needed
        .iter()
        .filter_map(|name| {
            let e = facts.locals.get(name.as_str())?;
            Some((name.as_str(), local_references(&e.expr)))
        })
        .collect();
    let order = topo_order(&deps);
    let mut local_errors = BTreeMap::new();
    let mut cyclic = Vec::with_capacity(order.cyclic.len());
    for name in &order.cyclic {
        let chain = order.cycle_chain(name);
        if let Some(e) = facts.locals.get(name.as_str()) {
            diagnostics.push(
                Diagnostic::error(
                    Code::LocalCycle,
                    format!("`local.{name}` refers to itself: {chain}"),
                )
                .with_anchor(e.anchor(e.expr.id)),
            );
        }
        let cycle = format!("`local.{name}` refers to itself ({chain})");
        cyclic.push((name.clone(), Value::unknown(cycle)));
    }
    // Every local to evaluate has its entry from the start (built sorted, in one go:
    // inserting thousands of locals in dependency order one by one would shift the
    // entries each time). A local is only read after the ones it refers to, so no
    // evaluation sees a placeholder.
    let locals: Object = order
        .sorted
        .iter()
        .filter(|name| facts.locals.contains_key(name.as_str()))
        .map(|name| {
            let pending = format!("`local.{name}` is not evaluated yet");
            (name.clone(), Value::unknown(pending))
        })
        .chain(cyclic)
        .collect();
    // Each local sees the ones before it in the order: their entries in the scope's
    // `local` map are filled in place as they are evaluated.
    scope.insert("local".to_owned(), Value::Map(locals));
    for name in &order.sorted {
        let Some(e) = facts.locals.get(name.as_str()) else {
            continue;
        };
        let ctx = EvalContext {
            scope: &scope,
            extra: &[],
            module_dir: dir.to_owned(),
            host,
        };
        let v = match evaluate(&e.expr, &ctx) {
            Ok(v) => detach(v, &format!("local.{name}")),
            Err(err) => {
                let v = Value::unknown(format!("`local.{name}`: {}", err.message));
                local_errors.insert(name.clone(), err);
                v
            }
        };
        if let Some(slot) = match scope.get_mut("local") {
            Some(Value::Map(locals)) => locals.get_mut(name),
            _ => None,
        } {
            *slot = v;
        }
    }
    // Kept for the whole run, one per module: no growth slack.
    for v in scope.values_mut() {
        if let Value::Map(m) = v {
            m.shrink_to_fit();
        }
    }
    scope.shrink_to_fit();
    ModuleScope {
        scope,
        diagnostics,
        local_errors,
        backend_config: Object::new(),
    }
}

/// An unknown inside a stored value loses its node (it belongs to another expression),
/// and names the declaration it came through.
pub(super) fn detach(v: Value, via: &str) -> Value {
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
        out.insert(name.clone(), cli_value(raw));
    }
    out
}

/// What `--var`, `--var-file` and `--workspace` tell terraform in the jobs, as the
/// environment of every job: `TF_WORKSPACE`, and a `TF_VAR_<name>` per assignment (the
/// files' first, then `--var`s, a later one winning; lists and maps as JSON, which
/// Terraform reads as HCL). Terraform ignores a `TF_VAR_` that a module does not declare,
/// as terraci applies these only where declared. One difference stays: a module's own
/// `terraform.tfvars` outranks `TF_VAR_` in Terraform, while terraci's `--var` outranks
/// it; `-var` would match, but is an error in a module that does not declare it.
#[salsa::tracked(returns(ref))]
pub fn command_line_env(db: &dyn Db, project: Project) -> Vec<(String, String)> {
    let settings = project.eval_settings(db);
    let mut env: IndexMap<String, String> = IndexMap::new();
    if !settings.workspace.is_empty() && settings.workspace != "default" {
        env.insert("TF_WORKSPACE".to_owned(), settings.workspace.clone());
    }
    let empty = Object::new();
    let ctx = EvalContext {
        scope: &empty,
        extra: &[],
        module_dir: project.root(db).clone(),
        host: &NoFilesystem,
    };
    for (name, text) in &settings.var_files {
        let Ok(assignments) = var_file_assignments(name, text) else {
            continue;
        };
        for (var, e) in assignments {
            let value = match evaluate(&e, &ctx) {
                Ok(Value::String(s)) => Some(s),
                Ok(v) => crate::eval::json_string(&v).ok(),
                Err(_) => None,
            };
            if let Some(value) = value {
                env.insert(format!("TF_VAR_{var}"), value);
            }
        }
    }
    for (var, value) in &settings.vars {
        env.insert(format!("TF_VAR_{var}"), value.clone());
    }
    env.into_iter().collect()
}

/// A `-var` / `TF_VAR_` value: Terraform reads complex types as HCL; a plain word is a
/// string.
pub(super) fn cli_value(raw: &str) -> Expr {
    match hcl_edit::parser::parse_expr(raw) {
        Ok(
            e @ (hcl_edit::expr::Expression::Array(_)
            | hcl_edit::expr::Expression::Object(_)
            | hcl_edit::expr::Expression::Number(_)
            | hcl_edit::expr::Expression::Bool(_)),
        ) => crate::parse::lower(&e),
        _ => Expr::string(Default::default(), raw.to_owned()),
    }
}

/// The locals a remote-state block reads, directly or through other locals.
pub(super) fn locals_used_by(rs: &RemoteStateFact, locals: &ByName<AttrExpr>) -> BTreeSet<String> {
    let roots = rs.attributes();
    closure_of_locals(roots, locals)
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

pub(super) fn local_references(e: &Expr) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    visit(e, &mut |e| {
        if let ExprKind::Traversal(root, ops) = &e.kind {
            if let (ExprKind::Variable(v), Some(Traverser::Attr(name))) = (&root.kind, ops.first())
            {
                if v == "local" {
                    out.insert(name.as_str().to_owned());
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

const NO_VALUE: &str = "` has no default, no tfvars value and no --var";

/// Why a root module's variable is unknown when nothing sets it.
fn no_value(name: &str) -> String {
    format!("`var.{name}{NO_VALUE}")
}

/// The variable a message says has no value (see [`no_value`]): the root cause that
/// [`super::group_root_causes`] reports once.
pub(super) fn variable_without_value(message: &str) -> Option<&str> {
    let end = message.find(NO_VALUE)?;
    let start = message[..end].rfind("`var.")? + "`var.".len();
    Some(&message[start..end])
}
