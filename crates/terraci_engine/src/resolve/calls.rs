//! Local module calls: a root's `module "x" { source = "./..." }` runs the child's
//! `terraform_remote_state` data sources when the root is planned, so the child's
//! references count for the root.
//!
//! Each call is evaluated on its own: `count`/`for_each` expanded in the caller's scope
//! (`count = 0` reads nothing), the call's arguments bound to the child's variables
//! (child defaults otherwise; a required variable the call does not set is unknown and
//! says so), the child's locals evaluated in the child (`path.module` is the child's
//! directory, `path.root` the root's). Calls the child makes are followed the same way,
//! to [`MAX_CALL_DEPTH`]; a call back into a directory already on the chain is a
//! `module-call-cycle`. Sources that are not local paths (registry, git, ...) cannot be
//! read and are noted (`remote-module-source`, an info shown with `-v`).

use crate::eval::Object;

use camino::Utf8Path;

use super::references::{read_remote_states, via_suffix, ModuleReferences, Site};
use super::scope::{convert_variable, evaluate_scope, workspace, ScopeInputs};
use crate::eval::{evaluate, EvalContext, NoFilesystem, Value};
use crate::facts::{literal_string, module_facts, AttrExpr, ModuleCallFact, ModuleFacts};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Code, Diagnostic, Severity};
use terraci_db::files::{Module, Project};
use terraci_db::system::normalize;

/// How deep local calls are followed (Terraform sets no limit; real trees nest 2-4).
pub(crate) const MAX_CALL_DEPTH: usize = 16;

/// Whether `source` is a local path (Terraform: it starts with `./` or `../`).
pub(crate) fn is_local_source(source: &str) -> bool {
    source.starts_with("./") || source.starts_with("../")
}

/// Whether a module makes any call (followed when local, noted otherwise).
pub(super) fn has_module_calls(facts: &ModuleFacts) -> bool {
    !facts.module_calls.is_empty()
}

/// The module a call is made from.
pub(super) struct Caller<'a> {
    pub(crate) facts: &'a ModuleFacts,
    pub(crate) scope: &'a Object,
    pub(crate) site: &'a Site<'a>,
    /// Directories on the call chain (project-relative), the root first.
    pub(crate) chain: &'a [String],
}

/// Evaluates every call of `caller` and the calls they make, adding their references
/// and diagnostics to `out`.
pub(super) fn expand_calls(
    db: &dyn Db,
    project: Project,
    caller: &Caller<'_>,
    out: &mut ModuleReferences,
) {
    let site = caller.site;
    for call in &caller.facts.module_calls {
        let Some(source_attr) = &call.source else {
            continue;
        };
        let Some(source) = literal_string(&source_attr.expr) else {
            continue;
        };
        let at = call_site(db, source_attr);
        let diagnostic = |severity, code, message: String| {
            Diagnostic::new(severity, code, format!("{message}{}", via_suffix(site.via)))
                .with_module(site.id)
                .with_anchor(source_attr.anchor(source_attr.expr.id))
        };
        if !is_local_source(source) {
            out.diagnostics.push(diagnostic(
                Severity::Info,
                Code::RemoteModuleSource,
                format!(
                    "`module.{}` comes from \"{source}\", outside the repository: its `terraform_remote_state` blocks (if any) are not read",
                    call.name
                ),
            ));
            continue;
        }
        let here = caller.chain.last().expect("the chain holds the root");
        let child_id = normalize(&Utf8Path::new(here).join(source))
            .as_str()
            .trim_end_matches('/')
            .to_owned();
        if child_id.starts_with("..") || child_id.is_empty() || child_id.starts_with('/') {
            // Outside the project: nothing terraci may read.
            out.diagnostics.push(diagnostic(
                Severity::Info,
                Code::RemoteModuleSource,
                format!(
                    "`module.{}` comes from \"{source}\", outside the project directory: its `terraform_remote_state` blocks (if any) are not read",
                    call.name
                ),
            ));
            continue;
        }
        if let Some(i) = caller.chain.iter().position(|d| *d == child_id) {
            let cycle: Vec<&str> = caller.chain[i..]
                .iter()
                .map(String::as_str)
                .chain([child_id.as_str()])
                .collect();
            out.diagnostics.push(diagnostic(
                Severity::Warning,
                Code::ModuleCallCycle,
                format!(
                    "`module.{}` calls a module that is already being called: {}; not followed",
                    call.name,
                    cycle.join(" -> ")
                ),
            ));
            continue;
        }
        if caller.chain.len() > MAX_CALL_DEPTH {
            out.diagnostics.push(diagnostic(
                Severity::Warning,
                Code::EvaluationLimit,
                format!(
                    "`module.{}` is nested more than {MAX_CALL_DEPTH} local calls deep; not followed",
                    call.name
                ),
            ));
            continue;
        }
        if !out.reads.contains(&child_id) {
            out.reads.push(child_id.clone());
        }
        let Some(child) = find_module(db, project, &child_id) else {
            out.diagnostics.push(diagnostic(
                Severity::Warning,
                Code::MissingModuleSource,
                format!(
                    "`module.{}`: \"{source}\" ({child_id}) is not a directory with Terraform files in the project; its `terraform_remote_state` blocks (if any) are not read",
                    call.name
                ),
            ));
            continue;
        };
        let child_facts = module_facts(db, child);
        if child_facts.remote_states.is_empty() && !has_module_calls(child_facts) {
            continue;
        }
        let Some(instances) = call_instances(call, caller, out) else {
            continue;
        };
        let root_dir = site.root.join(&caller.chain[0]);
        let child_dir = site.root.join(&child_id);
        let mut chain = caller.chain.to_vec();
        chain.push(child_id.clone());
        for (suffix, extra) in instances {
            let mut scope = caller.scope.clone();
            scope.extend(extra);
            let vars = bind_variables(call, &suffix, &scope, child_facts, &child_id, site);
            let child_scope = evaluate_scope(&ScopeInputs {
                facts: child_facts,
                dir: &child_dir,
                root_dir: &root_dir,
                workspace: &workspace(db, project),
                vars,
                host: site.host,
            });
            let mut via = site.via.to_vec();
            via.push(format!("`module.{}{suffix}` ({at})", call.name));
            let child_site = Site {
                id: site.id,
                dir: &child_dir,
                root_dir: site.root_dir,
                root: site.root,
                components: site.components,
                locals: &child_facts.locals,
                host: site.host,
                via: &via,
            };
            out.diagnostics
                .extend(child_scope.diagnostics.iter().map(|d| {
                    let mut d = d.clone().with_module(site.id);
                    d.message.push_str(&via_suffix(&via));
                    d
                }));
            read_remote_states(child_facts, &child_scope, &child_site, out);
            let next = Caller {
                facts: child_facts,
                scope: &child_scope.scope,
                site: &child_site,
                chain: &chain,
            };
            expand_calls(db, project, &next, out);
        }
    }
}

/// `path/main.tf:12`: where a call is written.
fn call_site(db: &dyn Db, source: &AttrExpr) -> String {
    let anchor = source.anchor(source.expr.id);
    let file = anchor.file.path(db);
    let scanned = match (
        anchor.file.kind(db),
        &anchor.item.block[..],
        &anchor.item.attr[..],
    ) {
        (terraci_db::files::FileKind::Native, [module, name], [attr]) if module == "module" => {
            anchor
                .file
                .contents(db)
                .text()
                .and_then(|text| scanned_attribute_line(&text, name, attr))
        }
        _ => None,
    };
    // Locating parses the file with spans (the full parser, kept in a memo): at one call
    // per module that was half of a cold run's instructions. The text says the line
    // itself whenever it leaves no doubt.
    match scanned.or_else(|| crate::parse::locate(db, &anchor).map(|(line, _)| line)) {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    }
}

/// The line of attribute `attr` of the top-level `module "NAME"` block, read from the
/// text when it leaves no doubt: the header `module "NAME" {` occurs once in the whole
/// file, on a line of its own at the start, the block closes with a `}` at the start of
/// a later line, and inside it exactly one line starts with `attr =` followed by a value
/// on the same line, with no heredoc or comment marker in the block. `None` otherwise
/// (the caller parses the file).
fn scanned_attribute_line(text: &str, name: &str, attr: &str) -> Option<u32> {
    let header = format!("module \"{name}\"");
    if text.matches(&header).count() != 1 {
        return None;
    }
    let mut lines = text.lines().enumerate();
    let start = lines
        .by_ref()
        .find(|(_, l)| l.strip_prefix(&header).is_some_and(|r| r.trim() == "{"))?
        .0;
    let mut found = None;
    for (i, line) in lines {
        if line.starts_with('}') {
            return (line.trim_end() == "}")
                .then_some(found?)
                .map(|i: usize| i as u32 + 1);
        }
        if ["<<", "#", "//", "/*"].iter().any(|m| line.contains(m)) || i == start {
            return None;
        }
        let assigned = line
            .trim_start()
            .strip_prefix(attr)
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('='))
            .is_some_and(|value| !value.trim().is_empty() && !value.starts_with('='));
        if assigned {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    None
}

/// A module of the project (root, library or plain directory) by id.
pub(crate) fn find_module(db: &dyn Db, project: Project, id: &str) -> Option<Module> {
    modules_by_id(db, project).get(id).copied()
}

/// The project's modules by id, made once per project: a search through the modules
/// themselves read one module's info (a dependency of the asking query each) per step,
/// for every read of every module whose summary is checked. The first of a repeated id
/// wins (ids are unique: discovery makes one module per directory).
#[salsa::tracked(returns(ref))]
fn modules_by_id(db: &dyn Db, project: Project) -> rustc_hash::FxHashMap<String, Module> {
    let modules = project.modules(db);
    let mut by_id = rustc_hash::FxHashMap::default();
    by_id.reserve(modules.len());
    for &m in modules {
        by_id.entry(m.info(db).id.clone()).or_insert(m);
    }
    by_id
}

/// One instance of a call: its key (`[0]`, `["key"]`, empty) and the `count`/`each`
/// values its arguments see.
type Instance = (String, Vec<(String, Value)>);

/// The instances of a call.
/// `None` (with a diagnostic) when `count`/`for_each` cannot be known.
fn call_instances(
    call: &ModuleCallFact,
    caller: &Caller<'_>,
    out: &mut ModuleReferences,
) -> Option<Vec<Instance>> {
    let site = caller.site;
    let ctx = EvalContext {
        scope: caller.scope,
        extra: &[],
        module_dir: site.dir.to_owned(),
        host: site.host,
    };
    let problem = |attr: &AttrExpr, what: String, node| {
        Diagnostic::warning(
            Code::UnresolvedRemoteState,
            format!(
                "cannot tell which instances of `module.{}` exist: {what}; the `terraform_remote_state` blocks it reads make no edge{}",
                call.name,
                via_suffix(site.via)
            ),
        )
        .with_module(site.id)
        .with_anchor(attr.anchor(node))
    };
    if let Some(fe) = &call.for_each {
        let items: Vec<(String, Value)> = match evaluate(&fe.expr, &ctx) {
            Ok(Value::Map(m)) => m.into_iter().collect(),
            Ok(Value::Set(items)) => {
                let mut keyed = Vec::new();
                for item in items {
                    match item {
                        Value::String(s) => keyed.push((s.clone(), Value::String(s))),
                        _ => {
                            out.diagnostics.push(problem(
                                fe,
                                "`for_each` over a set needs known strings".into(),
                                fe.expr.id,
                            ));
                            return None;
                        }
                    }
                }
                keyed
            }
            Ok(Value::Unknown(u)) => {
                out.diagnostics.push(problem(
                    fe,
                    format!("`for_each` is unknown: {}", u.reason),
                    u.at.unwrap_or(fe.expr.id),
                ));
                return None;
            }
            Ok(_) => {
                out.diagnostics.push(problem(
                    fe,
                    "`for_each` needs a map or a set of strings".into(),
                    fe.expr.id,
                ));
                return None;
            }
            Err(err) => {
                out.diagnostics
                    .push(problem(fe, err.message.clone(), err.node));
                return None;
            }
        };
        return Some(
            items
                .into_iter()
                .map(|(key, value)| {
                    let each = Value::Map(Object::from([
                        ("key".to_owned(), Value::String(key.clone())),
                        ("value".to_owned(), value),
                    ]));
                    (format!("[\"{key}\"]"), vec![("each".to_owned(), each)])
                })
                .collect(),
        );
    }
    if let Some(count) = &call.count {
        let value = evaluate(&count.expr, &ctx).map(|v| match v {
            Value::String(s) => s.parse::<f64>().map_or(Value::String(s), Value::Number),
            Value::Bool(b) => Value::Number(f64::from(u8::from(b))),
            other => other,
        });
        return match value {
            Ok(Value::Number(n)) if n >= 0.0 && n.fract() == 0.0 && n <= 1024.0 => Some(
                (0..n as u64)
                    .map(|i| {
                        let c = Value::Map(Object::from([(
                            "index".to_owned(),
                            Value::Number(i as f64),
                        )]));
                        (format!("[{i}]"), vec![("count".to_owned(), c)])
                    })
                    .collect(),
            ),
            Ok(Value::Unknown(u)) => {
                // Whether the instances exist depends on what terraci cannot know
                // (`var.env == "dev" ? 1 : 0`); where they exist, their states must be
                // applied first, so they are read as one instance, and said so.
                out.diagnostics.push(
                    Diagnostic::new(
                        Severity::Info,
                        Code::UnknownModuleCount,
                        format!(
                            "the `count` of `module.{}` is unknown ({}); its `terraform_remote_state` blocks are read as for one instance{}",
                            call.name,
                            u.reason.trim_end_matches('.'),
                            via_suffix(site.via)
                        ),
                    )
                    .with_module(site.id)
                    .with_anchor(count.anchor(u.at.unwrap_or(count.expr.id))),
                );
                let index = Value::unknown(format!(
                    "`count.index` of `module.{}` is unknown: its `count` is",
                    call.name
                ));
                let c = Value::Map(Object::from([("index".to_owned(), index)]));
                Some(vec![("[?]".to_owned(), vec![("count".to_owned(), c)])])
            }
            Ok(_) => {
                out.diagnostics.push(problem(
                    count,
                    "`count` must be a whole number between 0 and 1024".into(),
                    count.expr.id,
                ));
                None
            }
            Err(err) => {
                out.diagnostics
                    .push(problem(count, err.message.clone(), err.node));
                None
            }
        };
    }
    Some(vec![(String::new(), Vec::new())])
}

/// The child's variables for one call instance: the call's arguments (evaluated in the
/// caller's scope), else the child's defaults, else unknown (the reason names both).
fn bind_variables(
    call: &ModuleCallFact,
    suffix: &str,
    scope: &Object,
    child: &ModuleFacts,
    child_id: &str,
    site: &Site<'_>,
) -> Object {
    let ctx = EvalContext {
        scope,
        extra: &[],
        module_dir: site.dir.to_owned(),
        host: site.host,
    };
    let empty = Object::new();
    let literals = EvalContext {
        scope: &empty,
        extra: &[],
        module_dir: site.root.join(child_id),
        host: &NoFilesystem,
    };
    let mut vars = Object::new();
    for (name, var) in &child.variables {
        let argument = call.arguments.iter().find(|(n, _)| n == name);
        let value = match (argument, &var.default) {
            (Some((_, a)), _) => match evaluate(&a.expr, &ctx) {
                Ok(v) => super::scope::detach(v, &format!("module.{}{suffix}.{name}", call.name)),
                Err(err) => Value::unknown(format!(
                    "`{name}` of `module.{}{suffix}`: {}",
                    call.name, err.message
                )),
            },
            (None, Some(d)) => {
                evaluate(&d.expr, &literals).unwrap_or_else(|err| Value::unknown(err.message))
            }
            (None, None) => Value::unknown(format!(
                "`var.{name}` of {child_id} has no default and `module.{}{suffix}` does not set it",
                call.name
            )),
        };
        vars.insert(name.as_str().to_owned(), convert_variable(value, var));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;
    use terraci_db::db::Database;
    use terraci_db::files::{File, FileContents, FileKind};

    /// The scanned line is the parser's line, or no answer.
    #[test]
    fn a_scanned_call_site_is_the_line_the_parser_locates() {
        let texts = [
            "module \"net\" {\n  source = \"../net\"\n}\n",
            "locals {\n  a = 1\n}\n\nmodule \"net\" {\n  count  = 2\n  source = \"../net\"\n  x      = { a = 1 }\n}\n",
            "module \"net\" {\n  providers = {\n    source = aws\n  }\n  source = \"../net\"\n}\n",
            "module \"net\" {\n  # module \"net\"\n  source = \"../net\"\n}\n",
            "module \"net\" {\r\n  source_x = 1\r\n  source = \"../net\"\r\n}\r\n",
            "module \"net\" { source = \"../net\" }\n",
            "module \"net\" {\n  source = \"../net\"\n  }\n",
            "\u{feff}module \"net\" {\n  source = \"../net\"\n}\n",
        ];
        let db = Database::default();
        let mut scanned = 0;
        for text in texts {
            let file = File::new(
                &db,
                "m/main.tf".into(),
                FileKind::Native,
                FileContents::Text(text.into()),
            );
            let facts = crate::facts::file_facts(&db, file);
            let call = facts.module_calls.first();
            let source = call.and_then(|c| c.source.as_ref()).expect(text);
            let anchor = source.anchor(source.expr.id);
            let located = crate::parse::locate(&db, &anchor).map(|(line, _)| line);
            if let Some(line) = scanned_attribute_line(text, "net", "source") {
                assert_eq!(Some(line), located, "{text:?}");
                scanned += 1;
            }
        }
        assert_eq!(scanned, 3, "the plain layouts are scanned");
    }
}
