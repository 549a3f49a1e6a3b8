//! Change propagation (spec §6): changed paths -> changed modules -> affected modules.
//!
//! Input: the [`Selection`]'s change set (read from git outside salsa by `vcs`), module
//! facts (for uses-library links) and the [`dependency_graph`]. Output: [`Affected`] with a
//! reason chain per module. A new change set re-runs only this query and what follows.

use std::collections::{BTreeMap, BTreeSet};

use crate::db::Db;
use crate::diagnostic::Diagnostic;
use crate::facts::{literal_string, module_facts};
use crate::files::{FileKind, Project, Role, Selection};
use crate::graph::dependency_graph;
use crate::system::normalize;

/// Library directory -> root modules that use it, directly or through other libraries.
#[salsa::tracked(returns(ref))]
pub fn library_users(db: &dyn Db, project: Project) -> BTreeMap<String, BTreeSet<String>> {
    // Direct links: directory of a module -> directories its local `module` calls name.
    let mut calls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &m in project.modules(db) {
        let id = &m.info(db).id;
        for call in &module_facts(db, m).module_calls {
            let Some(source) = call.source.as_ref().and_then(|s| literal_string(&s.expr)) else {
                continue;
            };
            if !(source.starts_with("./") || source.starts_with("../")) {
                continue;
            }
            let target = normalize(&camino::Utf8Path::new(id).join(source));
            let target = target.as_str().trim_end_matches('/').to_owned();
            if !target.starts_with("..") && target != *id {
                calls.entry(id.clone()).or_default().insert(target);
            }
        }
    }
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &m in project.modules(db) {
        let info = m.info(db);
        if !info.is_root() {
            continue;
        }
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = calls.get(&info.id).into_iter().flatten().collect();
        while let Some(dir) = stack.pop() {
            if seen.insert(dir.clone()) {
                stack.extend(calls.get(dir).into_iter().flatten());
            }
        }
        for dir in seen {
            users.entry(dir).or_default().insert(info.id.clone());
        }
    }
    users
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affected {
    /// Root modules marked by a changed file (before filters), sorted.
    pub changed_modules: Vec<String>,
    /// Affected module -> reasons (before filters).
    pub affected: BTreeMap<String, Vec<String>>,
    pub diagnostics: Vec<Diagnostic>,
}

fn contains(dir: &str, path: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// The affected set of the selection's change set; every root module when there is none.
#[salsa::tracked(returns(ref))]
pub fn affected(db: &dyn Db, project: Project, selection: Selection) -> Affected {
    let graph = dependency_graph(db, project);
    let Some(changes) = selection.changes(db) else {
        return Affected {
            changed_modules: Vec::new(),
            affected: graph
                .modules
                .iter()
                .map(|m| (m.clone(), Vec::new()))
                .collect(),
            diagnostics: Vec::new(),
        };
    };
    let roots: BTreeSet<&str> = graph.modules.iter().map(String::as_str).collect();
    let all_dirs: BTreeSet<&str> = project
        .modules(db)
        .iter()
        .map(|m| m.info(db).id.as_str())
        .collect();
    let libs = library_users(db, project);
    let depth = project.pattern(db).depth();
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    for path in &changes.files {
        let owner = roots
            .iter()
            .filter(|m| contains(m, path))
            .max_by_key(|m| m.len());
        if let Some(owner) = owner {
            let rel = &path[owner.len() + 1..];
            reasons
                .entry((*owner).to_owned())
                .or_default()
                .push(format!("changed: {rel}"));
        } else if let Some((dir, name)) = path.rsplit_once('/') {
            let is_tf = FileKind::of(name).is_some_and(|k| !k.is_vars());
            if is_tf
                && dir.split('/').count() >= depth
                && !all_dirs.contains(dir)
                && !all_dirs.iter().any(|d| contains(d, dir))
            {
                deleted.insert(dir.to_owned());
            }
        }
        for (lib, users) in libs {
            if contains(lib, path) {
                let rel = &path[lib.len() + 1..];
                for user in users {
                    reasons
                        .entry(user.clone())
                        .or_default()
                        .push(format!("uses library {lib} (changed: {rel})"));
                }
            }
        }
    }
    let changed_modules: Vec<String> = reasons.keys().cloned().collect();
    let mut affected = reasons.clone();

    // Dependents, breadth-first so each gets the shortest reason chain.
    let mut queue: std::collections::VecDeque<String> = changed_modules.iter().cloned().collect();
    while let Some(m) = queue.pop_front() {
        let why = describe(&m, &affected);
        for d in graph.dependents(&m) {
            if !affected.contains_key(d) {
                affected.insert(d.to_owned(), vec![format!("depends on {m} ({why})")]);
                queue.push_back(d.to_owned());
            }
        }
    }
    if changes.include_dependencies {
        let mut queue: std::collections::VecDeque<String> =
            changed_modules.iter().cloned().collect();
        while let Some(m) = queue.pop_front() {
            for d in graph.dependencies(&m) {
                if !affected.contains_key(d) {
                    affected.insert(d.to_owned(), vec![format!("dependency of {m}")]);
                    queue.push_back(d.to_owned());
                }
            }
        }
    }
    let diagnostics = deleted
        .into_iter()
        .map(|id| {
            Diagnostic::warning(
                "deleted-module",
                "module deleted by this change; its resources are not destroyed by this pipeline",
            )
            .with_module(id)
        })
        .collect();
    Affected {
        changed_modules,
        affected,
        diagnostics,
    }
}

fn describe(m: &str, affected: &BTreeMap<String, Vec<String>>) -> String {
    match affected.get(m).and_then(|r| r.first()) {
        Some(r) if r.starts_with("changed") || r.starts_with("uses library") => "changed".into(),
        Some(r) => r.clone(),
        None => "changed".into(),
    }
}

/// Roles never reach the affected set other than `Root`; exported for `validate`.
pub fn is_target_role(role: Role) -> bool {
    role == Role::Root
}
