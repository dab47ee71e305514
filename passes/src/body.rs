//! Kernel bodies: the fused group of ops a kernel e-node stands for, as a small hash-consed DAG over
//! the kernel's external inputs. Bodies are interned in the analysis' table; the kernel e-node holds
//! the body's index and has the external inputs' classes as children.

use std::sync::Arc;

use indexmap::IndexSet;
use rustc_hash::FxBuildHasher;

use egg::Id;
use tcc_ir::{BuildError, Graph, KernelClass, NodeId, TensorType};

use crate::classify::classify;
use crate::lang::TOp;

/// The operands of a body value: indices of earlier values (at most three but for `concat`, so
/// kept inline: a merge copies thousands of them).
pub type Kids = smallvec::SmallVec<[usize; 3]>;

/// One value of a kernel body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BodyNode {
    /// The kernel's `i`-th external input.
    Input(usize),
    /// An op over earlier values of the body.
    Op(TOp, Kids),
}

/// A fused group of ops: values in topological order, the output (and perhaps further outputs),
/// typed external inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    /// The values, operands before users, without duplicates.
    pub nodes: Vec<BodyNode>,
    /// The type of each value (shared: merged bodies copy the types of the bodies they join).
    pub types: Vec<Arc<TensorType>>,
    /// The index of the value the kernel writes (its e-class's value).
    pub output: usize,
    /// Further values the kernel writes (the row log-sum-exp beside an attention's output). A
    /// kernel with side outputs lives in an e-class of its own, a *tuple*, and each output is a
    /// [`TOp::Output`] node of the tuple in the class of its value.
    pub side_outputs: Vec<usize>,
    /// The types of the external inputs, in input order.
    pub input_types: Vec<Arc<TensorType>>,
    /// The kernel class this body lowers as.
    pub class: KernelClass,
    /// The rules that built it, in the order they fired (no duplicates).
    pub rules: Vec<&'static str>,
}

impl Body {
    /// A hash of the body's structural identity (values, output, input types): what interning
    /// compares, without the derived `types`, `class` and `rules`.
    pub fn structural_hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.nodes.hash(&mut h);
        self.output.hash(&mut h);
        self.side_outputs.hash(&mut h);
        self.input_types.hash(&mut h);
        h.finish()
    }

    /// True if both bodies compute the same values from inputs of the same types.
    pub fn same_structure(&self, other: &Body) -> bool {
        self.output == other.output
            && self.side_outputs == other.side_outputs
            && self.nodes == other.nodes
            && self.input_types == other.input_types
    }

    /// The values the kernel writes: the output, then the side outputs.
    pub fn outputs(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.output).chain(self.side_outputs.iter().copied())
    }

    /// The type of the kernel's `index`-th output ([`Body::outputs`] order).
    pub fn nth_output_type(&self, index: usize) -> Option<&TensorType> {
        self.outputs().nth(index).and_then(|v| self.types.get(v)).map(|t| &**t)
    }

    /// The type of the value the kernel writes.
    pub fn output_type(&self) -> Option<&TensorType> {
        self.types.get(self.output).map(|t| &**t)
    }

    /// Number of ops that compute something (not inputs or constants).
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| matches!(n, BodyNode::Op(op, _) if op.is_compute())).count()
    }

    /// The kinds of the fused ops (`matmul`, `add`, `reduce_max`, ...), in body order.
    pub fn op_kinds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter_map(|n| match n {
                BodyNode::Op(op, _) if op.is_compute() => Some(op.kind_name()),
                _ => None,
            })
            .collect()
    }

    /// The body as a self-contained graph: its params are the external inputs, its outputs the
    /// kernel's ([`Body::outputs`]). Every node is re-checked by the IR's typing rules.
    pub fn to_graph(&self, name: &str) -> Result<Graph, BuildError> {
        Ok(self.to_graph_with_ids(name)?.0)
    }

    /// [`Body::to_graph`], with the graph node of each body value.
    pub fn to_graph_with_ids(&self, name: &str) -> Result<(Graph, Vec<NodeId>), BuildError> {
        let mut g = Graph::new(name);
        let mut params = Vec::with_capacity(self.input_types.len());
        for (i, ty) in self.input_types.iter().enumerate() {
            params.push(g.add_param(format!("in{i}"), (**ty).clone())?);
        }
        let mut ids: Vec<NodeId> = Vec::with_capacity(self.nodes.len());
        for (node, ty) in self.nodes.iter().zip(&self.types) {
            let id = match node {
                BodyNode::Input(i) => *params.get(*i).ok_or(tcc_ir::TypeError::UnknownParam(*i))?,
                BodyNode::Op(op, kids) => {
                    let operands: Vec<NodeId> = kids.iter().filter_map(|k| ids.get(*k).copied()).collect();
                    let ir = op.to_ir(&operands).ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(u32::MAX)))?;
                    g.push_typed(ir, (**ty).clone())?
                }
            };
            ids.push(id);
        }
        for v in self.outputs() {
            let out = ids.get(v).copied().ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(0)))?;
            g.outputs.push(out);
        }
        Ok((g, ids))
    }
}

/// Builds a body by hash-consing values; external inputs are deduplicated by e-class.
#[derive(Debug, Default)]
pub struct BodyBuilder {
    /// The values, each once, by index.
    nodes: IndexSet<BodyNode, FxBuildHasher>,
    types: Vec<Arc<TensorType>>,
    inputs: Vec<Id>,
    input_types: Vec<Arc<TensorType>>,
}

impl BodyBuilder {
    /// An empty builder.
    pub fn new() -> BodyBuilder {
        BodyBuilder::default()
    }

    /// An empty builder with room for `values` values and `inputs` external inputs.
    pub fn with_capacity(values: usize, inputs: usize) -> BodyBuilder {
        BodyBuilder {
            nodes: IndexSet::with_capacity_and_hasher(values, FxBuildHasher),
            types: Vec::with_capacity(values),
            inputs: Vec::with_capacity(inputs),
            input_types: Vec::with_capacity(inputs),
        }
    }

    fn intern(&mut self, node: BodyNode, ty: Arc<TensorType>) -> usize {
        let (i, new) = self.nodes.insert_full(node);
        if new {
            self.types.push(ty);
        }
        i
    }

    /// The value reading external input `class` (canonical id) of type `ty`.
    pub fn input(&mut self, class: Id, ty: &TensorType) -> usize {
        self.shared_input(class, &Arc::new(ty.clone()))
    }

    /// Like [`BodyBuilder::input`], sharing the type.
    fn shared_input(&mut self, class: Id, ty: &Arc<TensorType>) -> usize {
        let index = match self.inputs.iter().position(|&c| c == class) {
            Some(i) => i,
            None => {
                self.inputs.push(class);
                self.input_types.push(Arc::clone(ty));
                self.inputs.len() - 1
            }
        };
        self.intern(BodyNode::Input(index), Arc::clone(ty))
    }

    /// The value computing `op` over `kids`, whose result type is `ty`.
    pub fn op(&mut self, op: TOp, kids: Vec<usize>, ty: TensorType) -> usize {
        self.intern(BodyNode::Op(op, kids.into()), Arc::new(ty))
    }

    /// Copies `body` in, reading its input `j` from `inputs[j]`; returns its output value.
    /// `inline` maps some of `body`'s inputs to values already built instead.
    pub fn splice(&mut self, body: &Body, inputs: &[Id], inline: &dyn Fn(usize) -> Option<usize>) -> Option<usize> {
        let map = self.splice_all(body, inputs, inline)?;
        map.get(body.output).copied()
    }

    /// Like [`BodyBuilder::splice`], returning the value each of `body`'s values became.
    pub fn splice_all(
        &mut self,
        body: &Body,
        inputs: &[Id],
        inline: &dyn Fn(usize) -> Option<usize>,
    ) -> Option<Vec<usize>> {
        let mut map: Vec<usize> = Vec::with_capacity(body.nodes.len());
        for (node, ty) in body.nodes.iter().zip(&body.types) {
            let v = match node {
                BodyNode::Input(j) => match inline(*j) {
                    Some(v) => v,
                    None => self.shared_input(*inputs.get(*j)?, ty),
                },
                BodyNode::Op(op, kids) => {
                    let kids: Option<Kids> = kids.iter().map(|k| map.get(*k).copied()).collect();
                    self.intern(BodyNode::Op(op.clone(), kids?), Arc::clone(ty))
                }
            };
            map.push(v);
        }
        Some(map)
    }

    /// Finishes the body with output `output`; `None` if the result is not a legal kernel.
    /// Returns the body and its external inputs' classes.
    pub fn finish(self, output: usize, rules: Vec<&'static str>) -> Option<(Body, Vec<Id>)> {
        self.finish_with_side_outputs(output, Vec::new(), rules)
    }

    /// Like [`BodyBuilder::finish`], with `side_outputs` written too.
    pub fn finish_with_side_outputs(
        self,
        output: usize,
        side_outputs: Vec<usize>,
        rules: Vec<&'static str>,
    ) -> Option<(Body, Vec<Id>)> {
        let (mut body, inputs) = self.finish_unclassified(output, rules);
        body.side_outputs = side_outputs;
        body.class = classify(&body)?;
        Some((body, inputs))
    }

    /// Finishes the body without classifying it (its class reads `Generic`): a step of a merge
    /// whose intermediate is no legal kernel by itself.
    fn finish_unclassified(self, output: usize, rules: Vec<&'static str>) -> (Body, Vec<Id>) {
        let body = Body {
            nodes: self.nodes.into_iter().collect(),
            types: self.types,
            output,
            side_outputs: Vec::new(),
            input_types: self.input_types,
            class: KernelClass::Generic,
            rules,
        };
        (body, self.inputs)
    }
}

/// Merges `producer` into `consumer` at the consumer's input `at`: the result computes the
/// consumer with that input replaced by the producer's ops. Both bodies come with their inputs'
/// classes (canonical ids). `None` when the result is not a legal kernel.
pub fn merge(
    consumer: (&Body, &[Id]),
    at: usize,
    producer: (&Body, &[Id]),
    rule: &'static str,
) -> Option<(Body, Vec<Id>)> {
    let (b, out, side, rules) = merged_builder(consumer, at, producer, rule)?;
    b.finish_with_side_outputs(out, side, rules)
}

/// Like [`merge`], without classifying the result: the first of two merges that only together
/// make a legal kernel (attention).
pub fn merge_unclassified(
    consumer: (&Body, &[Id]),
    at: usize,
    producer: (&Body, &[Id]),
    rule: &'static str,
) -> Option<(Body, Vec<Id>)> {
    let (b, out, side, rules) = merged_builder(consumer, at, producer, rule)?;
    let (mut body, inputs) = b.finish_unclassified(out, rules);
    body.side_outputs = side;
    Some((body, inputs))
}

/// The builder holding `consumer` with `producer` spliced in at input `at`, its output and side
/// output values and the merged rule list. A producer with side outputs is never spliced (its
/// other outputs would be lost; nothing reads a tuple but its outputs anyway).
fn merged_builder(
    consumer: (&Body, &[Id]),
    at: usize,
    producer: (&Body, &[Id]),
    rule: &'static str,
) -> Option<(BodyBuilder, usize, Vec<usize>, Vec<&'static str>)> {
    if !producer.0.side_outputs.is_empty() {
        return None;
    }
    let mut b = BodyBuilder::with_capacity(
        consumer.0.nodes.len() + producer.0.nodes.len(),
        consumer.0.input_types.len() + producer.0.input_types.len(),
    );
    // The producer's output value, built the first time the consumer reads input `at`.
    let produced = std::cell::Cell::new(None::<usize>);
    let mut map: Vec<usize> = Vec::with_capacity(consumer.0.nodes.len());
    for (node, ty) in consumer.0.nodes.iter().zip(&consumer.0.types) {
        let v = match node {
            BodyNode::Input(j) if *j == at => match produced.get() {
                Some(v) => v,
                None => {
                    let v = b.splice(producer.0, producer.1, &|_| None)?;
                    produced.set(Some(v));
                    v
                }
            },
            BodyNode::Input(j) => b.shared_input(*consumer.1.get(*j)?, ty),
            BodyNode::Op(op, kids) => {
                let kids: Option<Kids> = kids.iter().map(|k| map.get(*k).copied()).collect();
                b.intern(BodyNode::Op(op.clone(), kids?), Arc::clone(ty))
            }
        };
        map.push(v);
    }
    let out = *map.get(consumer.0.output)?;
    let side: Option<Vec<usize>> = consumer.0.side_outputs.iter().map(|v| map.get(*v).copied()).collect();
    let mut rules = consumer.0.rules.clone();
    for r in producer.0.rules.iter().copied().chain([rule]) {
        if !rules.contains(&r) {
            rules.push(r);
        }
    }
    Some((b, out, side?, rules))
}
