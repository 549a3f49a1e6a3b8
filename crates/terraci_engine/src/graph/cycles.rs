//! Cycles of the dependency graph: each strongly connected component as a path, the
//! blocks behind its edges, and the fewest `dependencies.ignore` entries that break
//! every cycle ([`minimal_ignores`]), all in the `dependency-cycle` error. Only a graph
//! that Kahn's algorithm could not order comes here.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use petgraph::graphmap::DiGraphMap;

use crate::chunk::roots;
use crate::parse::Locator;
use crate::resolve::{resolved_dependencies, EdgeSource};
use terraci_db::config::Dependencies;
use terraci_db::db::Db;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::files::Project;

/// A (dependent, dependency) edge over module indices.
type Edge = (u32, u32);

/// What [`cycles_of`] finds.
#[derive(Default)]
pub(super) struct Cycles {
    /// [`DependencyGraph::cycles`](super::DependencyGraph::cycles).
    pub(super) cycles: Vec<Vec<String>>,
    /// [`DependencyGraph::proposed_ignores`](super::DependencyGraph::proposed_ignores).
    pub(super) proposed: Vec<ProposedIgnore>,
    /// The `dependency-cycle` error ([`cycle_diagnostic`]), if there is a cycle.
    pub(super) diagnostic: Option<Diagnostic>,
}

/// The cycles among `edges` (module indices into `modules`, sorted): the modules Kahn's
/// algorithm left over and their edges between themselves.
pub(super) fn cycles_of(
    db: &dyn Db,
    project: Project,
    modules: &[String],
    edges: &[Edge],
) -> Cycles {
    let components = cyclic_components(edges);
    if components.is_empty() {
        return Cycles::default();
    }
    let mut blocks = EdgeBlocks::new(db, project);
    let proposed = proposed(modules, &components, &mut blocks);
    let diagnostic = cycle_diagnostic(
        modules,
        &components,
        &proposed,
        &project.config(db).dependencies,
        &mut blocks,
    );
    Cycles {
        cycles: components
            .iter()
            .map(|c| {
                c.shown[0]
                    .iter()
                    .map(|&i| modules[i as usize].clone())
                    .collect()
            })
            .collect(),
        proposed,
        diagnostic,
    }
}

/// A `dependencies.ignore` entry that, with the others of
/// [`DependencyGraph::proposed_ignores`], breaks every cycle of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedIgnore {
    /// The dependent module's id.
    pub from: String,
    /// The dependency's id.
    pub to: String,
    /// The blocks behind the edge, `data.terraform_remote_state.vpc at a/main.tf:4`
    /// (with the module calls they are read through), joined by `, `.
    pub blocks: String,
    /// The index in [`DependencyGraph::cycles`] of the cycle (strongly connected
    /// component) the edge is in.
    pub cycle: usize,
}

impl ProposedIgnore {
    /// The entry's `reason`: which cycle it breaks, and the blocks behind the edge.
    pub fn reason(&self) -> String {
        format!("breaks a dependency cycle; {}", self.blocks)
    }

    /// The entry as one line of YAML, `{from: "a", to: "b", reason: "..."}`: double-quoted,
    /// and its globs match exactly these two ids (`*`, `?` and `[` are written `[*]`...).
    pub fn yaml_entry(&self) -> String {
        format!(
            "{{from: {}, to: {}, reason: {}}}",
            yaml_quoted(&glob_literal(&self.from)),
            yaml_quoted(&glob_literal(&self.to)),
            yaml_quoted(&self.reason())
        )
    }
}

/// `proposed` as a `dependencies:` section, one line each, to paste into `.terraci.yaml`
/// (or to write commented out): `dependencies:`, `  ignore:`, then `    - {from: ...}`.
pub fn ignore_yaml(proposed: &[ProposedIgnore]) -> Vec<String> {
    let mut lines = vec!["dependencies:".to_owned(), "  ignore:".to_owned()];
    lines.extend(proposed.iter().map(|p| format!("    - {}", p.yaml_entry())));
    lines
}

/// A glob (see [`terraci_db::filter::glob_matches`]) that matches `id` and nothing else.
fn glob_literal(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        match c {
            '*' | '?' | '[' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

/// `s` as a YAML double-quoted scalar: `\` and `"` escaped, and every control or
/// line-breaking character as `\uXXXX`.
fn yaml_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A strongly connected component with a cycle, over module indices.
#[derive(Debug)]
struct Component {
    /// The cycles shown for it: first the shortest through its smallest id (its
    /// [`DependencyGraph::cycles`] path), then, for each edge of `ignores` on none of the
    /// cycles before, the shortest cycle through that edge. Each from its smallest id.
    shown: Vec<Vec<u32>>,
    /// The fewest edges that break all its cycles, sorted ([`feedback_edges`]).
    ignores: Vec<Edge>,
}

/// The strongly connected components of `edges` (sorted, no duplicates) that hold a
/// cycle, sorted by their smallest member.
fn cyclic_components(edges: &[Edge]) -> Vec<Component> {
    let mut g: DiGraphMap<u32, ()> = DiGraphMap::new();
    for &(a, b) in edges {
        g.add_edge(a, b, ());
    }
    let mut members: Vec<Vec<u32>> = petgraph::algo::tarjan_scc(&g)
        .into_iter()
        .filter(|scc| scc.len() > 1 || g.contains_edge(scc[0], scc[0]))
        .map(|mut scc| {
            scc.sort_unstable();
            scc
        })
        .collect();
    members.sort();
    // Each component's own edges, in one pass over all of them (sorted, as `edges`).
    let mut component_of: BTreeMap<u32, usize> = BTreeMap::new();
    for (c, scc) in members.iter().enumerate() {
        component_of.extend(scc.iter().map(|&m| (m, c)));
    }
    let mut inside: Vec<Vec<Edge>> = vec![Vec::new(); members.len()];
    for &(a, b) in edges {
        match (component_of.get(&a), component_of.get(&b)) {
            (Some(x), Some(y)) if x == y => inside[*x].push((a, b)),
            _ => {}
        }
    }
    members
        .iter()
        .zip(inside)
        .map(|(scc, edges)| {
            let start = scc[0];
            let mut shown = vec![shortest_cycle(&edges, start, start)];
            let ignores = feedback_edges(&edges);
            for &(u, v) in &ignores {
                if !shown.iter().any(|c| cycle_has_edge(c, u, v)) {
                    shown.push(shortest_cycle(&edges, u, v));
                }
            }
            Component { shown, ignores }
        })
        .collect()
}

/// The shortest cycle through the edge `from -> to` (or, `from == to`, through the node
/// `from`), found breadth first with neighbours in id order (deterministic, readable), as
/// its nodes from the smallest id. `edges` (sorted) must hold such a cycle.
fn shortest_cycle(edges: &[Edge], from: u32, to: u32) -> Vec<u32> {
    let successors = |n: u32| {
        let at = edges.partition_point(|&(a, _)| a < n);
        edges[at..]
            .iter()
            .take_while(move |&&(a, _)| a == n)
            .map(|&(_, b)| b)
    };
    // A walk of at least one edge from `to` back to `from`.
    let mut prev: BTreeMap<u32, u32> = BTreeMap::new();
    let mut queue: VecDeque<u32> = VecDeque::from([to]);
    let mut seen: BTreeSet<u32> = BTreeSet::from([to]);
    let mut walk = Vec::new();
    'bfs: while let Some(n) = queue.pop_front() {
        for next in successors(n) {
            if next == from {
                let mut cur = n;
                walk.push(cur);
                while cur != to {
                    cur = prev[&cur];
                    walk.push(cur);
                }
                walk.reverse();
                break 'bfs;
            }
            if seen.insert(next) {
                prev.insert(next, n);
                queue.push_back(next);
            }
        }
    }
    debug_assert!(!walk.is_empty(), "no cycle through {from} -> {to}");
    // `from -> to -> ... -> from`, or `from -> ... -> from` for a node.
    let mut cycle = if from == to {
        walk
    } else {
        [vec![from], walk].concat()
    };
    if let Some(smallest) = (0..cycle.len()).min_by_key(|&i| cycle[i]) {
        cycle.rotate_left(smallest);
    }
    cycle
}

fn cycle_has_edge(cycle: &[u32], from: u32, to: u32) -> bool {
    (0..cycle.len()).any(|i| cycle[i] == from && cycle[(i + 1) % cycle.len()] == to)
}

/// How many edge sets [`feedback_edges`] checks, at most, for the fewest: every subset of
/// a component of 16 edges.
const EXACT_BUDGET: u64 = 1 << 16;

/// The fewest edges whose removal leaves `edges` (sorted; one strongly connected
/// component) without a cycle: a minimum feedback arc set, sorted. Found exactly by
/// trying edge sets by increasing size, each size in (from, to) order (so of several
/// smallest sets, the first in that order), while that stays within [`EXACT_BUDGET`]
/// checks; above it, the greedy order of Eades, Lin and Smyth, keeping only the edges
/// that are still needed. Deterministic either way.
fn feedback_edges(edges: &[Edge]) -> Vec<Edge> {
    let mut nodes: Vec<u32> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let local = |n: u32| nodes.binary_search(&n).expect("an edge's node");
    // Node indices are in id order, so `list` keeps the (from, to) order of `edges`.
    let list: Vec<(usize, usize)> = edges.iter().map(|&(a, b)| (local(a), local(b))).collect();
    let n = nodes.len();
    let greedy = greedy_feedback(n, &list);
    let m = list.len();
    let mut tried = 0u64;
    let mut removed = vec![false; m];
    for size in 1..=greedy.len() {
        let count = binomial(m as u64, size as u64);
        tried = tried.saturating_add(count);
        if tried > EXACT_BUDGET {
            break;
        }
        // Index sets of `size` in lexicographic order.
        let mut pick: Vec<usize> = (0..size).collect();
        loop {
            removed.iter_mut().for_each(|r| *r = false);
            for &i in &pick {
                removed[i] = true;
            }
            if acyclic(n, &list, &removed) {
                return pick.iter().map(|&i| edges[i]).collect();
            }
            let Some(i) = (0..size).rev().find(|&i| pick[i] < m - size + i) else {
                break;
            };
            pick[i] += 1;
            for j in i + 1..size {
                pick[j] = pick[j - 1] + 1;
            }
        }
    }
    greedy.into_iter().map(|i| edges[i]).collect()
}

fn binomial(n: u64, k: u64) -> u64 {
    let k = k.min(n.saturating_sub(k));
    (0..k).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

/// Whether the graph of `edges` over nodes `0..n`, without the `removed` ones, has no
/// cycle (Kahn's algorithm).
fn acyclic(n: usize, edges: &[(usize, usize)], removed: &[bool]) -> bool {
    let mut in_degree = vec![0usize; n];
    for (e, &(_, b)) in edges.iter().enumerate() {
        if !removed[e] {
            in_degree[b] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&v| in_degree[v] == 0).collect();
    let mut done = 0;
    while let Some(v) = ready.pop() {
        done += 1;
        // `edges` is sorted by `from`: `v`'s edges are one run.
        let at = edges.partition_point(|&(a, _)| a < v);
        for (e, &(a, b)) in edges.iter().enumerate().skip(at) {
            if a != v {
                break;
            }
            if !removed[e] {
                in_degree[b] -= 1;
                if in_degree[b] == 0 {
                    ready.push(b);
                }
            }
        }
    }
    done == n
}

/// A small feedback arc set by the order of Eades, Lin and Smyth (sinks to the end,
/// sources to the front, else the node with the most outgoing minus incoming edges;
/// ties to the smallest index), its backward edges, then without every edge not needed
/// (tried in (from, to) order). Edge indices into `edges`, sorted.
fn greedy_feedback(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut out_degree = vec![0i64; n];
    let mut in_degree = vec![0i64; n];
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut in_edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        out_degree[a] += 1;
        in_degree[b] += 1;
        out_edges[a].push(b);
        in_edges[b].push(a);
    }
    let mut alive = vec![true; n];
    let mut left = n;
    let (mut front, mut back) = (Vec::with_capacity(n), Vec::new());
    let remove =
        |v: usize, alive: &mut Vec<bool>, out_degree: &mut Vec<i64>, in_degree: &mut Vec<i64>| {
            alive[v] = false;
            for &b in &out_edges[v] {
                in_degree[b] -= 1;
            }
            for &a in &in_edges[v] {
                out_degree[a] -= 1;
            }
        };
    while left > 0 {
        let sink = (0..n).find(|&v| alive[v] && out_degree[v] == 0);
        let v = match sink {
            Some(v) => {
                back.push(v);
                v
            }
            None => {
                let v = (0..n)
                    .find(|&v| alive[v] && in_degree[v] == 0)
                    .or_else(|| {
                        (0..n)
                            .filter(|&v| alive[v])
                            .max_by_key(|&v| (out_degree[v] - in_degree[v], Reverse(v)))
                    })
                    .expect("a node is left");
                front.push(v);
                v
            }
        };
        remove(v, &mut alive, &mut out_degree, &mut in_degree);
        left -= 1;
    }
    back.reverse();
    front.extend(back);
    let mut position = vec![0usize; n];
    for (p, &v) in front.iter().enumerate() {
        position[v] = p;
    }
    let mut removed: Vec<bool> = edges
        .iter()
        .map(|&(a, b)| position[a] >= position[b])
        .collect();
    for e in 0..edges.len() {
        if removed[e] {
            removed[e] = false;
            if !acyclic(n, edges, &removed) {
                removed[e] = true;
            }
        }
    }
    (0..edges.len()).filter(|&e| removed[e]).collect()
}

/// The fewest `(from, to)` edges whose removal (as `dependencies.ignore` entries) leaves
/// no cycle among `modules`: a minimum feedback arc set of each strongly connected
/// component (see [`feedback_edges`] for how it is found and which of several is picked),
/// sorted by (from, to). Empty for a graph without cycles.
pub fn minimal_ignores(modules: &[String], edges: &[(String, String)]) -> Vec<(String, String)> {
    let mut ids: Vec<&str> = modules
        .iter()
        .map(String::as_str)
        .chain(edges.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let index = |id: &str| ids.binary_search(&id).expect("listed above") as u32;
    let mut list: Vec<Edge> = edges.iter().map(|(a, b)| (index(a), index(b))).collect();
    list.sort_unstable();
    list.dedup();
    let mut out: Vec<(String, String)> = cyclic_components(&list)
        .into_iter()
        .flat_map(|c| c.ignores)
        .map(|(a, b)| (ids[a as usize].to_owned(), ids[b as usize].to_owned()))
        .collect();
    out.sort();
    out
}

/// The blocks behind edges, as text for the cycle diagnostic, looked up as needed: only
/// a graph with cycles reads them.
struct EdgeBlocks<'db> {
    db: &'db dyn Db,
    project: Project,
    locator: Locator,
    known: BTreeMap<Edge, String>,
}

impl<'db> EdgeBlocks<'db> {
    fn new(db: &'db dyn Db, project: Project) -> Self {
        EdgeBlocks {
            db,
            project,
            locator: Locator::default(),
            known: BTreeMap::new(),
        }
    }

    /// `data.terraform_remote_state.vpc at a/main.tf:4, ...`: the sources of `edge`.
    fn of(&mut self, modules: &[String], edge: Edge) -> String {
        if let Some(text) = self.known.get(&edge) {
            return text.clone();
        }
        let (db, project) = (self.db, self.project);
        let module = roots(db, project).modules[edge.0 as usize];
        let resolved = resolved_dependencies(db, project, module);
        let text = resolved
            .edges
            .get(&modules[edge.1 as usize])
            .into_iter()
            .flatten()
            .map(|s| self.source(s))
            .collect::<Vec<_>>()
            .join(", ");
        self.known.insert(edge, text.clone());
        text
    }

    fn source(&mut self, s: &EdgeSource) -> String {
        let Some(anchor) = &s.anchor else {
            // `dependencies.add`: its name is the rule's reason, if it has one.
            return match s.name.as_str() {
                "dependencies.add" => "dependencies.add in .terraci.yaml".to_owned(),
                reason => format!("dependencies.add in .terraci.yaml ({reason})"),
            };
        };
        let file = anchor.file.path(self.db);
        let at = match self.locator.locate(self.db, anchor) {
            Some((line, _)) => format!("{file}:{line}"),
            None => file.to_string(),
        };
        let via = if s.via.is_empty() {
            String::new()
        } else {
            format!(" (read through {})", s.via.join(" -> "))
        };
        format!("data.terraform_remote_state.{} at {at}{via}", s.name)
    }
}

/// The proposed ignores of `components`, sorted by (from, to).
fn proposed(
    modules: &[String],
    components: &[Component],
    blocks: &mut EdgeBlocks<'_>,
) -> Vec<ProposedIgnore> {
    let mut out: Vec<ProposedIgnore> = components
        .iter()
        .enumerate()
        .flat_map(|(cycle, c)| c.ignores.iter().map(move |&e| (cycle, e)))
        .map(|(cycle, (from, to))| ProposedIgnore {
            from: modules[from as usize].clone(),
            to: modules[to as usize].clone(),
            blocks: blocks.of(modules, (from, to)),
            cycle,
        })
        .collect();
    out.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
    out
}

/// The `dependency-cycle` error of a graph with cycles: `circular dependency detected`,
/// then each cycle as `a -> b -> a` with the blocks behind each of its edges, and the
/// fewest `dependencies.ignore` entries that break every cycle, as YAML to paste: the
/// whole section, or what `existing` (the config's) lacks of it.
fn cycle_diagnostic(
    modules: &[String],
    components: &[Component],
    proposed: &[ProposedIgnore],
    existing: &Dependencies,
    blocks: &mut EdgeBlocks<'_>,
) -> Option<Diagnostic> {
    if components.is_empty() {
        return None;
    }
    let id = |i: u32| modules[i as usize].as_str();
    let mut details = Vec::new();
    for cycle in components.iter().flat_map(|c| &c.shown) {
        let mut path: Vec<&str> = cycle.iter().map(|&i| id(i)).collect();
        path.push(id(cycle[0]));
        details.push(path.join(" -> "));
        for (k, &from) in cycle.iter().enumerate() {
            let to = cycle[(k + 1) % cycle.len()];
            details.push(format!(
                "  {} -> {}: {}",
                id(from),
                id(to),
                blocks.of(modules, (from, to))
            ));
        }
    }
    // Only what the config lacks, to paste where it goes: a second `dependencies:` key
    // would be a config error.
    let mut yaml = ignore_yaml(proposed);
    let place = if !existing.ignore.is_empty() {
        yaml.drain(..2);
        "add to the `dependencies.ignore` list of .terraci.yaml"
    } else if !existing.add.is_empty() {
        yaml.remove(0);
        "add under `dependencies:` in .terraci.yaml"
    } else {
        "in .terraci.yaml"
    };
    let n = proposed.len();
    details.push(format!(
        "to break every cycle, ignore {n} {} (the fewest that do; where a read needs its \
         state written first, ignore another edge of its cycle), {place}:",
        if n == 1 { "edge" } else { "edges" }
    ));
    details.extend(yaml);
    Some(
        Diagnostic::error(Code::DependencyCycle, "circular dependency detected")
            .with_details(details),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::{e, ids};

    #[test]
    fn a_cycle_is_one_path_from_its_smallest_id() {
        let modules = ids(&["app", "eks", "vpc", "x"]);
        let edges = e(&[("vpc", "eks"), ("eks", "app"), ("app", "vpc"), ("x", "vpc")]);
        let index = |id: &str| modules.iter().position(|m| m == id).unwrap() as u32;
        let mut list: Vec<Edge> = edges.iter().map(|(a, b)| (index(a), index(b))).collect();
        list.sort();
        let components = cyclic_components(&list);
        assert_eq!(components.len(), 1);
        // app -> vpc -> eks -> app.
        assert_eq!(components[0].shown, vec![vec![0, 2, 1]]);
    }

    fn ignores(list: &[(&str, &str)]) -> Vec<(String, String)> {
        let edges = e(list);
        let mut modules: Vec<String> = edges
            .iter()
            .flat_map(|(a, b)| [a.clone(), b.clone()])
            .collect();
        modules.sort();
        modules.dedup();
        minimal_ignores(&modules, &edges)
    }

    /// Whether `edges` without `removed` has no cycle.
    fn breaks_every_cycle(edges: &[(String, String)], removed: &[(String, String)]) -> bool {
        let mut modules: Vec<&str> = edges
            .iter()
            .flat_map(|(a, b)| [a.as_str(), b.as_str()])
            .collect();
        modules.sort();
        modules.dedup();
        let index = |id: &str| modules.binary_search(&id).unwrap();
        let mut list: Vec<(usize, usize)> =
            edges.iter().map(|(a, b)| (index(a), index(b))).collect();
        list.sort();
        let gone: Vec<bool> = list
            .iter()
            .map(|&(a, b)| removed.contains(&(modules[a].to_owned(), modules[b].to_owned())))
            .collect();
        acyclic(modules.len(), &list, &gone)
    }

    #[test]
    fn a_two_cycle_needs_one_ignore_the_first_in_id_order() {
        assert_eq!(ignores(&[("b", "a"), ("a", "b")]), e(&[("a", "b")]));
        assert!(ignores(&[("a", "b"), ("b", "c")]).is_empty());
    }

    #[test]
    fn two_cycles_sharing_an_edge_need_only_that_edge() {
        // m -> n -> a -> m and m -> n -> b -> m: (a, m) and (b, m) come first in id
        // order, but each breaks one cycle only.
        let list = [("a", "m"), ("b", "m"), ("m", "n"), ("n", "a"), ("n", "b")];
        assert_eq!(ignores(&list), e(&[("m", "n")]));
    }

    #[test]
    fn a_triangle_with_a_chord_needs_one_ignore() {
        // a -> b -> c -> a and a -> c -> a share c -> a.
        let list = [("a", "b"), ("b", "c"), ("c", "a"), ("a", "c")];
        assert_eq!(ignores(&list), e(&[("c", "a")]));
    }

    #[test]
    fn each_component_is_broken_on_its_own() {
        // Two 2-cycles and a triangle, apart: one edge each, sorted.
        let list = [
            ("x", "y"),
            ("y", "x"),
            ("b", "a"),
            ("a", "b"),
            ("p", "q"),
            ("q", "r"),
            ("r", "p"),
            ("a", "p"),
        ];
        assert_eq!(ignores(&list), e(&[("a", "b"), ("p", "q"), ("x", "y")]));
    }

    #[test]
    fn the_fewest_is_not_one_per_cycle() {
        // Three 2-cycles through a hub h, and three longer cycles (a -> b -> h -> a,
        // b -> c -> h -> b, a -> b -> c -> h -> a): three edges break all six.
        let list = [
            ("h", "a"),
            ("a", "h"),
            ("h", "b"),
            ("b", "h"),
            ("h", "c"),
            ("c", "h"),
            ("a", "b"),
            ("b", "c"),
        ];
        let got = ignores(&list);
        assert_eq!(got, e(&[("a", "h"), ("b", "h"), ("c", "h")]));
        assert!(breaks_every_cycle(&e(&list), &got));
    }

    #[test]
    fn above_the_exact_budget_the_greedy_order_still_breaks_every_cycle() {
        // Every ordered pair of 7 modules: 42 edges, far above the budget; any order
        // leaves 21 edges pointing back, and no fewer break every cycle.
        let names = ["a", "b", "c", "d", "e", "f", "g"];
        let list: Vec<(&str, &str)> = names
            .iter()
            .flat_map(|a| names.iter().filter(move |b| *b != a).map(move |b| (*a, *b)))
            .collect();
        let got = ignores(&list);
        assert_eq!(got.len(), 21);
        assert!(breaks_every_cycle(&e(&list), &got));
        assert_eq!(ignores(&list), got, "deterministic");
    }

    #[test]
    fn the_proposal_loads_as_a_config_and_names_exactly_its_modules() {
        let proposed = [ProposedIgnore {
            from: "stage/a*b".into(),
            to: "stage/[x]?".into(),
            blocks: "data.terraform_remote_state.peers[\"x\"] at stage/a*b/main.tf:4\u{7}".into(),
            cycle: 0,
        }];
        let text = ignore_yaml(&proposed).join("\n");
        let config = terraci_db::config::parse_config(&text, ".terraci.yaml").expect(&text);
        let rule = &config.dependencies.ignore[0];
        use terraci_db::filter::glob_matches;
        assert!(glob_matches(&rule.from, "stage/a*b"));
        assert!(!glob_matches(&rule.from, "stage/aXb"));
        assert!(glob_matches(&rule.to, "stage/[x]?"));
        assert!(!glob_matches(&rule.to, "stage/x!"));
        assert_eq!(
            rule.reason.as_deref(),
            Some("breaks a dependency cycle; data.terraform_remote_state.peers[\"x\"] at stage/a*b/main.tf:4\u{7}")
        );
    }
}
