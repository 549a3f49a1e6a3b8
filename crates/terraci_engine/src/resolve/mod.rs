//! Resolution: module facts -> evaluated state references -> dependency edges.
//!
//! Input: [`crate::facts::module_facts`] of every module, the project's eval settings.
//! Output, per module: its [`StateIdentity`] (from its own backend block), its evaluated
//! [`StateReference`]s (one per `terraform_remote_state` instance, its own and those of
//! the local modules it calls), and the [`ResolvedDependencies`] (edges + diagnostics)
//! found by matching references against every module (spec §4.3, as revised by the
//! real-monorepo rules). Invalidated by the module's facts (and its called modules'),
//! and for matching by the project's owners input (a copy of [`identity_index`] that
//! [`sync_owners`] refreshes), which changes only when some module's state identity or
//! the module set changes; read through [`owners_index`], which falls back to the query
//! while a load that needed no fresh resolution never set the input.
//!
//! One file per concern, in pipeline order:
//! - [`scope`]: variables and locals, evaluated on demand;
//! - [`identity`]: a module's own state identity and the owners index;
//! - [`references`]: `terraform_remote_state` instances, in the module and through
//!   local module calls;
//! - [`matching`]: the rules that map a reference to the module owning its state;
//! - [`summary`]: what the later stages read of each module, and the cache that keeps
//!   it (and each root's resolution) across runs.
//!
//! Filesystem functions (`file`, `templatefile`, `fileexists`, `fileset`) read through
//! on-demand salsa inputs ([`Db::extra_file`], [`Db::extra_dir`]), created by the database
//! through its `System` the first time an evaluation asks; a reference that reads a file
//! is invalidated by that file and nothing else (`Database::refresh_extra` re-reads them).

mod calls;
pub(crate) use calls::find_module;
mod declared;
mod identity;
mod matching;
mod references;
mod scope;
pub mod summary;

use std::collections::BTreeMap;

use crate::chunk::{chunk_modules, ModuleChunk};
use terraci_db::db::Db;
use terraci_db::diagnostic::{Anchor, Code, Diagnostic};
use terraci_db::files::{Module, Project};

pub use declared::config_rule_diagnostics;
pub use identity::{
    chunk_identities, chunk_identities_hash, identity_fields, identity_index, owners_index,
    state_identity, sync_owners,
};
pub(crate) use matching::Rule;
use matching::{match_reference, Match};
pub(crate) use references::module_references;
pub use scope::{cli_variables, command_line_env, module_scope, var_file_assignments, ModuleScope};
pub use summary::{module_summary, ModuleSummary, RootSummary};
pub(crate) use terraci_db::owners::{IdentityIndex, StateIdentity};

/// The fact and scope diagnostics of a chunk's modules, each with its module, in module
/// order (resolution diagnostics come with the graph).
#[salsa::tracked(returns(ref))]
pub fn chunk_diagnostics<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some(heads) = summary::held_heads(db, chunk) {
        for (m, head) in heads {
            let id = &m.info(db).id;
            let scope = head.root.iter().flat_map(|(_, scope)| scope);
            for d in head.fact_diagnostics.iter().chain(scope) {
                out.push(d.clone().with_module(id.clone()));
            }
        }
        return out;
    }
    let project = chunk.project(db);
    for &m in chunk_modules(db, chunk) {
        let info = m.info(db);
        let with_module = |d: &Diagnostic| d.clone().with_module(info.id.clone());
        let summary = module_summary(db, project, m);
        out.extend(summary.fact_diagnostics.iter().map(with_module));
        if let Some(root) = &summary.root {
            out.extend(root.scope_diagnostics.iter().map(with_module));
        }
    }
    out
}

/// The direct dependencies of a chunk's root modules, as indices among all root modules
/// ([`crate::chunk::roots`]), with their resolution diagnostics: what the graph reads of
/// a chunk ([`crate::graph::chunk_dependencies`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkDependencies {
    /// Per root module of the chunk, in order: `targets[at[i]..at[i + 1]]`, sorted.
    pub(crate) at: Vec<u32>,
    pub(crate) targets: Vec<u32>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

impl Default for ChunkDependencies {
    fn default() -> Self {
        ChunkDependencies {
            at: vec![0],
            targets: Vec::new(),
            diagnostics: Vec::new(),
        }
    }
}

impl ChunkDependencies {
    /// Adds the next root module's targets and diagnostics.
    pub(crate) fn push(
        &mut self,
        targets: &[u32],
        diagnostics: impl IntoIterator<Item = Diagnostic>,
    ) {
        self.targets.extend_from_slice(targets);
        self.at.push(self.targets.len() as u32);
        self.diagnostics.extend(diagnostics);
    }
}

/// Where an edge came from: the block instance, its config attribute, the rule that
/// matched it and the local module calls it was read through.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EdgeSource {
    pub name: String,
    /// `None` for an edge declared in `.terraci.yaml` (`dependencies.add`).
    pub anchor: Option<Anchor>,
    pub rule: Rule,
    pub via: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedDependencies {
    /// Dependency id -> the references that created the edge (in block order).
    pub(crate) edges: BTreeMap<String, Vec<EdgeSource>>,
    /// The dependencies' indices among the root modules ([`crate::chunk::roots`]), in
    /// the order of `edges`: what the graph is built from.
    pub(crate) targets: Vec<u32>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// References to state the config says other repositories own (`external_state`).
    pub external: Vec<(String, EdgeSource)>,
    /// The `dependencies.add` / `dependencies.ignore` rules (by index) that applied here.
    pub(crate) rules_used: Vec<(bool, usize)>,
}

/// Matches each reference of `module` against all modules (spec §4.3).
#[salsa::tracked(returns(ref))]
pub fn resolved_dependencies(
    db: &dyn Db,
    project: Project,
    module: Module,
) -> ResolvedDependencies {
    let cached = summary::cached_resolution(db, project, module)
        .or_else(|| summary::reused_resolution(db, project, module));
    if let Some(cached) = cached {
        return cached;
    }
    let summary = module_summary(db, project, module);
    let Some(root) = &summary.root else {
        return ResolvedDependencies::default();
    };
    let refs = &root.references;
    let index = owners_index(db, project);
    let info = module.info(db);
    let mut out = ResolvedDependencies {
        diagnostics: refs
            .diagnostics
            .iter()
            .map(|d| with_hint(d.clone(), &info.id, index))
            .collect(),
        ..Default::default()
    };
    let config = project.config(db);
    let deps = &config.dependencies;
    if refs.references.is_empty() && deps.add.is_empty() {
        return out;
    }
    let depth = project.pattern(db).depth();
    for r in &refs.references {
        let via = references::via_suffix(&r.via);
        let warning = |code, message: String| {
            Diagnostic::warning(code, format!("{message}{via}"))
                .with_module(&info.id)
                .with_anchor(r.anchor.clone())
        };
        match match_reference(&r.target, &info.id, depth, index) {
            Match::One(target, _) if target == info.id => out.diagnostics.push(warning(
                Code::SelfReference,
                format!(
                    "`data.terraform_remote_state.{}` reads this module's own state; no edge",
                    r.name
                ),
            )),
            Match::One(target, rule) => out.edges.entry(target).or_default().push(EdgeSource {
                name: r.name.clone(),
                anchor: Some(r.anchor.clone()),
                rule,
                via: r.via.clone(),
            }),
            // A partly known path whose known end fits several modules: the unknown part
            // is the reason there is no edge.
            Match::Ambiguous(rule, candidates) if r.unresolved.is_some() => {
                let mut d = r.unresolved.clone().expect("checked by the guard");
                d.message.push_str(&format!(
                    " (the known end of the path fits {} modules by {}: {})",
                    candidates.len(),
                    rule.as_str(),
                    candidates.join(", ")
                ));
                out.diagnostics.push(d);
            }
            Match::Ambiguous(rule, candidates) => out.diagnostics.push(warning(
                Code::AmbiguousRemoteState,
                format!(
                    "`data.terraform_remote_state.{}` matches {} modules by {}: {}; no edge ({})",
                    r.name,
                    candidates.len(),
                    rule.as_str(),
                    candidates.join(", "),
                    if matches!(rule, Rule::Identity | Rule::PartialIdentity) {
                        "two modules sharing one state is a bug"
                    } else {
                        "write the full state path to pick one"
                    }
                ),
            )),
            Match::None(_, _)
                if r.target
                    .identity
                    .as_ref()
                    .and_then(declared::state_url)
                    .is_some_and(|url| declared::is_external(config, &url)) =>
            {
                let url = r.target.identity.as_ref().and_then(declared::state_url);
                out.external.push((
                    url.unwrap_or_default(),
                    EdgeSource {
                        name: r.name.clone(),
                        anchor: Some(r.anchor.clone()),
                        rule: Rule::Declared,
                        via: r.via.clone(),
                    },
                ));
            }
            Match::None(looked_for, near_miss) => {
                let near_miss = near_miss.map(|m| format!(" ({m})")).unwrap_or_default();
                let d = match &r.unresolved {
                    // A partly known path whose tail matched nothing: the unknown part is
                    // the reason.
                    Some(d) => d.clone(),
                    None if r.target.path.is_some() => warning(
                        Code::UnmatchedRemoteState,
                        format!(
                            "no module for state path \"{looked_for}\"{near_miss}{}",
                            one_segment_off(&looked_for, index)
                                .map(|(id, seg)| format!(
                                    " (hint: the module `{id}` differs in one segment, `{seg}`)"
                                ))
                                .unwrap_or_default()
                        ),
                    ),
                    None => warning(
                        Code::UnmatchedRemoteState,
                        format!("no module with the state identity `{looked_for}`{near_miss}"),
                    ),
                };
                out.diagnostics.push(with_hint(d, &info.id, index));
            }
        }
    }
    // What the config says the code cannot.
    for (i, rule) in deps.add.iter().enumerate() {
        if !terraci_db::filter::glob_matches(&rule.from, &info.id) {
            continue;
        }
        for to in index
            .ids
            .iter()
            .filter(|to| terraci_db::filter::glob_matches(&rule.to, to))
        {
            if *to == info.id {
                continue;
            }
            out.rules_used.push((true, i));
            out.edges.entry(to.clone()).or_default().push(EdgeSource {
                name: rule
                    .reason
                    .clone()
                    .unwrap_or_else(|| "dependencies.add".into()),
                anchor: None,
                rule: Rule::Declared,
                via: Vec::new(),
            });
        }
    }
    for (i, rule) in deps.ignore.iter().enumerate() {
        if !terraci_db::filter::glob_matches(&rule.from, &info.id) {
            continue;
        }
        let ignored: Vec<String> = out
            .edges
            .keys()
            .filter(|to| terraci_db::filter::glob_matches(&rule.to, to))
            .cloned()
            .collect();
        for to in ignored {
            out.edges.remove(&to);
            out.rules_used.push((false, i));
            out.diagnostics.push(
                Diagnostic::new(
                    terraci_db::diagnostic::Severity::Info,
                    Code::IgnoredDependency,
                    format!(
                        "the edge {} -> {to} is ignored (`dependencies.ignore`{})",
                        info.id,
                        rule.reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                )
                .with_module(&info.id)
                .with_file(".terraci.yaml"),
            );
        }
    }
    let ids = &crate::chunk::roots(db, project).ids;
    // Resolution only ever names root modules, so each has an index.
    out.targets = out
        .edges
        .keys()
        .filter_map(|to| ids.binary_search(to).ok().map(|i| i as u32))
        .collect();
    // Kept for the whole run, one per module: no growth slack.
    for sources in out.edges.values_mut() {
        sources.shrink_to_fit();
    }
    out.diagnostics.shrink_to_fit();
    out.external.shrink_to_fit();
    out.rules_used.shrink_to_fit();
    out
}

/// A reference that found no module, whose block name is the last directory of exactly
/// one other module (`infra_google_monitoring`, `.../infra-google-monitoring`): the
/// message says so, as the likely target.
fn with_hint(mut d: Diagnostic, from: &str, index: &IdentityIndex) -> Diagnostic {
    if !matches!(
        d.code,
        Code::UnresolvedRemoteState | Code::UnmatchedRemoteState
    ) {
        return d;
    }
    // The block the diagnostic points into: `data "terraform_remote_state" NAME`.
    let name = match d.anchor.as_ref().map(|a| a.item.block.as_slice()) {
        Some([data, kind, name]) if data == "data" && kind == "terraform_remote_state" => {
            terraci_db::owners::hint_name(name)
        }
        _ => return d,
    };
    if let Some([one]) = index.by_name.get(&name).map(Vec::as_slice) {
        if one != from && !d.message.contains(one.as_str()) {
            d.message.push_str(&format!(
                " (hint: the block is named like the module `{one}`)"
            ));
        }
    }
    d
}

/// The one module id with as many segments as `path` that differs from it in exactly one
/// segment, by one or two characters (a typo, `stage/vpcx` for `stage/vpc`), and that
/// segment of the path.
fn one_segment_off(path: &str, index: &IdentityIndex) -> Option<(String, String)> {
    let segs: Vec<&str> = path.split('/').collect();
    if segs.len() < 2 {
        return None;
    }
    let near = |id: &str| -> Option<String> {
        let theirs: Vec<&str> = id.split('/').collect();
        if theirs.len() != segs.len() {
            return None;
        }
        let mut off = segs.iter().zip(&theirs).filter(|(a, b)| a != b);
        let (mine, their) = off.next()?;
        // Short names are close by chance (`rds`, `eks`): one edit for those.
        let allowed = if mine.len().min(their.len()) <= 4 {
            1
        } else {
            2
        };
        (off.next().is_none() && terraci_db::config::edit_distance(mine, their) <= allowed)
            .then(|| (*mine).to_owned())
    };
    let mut found = Vec::new();
    // The ids that share the first segment, and those that differ only in it.
    let first = format!("{}/", segs[0]);
    let rest = format!("/{}", segs[1..].join("/"));
    let candidates = index
        .ids
        .range(first.clone()..)
        .take_while(|id| id.starts_with(&first))
        .chain(index.ids.iter().filter(|id| id.ends_with(&rest)).take(2));
    for id in candidates {
        if let Some(seg) = near(id) {
            if !found.iter().any(|(f, _): &(String, String)| f == id) {
                found.push((id.clone(), seg));
            }
        }
        if found.len() > 1 {
            return None;
        }
    }
    found.pop()
}

/// One diagnostic per root cause: `unresolved-remote-state` warnings that all come from
/// the same variable without a value, in two or more modules, become one warning that
/// lists the modules (count and first few) and says how to set it. It keeps the first
/// one's position. Expects `diags` sorted (as [`terraci::workspace::Workspace::finish_diagnostics`]
/// leaves them); the result keeps that order.
pub fn group_root_causes(diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let cause = |d: &Diagnostic| {
        (d.code == Code::UnresolvedRemoteState)
            .then(|| scope::variable_without_value(&d.message))
            .flatten()
            .map(str::to_owned)
    };
    let mut modules: BTreeMap<String, (std::collections::BTreeSet<String>, usize)> =
        BTreeMap::new();
    for d in &diags {
        if let Some(var) = cause(d) {
            let entry = modules.entry(var).or_default();
            entry.0.insert(d.module.clone().unwrap_or_default());
            entry.1 += 1;
        }
    }
    modules.retain(|_, (mods, _)| mods.len() >= 2);
    if modules.is_empty() {
        return diags;
    }
    let mut out = Vec::with_capacity(diags.len());
    let mut done = std::collections::BTreeSet::new();
    for d in diags {
        let Some(var) = cause(&d).filter(|v| modules.contains_key(v)) else {
            out.push(d);
            continue;
        };
        if !done.insert(var.clone()) {
            continue;
        }
        let (mods, count) = &modules[&var];
        let mut d = d;
        d.message = format!(
            "`var.{var}` has no default, no tfvars value and no --var in {} modules ({}): {count} remote state locations cannot be resolved and make no edge; set it in `variables:` of .terraci.yaml for those modules, or pass --var {var}=VALUE",
            mods.len(),
            terraci_db::diagnostic::first_few(mods.iter().map(String::as_str)),
        );
        out.push(d);
    }
    out
}
