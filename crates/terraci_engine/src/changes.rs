//! Change propagation (spec §6): changed paths -> changed modules -> affected modules.
//!
//! Input: the [`Selection`]'s change set (read from git outside salsa by `vcs`), module
//! facts (for uses-library links) and the [`dependency_graph`]. Output: [`Affected`] with a
//! reason chain per module. A new change set re-runs only this query and what follows.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::graph::dependency_graph;
use terraci_db::db::Db;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::files::{FileKind, Project, Role, Selection};
use terraci_db::system::normalize;

/// What running terraform or terraci leaves in a checkout (`.terraform/`, plan files,
/// the plan results a plan job keeps, `.terraci/` logs and caches): never a change of the
/// module, ignored or not by git. After one local run every module would otherwise be
/// "changed".
pub(crate) fn is_run_output(path: &str) -> bool {
    // The plan results of `local-exec plan` and of the pipelines' plan jobs (the IR's
    // `contrib::PLAN_RESULT_FILES`, named here: this stage comes first).
    const PLAN_RESULTS: [&str; 3] = ["plan.txt", "plan.json", "plan.result.json"];
    path.split('/')
        .any(|part| part == ".terraform" || part == ".terraci")
        || path.ends_with(".tfplan")
        || PLAN_RESULTS.contains(&path.rsplit('/').next().unwrap_or(path))
}

/// Direct uses-library links: module directory -> the directories its local `module`
/// sources name (`./`, `../`), for every discovered directory, libraries included.
#[salsa::tracked(returns(ref))]
pub fn library_links(db: &dyn Db, project: Project) -> BTreeMap<String, BTreeSet<String>> {
    let mut calls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Each module's literal call sources, from the summary cache's heads where a whole
    // chunk holds there (no summary decoded whole for them).
    let sources = crate::chunk::chunks(db, project)
        .into_iter()
        .flat_map(
            |chunk| match crate::resolve::summary::held_heads(db, chunk) {
                Some(heads) => heads
                    .iter()
                    .map(|(m, head)| (*m, &head.call_sources[..]))
                    .collect::<Vec<_>>(),
                None => crate::chunk::chunk_modules(db, chunk)
                    .iter()
                    .map(|&m| {
                        let summary = crate::resolve::module_summary(db, project, m);
                        (m, &summary.call_sources[..])
                    })
                    .collect(),
            },
        );
    for (m, call_sources) in sources {
        let id = &m.info(db).id;
        for source in call_sources {
            if !(source.starts_with("./") || source.starts_with("../")) {
                continue;
            }
            let target = normalize(&camino::Utf8Path::new(id).join(source));
            let target = target.as_str().trim_end_matches('/').to_owned();
            // A source above the project dir holds no project file that could change.
            if !target.starts_with("..") && !target.is_empty() && target != *id {
                calls.entry(id.clone()).or_default().insert(target);
            }
        }
    }
    calls
}

/// Library directory -> root modules that use it, directly or through other libraries.
#[salsa::tracked(returns(ref))]
pub(crate) fn library_users(db: &dyn Db, project: Project) -> BTreeMap<String, BTreeSet<String>> {
    let calls = library_links(db, project);
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Only a module with calls uses a library: the others are not looked at.
    for (id, called) in calls {
        let Some(info) = crate::resolve::find_module(db, project, id).map(|m| m.info(db)) else {
            continue;
        };
        if !info.is_root() {
            continue;
        }
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = called.iter().collect();
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

/// How a listed library module is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibraryUse {
    /// By these root modules, directly or through other libraries.
    By(BTreeSet<String>),
    /// Not itself, but it sits inside this used library (its examples, its own
    /// submodules) and ships with it.
    PartOf(String),
    Unused,
}

/// Every listed library module (sorted by id) and how it is used.
pub fn library_usage(db: &dyn Db, project: Project) -> Vec<(String, LibraryUse)> {
    let users = library_users(db, project);
    project
        .modules(db)
        .iter()
        .map(|m| m.info(db))
        .filter(|info| info.role == Role::Library)
        .map(|info| {
            let usage = match users.get(&info.id) {
                Some(by) => LibraryUse::By(by.clone()),
                None => match ancestors(&info.id).find(|dir| users.contains_key(*dir)) {
                    Some(dir) => LibraryUse::PartOf(dir.to_owned()),
                    None => LibraryUse::Unused,
                },
            };
            (info.id.clone(), usage)
        })
        .collect()
}

/// `unused-library` warnings: listed library modules that no module reaches through a
/// local `source`, and that are not part of a library that is reached.
pub fn unused_libraries(db: &dyn Db, project: Project) -> Vec<Diagnostic> {
    library_usage(db, project)
        .into_iter()
        .filter(|(_, usage)| *usage == LibraryUse::Unused)
        .map(|(id, _)| id)
        .map(|id| {
            Diagnostic::warning(
                Code::UnusedLibrary,
                "library module is used by no module (no local `source` reaches it)",
            )
            .with_module(id)
        })
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Affected {
    /// Root modules marked by a changed file (before filters), sorted.
    pub changed_modules: Vec<String>,
    /// Affected module -> reasons (before filters).
    pub affected: BTreeMap<String, Vec<String>>,
    /// Every root module is affected (no change set): `affected` lists them all.
    pub(crate) all_roots: bool,
    pub diagnostics: Vec<Diagnostic>,
}

fn contains(dir: &str, path: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// The directories above `path`, deepest first: `a/b/c.tf` -> `a/b`, `a`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = path;
    std::iter::from_fn(move || {
        let (dir, _) = rest.rsplit_once('/')?;
        rest = dir;
        Some(dir)
    })
}

/// A submodule that moved or holds uncommitted changes: its files are not listed, so it
/// marks the deepest module whose directory holds the submodule (or is it), and every
/// module inside it.
fn mark_submodule(
    path: &str,
    graph: &crate::graph::DependencyGraph,
    reasons: &mut BTreeMap<String, Vec<String>>,
) {
    let owner = std::iter::once(path)
        .chain(ancestors(path))
        .find(|dir| graph.index_of(dir).is_some());
    if let Some(owner) = owner {
        let reason = match path.get(owner.len() + 1..) {
            Some(rel) => format!("changed: {rel} (submodule)"),
            None => "changed: the submodule checked out here".to_owned(),
        };
        reasons.entry(owner.to_owned()).or_default().push(reason);
    }
    let inside = format!("{path}/");
    let roots = &graph.modules;
    let from = roots.partition_point(|root| root.as_str() < inside.as_str());
    for root in &roots[from..] {
        if !root.starts_with(&inside) {
            break;
        }
        reasons
            .entry(root.clone())
            .or_default()
            .push(format!("inside submodule {path} (changed)"));
    }
}

/// The affected set of the selection's change set; every root module when there is none.
///
/// A changed file marks the deepest module whose directory holds it, and every module
/// that uses (transitively) a library directory holding it; the marked modules' dependents
/// follow, each with the shortest reason chain. The files of a deleted module belong to
/// it, not to a module above it, and give a `deleted-module` warning instead.
#[salsa::tracked(returns(ref))]
pub fn affected(db: &dyn Db, project: Project, selection: Selection) -> Affected {
    let Some(changes) = selection.changes(db) else {
        // Every root module, read from the module list rather than the graph: an edit
        // that changes an edge does not change this set, and need not recompute it.
        return Affected {
            changed_modules: Vec::new(),
            affected: project
                .modules(db)
                .iter()
                .map(|m| m.info(db))
                .filter(|info| info.is_root())
                .map(|info| (info.id.clone(), Vec::new()))
                .collect(),
            all_roots: true,
            diagnostics: Vec::new(),
        };
    };
    let graph = dependency_graph(db, project);
    // Root module ids are looked up in the graph's sorted list.
    let is_root = |dir: &str| graph.index_of(dir).is_some();
    let library_paths: Vec<&str> = project
        .config(db)
        .library_modules
        .paths
        .iter()
        .map(|p| p.trim_start_matches("./").trim_matches('/'))
        .filter(|p| !p.is_empty())
        .collect();
    let libs = library_users(db, project);
    let depth = project.pattern(db).depth();

    // A Terraform file in a directory that discovery would have made a module, but that
    // is no module now: the module was deleted (or renamed away).
    let deleted: BTreeSet<&str> = changes
        .files
        .iter()
        .filter_map(|path| {
            let (dir, name) = path.rsplit_once('/')?;
            let terraform = FileKind::of(name).is_some_and(|k| !k.is_vars());
            let hidden = dir.split('/').any(|part| part.starts_with('.'));
            let library = library_paths.iter().any(|l| dir == *l || contains(l, dir));
            (terraform
                && !hidden
                && !library
                && dir.split('/').count() >= depth
                && !is_root(dir)
                && crate::resolve::find_module(db, project, dir).is_none())
            .then_some(dir)
        })
        .collect();

    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in changes.files.iter().filter(|p| !is_run_output(p)) {
        let submodule = changes.submodules.contains(path);
        if submodule {
            mark_submodule(path, graph, &mut reasons);
        } else {
            let owner = ancestors(path).find(|dir| is_root(dir) || deleted.contains(dir));
            if let Some(owner) = owner.filter(|dir| is_root(dir)) {
                let rel = &path[owner.len() + 1..];
                reasons
                    .entry(owner.to_owned())
                    .or_default()
                    .push(format!("changed: {rel}"));
            }
        }
        // A submodule may itself be a library directory.
        let own = submodule.then_some(path.as_str());
        for lib in own.into_iter().chain(ancestors(path)) {
            let Some(users) = libs.get(lib) else { continue };
            let changed = match path.get(lib.len() + 1..) {
                Some(rel) if submodule => format!("{rel} (submodule)"),
                Some(rel) => rel.to_owned(),
                None => "the submodule checked out here".to_owned(),
            };
            for user in users {
                reasons
                    .entry(user.clone())
                    .or_default()
                    .push(format!("uses library {lib} (changed: {changed})"));
            }
        }
    }
    let changed_modules: Vec<String> = reasons.keys().cloned().collect();
    let mut affected = reasons;

    // Breadth-first from the changed modules, so each module gets the shortest chain;
    // each module's links (the graph's, sorted) in order.
    let mut spread = |forward: bool, verb: &str| {
        let mut queue: VecDeque<String> = changed_modules.iter().cloned().collect();
        while let Some(m) = queue.pop_front() {
            let why = describe(&m, &affected);
            let links = if forward {
                graph.dependencies(&m)
            } else {
                graph.dependents(&m)
            };
            for next in links {
                if !affected.contains_key(next) {
                    affected.insert(next.to_owned(), vec![format!("{verb} {m} ({why})")]);
                    queue.push_back(next.to_owned());
                }
            }
        }
    };
    spread(false, "depends on");
    if changes.include_dependencies {
        spread(true, "dependency of");
    }

    let diagnostics = deleted
        .into_iter()
        .map(|id| {
            Diagnostic::warning(
                Code::DeletedModule,
                "module deleted by this change; its resources are not destroyed by this pipeline",
            )
            .with_module(id)
        })
        .collect();
    Affected {
        changed_modules,
        affected,
        all_roots: false,
        diagnostics,
    }
}

/// How a module that passes the change on is named in its neighbour's reason: `changed`
/// for a changed module, else its own chain.
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
