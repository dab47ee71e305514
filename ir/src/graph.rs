//! The SSA dataflow graph of one tensor function.

use crate::infer::{TypeError, infer};
use crate::limits;
use crate::op::{NodeId, Op, TensorType};
use crate::shape::Shape;

/// One value of the graph: the op that computes it and its type.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// What the node computes.
    pub op: Op,
    /// Its result type.
    pub ty: TensorType,
}

/// A named parameter of the function.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Param {
    /// The name in source.
    pub name: String,
    /// Its type.
    pub ty: TensorType,
}

/// One tensor function: parameters, nodes in topological order, and outputs.
///
/// Invariant (checked by [`crate::verify`]): every operand id is smaller than its user's id, so the
/// node order is a topological order and the graph is acyclic.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Graph {
    /// The function's name.
    pub name: String,
    /// Parameters, in order; node `Op::Input { index }` reads `params[index]`.
    pub params: Vec<Param>,
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// The returned values, in order.
    pub outputs: Vec<NodeId>,
}

/// Errors from building a graph node.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// The op is ill-typed.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// The program has more ops than [`limits::MAX_OPS`].
    #[error("the program has more than {} ops", limits::MAX_OPS)]
    TooManyOps,
}

impl Graph {
    /// The users of every node, indexed by node: each node that reads it as an operand, once, in
    /// graph order.
    pub fn users(&self) -> Vec<Vec<NodeId>> {
        let mut users = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for a in node.op.operands() {
                if let Some(u) = users.get_mut(a.index())
                    && !u.contains(&NodeId(i as u32))
                {
                    u.push(NodeId(i as u32));
                }
            }
        }
        users
    }

    /// An empty graph named `name`.
    pub fn new(name: impl Into<String>) -> Graph {
        Graph { name: name.into(), ..Graph::default() }
    }

    /// Adds a parameter and the `Input` node that reads it.
    pub fn add_param(&mut self, name: impl Into<String>, ty: TensorType) -> Result<NodeId, BuildError> {
        let index = self.params.len();
        self.params.push(Param { name: name.into(), ty });
        self.push(Op::Input { index })
    }

    /// Appends `op` after checking its operands and computing its type.
    pub fn push(&mut self, op: Op) -> Result<NodeId, BuildError> {
        let ty = infer(self, &op)?;
        self.push_typed(op, ty)
    }

    /// Appends a constant scalar of `dtype`, rounding `value` to it.
    pub fn constant(&mut self, value: f64, dtype: crate::DType) -> Result<NodeId, BuildError> {
        let ty = TensorType { dtype, shape: Shape::scalar() };
        self.push_typed(Op::Constant { value: dtype.round(value) }, ty)
    }

    /// Appends `iota`: the positions `0..len` as an `i32[len]` vector.
    pub fn iota(&mut self, len: crate::Dim) -> Result<NodeId, BuildError> {
        self.push_typed(Op::Iota, TensorType { dtype: crate::DType::I32, shape: Shape(vec![len]) })
    }

    /// Appends an op whose result type is given (casts, broadcasts and reshapes choose theirs);
    /// the type is checked against the op's rules.
    pub fn push_typed(&mut self, op: Op, ty: TensorType) -> Result<NodeId, BuildError> {
        if self.nodes.len() >= limits::MAX_OPS {
            return Err(BuildError::TooManyOps);
        }
        crate::infer::check_declared(self, &op, &ty)?;
        let id = NodeId(u32::try_from(self.nodes.len()).map_err(|_| BuildError::TooManyOps)?);
        self.nodes.push(Node { op, ty });
        Ok(id)
    }

    /// The node with id `id`, if it exists.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The type of node `id`, if it exists.
    pub fn ty(&self, id: NodeId) -> Option<&TensorType> {
        self.node(id).map(|n| &n.ty)
    }

    /// Names of every shape variable used by parameters and nodes, sorted.
    pub fn shape_vars(&self) -> Vec<String> {
        let mut vars: Vec<String> = self
            .params
            .iter()
            .map(|p| &p.ty)
            .chain(self.nodes.iter().map(|n| &n.ty))
            .flat_map(|t| t.shape.vars())
            .collect();
        vars.sort();
        vars.dedup();
        vars
    }

    /// How many times each node is used as an operand or output.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut counts = vec![0usize; self.nodes.len()];
        for node in &self.nodes {
            for operand in node.op.operands() {
                if let Some(c) = counts.get_mut(operand.index()) {
                    *c += 1;
                }
            }
        }
        for out in &self.outputs {
            if let Some(c) = counts.get_mut(out.index()) {
                *c += 1;
            }
        }
        counts
    }

    /// Which nodes depend on `from`, itself included (nodes are in topological order).
    pub fn downstream_of(&self, from: NodeId) -> Vec<bool> {
        let mut dep = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            dep[i] =
                i == from.index() || node.op.operands().iter().any(|a| dep.get(a.index()).copied().unwrap_or(false));
        }
        dep
    }
}

/// A set of functions, as one `.tc` file or `kernel!` invocation defines them.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Module {
    /// The functions, in source order; calls between them are already inlined.
    pub functions: Vec<Graph>,
}

impl Module {
    /// The function named `name`.
    pub fn function(&self, name: &str) -> Option<&Graph> {
        self.functions.iter().find(|g| g.name == name)
    }
}
