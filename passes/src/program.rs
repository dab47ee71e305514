//! Programs: from a kernel extraction to a [`Program`] (kernels in execution order, buffers between
//! them), and the unfused baseline with one kernel per op.

use std::collections::BTreeMap;

use egg::Id;
use tcc_ir::{Graph, Kernel, KernelClass, Launch, Node, Op, Param, Program, Schedule, Tier, ValueRef};

use crate::analysis::EG;
use crate::body::Body;
use crate::classify::classify;
use crate::cost::{Estimate, kernel_estimate};
use crate::error::PassError;
use crate::extract::Extraction;
use crate::lang::TOp;
use crate::target::TargetModel;

/// One kernel of a built program, with what the report says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltKernel {
    /// The e-class whose value it computes.
    pub class: Id,
    /// The kernel e-node chosen for it.
    pub node: crate::lang::TNode,
    /// The body index it came from.
    pub body: u32,
    /// The model's estimate.
    pub estimate: Estimate,
}

/// A short readable summary of a body's ops (`matmul_add_relu`, `max_sub_exp_sum_div`).
fn summary(body: &Body) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for k in body.op_kinds() {
        let k = k.strip_prefix("reduce_").map(str::to_string).unwrap_or(k);
        if !kinds.contains(&k) && k != "broadcast" && k != "reshape" {
            kinds.push(k);
        }
    }
    if kinds.len() > 5 {
        kinds.truncate(5);
        kinds.push("etc".into());
    }
    if kinds.is_empty() { "const".into() } else { kinds.join("_") }
}

/// Builds the program an extraction of kernel nodes denotes.
pub fn build_program(
    source: &Graph,
    egraph: &EG,
    ex: &Extraction,
    roots: &[Id],
    target: &TargetModel,
) -> Result<(Program, Vec<BuiltKernel>), PassError> {
    let order = ex.post_order(egraph, roots).ok_or_else(|| PassError::Internal("cyclic extraction".into()))?;
    let mut program = Program {
        name: source.name.clone(),
        params: source.params.clone(),
        buffers: Vec::new(),
        launches: Vec::new(),
        outputs: Vec::new(),
    };
    let mut kernels = Vec::new();
    let mut values: BTreeMap<Id, ValueRef> = BTreeMap::new();
    // The buffers of each tuple's outputs (the class of a kernel with side outputs).
    let mut tuples: BTreeMap<Id, Vec<ValueRef>> = BTreeMap::new();
    for c in order {
        let node = ex.choice.get(&c).ok_or_else(|| PassError::Internal("missing choice".into()))?;
        let value = match &node.op {
            TOp::Input(i) => ValueRef::Param(*i),
            TOp::Kernel { body, sched } => {
                let b = egraph.analysis.body(*body).ok_or_else(|| PassError::Internal("missing body".into()))?;
                let schedule = sched
                    .and_then(|s| egraph.analysis.schedule(s).copied())
                    .unwrap_or_else(|| Schedule::default_for(target.tier()));
                let inputs: Option<Vec<ValueRef>> =
                    node.children.iter().map(|k| values.get(&egraph.find(*k)).copied()).collect();
                let inputs = inputs.ok_or_else(|| PassError::Internal("kernel input not built".into()))?;
                let index = program.launches.len();
                let name = format!("k{index}_{}", summary(b));
                let graph = b.to_graph(&name)?;
                let mut outputs = Vec::new();
                for o in 0..=b.side_outputs.len() {
                    let ty = b.nth_output_type(o).ok_or_else(|| PassError::Internal("missing output type".into()))?;
                    outputs.push(ValueRef::Buffer(program.buffers.len()));
                    program.buffers.push(ty.clone());
                }
                program.launches.push(Launch {
                    kernel: Kernel { name, class: b.class, graph, schedule },
                    inputs,
                    outputs: outputs.clone(),
                });
                kernels.push(BuiltKernel {
                    class: c,
                    node: node.clone(),
                    body: *body,
                    estimate: kernel_estimate(b, &schedule, target, &egraph.analysis.bindings),
                });
                if !b.side_outputs.is_empty() {
                    tuples.insert(c, outputs.clone());
                }
                outputs[0]
            }
            TOp::Output(i) => {
                let tuple = node.children.first().map(|t| egraph.find(*t));
                let outputs = tuple.and_then(|t| tuples.get(&t));
                *outputs
                    .and_then(|o| o.get(*i))
                    .ok_or_else(|| PassError::Internal("an output of a kernel not built".into()))?
            }
            op => return Err(PassError::Internal(format!("extracted a bare {op} node"))),
        };
        values.insert(c, value);
    }
    for r in roots {
        let v = values.get(&egraph.find(*r)).copied().ok_or_else(|| PassError::Internal("output not built".into()))?;
        program.outputs.push(v);
    }
    Ok((program, kernels))
}

/// The baseline: one kernel per op (constants included), each with the conservative schedule of
/// the Cranelift tier. The graph should verify; the kernels copy its ops and types as they are.
pub fn lower_unfused(g: &Graph) -> Program {
    lower_unfused_for(g, Tier::Cranelift)
}

/// [`lower_unfused`] with the default schedule of `tier`.
pub fn lower_unfused_for(g: &Graph, tier: Tier) -> Program {
    let mut program = Program {
        name: g.name.clone(),
        params: g.params.clone(),
        buffers: Vec::new(),
        launches: Vec::new(),
        outputs: Vec::new(),
    };
    let mut values: Vec<Option<ValueRef>> = Vec::with_capacity(g.nodes.len());
    for node in &g.nodes {
        if let Op::Input { index } = node.op {
            values.push(Some(ValueRef::Param(index)));
            continue;
        }
        let mut operands: Vec<tcc_ir::NodeId> = Vec::new();
        for o in node.op.operands() {
            if !operands.contains(&o) {
                operands.push(o);
            }
        }
        let name = format!("k{}_{}", program.launches.len(), node.op.kind_name());
        let mut kg = Graph::new(name.clone());
        let mut inputs = Vec::with_capacity(operands.len());
        for (i, o) in operands.iter().enumerate() {
            let ty = g.ty(*o).cloned().unwrap_or_else(|| node.ty.clone());
            kg.params.push(Param { name: format!("in{i}"), ty: ty.clone() });
            kg.nodes.push(Node { op: Op::Input { index: i }, ty });
            inputs.push(values.get(o.index()).copied().flatten().unwrap_or(ValueRef::Param(0)));
        }
        let op = node.op.map_operands(|o| {
            let i = operands.iter().position(|x| *x == o).unwrap_or(0);
            tcc_ir::NodeId(u32::try_from(i).unwrap_or(0))
        });
        kg.nodes.push(Node { op, ty: node.ty.clone() });
        kg.outputs.push(tcc_ir::NodeId(u32::try_from(operands.len()).unwrap_or(0)));
        let class = single_op_class(&node.op, &kg);
        let buffer = program.buffers.len();
        program.buffers.push(node.ty.clone());
        program.launches.push(Launch {
            kernel: Kernel { name, class, graph: kg, schedule: Schedule::default_for(tier) },
            inputs,
            outputs: vec![ValueRef::Buffer(buffer)],
        });
        values.push(Some(ValueRef::Buffer(buffer)));
    }
    program.outputs =
        g.outputs.iter().map(|o| values.get(o.index()).copied().flatten().unwrap_or(ValueRef::Param(0))).collect();
    program
}

/// The class of a one-op kernel.
fn single_op_class(op: &Op, kg: &Graph) -> KernelClass {
    match op {
        Op::MatMul(..) => KernelClass::MatMul,
        Op::Reduce { .. } => {
            let ty = kg.nodes.last().map(|n| n.ty.clone());
            let body = ty.and_then(|ty| {
                let input = kg.params.first()?.ty.clone();
                Some(Body {
                    nodes: vec![
                        crate::body::BodyNode::Input(0),
                        crate::body::BodyNode::Op(TOp::from_ir(op, &ty), [0].into_iter().collect()),
                    ],
                    types: vec![std::sync::Arc::new(input.clone()), std::sync::Arc::new(ty)],
                    output: 1,
                    side_outputs: Vec::new(),
                    input_types: vec![std::sync::Arc::new(input)],
                    class: KernelClass::Generic,
                    rules: Vec::new(),
                })
            });
            body.and_then(|b| classify(&b)).unwrap_or(KernelClass::Generic)
        }
        _ => KernelClass::Pointwise,
    }
}
