//! The classes of a sub-DAG with their costs, as a persistent set: a treap whose nodes are shared
//! between versions, with the sum of every subtree. Extraction keeps one per e-class and unions
//! its children's; copying a whole map per class made extraction quadratic in program size (a
//! chain of n classes held n maps of up to n entries). Here a clone is a pointer copy and the union
//! of two versions of one lineage (a value and one a few steps back) costs about the entries in
//! which they differ, times log n.
//!
//! Priorities come from the key alone, so a set of keys has one shape whatever the order of
//! insertion; subtrees two versions share are the same allocation, which lets a union skip them.

use std::rc::Rc;

use egg::Id;

/// A persistent map from e-class to cost, with its length and sum.
#[derive(Debug, Clone, Default)]
pub(crate) struct CostSet(Option<Rc<Node>>);

#[derive(Debug)]
struct Node {
    key: Id,
    cost: f64,
    left: CostSet,
    right: CostSet,
    len: usize,
    sum: f64,
}

/// True when `a` and `b` are the same allocation (or both empty).
fn same(a: &CostSet, b: &CostSet) -> bool {
    match (&a.0, &b.0) {
        (Some(x), Some(y)) => Rc::ptr_eq(x, y),
        (None, None) => true,
        _ => false,
    }
}

/// The treap priority of `key`: a fixed mix of its bits (splitmix64's finalizer).
fn priority(key: Id) -> u64 {
    let mut z = (usize::from(key) as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
thread_local! {
    /// Nodes allocated on this thread (tests bound the work of unions with it).
    static ALLOCATED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl CostSet {
    fn node(key: Id, cost: f64, left: CostSet, right: CostSet) -> CostSet {
        #[cfg(test)]
        ALLOCATED.with(|a| a.set(a.get() + 1));
        let len = left.len() + 1 + right.len();
        let sum = left.sum() + cost + right.sum();
        CostSet(Some(Rc::new(Node { key, cost, left, right, len, sum })))
    }

    /// The set of one class.
    pub(crate) fn single(key: Id, cost: f64) -> CostSet {
        CostSet::node(key, cost, CostSet::default(), CostSet::default())
    }

    /// Number of classes.
    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |n| n.len)
    }

    /// Sum of the costs.
    pub(crate) fn sum(&self) -> f64 {
        self.0.as_ref().map_or(0.0, |n| n.sum)
    }

    /// True if `key` is in the set.
    pub(crate) fn contains(&self, key: Id) -> bool {
        let mut t = self;
        while let Some(n) = &t.0 {
            if key == n.key {
                return true;
            }
            t = if key < n.key { &n.left } else { &n.right };
        }
        false
    }

    /// The classes below `key`, the cost of `key` if present, and the classes above it.
    fn split(&self, key: Id) -> (CostSet, Option<f64>, CostSet) {
        let Some(n) = &self.0 else { return (CostSet::default(), None, CostSet::default()) };
        if key < n.key {
            let (l, v, r) = n.left.split(key);
            (l, v, CostSet::node(n.key, n.cost, r, n.right.clone()))
        } else if key > n.key {
            let (l, v, r) = n.right.split(key);
            (CostSet::node(n.key, n.cost, n.left.clone(), l), v, r)
        } else {
            (n.left.clone(), Some(n.cost), n.right.clone())
        }
    }

    /// Every class of `self` and of `other`; where both hold a class, `self`'s cost is kept.
    pub(crate) fn union(&self, other: &CostSet) -> CostSet {
        let (Some(a), Some(b)) = (&self.0, &other.0) else {
            return if self.0.is_some() { self.clone() } else { other.clone() };
        };
        if Rc::ptr_eq(a, b) {
            return self.clone();
        }
        if priority(a.key) >= priority(b.key) {
            let (bl, _, br) = other.split(a.key);
            let (left, right) = (a.left.union(&bl), a.right.union(&br));
            // Nothing of `other` was new here: keep this very node, so later unions can skip it.
            if same(&left, &a.left) && same(&right, &a.right) {
                return self.clone();
            }
            CostSet::node(a.key, a.cost, left, right)
        } else {
            let (al, kept, ar) = self.split(b.key);
            let (left, right) = (al.union(&b.left), ar.union(&b.right));
            let cost = kept.unwrap_or(b.cost);
            if same(&left, &b.left) && same(&right, &b.right) && cost.to_bits() == b.cost.to_bits() {
                return other.clone();
            }
            CostSet::node(b.key, cost, left, right)
        }
    }

    /// The (class, cost) pairs in class order.
    #[cfg(test)]
    fn entries(&self) -> Vec<(Id, f64)> {
        let mut out = Vec::new();
        let mut stack: Vec<&Node> = Vec::new();
        let mut t = self;
        loop {
            while let Some(n) = &t.0 {
                stack.push(n);
                t = &n.left;
            }
            let Some(n) = stack.pop() else { break };
            out.push((n.key, n.cost));
            t = &n.right;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn id(i: usize) -> Id {
        Id::from(i)
    }

    #[test]
    fn unions_keep_the_first_cost_and_match_a_map() {
        let mut model: BTreeMap<Id, f64> = BTreeMap::new();
        let mut set = CostSet::default();
        // A chain: each version is the last one plus a class, unioned with one a few steps back.
        let mut versions: Vec<CostSet> = Vec::new();
        for i in 0..500usize {
            let back = versions.get(i.saturating_sub(7)).cloned().unwrap_or_default();
            set = set.union(&back).union(&CostSet::single(id(i), i as f64 * 0.5));
            model.entry(id(i)).or_insert(i as f64 * 0.5);
            versions.push(set.clone());
        }
        assert_eq!(set.len(), model.len());
        assert_eq!(set.entries(), model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        assert!((set.sum() - model.values().sum::<f64>()).abs() < 1e-9);
        // Where both hold a class, the left side's cost stays.
        let a = CostSet::single(id(3), 1.0).union(&CostSet::single(id(5), 2.0));
        let b = CostSet::single(id(3), 9.0).union(&CostSet::single(id(4), 4.0));
        assert_eq!(a.union(&b).entries(), vec![(id(3), 1.0), (id(4), 4.0), (id(5), 2.0)]);
        assert_eq!(b.union(&a).entries(), vec![(id(3), 9.0), (id(4), 4.0), (id(5), 2.0)]);
        assert!(a.contains(id(5)) && !a.contains(id(4)));
    }

    /// The work of the chain above grows like n log n, not n^2: a copied map per class allocated
    /// n(n+1)/2 entries (12.5 million for n = 5000).
    #[test]
    fn a_long_chain_allocates_n_log_n_nodes() {
        let n = 5000usize;
        let before = ALLOCATED.with(std::cell::Cell::get);
        let mut set = CostSet::default();
        let mut versions: Vec<CostSet> = Vec::with_capacity(n);
        for i in 0..n {
            let back = versions.get(i.saturating_sub(7)).cloned().unwrap_or_default();
            set = set.union(&back).union(&CostSet::single(id(i), 1.0));
            versions.push(set.clone());
        }
        let allocated = ALLOCATED.with(std::cell::Cell::get) - before;
        assert_eq!(set.len(), n);
        // log2(5000) is about 12.3; a treap's expected depth is a small multiple of it.
        assert!(allocated < n * 100, "{allocated} nodes for {n} classes");
    }
}
