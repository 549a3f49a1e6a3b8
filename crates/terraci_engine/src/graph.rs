//! The dependency graph over all non-library modules.
//!
//! Input: [`resolved_dependencies`] of every module. Output: [`DependencyGraph`] with
//! edges (dependent -> dependency), a Kahn topological order with module-id tie-break,
//! levels, and every cycle as a path with the fewest `dependencies.ignore` entries that
//! break them all (`cycles`, [`minimal_ignores`]); [`edge_sources`] gives the references
//! behind each edge. Invalidated when any module's edges change; a fact-preserving edit is backdated
//! before it reaches this query. petgraph indices never leave this module.
//!
//! A one-file edit that changes an edge rebuilds this graph (watch mode runs it on every
//! such edit), so it is built from integers only: module indices (sorted ids: index order
//! is id order) in flat adjacency arrays, the ids themselves shared with [`roots`]. It
//! looks for cycles only when Kahn's algorithm leaves modules behind, and only then reads
//! the blocks behind their edges (their files' lines).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;

use crate::chunk::{chunk_modules, chunks, roots, ModuleChunk};

mod cycles;
use crate::resolve::{resolved_dependencies, EdgeSource};
pub use cycles::{ignore_yaml, minimal_ignores, ProposedIgnore};
use terraci_db::db::Db;
use terraci_db::diagnostic::Diagnostic;
use terraci_db::files::Project;

/// The dependency graph, over module indices (positions in [`Self::modules`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyGraph {
    /// Non-library module ids, sorted (shared with [`roots`]).
    pub modules: Arc<[String]>,
    /// Each strongly connected component of size > 1 as a path, smallest id first.
    pub cycles: Vec<Vec<String>>,
    /// The fewest `dependencies.ignore` entries that break every cycle
    /// ([`minimal_ignores`] per component), sorted by (from, to); empty without cycles.
    pub proposed_ignores: Vec<ProposedIgnore>,
    /// Every resolution diagnostic of every module, in module order, then the
    /// `dependency-cycle` error of a graph with cycles ([`cycle_diagnostic`]).
    pub diagnostics: Vec<Diagnostic>,
    /// Direct dependencies / dependents of each module, sorted, as adjacency lists in
    /// one array each (`forward[forward_at[i]..forward_at[i + 1]]`).
    forward_at: Vec<u32>,
    forward: Vec<u32>,
    backward_at: Vec<u32>,
    backward: Vec<u32>,
    /// Kahn order (dependencies first), ties broken by id. Modules in or behind a cycle
    /// are missing.
    order: Vec<u32>,
    /// Each module's level (the edge count of its longest dependency chain);
    /// `u32::MAX` for a module in or behind a cycle.
    level: Vec<u32>,
    level_count: usize,
}

impl DependencyGraph {
    /// The index of `id` in [`Self::modules`].
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.modules.binary_search_by(|m| m.as_str().cmp(id)).ok()
    }

    /// Direct dependencies of `id`, sorted.
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.index_of(id)
            .map(|i| self.names(self.dependency_indices(i)))
            .unwrap_or_default()
    }

    /// Direct dependents of `id`, sorted.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.index_of(id)
            .map(|i| self.names(adjacent(&self.backward_at, &self.backward, i)))
            .unwrap_or_default()
    }

    /// Direct dependencies of the module at `index` (indices into [`Self::modules`]),
    /// sorted.
    pub(crate) fn dependency_indices(&self, index: usize) -> &[u32] {
        adjacent(&self.forward_at, &self.forward, index)
    }

    fn names(&self, indices: &[u32]) -> Vec<&str> {
        indices
            .iter()
            .map(|&i| self.modules[i as usize].as_str())
            .collect()
    }

    /// Every edge as (dependent, dependency) indices, sorted.
    pub(crate) fn edge_indices(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.modules.len()).flat_map(move |i| {
            self.dependency_indices(i)
                .iter()
                .map(move |&to| (i as u32, to))
        })
    }

    /// Every edge as (dependent, dependency) ids, sorted.
    pub fn edges(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.edge_indices().map(|(from, to)| {
            (
                self.modules[from as usize].as_str(),
                self.modules[to as usize].as_str(),
            )
        })
    }

    pub fn edge_count(&self) -> usize {
        self.forward.len()
    }

    /// Kahn order (dependencies first), ties broken by id; modules in or behind a cycle
    /// are missing.
    pub fn order(&self) -> impl Iterator<Item = &str> + '_ {
        self.order
            .iter()
            .map(|&i| self.modules[i as usize].as_str())
    }

    /// `levels()[n]` = modules whose longest dependency chain has n edges, sorted.
    pub fn levels(&self) -> Vec<Vec<String>> {
        let mut levels = vec![Vec::new(); self.level_count];
        for (id, &l) in self.modules.iter().zip(&self.level) {
            if l != u32::MAX {
                levels[l as usize].push(id.clone());
            }
        }
        levels
    }

    /// The number of levels.
    pub fn level_count(&self) -> usize {
        self.level_count
    }

    /// `id` and everything it depends on (or, not `forward`, everything that depends on
    /// it), transitively.
    pub fn transitive(&self, start: &[String], forward: bool) -> BTreeSet<String> {
        let (at, list) = if forward {
            (&self.forward_at, &self.forward)
        } else {
            (&self.backward_at, &self.backward)
        };
        let mut seen = vec![false; self.modules.len()];
        let mut stack: Vec<usize> = start.iter().filter_map(|id| self.index_of(id)).collect();
        let mut out: BTreeSet<String> = start.iter().cloned().collect();
        while let Some(n) = stack.pop() {
            if !std::mem::replace(&mut seen[n], true) {
                out.insert(self.modules[n].clone());
                stack.extend(adjacent(at, list, n).iter().map(|&d| d as usize));
            }
        }
        out
    }

    pub fn level_of(&self, id: &str) -> Option<usize> {
        self.index_of(id)
            .map(|i| self.level[i])
            .filter(|&l| l != u32::MAX)
            .map(|l| l as usize)
    }
}

/// A graph's modules and edges, kept to tell what the next graph changed.
#[derive(Debug, Clone, Default)]
pub struct GraphShape {
    modules: Arc<[String]>,
    /// (dependent, dependency) indices, sorted.
    edges: Vec<(u32, u32)>,
}

impl GraphShape {
    pub fn of(graph: &DependencyGraph) -> GraphShape {
        GraphShape {
            modules: graph.modules.clone(),
            edges: graph.edge_indices().collect(),
        }
    }

    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// Modules added, modules removed and edges added or removed from `self` to `next`.
    pub fn changes_to(&self, next: &GraphShape) -> (usize, usize, usize) {
        if Arc::ptr_eq(&self.modules, &next.modules) || self.modules == next.modules {
            // Same index space: compare the sorted index pairs in one merge walk.
            let (mut a, mut b) = (self.edges.iter().peekable(), next.edges.iter().peekable());
            let mut changed = 0;
            loop {
                match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) if x == y => {
                        a.next();
                        b.next();
                    }
                    (Some(x), Some(y)) if x < y => {
                        changed += 1;
                        a.next();
                    }
                    (Some(_), Some(_)) | (None, Some(_)) => {
                        changed += 1;
                        b.next();
                    }
                    (Some(_), None) => {
                        changed += 1;
                        a.next();
                    }
                    (None, None) => return (0, 0, changed),
                }
            }
        }
        fn ids(s: &GraphShape) -> BTreeSet<&str> {
            s.modules.iter().map(String::as_str).collect()
        }
        fn edges(s: &GraphShape) -> BTreeSet<(&str, &str)> {
            let id = |i: u32| s.modules[i as usize].as_str();
            s.edges.iter().map(|&(a, b)| (id(a), id(b))).collect()
        }
        let (old, new) = (ids(self), ids(next));
        (
            new.difference(&old).count(),
            old.difference(&new).count(),
            edges(self).symmetric_difference(&edges(next)).count(),
        )
    }
}

fn adjacent<'a>(at: &[u32], list: &'a [u32], index: usize) -> &'a [u32] {
    match (at.get(index), at.get(index + 1)) {
        (Some(&start), Some(&end)) => &list[start as usize..end as usize],
        _ => &[],
    }
}

/// Every edge with the references that created it, sorted by (dependent, dependency).
pub fn edge_sources(db: &dyn Db, project: Project) -> Vec<((String, String), Vec<EdgeSource>)> {
    let roots = roots(db, project);
    let mut out = Vec::new();
    for (id, &m) in roots.ids.iter().zip(&roots.modules) {
        for (to, sources) in &resolved_dependencies(db, project, m).edges {
            out.push(((id.clone(), to.clone()), sources.clone()));
        }
    }
    out
}

#[salsa::tracked(returns(ref))]
pub fn dependency_graph(db: &dyn Db, project: Project) -> DependencyGraph {
    #[cfg(debug_assertions)]
    assert!(
        project
            .owners(db)
            .as_ref()
            .is_none_or(|owners| owners == crate::resolve::identity_index(db, project)),
        "the owners input is out of date: call resolve::sync_owners after changing inputs"
    );
    let roots = roots(db, project);
    let modules = &roots.ids;

    let mut forward_at = Vec::with_capacity(modules.len() + 1);
    let mut forward = Vec::new();
    let mut in_degree = vec![0u32; modules.len()];
    let mut diagnostics = Vec::new();
    forward_at.push(0);
    // By chunks (see `crate::chunk`), whose root modules come in the roots' order.
    for chunk in chunks(db, project) {
        let part = chunk_dependencies(db, chunk);
        for &to in &part.targets {
            in_degree[to as usize] += 1;
        }
        let base = forward.len() as u32;
        forward.extend_from_slice(&part.targets);
        forward_at.extend(part.at[1..].iter().map(|&at| base + at));
        diagnostics.extend(part.diagnostics.iter().cloned());
    }
    // Dependents, filled in ascending dependent order: each list comes out sorted.
    let mut backward_at = Vec::with_capacity(modules.len() + 1);
    backward_at.push(0u32);
    for &d in &in_degree {
        backward_at.push(backward_at.last().copied().unwrap_or(0) + d);
    }
    let mut fill: Vec<u32> = backward_at[..modules.len()].to_vec();
    let mut backward = vec![0u32; forward.len()];
    for from in 0..modules.len() {
        for &to in adjacent(&forward_at, &forward, from) {
            backward[fill[to as usize] as usize] = from as u32;
            fill[to as usize] += 1;
        }
    }
    let (order, mut level) = kahn(&forward_at, &backward_at, &backward);
    let mut in_order = vec![false; modules.len()];
    for &i in &order {
        in_order[i as usize] = true;
    }
    let mut level_count = 0;
    for (l, &reached) in level.iter_mut().zip(&in_order) {
        if reached {
            level_count = level_count.max(*l as usize + 1);
        } else {
            *l = u32::MAX;
        }
    }
    // Every cycle stops Kahn's algorithm; without leftovers there is none to look for,
    // and the cycles are among the leftovers' edges between themselves.
    let found = if order.len() < modules.len() {
        let edges: Vec<(u32, u32)> = (0..modules.len())
            .filter(|&i| !in_order[i])
            .flat_map(|i| {
                adjacent(&forward_at, &forward, i)
                    .iter()
                    .filter(|&&to| !in_order[to as usize])
                    .map(move |&to| (i as u32, to))
            })
            .collect();
        cycles::cycles_of(db, project, modules, &edges)
    } else {
        cycles::Cycles::default()
    };
    diagnostics.extend(found.diagnostic);
    DependencyGraph {
        modules: modules.clone(),
        cycles: found.cycles,
        proposed_ignores: found.proposed,
        diagnostics,
        forward_at,
        forward,
        backward_at,
        backward,
        order,
        level,
        level_count,
    }
}

/// Kahn's algorithm over module indices, smallest ready index (= smallest id) first.
/// Returns the order and each module's level (0 for modules left out by a cycle).
fn kahn(forward_at: &[u32], backward_at: &[u32], backward: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let n = forward_at.len().saturating_sub(1);
    let mut remaining: Vec<u32> = (0..n).map(|i| forward_at[i + 1] - forward_at[i]).collect();
    let mut level = vec![0u32; n];
    let mut ready: BinaryHeap<Reverse<u32>> = remaining
        .iter()
        .enumerate()
        .filter(|(_, &r)| r == 0)
        .map(|(i, _)| Reverse(i as u32))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(m)) = ready.pop() {
        order.push(m);
        let next = level[m as usize] + 1;
        for &d in adjacent(backward_at, backward, m as usize) {
            let d = d as usize;
            level[d] = level[d].max(next);
            remaining[d] -= 1;
            if remaining[d] == 0 {
                ready.push(Reverse(d as u32));
            }
        }
    }
    (order, level)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Edges from pairs of ids (also for `cycles`' tests).
    pub(super) fn e(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    pub(super) fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Kahn over sorted `modules`, as ids: the order and the levels.
    fn kahn_ids(modules: &[String], edges: &[(String, String)]) -> (Vec<String>, Vec<Vec<String>>) {
        let index = |id: &str| modules.iter().position(|m| m == id).unwrap() as u32;
        let mut forward = vec![Vec::new(); modules.len()];
        let mut backward = vec![Vec::new(); modules.len()];
        for (from, to) in edges {
            forward[index(from) as usize].push(index(to));
            backward[index(to) as usize].push(index(from));
        }
        let csr = |lists: Vec<Vec<u32>>| {
            let mut at = vec![0u32];
            let mut flat = Vec::new();
            for mut l in lists {
                l.sort();
                flat.extend(l);
                at.push(flat.len() as u32);
            }
            (at, flat)
        };
        let ((forward_at, _), (backward_at, backward)) = (csr(forward), csr(backward));
        let (order, level) = kahn(&forward_at, &backward_at, &backward);
        let mut levels: Vec<Vec<String>> = Vec::new();
        for &i in &order {
            let l = level[i as usize] as usize;
            if levels.len() <= l {
                levels.resize(l + 1, Vec::new());
            }
            levels[l].push(modules[i as usize].clone());
        }
        for l in &mut levels {
            l.sort();
        }
        let order = order.iter().map(|&i| modules[i as usize].clone()).collect();
        (order, levels)
    }

    #[test]
    fn levels_of_the_how_it_works_page() {
        let modules = ids(&["app", "eks", "rds", "vpc"]);
        let edges = e(&[
            ("eks", "vpc"),
            ("rds", "vpc"),
            ("app", "eks"),
            ("app", "rds"),
        ]);
        let (order, levels) = kahn_ids(&modules, &edges);
        assert_eq!(order, ["vpc", "eks", "rds", "app"]);
        assert_eq!(
            levels,
            vec![ids(&["vpc"]), ids(&["eks", "rds"]), ids(&["app"])]
        );
    }
}

pub(crate) use crate::resolve::ChunkDependencies;

#[salsa::tracked(returns(ref))]
pub fn chunk_dependencies<'db>(db: &'db dyn Db, chunk: ModuleChunk<'db>) -> ChunkDependencies {
    if let Some(held) = crate::resolve::summary::held_dependencies(db, chunk) {
        return held;
    }
    let project = chunk.project(db);
    let mut out = ChunkDependencies::default();
    for &m in chunk_modules(db, chunk) {
        if m.info(db).is_root() {
            let resolved = resolved_dependencies(db, project, m);
            out.push(&resolved.targets, resolved.diagnostics.iter().cloned());
        }
    }
    out
}
