//! GPU targets and their capabilities, declared as data.
//!
//! LLVM aborts the whole process when asked for an instruction the target lacks, so every emitter
//! asks [`GpuCaps::require`] before it uses an instruction that not every target has.

use std::fmt;

use super::error::PtxError;

/// A PTX target architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuArch {
    /// Ampere (A100): `sm_80`; its PTX also runs (JIT-compiled) on every later GPU.
    Sm80,
    /// Hopper (H100) with the architecture-specific features (wgmma, setmaxnreg): `sm_90a`.
    Sm90a,
}

/// An instruction family that not every target has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `cvt.rn.bf16.f32` and bf16 loads/stores.
    Bf16Convert,
    /// `shfl.sync` warp shuffles.
    WarpShuffle,
    /// `mma.sync.aligned.m16n8k16` with f16/bf16 inputs.
    MmaM16N8K16,
    /// `cp.async` global-to-shared copies.
    CpAsync,
    /// `wgmma.mma_async` warpgroup matrix multiply.
    Wgmma,
    /// Tensor memory accelerator copies (`cp.async.bulk.tensor`).
    Tma,
}

/// What a target can do and how large it is: the data every lowering consults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuCaps {
    /// The LLVM CPU name and `ptxas -arch` value (`sm_80`).
    pub name: &'static str,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// The PTX ISA version requested from LLVM (major, minor); LLVM 19 knows up to 8.5.
    pub ptx_isa: (u32, u32),
    /// Threads in a warp.
    pub warp_size: u32,
    /// Most threads in one block.
    pub max_threads_per_block: u32,
    /// Most resident threads on one SM.
    pub max_threads_per_sm: u32,
    /// Most resident blocks on one SM.
    pub max_blocks_per_sm: u32,
    /// Static shared memory one block may declare (bytes).
    pub max_static_shared_bytes: u32,
    /// Shared memory one block may use with the opt-in attribute (bytes).
    pub max_shared_optin_bytes: u32,
    /// Registers one thread may use.
    pub max_registers_per_thread: u32,
    /// SM count of the flagship part (A100 SXM: 108, H100 SXM: 132); the runtime uses the real
    /// device's count, this only serves code that must size grids without a device.
    pub typical_sm_count: u32,
    /// Instruction families the target has.
    pub features: &'static [Feature],
}

const SM80_FEATURES: &[Feature] = &[Feature::Bf16Convert, Feature::WarpShuffle, Feature::MmaM16N8K16, Feature::CpAsync];
const SM90A_FEATURES: &[Feature] =
    &[Feature::Bf16Convert, Feature::WarpShuffle, Feature::MmaM16N8K16, Feature::CpAsync, Feature::Wgmma, Feature::Tma];

impl GpuArch {
    /// Every target, in a fixed order.
    pub const ALL: [GpuArch; 2] = [GpuArch::Sm80, GpuArch::Sm90a];

    /// The target's capabilities.
    pub fn caps(self) -> GpuCaps {
        match self {
            GpuArch::Sm80 => GpuCaps {
                name: "sm_80",
                compute_capability: (8, 0),
                ptx_isa: (8, 0),
                warp_size: 32,
                max_threads_per_block: 1024,
                max_threads_per_sm: 2048,
                max_blocks_per_sm: 32,
                max_static_shared_bytes: 48 * 1024,
                max_shared_optin_bytes: 163 * 1024,
                max_registers_per_thread: 255,
                typical_sm_count: 108,
                features: SM80_FEATURES,
            },
            GpuArch::Sm90a => GpuCaps {
                name: "sm_90a",
                compute_capability: (9, 0),
                ptx_isa: (8, 0),
                warp_size: 32,
                max_threads_per_block: 1024,
                max_threads_per_sm: 2048,
                max_blocks_per_sm: 32,
                max_static_shared_bytes: 48 * 1024,
                max_shared_optin_bytes: 227 * 1024,
                max_registers_per_thread: 255,
                typical_sm_count: 132,
                features: SM90A_FEATURES,
            },
        }
    }

    /// The name used on the command line and by ptxas (`sm_80`, `sm_90a`).
    pub fn name(self) -> &'static str {
        self.caps().name
    }

    /// Parses `sm_80` or `sm_90a`.
    pub fn from_name(name: &str) -> Option<GpuArch> {
        GpuArch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The best target whose PTX runs on a device of compute capability `major.minor`: `sm_90a`
    /// exactly on 9.0 (arch-specific PTX runs only there), `sm_80` on every other 8.0 or later
    /// device, none below 8.0.
    pub fn for_compute_capability(major: u32, minor: u32) -> Option<GpuArch> {
        match (major, minor) {
            (9, 0) => Some(GpuArch::Sm90a),
            (m, _) if m >= 8 => Some(GpuArch::Sm80),
            _ => None,
        }
    }
}

impl fmt::Display for GpuArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl GpuCaps {
    /// True if the target has `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        self.features.contains(&feature)
    }

    /// Fails with [`PtxError::Unsupported`] unless the target has `feature`; call it before
    /// emitting any instruction of that family.
    pub fn require(&self, feature: Feature, what: &str) -> Result<(), PtxError> {
        if self.has(feature) {
            Ok(())
        } else {
            Err(PtxError::Unsupported { target: self.name, what: format!("{what} needs {feature:?}") })
        }
    }

    /// The LLVM target feature string (`+ptx80`).
    pub fn llvm_features(&self) -> String {
        format!("+ptx{}{}", self.ptx_isa.0, self.ptx_isa.1)
    }
}
