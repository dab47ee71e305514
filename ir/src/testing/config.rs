//! What the generator may produce: sizes, dtypes and the set of ops.

use crate::dtype::DType;
use crate::limits;
use crate::op::{BinaryOp, CompareOp, ReduceOp, UnaryOp};

/// The ops the generator may use. Backends that support a subset generate only that subset.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSet {
    /// Unary ops.
    pub unary: Vec<UnaryOp>,
    /// Binary ops.
    pub binary: Vec<BinaryOp>,
    /// Comparisons (the source of bool values besides bool parameters and casts).
    pub compare: Vec<CompareOp>,
    /// Reductions.
    pub reduce: Vec<ReduceOp>,
    /// Scalar constants.
    pub constant: bool,
    /// Casts between the configured dtypes.
    pub cast: bool,
    /// `select`.
    pub select: bool,
    /// Explicit broadcasts.
    pub broadcast: bool,
    /// Reshapes.
    pub reshape: bool,
    /// Permutes.
    pub permute: bool,
    /// Slices.
    pub slice: bool,
    /// Concats.
    pub concat: bool,
    /// (Batched) matmuls.
    pub matmul: bool,
    /// `iota` (positions as an i32 vector). Off in [`OpSet::all`], so that the programs earlier
    /// seeds drew stay the same; [`GenConfig::with_positions`] turns it on.
    pub iota: bool,
}

impl OpSet {
    /// Every op of the IR.
    pub fn all() -> OpSet {
        OpSet {
            unary: UnaryOp::ALL.to_vec(),
            binary: BinaryOp::ALL.to_vec(),
            compare: CompareOp::ALL.to_vec(),
            reduce: ReduceOp::ALL.to_vec(),
            constant: true,
            cast: true,
            select: true,
            broadcast: true,
            reshape: true,
            permute: true,
            slice: true,
            concat: true,
            matmul: true,
            iota: false,
        }
    }

    /// What a pointwise kernel holds ([`crate::KernelClass::Pointwise`]): elementwise ops,
    /// constants, broadcasts and the index-only ops (reshape, permute, slice, concat); no
    /// reductions, no matmul.
    pub fn pointwise() -> OpSet {
        OpSet { reduce: Vec::new(), matmul: false, ..OpSet::all() }
    }

    /// Strictly elementwise ops with constants and broadcasts (no index-only ops).
    pub fn elementwise() -> OpSet {
        OpSet { reshape: false, permute: false, slice: false, concat: false, ..OpSet::pointwise() }
    }
}

/// Configuration of [`super::arb_graph`].
#[derive(Debug, Clone, PartialEq)]
pub struct GenConfig {
    /// At most this many parameters (at least 1 is always generated).
    pub max_params: usize,
    /// At most this many recipe steps. Each adds one op, plus a few more when it guards an op's
    /// domain (`log(abs(x) + c)`, `pow(abs(a) + c, tanh(b))`), so a graph may hold more nodes.
    pub max_ops: usize,
    /// Maximum rank of every value (clamped to 1..=8).
    pub max_rank: usize,
    /// Maximum size of one dimension (sizes come from 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 33, 64, 65, 96, 100, 127).
    pub max_dim: u64,
    /// Maximum element count of every value.
    pub max_elements: u64,
    /// Dtypes of parameters, constants and cast targets (bool also comes from comparisons).
    pub dtypes: Vec<DType>,
    /// Let parameter shapes use shape variables (bound in [`super::GeneratedProgram::bindings`]).
    pub allow_shape_vars: bool,
    /// Sometimes (one step in eight) skip domain guards and use special constants (inf, NaN, -0,
    /// values that overflow f16), so NaN/inf semantics are exercised. When false, log/sqrt/rsqrt/
    /// pow/div/exp are always guarded and constants are ordinary.
    pub special_values: bool,
    /// The ops used.
    pub ops: OpSet,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            max_params: 4,
            max_ops: 64,
            max_rank: 4,
            max_dim: 127,
            max_elements: 20_000,
            dtypes: DType::ALL.to_vec(),
            allow_shape_vars: true,
            special_values: true,
            ops: OpSet::all(),
        }
    }
}

impl GenConfig {
    /// Only f32, f16 and bf16 values: no comparisons or selects (they need bool), casts between
    /// float dtypes only.
    pub fn float_only() -> GenConfig {
        GenConfig {
            dtypes: vec![DType::F32, DType::F16, DType::BF16],
            ops: OpSet { compare: Vec::new(), select: false, ..OpSet::all() },
            ..GenConfig::default()
        }
    }

    /// Only f32 values (the first dtype a new backend supports).
    pub fn f32_only() -> GenConfig {
        GenConfig { dtypes: vec![DType::F32], ..GenConfig::float_only() }
    }

    /// Every dtype, only the ops of a pointwise kernel ([`OpSet::pointwise`]).
    pub fn pointwise_only() -> GenConfig {
        GenConfig { ops: OpSet::pointwise(), ..GenConfig::default() }
    }

    /// The default programs with positions (`iota`) among the ops: masks and biases written as
    /// math of positions. A preset of its own, so the default one draws the programs it drew.
    pub fn with_positions() -> GenConfig {
        GenConfig { ops: OpSet { iota: true, ..OpSet::all() }, ..GenConfig::default() }
    }

    /// Longer programs (up to 200 steps) of smaller tensors.
    pub fn long_chains() -> GenConfig {
        GenConfig { max_ops: 200, max_elements: 4_000, ..GenConfig::default() }
    }

    /// A copy with every field in range: at least one parameter and one dtype, rank in 1..=8,
    /// dims and element counts at least 1 and below the IR's limits.
    pub fn normalized(&self) -> GenConfig {
        let mut c = self.clone();
        c.max_params = c.max_params.max(1);
        c.max_rank = c.max_rank.clamp(1, limits::MAX_RANK);
        c.max_dim = c.max_dim.clamp(1, limits::MAX_ELEMENTS - 1);
        c.max_elements = c.max_elements.clamp(1, limits::MAX_ELEMENTS - 1);
        c.max_ops = c.max_ops.min(limits::MAX_OPS / 8);
        if c.dtypes.is_empty() {
            c.dtypes.push(DType::F32);
        }
        c
    }
}
