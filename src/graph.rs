//! The dependency graph over all non-library modules.
//!
//! Input: [`resolved_dependencies`] of every module. Output: [`DependencyGraph`] with
//! edges (dependent -> dependency, each with its sources), a Kahn topological order with
//! module-id tie-break, levels, and every cycle as a path. Invalidated when any module's
//! edges change; a fact-preserving edit is backdated before it reaches this query.
//! petgraph indices never leave this module.
//!
//! A one-file edit that changes an edge rebuilds this graph (watch mode runs it on every
//! such edit), so it works on module indices (sorted ids: index order is id order) and
//! looks for cycles only when Kahn's algorithm leaves modules behind.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

use petgraph::graphmap::DiGraphMap;

use crate::db::Db;
use crate::diagnostic::Diagnostic;
use crate::files::Project;
use crate::resolve::{resolved_dependencies, EdgeSource};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyGraph {
    /// Non-library module ids, sorted.
    pub modules: Vec<String>,
    /// (dependent, dependency) -> sources.
    pub edges: BTreeMap<(String, String), Vec<EdgeSource>>,
    /// Kahn order (dependencies first), ties broken by id. Modules in or behind a cycle
    /// are missing.
    pub order: Vec<String>,
    /// `levels[n]` = modules whose longest dependency chain has n edges.
    pub levels: Vec<Vec<String>>,
    /// Each strongly connected component of size > 1 as a path, smallest id first.
    pub cycles: Vec<Vec<String>>,
    /// Every resolution diagnostic of every module, in module order.
    pub diagnostics: Vec<Diagnostic>,
    /// Index in `modules` -> indices of its direct dependencies / dependents, sorted.
    forward: Vec<Vec<u32>>,
    backward: Vec<Vec<u32>>,
}

impl DependencyGraph {
    /// The index of `id` in [`Self::modules`].
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.modules.binary_search_by(|m| m.as_str().cmp(id)).ok()
    }

    /// Direct dependencies of `id`, sorted.
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.index_of(id)
            .map(|i| self.names(&self.forward[i]))
            .unwrap_or_default()
    }

    /// Direct dependents of `id`, sorted.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.index_of(id)
            .map(|i| self.names(&self.backward[i]))
            .unwrap_or_default()
    }

    /// Direct dependencies of the module at `index` (indices into [`Self::modules`]),
    /// sorted.
    pub fn dependency_indices(&self, index: usize) -> &[u32] {
        self.forward
            .get(index)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    fn names(&self, indices: &[u32]) -> Vec<&str> {
        indices
            .iter()
            .map(|&i| self.modules[i as usize].as_str())
            .collect()
    }

    /// `id` and everything it depends on, transitively.
    pub fn transitive(&self, start: &[String], forward: bool) -> BTreeSet<String> {
        let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (from, to) in self.edges.keys() {
            if forward {
                adj.entry(from).or_default().push(to);
            } else {
                adj.entry(to).or_default().push(from);
            }
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut stack: Vec<&str> = start.iter().map(String::as_str).collect();
        while let Some(n) = stack.pop() {
            if seen.insert(n.to_owned()) {
                if let Some(next) = adj.get(n) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        seen
    }

    pub fn level_of(&self, id: &str) -> Option<usize> {
        self.levels.iter().position(|l| l.iter().any(|m| m == id))
    }
}

#[salsa::tracked(returns(ref))]
pub fn dependency_graph(db: &dyn Db, project: Project) -> DependencyGraph {
    let mut roots: Vec<(&str, crate::files::Module)> = project
        .modules(db)
        .iter()
        .map(|&m| (m.info(db).id.as_str(), m))
        .filter(|&(_, m)| m.info(db).is_root())
        .collect();
    // The project keeps its modules sorted by id; sorting again is a no-op check.
    if !roots.is_sorted_by(|a, b| a.0 <= b.0) {
        roots.sort_by(|a, b| a.0.cmp(b.0));
    }
    let modules: Vec<String> = roots.iter().map(|(id, _)| (*id).to_owned()).collect();
    let index = |id: &str| modules.binary_search_by(|m| m.as_str().cmp(id)).ok();

    let mut edges = Vec::new();
    let mut forward: Vec<Vec<u32>> = vec![Vec::new(); modules.len()];
    let mut backward: Vec<Vec<u32>> = vec![Vec::new(); modules.len()];
    let mut diagnostics = Vec::new();
    for (from, &(id, m)) in roots.iter().enumerate() {
        let resolved = resolved_dependencies(db, project, m);
        // `resolved.edges` is sorted by dependency id, and modules come in id order, so
        // the edge keys arrive sorted.
        for (to, sources) in &resolved.edges {
            edges.push(((id.to_owned(), to.clone()), sources.clone()));
            // Resolution only ever names root modules, so `to` always has an index.
            if let Some(to) = index(to) {
                forward[from].push(to as u32);
                backward[to].push(from as u32);
            }
        }
        diagnostics.extend(resolved.diagnostics.iter().cloned());
    }
    // `backward` lists were filled in ascending `from` order: already sorted.
    let (order, level) = kahn(&forward, &backward);
    let mut levels: Vec<Vec<String>> = Vec::new();
    let mut in_order = vec![false; modules.len()];
    for &i in &order {
        in_order[i as usize] = true;
    }
    // Walking indices in id order fills each level sorted.
    for (i, id) in modules.iter().enumerate() {
        if !in_order[i] {
            continue;
        }
        let l = level[i] as usize;
        if levels.len() <= l {
            levels.resize(l + 1, Vec::new());
        }
        levels[l].push(id.clone());
    }
    let edges: BTreeMap<(String, String), Vec<EdgeSource>> = edges.into_iter().collect();
    // Every cycle stops Kahn's algorithm; without leftovers there is none to look for.
    let cycles = if order.len() < modules.len() {
        cycles(&modules, edges.keys())
    } else {
        Vec::new()
    };
    DependencyGraph {
        order: order.iter().map(|&i| modules[i as usize].clone()).collect(),
        modules,
        edges,
        levels,
        cycles,
        diagnostics,
        forward,
        backward,
    }
}

/// Kahn's algorithm over module indices, smallest ready index (= smallest id) first.
/// Returns the order and each module's level (0 for modules left out by a cycle).
fn kahn(forward: &[Vec<u32>], backward: &[Vec<u32>]) -> (Vec<u32>, Vec<u32>) {
    let mut remaining: Vec<usize> = forward.iter().map(Vec::len).collect();
    let mut level = vec![0u32; forward.len()];
    let mut ready: BinaryHeap<Reverse<u32>> = remaining
        .iter()
        .enumerate()
        .filter(|(_, &n)| n == 0)
        .map(|(i, _)| Reverse(i as u32))
        .collect();
    let mut order = Vec::with_capacity(forward.len());
    while let Some(Reverse(m)) = ready.pop() {
        order.push(m);
        let next = level[m as usize] + 1;
        for &d in &backward[m as usize] {
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

fn cycles<'a>(
    modules: &[String],
    edges: impl Iterator<Item = &'a (String, String)>,
) -> Vec<Vec<String>> {
    let mut g: DiGraphMap<&str, ()> = DiGraphMap::new();
    for m in modules {
        g.add_node(m);
    }
    let mut succ: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in edges {
        g.add_edge(from, to, ());
        succ.entry(from).or_default().insert(to);
    }
    let mut out = Vec::new();
    for scc in petgraph::algo::tarjan_scc(&g) {
        if scc.len() < 2 {
            continue;
        }
        let members: BTreeSet<&str> = scc.iter().copied().collect();
        let start = *members.first().expect("non-empty component");
        // Shortest way back to `start`, neighbours in id order: deterministic and readable.
        let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue: VecDeque<&str> = VecDeque::from([start]);
        let mut closing = None;
        'bfs: while let Some(n) = queue.pop_front() {
            for &next in succ.get(n).into_iter().flatten() {
                if !members.contains(next) {
                    continue;
                }
                if next == start {
                    closing = Some(n);
                    break 'bfs;
                }
                if next != start && !prev.contains_key(next) {
                    prev.insert(next, n);
                    queue.push_back(next);
                }
            }
        }
        let mut path = Vec::new();
        let mut cur = closing.expect("a strongly connected component has a cycle");
        while cur != start {
            path.push(cur.to_owned());
            cur = prev[cur];
        }
        path.push(start.to_owned());
        path.reverse();
        out.push(path);
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    fn ids(list: &[&str]) -> Vec<String> {
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
        let (order, level) = kahn(&forward, &backward);
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

    #[test]
    fn a_cycle_is_one_path_from_its_smallest_id() {
        let modules = ids(&["app", "eks", "vpc", "x"]);
        let edges = e(&[("vpc", "eks"), ("eks", "app"), ("app", "vpc"), ("x", "vpc")]);
        assert_eq!(
            cycles(&modules, edges.iter()),
            vec![ids(&["app", "vpc", "eks"])]
        );
        let (order, _) = kahn_ids(&modules, &edges);
        assert!(order.is_empty());
    }
}
