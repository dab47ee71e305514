//! Optimized programs: kernels (fused groups of ops, each with its [`Schedule`]) and the buffers
//! between them. The optimizer produces them, the backends compile them, the autotuner tunes their
//! schedules, and [`crate::interp`] can run them as the oracle does.

use std::fmt;

use crate::graph::{Graph, Param};
use crate::op::TensorType;

/// The code generator a kernel (or a whole program) is compiled by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Tier {
    /// The f64 reference interpreter.
    Interp,
    /// Cranelift JIT on the host CPU (default build).
    Cranelift,
    /// LLVM x86 on the host CPU (feature `llvm`).
    LlvmCpu,
    /// PTX through LLVM NVPTX (feature `llvm`).
    Ptx,
}

impl Tier {
    /// Name used in tables and cache records.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Interp => "interp",
            Tier::Cranelift => "cranelift",
            Tier::LlvmCpu => "llvm-cpu",
            Tier::Ptx => "ptx",
        }
    }
}

/// What shape of computation a kernel is; each backend has one lowering per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum KernelClass {
    /// Elementwise ops with broadcasting (and index-only ops: permute, reshape, slice, concat):
    /// one pass over memory.
    Pointwise,
    /// Reductions over the innermost row(s) with pointwise prologue/epilogue, such as softmax,
    /// layernorm and rmsnorm: one read of each row.
    RowReduction,
    /// A (batched) matmul with pointwise prologue on its operands and epilogue on its result.
    MatMul,
    /// Anything else: lowered by a simple, always-correct loop nest.
    Generic,
    /// `softmax(f(q kᵀ)) v` written as plain math ([`crate::attention::Attention`]): one kernel
    /// with an online softmax, the scores never leaving on-chip memory.
    Attention,
}

impl KernelClass {
    /// Name used in tables, explanations and cache records.
    pub fn name(self) -> &'static str {
        match self {
            KernelClass::Pointwise => "pointwise",
            KernelClass::RowReduction => "row-reduction",
            KernelClass::MatMul => "matmul",
            KernelClass::Generic => "generic",
            KernelClass::Attention => "attention",
        }
    }
}

impl KernelClass {
    /// The kernel family as `--json` output names it: `gemm`, `pointwise`, `row-reduction`,
    /// `generic`, `attention`.
    pub fn family(self) -> &'static str {
        match self {
            KernelClass::Pointwise => "pointwise",
            KernelClass::RowReduction => "row-reduction",
            KernelClass::MatMul => "gemm",
            KernelClass::Generic => "generic",
            KernelClass::Attention => "attention",
        }
    }
}

/// Where the schedule a kernel runs with came from (schedule provenance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ScheduleSource {
    /// The lockfile.
    Locked,
    /// A record of the tuning cache measured on this device by this code generator.
    Cached,
    /// Tuned just now.
    Tuned,
    /// A record measured on another device or by another code-generator version, checked once on
    /// this machine and used until it is tuned here.
    Borrowed,
    /// The optimizer's own choice: nothing usable was locked or cached.
    #[default]
    Default,
}

impl ScheduleSource {
    /// Every source, in a fixed order.
    pub const ALL: [ScheduleSource; 5] = [
        ScheduleSource::Locked,
        ScheduleSource::Cached,
        ScheduleSource::Tuned,
        ScheduleSource::Borrowed,
        ScheduleSource::Default,
    ];

    /// Its name in reports and `--json` output: `locked`, `cached`, `tuned`, `borrowed`, `default`.
    pub fn name(self) -> &'static str {
        match self {
            ScheduleSource::Locked => "locked",
            ScheduleSource::Cached => "cached",
            ScheduleSource::Tuned => "tuned",
            ScheduleSource::Borrowed => "borrowed",
            ScheduleSource::Default => "default",
        }
    }
}

impl fmt::Display for ScheduleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a kernel is executed: the knobs the optimizer proposes, the backends obey and the autotuner
/// searches. Defined once, shared by every backend; a backend ignores knobs that mean nothing to it
/// and rejects combinations its target cannot run (before codegen, never by crashing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    /// Code generator.
    pub tier: Tier,
    /// Rows of the output tile per thread block (GPU) or cache block (CPU).
    pub tile_m: u32,
    /// Columns of the output tile.
    pub tile_n: u32,
    /// Depth of one k-step.
    pub tile_k: u32,
    /// Rows of a warp's (GPU) or micro-kernel's (CPU) register tile.
    pub micro_m: u32,
    /// Columns of a warp's (GPU) or micro-kernel's (CPU) register tile.
    pub micro_n: u32,
    /// Elements per vector load/store.
    pub vector_width: u32,
    /// Pipeline stages of shared-memory (GPU) buffering.
    pub stages: u32,
    /// Warps per block (GPU).
    pub warps: u32,
    /// Number of k-splits (1 = none).
    pub split_k: u32,
    /// Block-index swizzle group size for L2 reuse (1 = none).
    pub swizzle: u32,
    /// Host threads (CPU; 0 = all cores).
    pub threads: u32,
}

impl Schedule {
    /// A conservative schedule that every backend of `tier` accepts for every kernel class.
    pub fn default_for(tier: Tier) -> Schedule {
        Schedule {
            tier,
            tile_m: 64,
            tile_n: 64,
            tile_k: 32,
            micro_m: 4,
            micro_n: 8,
            vector_width: 4,
            stages: 2,
            warps: 4,
            split_k: 1,
            swizzle: 1,
            threads: 0,
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tile={}x{}x{} micro={}x{} vec={} stages={} warps={} split_k={} swizzle={} threads={}",
            self.tier.name(),
            self.tile_m,
            self.tile_n,
            self.tile_k,
            self.micro_m,
            self.micro_n,
            self.vector_width,
            self.stages,
            self.warps,
            self.split_k,
            self.swizzle,
            self.threads
        )
    }
}

/// Where a kernel reads or writes a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum ValueRef {
    /// A parameter of the program.
    Param(usize),
    /// An intermediate buffer of the program.
    Buffer(usize),
}

/// One kernel: a fused group of ops as its own [`Graph`] (whose params are the kernel's external
/// inputs and whose outputs are what it writes), with the schedule it runs under.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Kernel {
    /// A readable, unique name within the program (`k0_softmax`, ...).
    pub name: String,
    /// Which lowering applies.
    pub class: KernelClass,
    /// The fused ops.
    pub graph: Graph,
    /// How it runs.
    pub schedule: Schedule,
}

/// A kernel call: which values it reads (one per kernel param) and writes (one per kernel output).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Launch {
    /// The kernel.
    pub kernel: Kernel,
    /// Its inputs, in the order of the kernel graph's params.
    pub inputs: Vec<ValueRef>,
    /// Its outputs, in the order of the kernel graph's outputs; always buffers.
    pub outputs: Vec<ValueRef>,
}

/// An optimized program: the original function's signature, intermediate buffers and kernel
/// launches in execution order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Program {
    /// The function's name.
    pub name: String,
    /// The function's parameters.
    pub params: Vec<Param>,
    /// Types of intermediate and output buffers.
    pub buffers: Vec<TensorType>,
    /// Launches in an order that respects data dependencies.
    pub launches: Vec<Launch>,
    /// The function's results (a result may be a parameter returned as is).
    pub outputs: Vec<ValueRef>,
}
