//! The e-class analysis: every class's tensor type (and scalar constant value), plus the tables that
//! kernel e-nodes index (bodies and schedules).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use egg::{Analysis, DidMerge, EGraph, Id};
use rustc_hash::FxHashMap;
use tcc_ir::{DType, Schedule, Shape, TensorType};

use crate::body::Body;
use crate::fold::fold_constant;
use crate::lang::{TNode, TOp};
use crate::types::type_of;

/// The e-graph type of this crate.
pub type EG = EGraph<TNode, TensorAnalysis>;

/// What the analysis knows about one e-class.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    /// The type every node of the class has.
    pub ty: TensorType,
    /// The value, when the class is a scalar constant.
    pub konst: Option<f64>,
    /// The class holds a parameter of the function (an `Input` node): fusion counts the kernel
    /// inputs that are computed values, and a parameter is not one.
    pub param: bool,
}

/// A merge's consumer body, the input absorbed, the producer body, and a hash of both kernels'
/// inputs (whose full lists each entry keeps, so that a lookup allocates nothing).
type MergeKey = (u32, usize, u32, u64);
/// A computed merge: consumer inputs, producer inputs, the result, and whether an applier has
/// added the result to the e-graph.
/// A merge's consumer inputs, producer inputs, and what is known of it: its result, or `None`
/// once an applier added it (the e-graph then holds the body; keeping a copy here would only
/// hold memory).
type MergeEntry = (Inputs, Inputs, Option<Merged>);
/// A kernel's input classes as a merge entry keeps them (inline: there are many entries, and
/// kernels have few inputs).
type Inputs = smallvec::SmallVec<[Id; 6]>;

/// What [`TensorAnalysis::merged`] knows of a merge.
#[derive(Debug, Clone)]
pub enum MergeLookup {
    /// The merge (or `None`: not a legal kernel), not yet in the e-graph.
    Result(Merged),
    /// The merge is a kernel an applier has added already: the e-graph holds it in the class of
    /// the consumer, so adding it again would change nothing.
    Added,
}
/// A merged body and its inputs, or `None` when the merge is not a legal kernel.
pub type Merged = Option<(Arc<Body>, Vec<Id>)>;

/// The analysis and the side tables of kernel e-nodes.
#[derive(Debug, Clone, Default)]
pub struct TensorAnalysis {
    /// Types of the function's parameters (what `Input` nodes read).
    pub param_types: Vec<TensorType>,
    /// Fold constant expressions (phase A only).
    pub fold_constants: bool,
    /// Interned kernel bodies (shared with the merge table and the terms that add them).
    bodies: Vec<Arc<Body>>,
    /// [`Body::op_count`] of each interned body (fusion ranks kernels by it many times).
    body_ops: Vec<usize>,
    /// Interned bodies by [`Body::structural_hash`].
    body_index: FxHashMap<u64, Vec<u32>>,
    /// Interned schedules.
    pub schedules: Vec<Schedule>,
    schedule_index: HashMap<Schedule, u32>,
    /// How many users (ops, plus one if it is an output) each class has in the graph the e-graph
    /// was built from; fusion only recomputes cheap values that have several.
    pub users: FxHashMap<Id, usize>,
    /// Which ids are classes of parameters, by id (filled when fusion starts, [`TensorAnalysis::mark_params`]):
    /// fusion asks for every input of every kernel it ranks, and an index is cheaper than a class
    /// lookup.
    param_ids: Vec<bool>,
    /// The target schedules are chosen for (phase B).
    pub target: Option<crate::target::TargetModel>,
    /// Sizes of shape variables for the cost model and schedule rules.
    pub bindings: tcc_ir::Bindings,
    /// Results of kernel merges already computed (fusion rules ask for the same merge when
    /// searching and applying, and again in later iterations).
    merges: RefCell<FxHashMap<MergeKey, Vec<MergeEntry>>>,
    /// The rule adapter's memory between search and apply.
    pub search: crate::rules::SearchState,
    /// Inconsistencies found (ill-typed nodes, merges of different types): bugs, reported by
    /// [`crate::optimize`] instead of panicking.
    pub errors: Vec<String>,
}

impl TensorAnalysis {
    /// An analysis for a function with parameters of `param_types`.
    pub fn new(param_types: Vec<TensorType>, fold_constants: bool) -> TensorAnalysis {
        TensorAnalysis { param_types, fold_constants, ..TensorAnalysis::default() }
    }

    /// Interns `body`, returning its index: structurally equal bodies get one index.
    pub fn intern_body(&mut self, body: Arc<Body>) -> u32 {
        let hash = body.structural_hash();
        let same = self.body_index.get(&hash).into_iter().flatten().copied();
        if let Some(i) =
            same.into_iter().find(|&i| self.bodies.get(i as usize).is_some_and(|b| b.same_structure(&body)))
        {
            return i;
        }
        let i = u32::try_from(self.bodies.len()).unwrap_or(u32::MAX);
        self.body_ops.push(body.op_count());
        self.bodies.push(body);
        self.body_index.entry(hash).or_default().push(i);
        i
    }

    /// The body with index `i`.
    pub fn body(&self, i: u32) -> Option<&Body> {
        self.bodies.get(i as usize).map(|b| &**b)
    }

    /// The body with index `i` and its number of computing ops.
    pub fn body_with_ops(&self, i: u32) -> Option<(&Body, usize)> {
        Some((self.bodies.get(i as usize)?, *self.body_ops.get(i as usize)?))
    }

    /// Interns `schedule`, returning its index.
    pub fn intern_schedule(&mut self, schedule: Schedule) -> u32 {
        if let Some(&i) = self.schedule_index.get(&schedule) {
            return i;
        }
        let i = u32::try_from(self.schedules.len()).unwrap_or(u32::MAX);
        self.schedules.push(schedule);
        self.schedule_index.insert(schedule, i);
        i
    }

    /// The schedule with index `i`.
    pub fn schedule(&self, i: u32) -> Option<&Schedule> {
        self.schedules.get(i as usize)
    }

    /// The merge of producer `(body, inputs)` into consumer `(body, inputs)` at input `at`,
    /// computed by `compute` the first time it is asked for, or [`MergeLookup::Added`] once
    /// [`TensorAnalysis::mark_added`] recorded that its result is in the e-graph.
    pub fn merged(
        &self,
        consumer: (u32, &[Id]),
        at: usize,
        producer: (u32, &[Id]),
        compute: impl FnOnce() -> Merged,
    ) -> MergeLookup {
        let key = Self::merge_key(consumer, at, producer);
        let hit = self.merges.borrow().get(&key).and_then(|entries| {
            entries.iter().find(|(c, p, _)| c.as_slice() == consumer.1 && p.as_slice() == producer.1).map(
                |(_, _, m)| match m {
                    Some(m) => MergeLookup::Result(m.clone()),
                    None => MergeLookup::Added,
                },
            )
        });
        if let Some(hit) = hit {
            return hit;
        }
        let result = compute();
        let entry = (Inputs::from_slice(consumer.1), Inputs::from_slice(producer.1), Some(result.clone()));
        self.merges.borrow_mut().entry(key).or_default().push(entry);
        MergeLookup::Result(result)
    }

    /// Records that an applier added the result of this merge to the e-graph (and drops the
    /// copy of its body kept here: a body equal to one already interned would otherwise live on).
    pub fn mark_added(&self, consumer: (u32, &[Id]), at: usize, producer: (u32, &[Id])) {
        let key = Self::merge_key(consumer, at, producer);
        if let Some(entries) = self.merges.borrow_mut().get_mut(&key)
            && let Some((.., known)) =
                entries.iter_mut().find(|(c, p, _)| c.as_slice() == consumer.1 && p.as_slice() == producer.1)
        {
            *known = None;
        }
    }

    fn merge_key(consumer: (u32, &[Id]), at: usize, producer: (u32, &[Id])) -> MergeKey {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        consumer.1.hash(&mut h);
        producer.1.hash(&mut h);
        (consumer.0, at, producer.0, h.finish())
    }

    /// Records the classes of `egraph` that hold a parameter. They stay as they are: no rule
    /// makes a parameter equal to anything else, so their ids stay canonical.
    pub fn mark_params(egraph: &mut EG) {
        let ids: Vec<usize> = egraph.classes().filter(|c| c.data.param).map(|c| usize::from(c.id)).collect();
        let marks = &mut egraph.analysis.param_ids;
        marks.clear();
        for id in ids {
            if marks.len() <= id {
                marks.resize(id + 1, false);
            }
            marks[id] = true;
        }
    }

    /// Whether `id` is the class of a parameter (as of [`TensorAnalysis::mark_params`]).
    pub fn is_param(&self, id: Id) -> bool {
        self.param_ids.get(usize::from(id)).copied().unwrap_or(false)
    }

    /// Number of users of `class` (0 if unknown).
    pub fn users_of(&self, class: Id) -> usize {
        self.users.get(&class).copied().unwrap_or(0)
    }
}

/// The type of output `index` of the kernel in `node`'s child class (a tuple).
fn output_type(egraph: &EG, node: &TNode, index: usize) -> Result<TensorType, String> {
    let tuple = node.children.first().ok_or("an output of nothing")?;
    egraph[*tuple]
        .nodes
        .iter()
        .find_map(|n| match n.op {
            TOp::Kernel { body, .. } => egraph.analysis.body(body).and_then(|b| b.nth_output_type(index)).cloned(),
            _ => None,
        })
        .ok_or_else(|| format!("no kernel output {index}"))
}

fn placeholder() -> TensorType {
    TensorType { dtype: DType::F32, shape: Shape::scalar() }
}

impl Analysis<TNode> for TensorAnalysis {
    type Data = Data;

    fn make(egraph: &mut EG, enode: &TNode, _id: Id) -> Data {
        let ty = match &enode.op {
            TOp::Input(i) => egraph.analysis.param_types.get(*i).cloned().ok_or_else(|| format!("no param {i}")),
            TOp::Kernel { body, .. } => egraph
                .analysis
                .body(*body)
                .and_then(|b| b.output_type().cloned())
                .ok_or_else(|| format!("no kernel body {body}")),
            TOp::Output(index) => output_type(egraph, enode, *index),
            op => {
                let kids: Vec<&TensorType> = enode.children.iter().map(|c| &egraph[*c].data.ty).collect();
                type_of(op, &kids).map_err(|e| format!("ill-typed {op}: {e}"))
            }
        };
        let ty = match ty {
            Ok(ty) => ty,
            Err(e) => {
                egraph.analysis.errors.push(e);
                placeholder()
            }
        };
        let konst = match &enode.op {
            TOp::Const { bits, .. } => Some(f64::from_bits(*bits)),
            op if egraph.analysis.fold_constants && op.is_elementwise() && ty.shape.rank() == 0 => {
                let values: Option<Vec<f64>> = enode.children.iter().map(|c| egraph[*c].data.konst).collect();
                let kid_types: Vec<DType> = enode.children.iter().map(|c| egraph[*c].data.ty.dtype).collect();
                values.and_then(|v| fold_constant(op, &v, &kid_types, ty.dtype))
            }
            _ => None,
        };
        Data { ty, konst, param: matches!(enode.op, TOp::Input(_)) }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        if a.ty != b.ty {
            self.errors.push(format!("merged classes of types {} and {}", a.ty, b.ty));
            return DidMerge(false, true);
        }
        let param = DidMerge(!a.param && b.param, a.param && !b.param);
        a.param |= b.param;
        let konst = match (a.konst, b.konst) {
            (None, Some(v)) => {
                a.konst = Some(v);
                DidMerge(true, false)
            }
            (Some(_), None) => DidMerge(false, true),
            _ => DidMerge(false, false),
        };
        param | konst
    }

    fn modify(egraph: &mut EG, id: Id) {
        let data = &egraph[id].data;
        if let Some(v) = data.konst {
            let dtype = data.ty.dtype;
            let has_const = egraph[id].nodes.iter().any(|n| matches!(n.op, TOp::Const { .. }));
            if !has_const {
                let c = egraph.add(TNode::new(TOp::constant(v, dtype), Vec::new()));
                egraph.union_trusted(id, c, "constant-fold");
            }
        }
    }
}
