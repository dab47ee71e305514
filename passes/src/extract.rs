//! DAG-aware greedy extraction: each class's best node is chosen by the total cost of the sub-DAG it
//! needs, counting every class once (a value computed once and read by several kernels is paid for
//! once). Deterministic: classes and nodes are visited in a fixed order and ties keep the first.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use egg::Id;

use crate::analysis::EG;
use crate::costset::CostSet;
use crate::lang::TNode;

/// The cost of one node, or `None` if it may not be extracted.
pub type NodeCost<'a> = dyn Fn(&EG, Id, &TNode) -> Option<f64> + 'a;

/// The chosen node of every class reachable from the roots, and the total cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// Chosen node per (canonical) class.
    pub choice: BTreeMap<Id, TNode>,
    /// The cost of each chosen node.
    pub node_cost: BTreeMap<Id, f64>,
    /// Total cost, each class counted once.
    pub total: f64,
}

impl Extraction {
    /// Classes reachable from `roots` in post order (operands before users), each once.
    pub fn post_order(&self, egraph: &EG, roots: &[Id]) -> Option<Vec<Id>> {
        let mut order = Vec::new();
        let mut state: BTreeMap<Id, bool> = BTreeMap::new(); // false: in progress, true: done
        for &r in roots {
            // Iterative DFS to stay safe on deep graphs.
            let mut stack: Vec<(Id, usize)> = vec![(egraph.find(r), 0)];
            while let Some((c, i)) = stack.pop() {
                if i == 0 {
                    match state.get(&c) {
                        Some(true) => continue,
                        Some(false) => return None, // a cycle
                        None => {
                            state.insert(c, false);
                        }
                    }
                }
                let node = self.choice.get(&c)?;
                if let Some(&child) = node.children.get(i) {
                    stack.push((c, i + 1));
                    let child = egraph.find(child);
                    match state.get(&child) {
                        Some(true) => {}
                        Some(false) => return None,
                        None => stack.push((child, 0)),
                    }
                } else {
                    state.insert(c, true);
                    order.push(c);
                }
            }
        }
        Some(order)
    }
}

/// The costs of a sub-DAG's classes, and their sum.
type Union = (CostSet, f64);

struct Best {
    total: f64,
    node: TNode,
    cost: f64,
    /// The classes of the chosen node's sub-DAG with their costs (shared with other classes').
    costs: CostSet,
}

/// The union of the children's sub-DAG costs (each class once: the largest child's cost of a
/// class first, then the children's in order), or `None` if a child has no best node yet.
fn union_of(children: &[Id], best: &BTreeMap<Id, Best>) -> Option<CostSet> {
    let kids: Option<Vec<&Best>> = children.iter().map(|k| best.get(k)).collect();
    let kids = kids?;
    let mut merged = kids.iter().max_by_key(|b| b.costs.len()).map(|b| b.costs.clone()).unwrap_or_default();
    for b in &kids {
        merged = merged.union(&b.costs);
    }
    Some(merged)
}

/// Extracts from `egraph` the cheapest DAG for `roots` under `cost`, never choosing a node in
/// `banned`. `None` if some root has no extractable node.
///
/// Classes are processed from a work list (initially every class in id order, which is
/// topological for e-graphs built from a graph); a class whose best choice improves puts its
/// parents back on the list. Nodes of one class with the same children share one union.
pub fn extract(egraph: &EG, roots: &[Id], cost: &NodeCost<'_>, banned: &BTreeSet<(Id, TNode)>) -> Option<Extraction> {
    let mut classes: Vec<Id> = egraph.classes().map(|c| c.id).collect();
    classes.sort_unstable();
    let mut parents: BTreeMap<Id, Vec<Id>> = BTreeMap::new();
    for &c in &classes {
        for n in &egraph[c].nodes {
            for &k in &n.children {
                let list = parents.entry(egraph.find(k)).or_default();
                if list.last() != Some(&c) {
                    list.push(c);
                }
            }
        }
    }
    for list in parents.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    let mut best: BTreeMap<Id, Best> = BTreeMap::new();
    let mut queued: BTreeSet<Id> = classes.iter().copied().collect();
    let mut queue: VecDeque<Id> = classes.iter().copied().collect();
    while let Some(c) = queue.pop_front() {
        queued.remove(&c);
        // Per distinct children list: the union of their costs and its sum.
        let mut unions: Vec<(Vec<Id>, Option<Union>)> = Vec::new();
        let mut improved = false;
        for node in &egraph[c].nodes {
            if !banned.is_empty() && banned.contains(&(c, node.clone())) {
                continue;
            }
            let Some(own) = cost(egraph, c, node).filter(|c| !c.is_nan()) else { continue };
            let children: Vec<Id> = node.children.iter().map(|k| egraph.find(*k)).collect();
            let slot = match unions.iter().position(|(k, _)| *k == children) {
                Some(i) => i,
                None => {
                    let u = union_of(&children, &best).filter(|m| !m.contains(c)).map(|m| {
                        let sum = m.sum();
                        (m, sum)
                    });
                    unions.push((children, u));
                    unions.len() - 1
                }
            };
            let Some((merged, sum)) = unions.get(slot).and_then(|(_, u)| u.as_ref()) else { continue };
            let total = own + sum;
            if best.get(&c).is_none_or(|b| total < b.total * (1.0 - 1e-12)) {
                let costs = merged.union(&CostSet::single(c, own));
                best.insert(c, Best { total, node: node.clone(), cost: own, costs });
                improved = true;
            }
        }
        if improved {
            for &p in parents.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
                if queued.insert(p) {
                    queue.push_back(p);
                }
            }
        }
    }
    let mut choice = BTreeMap::new();
    let mut node_cost = BTreeMap::new();
    for (c, b) in &best {
        choice.insert(*c, b.node.clone());
        node_cost.insert(*c, b.cost);
    }
    let mut ex = Extraction { choice, node_cost, total: 0.0 };
    let roots: Vec<Id> = roots.iter().map(|r| egraph.find(*r)).collect();
    share_tuple_outputs(egraph, &mut ex, &roots);
    let order = ex.post_order(egraph, &roots)?;
    ex.total = order.iter().filter_map(|c| ex.node_cost.get(c)).sum();
    // Keep only what the roots reach.
    let reach: BTreeSet<Id> = order.into_iter().collect();
    ex.choice.retain(|c, _| reach.contains(c));
    ex.node_cost.retain(|c, _| reach.contains(c));
    Some(ex)
}

/// [`extract`], then for each class of `shared` in turn (a value several classes may read at
/// once, which the per-class choice cannot see paying for itself: a joined product whose columns
/// three consumers read in place, each of which alone is cheaper reading its own product), the
/// extraction as if that class and the ones kept before it cost (nearly) nothing, costed again by
/// `cost`: where it is cheaper, it is kept (and so is that class's freedom).
pub fn extract_sharing(
    egraph: &EG,
    roots: &[Id],
    cost: &NodeCost<'_>,
    banned: &BTreeSet<(Id, TNode)>,
    shared: &[Id],
) -> Option<Extraction> {
    let mut best = extract(egraph, roots, cost, banned)?;
    // The classes kept free so far: each that paid for itself stays free in the later trials.
    let mut free_classes: BTreeSet<Id> = BTreeSet::new();
    for &class in shared {
        let mut trying = free_classes.clone();
        trying.insert(egraph.find(class));
        // Nearly free: their nodes keep their order (a best schedule stays the best).
        let free = |eg: &EG, c: Id, n: &TNode| {
            let x = cost(eg, c, n);
            if trying.contains(&eg.find(c)) { x.map(|x| x * 1e-9) } else { x }
        };
        let Some(mut trial) = extract(egraph, roots, &free, banned) else { continue };
        let Some(order) = trial.post_order(egraph, roots) else { continue };
        let mut total = 0.0;
        for c in &order {
            let Some(real) = trial.choice.get(c).and_then(|n| cost(egraph, *c, n)) else { continue };
            trial.node_cost.insert(*c, real);
            total += real;
        }
        trial.total = total;
        if trial.total < best.total {
            best = trial;
            free_classes = trying;
        }
    }
    Some(best)
}

/// Where the chosen DAG computes a tuple (a kernel with side outputs) for one of its outputs, every
/// other class of the DAG that holds an output of that tuple reads it instead of its own choice:
/// free, since the tuple's kernel runs anyway. (The per-class choice cannot see this: a tuple
/// costs a little more than the same kernel without its side outputs, so the class of the first
/// output alone would choose the latter, and both kernels would run.)
fn share_tuple_outputs(egraph: &EG, ex: &mut Extraction, roots: &[Id]) {
    use crate::lang::TOp;
    let Some(order) = ex.post_order(egraph, roots) else { return };
    let tuple_of = |n: &TNode| match n.op {
        TOp::Output(_) => n.children.first().map(|t| egraph.find(*t)),
        _ => None,
    };
    let tuples: BTreeSet<Id> = order.iter().filter_map(|c| ex.choice.get(c).and_then(tuple_of)).collect();
    if tuples.is_empty() {
        return;
    }
    for c in order {
        if ex.choice.get(&c).and_then(tuple_of).is_some() {
            continue;
        }
        let Some(shared) = egraph[c].nodes.iter().find(|n| tuple_of(n).is_some_and(|t| tuples.contains(&t))) else {
            continue;
        };
        let (node, cost) = (ex.choice.insert(c, shared.clone()), ex.node_cost.insert(c, 0.0));
        if ex.post_order(egraph, roots).is_none() {
            // A cycle: keep the class's own choice.
            if let (Some(node), Some(cost)) = (node, cost) {
                ex.choice.insert(c, node);
                ex.node_cost.insert(c, cost);
            }
        }
    }
}
