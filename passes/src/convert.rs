//! Graph ⇄ e-graph: every IR node becomes an e-node (identical subexpressions share a class), and
//! an extraction becomes a graph again.

use std::collections::BTreeMap;

use egg::Id;
use tcc_ir::{BuildError, Graph, NodeId};

use crate::analysis::{EG, TensorAnalysis};
use crate::extract::Extraction;
use crate::lang::{TNode, TOp};

/// An e-graph built from a graph, with the class of each output and of each node.
pub struct Built {
    /// The e-graph.
    pub egraph: EG,
    /// The class of each output, in order.
    pub roots: Vec<Id>,
    /// The e-node id of each graph node (what explanations start from).
    pub node_ids: Vec<Id>,
}

/// Builds the e-graph of `g` under `analysis`, recording egg's explanations when `explain`; records
/// how many users each class has.
pub fn to_egraph(g: &Graph, mut analysis: TensorAnalysis, explain: bool) -> Built {
    analysis.param_types = g.params.iter().map(|p| p.ty.clone()).collect();
    let mut egraph = EG::new(analysis);
    if explain {
        // Without egg's greedy shortening of proofs: it walks every e-node of the classes on the
        // proof at each query, one query per kernel, which made `explain` quadratic in program size.
        // The rules of any proof are what `tcc explain` reports.
        egraph = egraph.with_explanations_enabled().without_explanation_length_optimization();
    }
    let mut ids: Vec<Id> = Vec::with_capacity(g.nodes.len());
    for node in &g.nodes {
        let children: Vec<Id> = node.op.operands().iter().filter_map(|o| ids.get(o.index()).copied()).collect();
        let id = egraph.add_uncanonical(TNode::new(TOp::from_ir(&node.op, &node.ty), children));
        ids.push(id);
    }
    egraph.rebuild();
    let mut users: BTreeMap<Id, usize> = BTreeMap::new();
    for (count, id) in g.use_counts().into_iter().zip(&ids) {
        *users.entry(egraph.find(*id)).or_default() += count;
    }
    egraph.analysis.users = users.into_iter().collect();
    let roots = g.outputs.iter().filter_map(|o| ids.get(o.index())).map(|&i| egraph.find(i)).collect();
    Built { egraph, roots, node_ids: ids }
}

/// The graph an extraction of op nodes denotes: same name and params, nodes in post order.
pub fn to_graph(source: &Graph, egraph: &EG, ex: &Extraction, roots: &[Id]) -> Result<Graph, BuildError> {
    let mut g = Graph::new(source.name.clone());
    let mut params = Vec::with_capacity(source.params.len());
    for p in &source.params {
        params.push(g.add_param(p.name.clone(), p.ty.clone())?);
    }
    let order = ex.post_order(egraph, roots).ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(0)))?;
    let mut map: BTreeMap<Id, NodeId> = BTreeMap::new();
    for c in order {
        let node = ex.choice.get(&c).ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(0)))?;
        let id = match &node.op {
            TOp::Input(i) => *params.get(*i).ok_or(tcc_ir::TypeError::UnknownParam(*i))?,
            op => {
                let operands: Option<Vec<NodeId>> =
                    node.children.iter().map(|k| map.get(&egraph.find(*k)).copied()).collect();
                let operands = operands.ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(0)))?;
                let ir = op.to_ir(&operands).ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(0)))?;
                g.push_typed(ir, egraph[c].data.ty.clone())?
            }
        };
        map.insert(c, id);
    }
    for r in roots {
        let id = map.get(&egraph.find(*r)).copied().ok_or(tcc_ir::TypeError::UnknownOperand(NodeId(0)))?;
        g.outputs.push(id);
    }
    Ok(g)
}
