//! The cycles of a module graph: its strongly connected components of more than one module,
//! each shown as one cycle through it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::modules::{ModuleGraph, ModulePath};

/// Every group of modules that name each other in a circle, as one cycle through the group:
/// `[a, b, c]` for `a -> b -> c -> a`.
pub fn cycles(graph: &ModuleGraph) -> Vec<Vec<ModulePath>> {
    components(graph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .filter_map(|component| cycle_through(graph, &component))
        .collect()
}

/// Tarjan's strongly connected components.
fn components(graph: &ModuleGraph) -> Vec<BTreeSet<ModulePath>> {
    struct Tarjan<'a> {
        graph: &'a ModuleGraph,
        index: BTreeMap<&'a ModulePath, usize>,
        low: BTreeMap<&'a ModulePath, usize>,
        stack: Vec<&'a ModulePath>,
        on_stack: BTreeSet<&'a ModulePath>,
        found: Vec<BTreeSet<ModulePath>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, node: &'a ModulePath) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self
                .graph
                .edges
                .get(node)
                .into_iter()
                .flat_map(|e| e.keys())
            {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = BTreeSet::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.insert(member.clone());
                    if member == node {
                        break;
                    }
                }
                self.found.push(component);
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    let nodes: BTreeSet<&ModulePath> = graph
        .modules
        .keys()
        .chain(graph.edges.keys())
        .chain(graph.edges.values().flat_map(|e| e.keys()))
        .collect();
    for node in nodes {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    tarjan.found
}

/// The shortest cycle from the component's first module back to it, inside the component.
fn cycle_through(graph: &ModuleGraph, component: &BTreeSet<ModulePath>) -> Option<Vec<ModulePath>> {
    let start = component.first()?;
    let mut came_from: BTreeMap<&ModulePath, &ModulePath> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in graph.edges.get(node).into_iter().flat_map(|e| e.keys()) {
            if !component.contains(next) {
                continue;
            }
            if next == start {
                let mut cycle = vec![node.clone()];
                let mut at = node;
                while let Some(previous) = came_from.get(at) {
                    cycle.push((*previous).clone());
                    at = previous;
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !came_from.contains_key(next) && next != start {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}
