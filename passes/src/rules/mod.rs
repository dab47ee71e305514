//! The rule families, one file each (see `README.md` in this folder for how to write a rule).
//!
//! A [`Rule`] is a named function from one e-node (and its class) to equivalent terms. The adapter
//! here turns it into an egg rewrite that type-checks every term before adding it: a term whose
//! type differs from its class's type is never added (contract §5: rewrites preserve every value's
//! dtype and shape exactly). Unions carry the rule's name, so egg's explanations name the rules.

pub mod algebra;
pub mod fusion;
pub mod layout;
pub mod schedule;
#[cfg(test)]
pub(crate) mod testkit;

use std::sync::Arc;

use egg::{Applier, Id, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use rustc_hash::FxHashSet;
use tcc_ir::TensorType;

use crate::analysis::EG;
use crate::body::Body;
use crate::lang::{TNode, TOp};
use crate::types::type_of;

/// A term to add to the e-graph, over existing classes.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// An existing class.
    Class(Id),
    /// An op over sub-terms.
    Op(TOp, Vec<Term>),
    /// A kernel node: a body (interned when added) over its external inputs' classes.
    Kernel(Arc<Body>, Vec<Id>),
    /// A kernel whose body has side outputs: its tuple (a class of its own) and the tuple's first
    /// output, the term's value; side output `i` joins class `siblings[i]` (as the value of
    /// another class of the e-graph it is equal to).
    Tuple {
        /// The body, with `siblings.len()` side outputs.
        body: Arc<Body>,
        /// The kernel's external inputs.
        inputs: Vec<Id>,
        /// The class of each side output.
        siblings: Vec<Id>,
    },
    /// A scheduled variant of a kernel body.
    Scheduled {
        /// The body's index.
        body: u32,
        /// The schedule.
        schedule: tcc_ir::Schedule,
        /// The kernel's external inputs.
        inputs: Vec<Id>,
    },
}

impl Term {
    /// An op over existing classes.
    pub fn op(op: TOp, children: &[Id]) -> Term {
        Term::Op(op, children.iter().map(|&c| Term::Class(c)).collect())
    }
}

/// A named rewrite: `find(egraph, class, node)` returns terms equal to `node`'s class.
#[derive(Clone, Copy)]
pub struct Rule {
    /// The rule's name (shown in reports and explanations).
    pub name: &'static str,
    /// The rule itself.
    pub find: fn(&EG, Id, &TNode) -> Vec<Term>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A named rewrite of a whole class: `find(egraph, class, limit)` returns up to `limit` terms equal
/// to the class, each with the node of the class it was derived from (the step egg's explanations
/// start at). For rules that compare the nodes of a class with each other (fusion grows only the
/// most promising kernel of a class), which a [`Rule`] would redo for every node. Searching asks
/// for one term, applying for all.
#[derive(Clone, Copy)]
pub struct ClassRule {
    /// The rule's name (shown in reports and explanations).
    pub name: &'static str,
    /// The rule itself.
    pub find: fn(&EG, Id, usize) -> Vec<(TNode, Term)>,
}

impl std::fmt::Debug for ClassRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The type `term` would have, or `None` if it is ill-typed.
pub fn term_type(egraph: &EG, term: &Term) -> Option<TensorType> {
    match term {
        Term::Class(id) => Some(egraph[*id].data.ty.clone()),
        Term::Op(op, kids) => {
            let tys: Option<Vec<TensorType>> = kids.iter().map(|k| term_type(egraph, k)).collect();
            let tys = tys?;
            let refs: Vec<&TensorType> = tys.iter().collect();
            type_of(op, &refs).ok()
        }
        Term::Kernel(body, inputs) => {
            let ok = body.input_types.len() == inputs.len()
                && body.input_types.iter().zip(inputs).all(|(t, i)| egraph[*i].data.ty == **t);
            if ok { body.output_type().cloned() } else { None }
        }
        Term::Tuple { body, inputs, siblings } => {
            let kernel = term_type(egraph, &Term::Kernel(Arc::clone(body), inputs.clone()))?;
            let siblings_ok = body.side_outputs.len() == siblings.len()
                && siblings.iter().enumerate().all(|(i, s)| body.nth_output_type(i + 1) == Some(&egraph[*s].data.ty));
            siblings_ok.then_some(kernel)
        }
        Term::Scheduled { body, .. } => egraph.analysis.body(*body).and_then(|b| b.output_type().cloned()),
    }
}

/// Adds a (type-checked) term, returning the id of its root node (not necessarily canonical).
pub fn add_term(egraph: &mut EG, term: Term) -> Id {
    match term {
        Term::Class(id) => id,
        Term::Op(op, kids) => {
            let children: Vec<Id> = kids.into_iter().map(|k| add_term(egraph, k)).collect();
            egraph.add_uncanonical(TNode::new(op, children))
        }
        Term::Kernel(body, inputs) => {
            let body = egraph.analysis.intern_body(body);
            egraph.add_uncanonical(TNode::new(TOp::Kernel { body, sched: None }, inputs))
        }
        Term::Scheduled { body, schedule, inputs } => {
            let sched = Some(egraph.analysis.intern_schedule(schedule));
            egraph.add_uncanonical(TNode::new(TOp::Kernel { body, sched }, inputs))
        }
        Term::Tuple { body, inputs, .. } => {
            let tuple = add_tuple(egraph, body, inputs);
            egraph.add_uncanonical(TNode::new(TOp::Output(0), vec![tuple]))
        }
    }
}

/// Adds the kernel of a body with side outputs in a class of its own (a tuple), returning its id.
fn add_tuple(egraph: &mut EG, body: Arc<Body>, inputs: Vec<Id>) -> Id {
    let body = egraph.analysis.intern_body(body);
    egraph.add_uncanonical(TNode::new(TOp::Kernel { body, sched: None }, inputs))
}

/// Every term `rule` finds for the nodes of `class`, with the node it came from, in node order.
fn find_all(rule: &Rule, egraph: &EG, class: Id) -> Vec<(TNode, Term)> {
    let mut terms = Vec::new();
    for node in &egraph[class].nodes {
        terms.extend((rule.find)(egraph, class, node).into_iter().map(|t| (node.clone(), t)));
    }
    terms
}

/// Which classes an incremental phase searches.
///
/// The applier asks its rule again for the terms of a matched class, on the e-graph as the earlier
/// rules of the iteration left it: that lets a fusion rule see the kernels that other rules have
/// just added to a class and grow only the most promising one (adding search-time terms instead
/// made 60% more e-nodes on a 1,000-`let` chain).
///
/// An *incremental* phase ([`run_incremental`], for [`ClassRule`]s) searches, after its first
/// iteration, only the classes that gained a node in the previous iteration and their parents.
/// That is exact for rules that read only a class and its nodes' children's classes (the fusion
/// rules): a class whose nodes and children's nodes did not change yields the terms it yielded
/// before, which are in the e-graph already.
#[derive(Debug, Clone, Default)]
pub struct SearchState {
    /// The classes searched in this iteration (`None`: every class).
    scope: Option<FxHashSet<Id>>,
    /// Classes that gained a node in this iteration (filled by the applier).
    touched: Vec<Id>,
    /// Each class's unscheduled kernel nodes as fusion last listed them (every rule asks for the
    /// kernels of a class and of its inputs, many times an iteration); an entry is dropped when
    /// its class gains a node, and all of them when an iteration starts (after the rebuild).
    pub(crate) kernels: std::cell::RefCell<rustc_hash::FxHashMap<Id, Arc<fusion::Listing>>>,
    /// Set while a class rule's applier asks for its terms (which it then adds to the e-graph).
    applying: std::cell::Cell<bool>,
}

impl SearchState {
    fn searches(&self, class: Id) -> bool {
        self.scope.as_ref().is_none_or(|s| s.contains(&class))
    }

    /// Whether a class rule's applier is asking (its terms go into the e-graph), not a searcher.
    pub(crate) fn applying(&self) -> bool {
        self.applying.get()
    }

    /// Drops what is known of the kernels of `ids` (classes that changed).
    fn forget(&self, ids: &[Id]) {
        let mut kernels = self.kernels.borrow_mut();
        for id in ids {
            kernels.remove(id);
        }
    }
}

/// Runs `rules` incrementally (see [`SearchState`]); afterwards every class is searched again.
pub fn run_incremental(
    runner: egg::Runner<TNode, crate::analysis::TensorAnalysis>,
    rules: &[ClassRule],
) -> egg::Runner<TNode, crate::analysis::TensorAnalysis> {
    let rewrites: Vec<_> = rules.iter().filter_map(|r| Rewrite::new(r.name, *r, *r).ok()).collect();
    let mut runner = runner.with_hook(incremental_hook).run(&rewrites);
    runner.egraph.analysis.search = SearchState::default();
    runner
}

/// The hook that makes a phase incremental.
fn incremental_hook(runner: &mut egg::Runner<TNode, crate::analysis::TensorAnalysis>) -> Result<(), String> {
    let egraph = &mut runner.egraph;
    let touched = std::mem::take(&mut egraph.analysis.search.touched);
    egraph.analysis.search.kernels.borrow_mut().clear();
    if runner.iterations.is_empty() {
        egraph.analysis.search.scope = None;
        return Ok(());
    }
    let mut scope = FxHashSet::default();
    for class in touched {
        let class = egraph.find(class);
        scope.insert(class);
        scope.extend(egraph[class].parents().map(|p| egraph.find(p)));
    }
    egraph.analysis.search.scope = Some(scope);
    Ok(())
}

impl Searcher<TNode, crate::analysis::TensorAnalysis> for Rule {
    fn search_eclass_with_limit(&self, egraph: &EG, eclass: Id, limit: usize) -> Option<SearchMatches<'_, TNode>> {
        if limit == 0 {
            return None;
        }
        let found = egraph[eclass].nodes.iter().any(|n| !(self.find)(egraph, eclass, n).is_empty());
        found.then(|| SearchMatches { eclass, substs: vec![Subst::with_capacity(0)], ast: None })
    }

    fn vars(&self) -> Vec<Var> {
        Vec::new()
    }
}

impl Applier<TNode, crate::analysis::TensorAnalysis> for Rule {
    fn apply_one(
        &self,
        egraph: &mut EG,
        eclass: Id,
        _subst: &Subst,
        _searcher_ast: Option<&egg::PatternAst<TNode>>,
        rule_name: Symbol,
    ) -> Vec<Id> {
        let eclass = egraph.find(eclass);
        let found = find_all(self, egraph, eclass);
        add_found(egraph, eclass, found, rule_name)
    }
}

impl Searcher<TNode, crate::analysis::TensorAnalysis> for ClassRule {
    fn search_eclass_with_limit(&self, egraph: &EG, eclass: Id, limit: usize) -> Option<SearchMatches<'_, TNode>> {
        if limit == 0 || !egraph.analysis.search.searches(eclass) {
            return None;
        }
        let found = !(self.find)(egraph, eclass, 1).is_empty();
        found.then(|| SearchMatches { eclass, substs: vec![Subst::with_capacity(0)], ast: None })
    }

    fn vars(&self) -> Vec<Var> {
        Vec::new()
    }
}

impl Applier<TNode, crate::analysis::TensorAnalysis> for ClassRule {
    fn apply_one(
        &self,
        egraph: &mut EG,
        eclass: Id,
        _subst: &Subst,
        _searcher_ast: Option<&egg::PatternAst<TNode>>,
        rule_name: Symbol,
    ) -> Vec<Id> {
        let eclass = egraph.find(eclass);
        egraph.analysis.search.applying.set(true);
        let found = (self.find)(egraph, eclass, usize::MAX);
        egraph.analysis.search.applying.set(false);
        add_found(egraph, eclass, found, rule_name)
    }
}

/// Adds the (type-checked) terms found for `eclass` and unions each with the class, justified by
/// `rule_name`; returns the class once per term that changed the e-graph.
fn add_found(egraph: &mut EG, eclass: Id, found: Vec<(TNode, Term)>, rule_name: Symbol) -> Vec<Id> {
    let mut changed = Vec::new();
    for (node, term) in found {
        let class_ty = egraph[eclass].data.ty.clone();
        if term_type(egraph, &term).as_ref() != Some(&class_ty) {
            continue;
        }
        // A tuple's side outputs join their classes too (the proof step starts at the class).
        let mut siblings = Vec::new();
        let id = match term {
            Term::Tuple { body, inputs, siblings: classes } => {
                let tuple = add_tuple(egraph, body, inputs);
                egraph.analysis.search.touched.push(tuple);
                for (i, class) in classes.into_iter().enumerate() {
                    siblings.push((class, egraph.add_uncanonical(TNode::new(TOp::Output(i + 1), vec![tuple]))));
                }
                egraph.add_uncanonical(TNode::new(TOp::Output(0), vec![tuple]))
            }
            term => add_term(egraph, term),
        };
        // With explanations, the proof step goes from the matched node itself.
        let from = if egraph.are_explanations_enabled() { egraph.add_uncanonical(node) } else { eclass };
        for (class, from, id) in std::iter::once((eclass, from, id)).chain(siblings.into_iter().map(|(c, o)| (c, c, o)))
        {
            if egraph.union_trusted(from, id, rule_name) {
                changed.push(class);
                egraph.analysis.search.touched.push(class);
                let root = egraph.find(class);
                egraph.analysis.search.forget(&[class, id, root]);
            }
        }
    }
    changed
}

/// The egg rewrite running `rule`.
pub fn rewrite(rule: Rule) -> Option<Rewrite<TNode, crate::analysis::TensorAnalysis>> {
    Rewrite::new(rule.name, rule, rule).ok()
}

/// The rewrites of a family.
pub fn rewrites(rules: &[Rule]) -> Vec<Rewrite<TNode, crate::analysis::TensorAnalysis>> {
    rules.iter().filter_map(|r| rewrite(*r)).collect()
}

/// Helpers shared by the rule files.
pub(crate) mod util {
    use egg::Id;
    use tcc_ir::TensorType;

    use crate::analysis::EG;
    use crate::lang::TOp;

    /// The scalar constant value of a class, if it is one.
    pub fn konst(egraph: &EG, id: Id) -> Option<f64> {
        egraph[id].data.konst
    }

    /// The class's type.
    pub fn ty(egraph: &EG, id: Id) -> &TensorType {
        &egraph[id].data.ty
    }

    /// Children of every node of class `id` whose operator satisfies `pred`, in node order.
    pub fn nodes_where<'a>(
        egraph: &'a EG,
        id: Id,
        pred: impl Fn(&TOp) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a TOp, &'a [Id])> + 'a {
        egraph[id].nodes.iter().filter(move |n| pred(&n.op)).map(|n| (&n.op, n.children.as_slice()))
    }

    /// Element count of a shape with unbound variables counted as 1024.
    pub fn numel(ty: &TensorType) -> f64 {
        crate::cost::numel(&ty.shape, &tcc_ir::Bindings::new())
    }
}
