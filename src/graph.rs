//! The dependency graph over all non-library modules.
//!
//! Input: [`resolved_dependencies`] of every module. Output: [`DependencyGraph`] with
//! edges (dependent -> dependency, each with its sources), a Kahn topological order with
//! module-id tie-break, levels, and every cycle as a path. Invalidated when any module's
//! edges change; a fact-preserving edit is backdated before it reaches this query.
//! petgraph indices never leave this module.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

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
    /// id -> direct dependencies / direct dependents, sorted (lookups are O(log n)).
    forward: BTreeMap<String, Vec<String>>,
    backward: BTreeMap<String, Vec<String>>,
}

impl DependencyGraph {
    /// Direct dependencies of `id`, sorted.
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.forward
            .get(id)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Direct dependents of `id`, sorted.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.backward
            .get(id)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
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
    let mut graph = DependencyGraph::default();
    for &m in project.modules(db) {
        let info = m.info(db);
        if !info.is_root() {
            continue;
        }
        graph.modules.push(info.id.clone());
        let resolved = resolved_dependencies(db, project, m);
        for (to, sources) in &resolved.edges {
            graph
                .edges
                .insert((info.id.clone(), to.clone()), sources.clone());
        }
        graph
            .diagnostics
            .extend(resolved.diagnostics.iter().cloned());
    }
    graph.modules.sort();
    for (from, to) in graph.edges.keys() {
        graph
            .forward
            .entry(from.clone())
            .or_default()
            .push(to.clone());
        graph
            .backward
            .entry(to.clone())
            .or_default()
            .push(from.clone());
    }
    for list in graph.backward.values_mut() {
        list.sort();
    }
    let (order, levels) = kahn(&graph.modules, graph.edges.keys());
    graph.order = order;
    graph.levels = levels;
    graph.cycles = cycles(&graph.modules, graph.edges.keys());
    graph
}

fn kahn<'a>(
    modules: &[String],
    edges: impl Iterator<Item = &'a (String, String)> + Clone,
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut remaining_deps: BTreeMap<&str, usize> =
        modules.iter().map(|m| (m.as_str(), 0)).collect();
    let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        *remaining_deps.entry(from).or_default() += 1;
        dependents.entry(to).or_default().push(from);
    }
    let mut level: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ready: BTreeSet<&str> = remaining_deps
        .iter()
        .filter(|(_, &n)| n == 0)
        .map(|(m, _)| *m)
        .collect();
    let mut order = Vec::new();
    while let Some(m) = ready.pop_first() {
        order.push(m.to_owned());
        let my_level = *level.entry(m).or_insert(0);
        for &d in dependents.get(m).map(Vec::as_slice).unwrap_or_default() {
            let l = level.entry(d).or_insert(0);
            *l = (*l).max(my_level + 1);
            let n = remaining_deps
                .get_mut(d)
                .expect("every dependent is a module");
            *n -= 1;
            if *n == 0 {
                ready.insert(d);
            }
        }
    }
    let mut levels: Vec<Vec<String>> = Vec::new();
    for m in &order {
        let l = level[m.as_str()];
        if levels.len() <= l {
            levels.resize(l + 1, Vec::new());
        }
        levels[l].push(m.clone());
    }
    for l in &mut levels {
        l.sort();
    }
    (order, levels)
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

    #[test]
    fn levels_of_the_how_it_works_page() {
        let modules = ids(&["app", "eks", "rds", "vpc"]);
        let edges = e(&[
            ("eks", "vpc"),
            ("rds", "vpc"),
            ("app", "eks"),
            ("app", "rds"),
        ]);
        let (order, levels) = kahn(&modules, edges.iter());
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
        let (order, _) = kahn(&modules, edges.iter());
        assert!(order.is_empty());
    }
}
