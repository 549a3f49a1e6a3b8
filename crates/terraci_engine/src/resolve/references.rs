//! State references: every `terraform_remote_state` instance a module reads, with its
//! backend, identity, state path and workspace evaluated.
//!
//! Input: the module's facts and scope. Output: [`ModuleReferences`]. Invalidated by the
//! module's facts, its scope and the files its expressions read.

use crate::eval::Object;
use std::collections::BTreeSet;

use camino::Utf8Path;
use indexmap::IndexMap;

use super::identity::{
    canonical_backend, flatten_config, identity_fields, identity_of, path_field, with_defaults,
};
use super::scope::{
    local_references, locals_used_by, module_dir, module_scope, ModuleScope, TrackedFilesystem,
};
use crate::eval::{evaluate, EvalContext, EvalError, EvalHost, Value};
use crate::facts::{module_facts, AttrExpr, ByName, ModuleFacts, RemoteStateFact};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Anchor, Code, Diagnostic};
use terraci_db::files::{Module, Project};
use terraci_db::owners::StateIdentity;
use terraci_db::syntax::{Expr, ExprKind, TemplatePart};

/// What a reference reads: the state location, evaluated as far as it can be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct StateTarget {
    pub(crate) backend: Option<String>,
    /// The identity (complete only when the backend and all its fields are known).
    pub(crate) identity: Option<StateIdentity>,
    /// The state path (key / prefix / path), known; `None` for backends that have none
    /// (http, pg, kubernetes), which match by identity only, and for a path that is
    /// only partly known.
    pub path: Option<String>,
    /// The known end of a state path whose beginning is unknown
    /// (`"${var.stack}/vpc.tfstate"` -> `/vpc.tfstate`): only the tail rule can use it.
    pub(crate) tail: Option<String>,
    pub(crate) workspace: String,
    pub(crate) workspace_key_prefix: Option<String>,
}

/// One evaluated `terraform_remote_state` instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct StateReference {
    /// `vpc`, or `peers["eks"]` for a `for_each` instance, `x[0]` for `count`.
    pub(crate) name: String,
    pub(crate) target: StateTarget,
    /// The config attribute, for pointing diagnostics at it.
    pub(crate) anchor: Anchor,
    /// The local module calls it was read through, outermost first:
    /// `` `module.kms` (1-org/main.tf:12) ``. Empty for the module's own blocks.
    pub(crate) via: Vec<String>,
    /// What to report when no rule finds the owner of a partly known path.
    pub(crate) unresolved: Option<Diagnostic>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ModuleReferences {
    pub(crate) references: Vec<StateReference>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The directories (project-relative) the module's local calls read, found or not,
    /// in the order first read: what the references depend on besides the module's own
    /// files (the summary cache's key, [`super::summary`]).
    pub(crate) reads: Vec<String>,
}

/// Every `terraform_remote_state` instance a root module reads: its own blocks, and
/// those of the local modules it calls (evaluated per call, see [`super::calls`]). Not
/// memoized: it is kept in the module's summary ([`super::module_summary`]).
pub(crate) fn module_references(db: &dyn Db, project: Project, module: Module) -> ModuleReferences {
    let facts = module_facts(db, module);
    let mut out = ModuleReferences::default();
    if facts.remote_states.is_empty() && !super::calls::has_module_calls(facts) {
        return out;
    }
    let info = module.info(db);
    let dir = module_dir(db, project, module);
    let root = project.root(db).clone();
    let scope = module_scope(db, project, module);
    let site = Site {
        id: &info.id,
        dir: &dir,
        root_dir: &dir,
        root: &root,
        components: &info.components,
        locals: &facts.locals,
        host: &TrackedFilesystem {
            db,
            root: project.root(db),
        },
        via: &[],
    };
    read_remote_states(facts, scope, &site, &mut out);
    let caller = super::calls::Caller {
        facts,
        scope: &scope.scope,
        site: &site,
        chain: std::slice::from_ref(&info.id),
    };
    super::calls::expand_calls(db, project, &caller, &mut out);
    // Kept for the whole run, one per module: no growth slack.
    out.references.shrink_to_fit();
    out.diagnostics.shrink_to_fit();
    out.reads.shrink_to_fit();
    out
}

/// The `terraform_remote_state` blocks of one module (a root, or a called module in the
/// scope of one call).
pub(super) fn read_remote_states(
    facts: &ModuleFacts,
    scope: &ModuleScope,
    site: &Site<'_>,
    out: &mut ModuleReferences,
) {
    let mut reported = BTreeSet::new();
    for rs in &facts.remote_states {
        // A local that failed to evaluate (unknown function, evaluation limit...) is
        // reported at the local, once, when a reference depends on it.
        if !scope.local_errors.is_empty() {
            for name in locals_used_by(rs, &facts.locals) {
                if let (Some(err), Some(attr)) = (
                    scope.local_errors.get(&name),
                    facts.locals.get(name.as_str()),
                ) {
                    if reported.insert(name.clone()) {
                        out.diagnostics.push(eval_error(site, attr, err, &rs.name));
                    }
                }
            }
        }
        expand_remote_state(rs, &scope.scope, site, out);
    }
}

/// ` (read through `module.a` (x/main.tf:3))` for a block of a called module.
pub(super) fn via_suffix(via: &[String]) -> String {
    if via.is_empty() {
        String::new()
    } else {
        format!(" (read through {})", via.join(" -> "))
    }
}

fn unresolved(
    site: &Site<'_>,
    attr: &AttrExpr,
    reason: &str,
    node: Option<terraci_db::syntax::NodeId>,
    name: &str,
) -> Diagnostic {
    Diagnostic::warning(
        Code::UnresolvedRemoteState,
        format!(
            "cannot resolve the state location of `data.terraform_remote_state.{name}`: {}; no dependency edge is created{}",
            reason.trim_end_matches('.'),
            via_suffix(site.via),
        ),
    )
    .with_module(site.id)
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
            .filter(|(name, _)| used.contains(*name) && !site.locals.contains_key(name.as_str()))
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
            site,
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
        terraci_db::diagnostic::Severity::Warning,
        err.code,
        format!("{}{}", err.message, via_suffix(site.via)),
    )
    .with_module(site.id)
    .with_anchor(attr.anchor(err.node))
}

/// An error in an expression of the block itself (`for_each`, `count`, `backend`,
/// `config`): the reference is unresolved, and the evaluation error is the reason (spec
/// 4.4). Errors about a root cause elsewhere (`unknown-function`, `evaluation-limit`) keep
/// their own code.
fn location_error(site: &Site<'_>, attr: &AttrExpr, err: &EvalError, block: &str) -> Diagnostic {
    let diagnostic = eval_error(site, attr, err, block);
    if diagnostic.code == Code::EvaluationError {
        return unresolved(site, attr, &err.message, Some(err.node), block);
    }
    diagnostic
}

/// Where a module's references are evaluated.
pub(super) struct Site<'a> {
    /// The root module the references count for.
    pub(crate) id: &'a str,
    /// The directory of the module holding the blocks (`path.module`).
    pub(crate) dir: &'a Utf8Path,
    /// The root module's directory, where Terraform runs: what a relative local
    /// backend `path` or `workspace_dir` is read against, in a called module too.
    pub(crate) root_dir: &'a Utf8Path,
    /// The project directory.
    pub root: &'a Utf8Path,
    pub(crate) components: &'a IndexMap<String, String>,
    /// Declared locals (their names tell a guessed path local from a declared one).
    pub(crate) locals: &'a ByName<AttrExpr>,
    pub(crate) host: &'a dyn EvalHost,
    /// The calls the blocks are read through (see [`StateReference::via`]).
    pub(crate) via: &'a [String],
}

impl Site<'_> {
    fn ctx<'s>(&'s self, scope: &'s Object) -> EvalContext<'s> {
        self.ctx_with(scope, &[])
    }

    /// [`Site::ctx`] with `extra` names (`each`, `count`) over the scope.
    fn ctx_with<'s>(&'s self, scope: &'s Object, extra: &'s [(String, Value)]) -> EvalContext<'s> {
        EvalContext {
            scope,
            extra,
            module_dir: self.dir.to_owned(),
            host: self.host,
        }
    }
}

fn expand_remote_state(
    rs: &RemoteStateFact,
    scope: &Object,
    site: &Site<'_>,
    out: &mut ModuleReferences,
) {
    let Site { root_dir, root, .. } = *site;
    // Instances: (display name, extra scope entries).
    let mut instances: Vec<(String, Vec<(String, Value)>)> = Vec::new();
    if let Some(fe) = &rs.for_each {
        match evaluate(&fe.expr, &site.ctx(scope)) {
            Err(err) => {
                out.diagnostics
                    .push(location_error(site, fe, &err, &rs.name));
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
                                        .push(unresolved(site, fe, &u.reason, u.at, &rs.name));
                                    return;
                                }
                                _ => {
                                    out.diagnostics.push(unresolved(
                                        site,
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
                            site,
                            fe,
                            &format!("`for_each` is unknown: {}", u.reason),
                            u.at,
                            &rs.name,
                        ));
                        return;
                    }
                    Value::Null => {
                        out.diagnostics.push(unresolved(
                            site,
                            fe,
                            "`for_each` is null",
                            None,
                            &rs.name,
                        ));
                        return;
                    }
                    Value::List(_) => {
                        out.diagnostics.push(unresolved(site, fe, "`for_each` needs a map or a set of strings, got a list (wrap it in toset())", None, &rs.name));
                        return;
                    }
                    _ => {
                        out.diagnostics.push(unresolved(
                            site,
                            fe,
                            "`for_each` needs a map or a set of strings",
                            None,
                            &rs.name,
                        ));
                        return;
                    }
                };
                for (key, value) in items {
                    let each = Value::Map(Object::from([
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
                    .push(location_error(site, count, &err, &rs.name));
                return;
            }
            Ok(Value::Number(n)) if n >= 0.0 && n.fract() == 0.0 && n <= 1024.0 => {
                for i in 0..n as u64 {
                    let c = Value::Map(Object::from([(
                        "index".to_owned(),
                        Value::Number(i as f64),
                    )]));
                    instances.push((format!("{}[{i}]", rs.name), vec![("count".into(), c)]));
                }
            }
            Ok(Value::Unknown(u)) => {
                out.diagnostics.push(unresolved(
                    site,
                    count,
                    &format!("`count` is unknown: {}", u.reason),
                    u.at,
                    &rs.name,
                ));
                return;
            }
            Ok(Value::Null) => {
                out.diagnostics
                    .push(unresolved(site, count, "`count` is null", None, &rs.name));
                return;
            }
            Ok(_) => {
                out.diagnostics.push(unresolved(
                    site,
                    count,
                    "`count` must be a whole number between 0 and 1024",
                    None,
                    &rs.name,
                ));
                return;
            }
        }
    } else {
        instances.push((rs.name.as_str().to_owned(), Vec::new()));
    }

    for (name, extra) in instances {
        let Some(config_attr) = &rs.config else {
            let anchor_attr = rs.backend.as_ref().or(rs.for_each.as_ref());
            if let Some(attr) = anchor_attr {
                out.diagnostics.push(unresolved(
                    site,
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
            Some(b) => match evaluate(&b.expr, &site.ctx_with(scope, &extra)) {
                Ok(Value::String(s)) => Some(s),
                Ok(Value::Unknown(u)) => {
                    out.diagnostics
                        .push(unresolved(site, b, &u.reason, u.at, &name));
                    continue;
                }
                Ok(_) => {
                    out.diagnostics.push(unresolved(
                        site,
                        b,
                        "`backend` must be a string",
                        None,
                        &name,
                    ));
                    continue;
                }
                Err(err) => {
                    out.diagnostics.push(location_error(site, b, &err, &name));
                    continue;
                }
            },
        };
        let config = match evaluate(&config_attr.expr, &site.ctx_with(scope, &extra)) {
            Ok(Value::Map(m)) => m,
            Ok(Value::Unknown(u)) => {
                out.diagnostics
                    .push(unresolved(site, config_attr, &u.reason, u.at, &name));
                continue;
            }
            Ok(_) => {
                out.diagnostics.push(unresolved(
                    site,
                    config_attr,
                    "`config` must be an object",
                    None,
                    &name,
                ));
                continue;
            }
            Err(err) => {
                let diagnostic = location_error(site, config_attr, &err, &name);
                // A state path whose beginning fails to evaluate (`coalesce("", "")` of
                // variables set only in CI) may still end in known text.
                match failed_path_tail(
                    config_attr,
                    backend.as_deref(),
                    &site.ctx_with(scope, &extra),
                ) {
                    Some((field, tail)) => out.references.push(StateReference {
                        name,
                        target: StateTarget {
                            backend: backend.map(|b| canonical_backend(&b).to_owned()),
                            identity: None,
                            path: None,
                            tail: Some(tail),
                            workspace: "default".to_owned(),
                            workspace_key_prefix: None,
                        },
                        anchor: config_attr.anchor(entry_node(&config_attr.expr, field)),
                        via: site.via.to_vec(),
                        unresolved: Some(diagnostic),
                    }),
                    None => out.diagnostics.push(diagnostic),
                }
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
                site,
                config_attr,
                "`config` has no state path (`key`, `prefix` or `path`) and there is no `backend`",
                None,
                &name,
            ));
            continue;
        }
        let workspace = match rs
            .workspace
            .as_ref()
            .map(|w| evaluate(&w.expr, &site.ctx_with(scope, &extra)))
        {
            None => "default".to_owned(),
            Some(Ok(Value::String(s))) => s,
            Some(Ok(Value::Unknown(u))) => {
                let w = rs.workspace.as_ref().expect("checked above");
                out.diagnostics
                    .push(unresolved(site, w, &u.reason, u.at, &name));
                continue;
            }
            Some(_) => "default".to_owned(),
        };
        // The local backend keeps a workspace other than `default` under its
        // `workspace_dir`, whatever its `path` (Terraform 1.11.4, see
        // `fixtures/rules/local-backend`): the path is no state path then.
        let local_workspace = kind == "local" && workspace != "default";
        let field = field.filter(|_| !local_workspace);
        let mut tail = None;
        let mut pending = None;
        let path = match field.map(|f| (f, config.get(f))) {
            None => None,
            Some((_, Some(Value::String(s)))) => Some(s.clone()),
            Some((field, Some(Value::Unknown(u)))) => {
                let diagnostic = unresolved(site, config_attr, &u.reason, u.at, &name);
                // The end of the path may still be known: the tail rule can use it.
                let known = crate::facts::object_entries(&config_attr.expr)
                    .into_iter()
                    .find(|(k, _)| *k == field)
                    .and_then(|(_, e)| known_tail(e, &site.ctx_with(scope, &extra)));
                match known {
                    Some(t) => {
                        tail = Some(t);
                        pending = Some(diagnostic);
                        None
                    }
                    None => {
                        out.diagnostics.push(diagnostic);
                        continue;
                    }
                }
            }
            Some((field, Some(other))) => {
                out.diagnostics.push(unresolved(
                    site,
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
                    site,
                    config_attr,
                    &format!("`config` has no `{field}`"),
                    None,
                    &name,
                ));
                continue;
            }
        };
        let identity = backend.as_deref().map(|b| {
            let mut identity = identity_of(b, &config, root_dir, root);
            if local_workspace {
                identity.partial = identity.workspace_prefix.is_none();
            }
            identity
        });
        if path.is_none() && tail.is_none() && !local_workspace {
            // Identity is all there is: every field has to be known.
            if let Some(u) = identity_fields(kind)
                .iter()
                .find_map(|f| match config.get(*f) {
                    Some(Value::Unknown(u)) => Some(u.clone()),
                    _ => None,
                })
            {
                out.diagnostics
                    .push(unresolved(site, config_attr, &u.reason, u.at, &name));
                continue;
            }
        }
        let workspace_key_prefix = match config.get("workspace_key_prefix") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        // The entry that places the state: a local workspace's `workspace_dir`, if set.
        let place = field.or(local_workspace.then_some("workspace_dir"));
        let node = place.map_or(config_attr.expr.id, |f| entry_node(&config_attr.expr, f));
        out.references.push(StateReference {
            name,
            target: StateTarget {
                backend,
                identity,
                path,
                tail,
                workspace,
                workspace_key_prefix,
            },
            anchor: config_attr.anchor(node),
            via: site.via.to_vec(),
            unresolved: pending,
        });
    }
}

/// When the state path entry of a literal `config` is what fails to evaluate: the entry
/// and its known tail.
fn failed_path_tail(
    config: &AttrExpr,
    backend: Option<&str>,
    ctx: &EvalContext<'_>,
) -> Option<(&'static str, String)> {
    let entries = crate::facts::object_entries(&config.expr);
    let field = match backend {
        Some(b) => path_field(Some(canonical_backend(b)), &Object::new())?,
        None => ["key", "prefix", "path"]
            .into_iter()
            .find(|f| entries.iter().any(|(k, _)| k == f))?,
    };
    let (_, e) = entries.into_iter().find(|(k, _)| *k == field)?;
    // Only a function that fails on the values at hand: an undeclared name or a
    // wrong attribute is a broken configuration, not a value set elsewhere.
    let ExprKind::Template(parts) = &e.kind else {
        return None;
    };
    let Some(TemplatePart::Interpolation(head)) = parts.first() else {
        return None;
    };
    match (&head.kind, evaluate(head, ctx)) {
        (ExprKind::FuncCall { .. }, Err(err)) if err.code == Code::EvaluationError => {
            known_tail(e, ctx).map(|t| (field, t))
        }
        _ => None,
    }
}

/// The known end of a template whose beginning is unknown: the literal text and known
/// interpolations after the last unknown one. `None` when the template does not begin
/// with the unknown part (a known head, `"stage/${data.x.region}/vpc"`, says where the
/// state is: the tail alone would be a guess), when the tail holds neither a `/` (a
/// whole segment known) nor begins with a separator (`-base.tfstate`: the end of a flat
/// name, see the flat-suffix rule), or the expression is not a template.
fn known_tail(e: &Expr, ctx: &EvalContext<'_>) -> Option<String> {
    let ExprKind::Template(parts) = &e.kind else {
        return None;
    };
    match parts.first() {
        Some(TemplatePart::Interpolation(head))
            if !matches!(evaluate(head, ctx), Ok(Value::String(_))) => {}
        _ => return None,
    }
    let mut tail = Vec::new();
    for part in parts.iter().rev() {
        match part {
            TemplatePart::Literal(s) => tail.push(s.as_str().to_owned()),
            TemplatePart::Interpolation(x) => match evaluate(x, ctx) {
                Ok(Value::String(s)) => tail.push(s),
                _ => break,
            },
            _ => break,
        }
    }
    tail.reverse();
    let tail = tail.concat();
    let flat = tail.len() > 1 && tail.starts_with(['-', '_', '.']) && tail != ".tfstate";
    (tail.contains('/') || flat).then_some(tail)
}

/// The node of `field`'s value in a literal `config` object (where a diagnostic about the
/// state path should point), else the whole expression.
fn entry_node(config: &Expr, field: &str) -> terraci_db::syntax::NodeId {
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
