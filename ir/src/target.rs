//! Where a program runs, as one type: the target grammar of the command line, `TCC_TARGET` and the
//! builder API is parsed here and nowhere else.
//!
//! ```text
//!  text ("cpu", "cpu:llvm", "cuda", "sm_90a", "interp")
//!    --TargetSpec::from_str-->  TargetSpec   what the user asked for; "cpu" and "cuda" still open
//!    --resolve (tcc crate: build features, the local GPU)-->  Target   one tier, one architecture
//! ```
//!
//! A [`Target`] names exactly one code generator and, for a GPU, one architecture with its
//! [`GpuCaps`]. Every crate takes a `Target` (or the cost model built from one); none re-parses a
//! target string. The spellings are part of the contract (README, "Targets").

use std::fmt;
use std::str::FromStr;

use crate::program::Tier;

/// A PTX target architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuArch {
    /// Ampere (A100): `sm_80`; its PTX also runs (JIT-compiled) on every later GPU.
    Sm80,
    /// Hopper (H100) with the architecture-specific features (wgmma, setmaxnreg): `sm_90a`.
    Sm90a,
}

/// An instruction family that not every GPU target has.
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

/// What a GPU target can do and how large it is: the data every lowering consults.
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
    /// Every GPU target, in a fixed order.
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

    /// True when code for this target runs on a device of compute capability `have`: sm_90a
    /// code only on 9.0, sm_80 code on 8.0 and later.
    pub fn runs_on(self, have: (u32, u32)) -> bool {
        let want = self.caps().compute_capability;
        match self {
            GpuArch::Sm90a => have == want,
            GpuArch::Sm80 => have >= want,
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
}

/// A CPU code generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CpuTier {
    /// Cranelift, 128-bit vectors; in every build.
    Cranelift,
    /// LLVM x86 with the host's widest vectors (feature `llvm`).
    Llvm,
}

/// One code generator and, for a GPU, one architecture: what a program is optimized, tuned,
/// compiled and run for. Serialized as its canonical name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Target {
    /// The f64 reference interpreter (runs the unoptimized graph).
    Interp,
    /// The host CPU through one tier.
    Cpu(CpuTier),
    /// A CUDA GPU through the PTX backend, compiled for this architecture.
    Gpu(GpuArch),
}

impl Target {
    /// Every target, in a fixed order (the order error messages list them in).
    pub const ALL: [Target; 5] = [
        Target::Cpu(CpuTier::Cranelift),
        Target::Cpu(CpuTier::Llvm),
        Target::Gpu(GpuArch::Sm80),
        Target::Gpu(GpuArch::Sm90a),
        Target::Interp,
    ];

    /// The canonical name: `interp`, `cpu:cranelift`, `cpu:llvm`, `sm_80`, `sm_90a`. Tuning records
    /// and lockfile entries are stored under it.
    pub fn name(self) -> &'static str {
        match self {
            Target::Interp => "interp",
            Target::Cpu(CpuTier::Cranelift) => "cpu:cranelift",
            Target::Cpu(CpuTier::Llvm) => "cpu:llvm",
            Target::Gpu(arch) => arch.name(),
        }
    }

    /// The code generator of its schedules.
    pub fn tier(self) -> Tier {
        match self {
            Target::Interp => Tier::Interp,
            Target::Cpu(CpuTier::Cranelift) => Tier::Cranelift,
            Target::Cpu(CpuTier::Llvm) => Tier::LlvmCpu,
            Target::Gpu(_) => Tier::Ptx,
        }
    }

    /// True for GPU targets.
    pub fn is_gpu(self) -> bool {
        matches!(self, Target::Gpu(_))
    }

    /// The GPU architecture, for GPU targets.
    pub fn gpu_arch(self) -> Option<GpuArch> {
        match self {
            Target::Gpu(arch) => Some(arch),
            _ => None,
        }
    }

    /// True when compiling for it needs a system LLVM (the `llvm` feature): the LLVM CPU tier and
    /// every GPU target.
    pub fn needs_llvm(self) -> bool {
        matches!(self, Target::Cpu(CpuTier::Llvm) | Target::Gpu(_))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Target> for String {
    fn from(t: Target) -> String {
        t.name().to_string()
    }
}

impl TryFrom<String> for Target {
    type Error = TargetError;

    fn try_from(name: String) -> Result<Target, TargetError> {
        name.parse()
    }
}

impl FromStr for Target {
    type Err = TargetError;

    /// Parses a canonical name ([`Target::name`]); `cpu` and `cuda` are requests, not targets:
    /// parse them as a [`TargetSpec`].
    fn from_str(text: &str) -> Result<Target, TargetError> {
        match text.parse::<TargetSpec>()? {
            TargetSpec::Exact(t) => Ok(t),
            _ => Err(TargetError::Unknown(text.to_string())),
        }
    }
}

/// What a user asked for with `--target`, `TCC_TARGET` or the builder API: an exact [`Target`],
/// or one of the two requests whose target depends on the build and the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetSpec {
    /// `cpu`: the best CPU tier this build has (LLVM with the `llvm` feature, else cranelift).
    BestCpu,
    /// `cuda`: the local GPU, compiled for its own architecture.
    LocalGpu,
    /// A canonical name: `interp`, `cpu:cranelift`, `cpu:llvm`, `sm_80`, `sm_90a`.
    Exact(Target),
}

/// Every spelling `--target` accepts, for messages.
pub const TARGET_SPELLINGS: &str = "cpu, cpu:cranelift, cpu:llvm, cuda, sm_80, sm_90a, interp";

impl FromStr for TargetSpec {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<TargetSpec, TargetError> {
        let text = text.trim();
        match text {
            "cpu" => Ok(TargetSpec::BestCpu),
            "cuda" => Ok(TargetSpec::LocalGpu),
            _ => Target::ALL
                .into_iter()
                .find(|t| t.name() == text)
                .map(TargetSpec::Exact)
                .ok_or_else(|| TargetError::Unknown(text.to_string())),
        }
    }
}

impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetSpec::BestCpu => f.write_str("cpu"),
            TargetSpec::LocalGpu => f.write_str("cuda"),
            TargetSpec::Exact(t) => f.write_str(t.name()),
        }
    }
}

impl TargetSpec {
    /// The target when it does not depend on the machine: `cpu` becomes the best tier of a build
    /// with (`llvm = true`) or without LLVM; `cuda` needs the local GPU, so it gives `None`.
    pub fn resolve_without_device(self, llvm: bool) -> Option<Target> {
        match self {
            TargetSpec::BestCpu if llvm => Some(Target::Cpu(CpuTier::Llvm)),
            TargetSpec::BestCpu => Some(Target::Cpu(CpuTier::Cranelift)),
            TargetSpec::LocalGpu => None,
            TargetSpec::Exact(t) => Some(t),
        }
    }
}

/// A target text that names no target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not one of [`TARGET_SPELLINGS`].
    #[error("unknown target `{0}`; valid targets: {TARGET_SPELLINGS}")]
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_round_trips_through_its_name() {
        for t in Target::ALL {
            assert_eq!(t.name().parse::<Target>(), Ok(t));
            assert_eq!(t.name().parse::<TargetSpec>(), Ok(TargetSpec::Exact(t)));
        }
    }

    #[test]
    fn requests_resolve_by_build() {
        assert_eq!("cpu".parse::<TargetSpec>(), Ok(TargetSpec::BestCpu));
        assert_eq!(TargetSpec::BestCpu.resolve_without_device(true), Some(Target::Cpu(CpuTier::Llvm)));
        assert_eq!(TargetSpec::BestCpu.resolve_without_device(false), Some(Target::Cpu(CpuTier::Cranelift)));
        assert_eq!(TargetSpec::LocalGpu.resolve_without_device(true), None);
        assert!("cuda".parse::<Target>().is_err());
    }

    #[test]
    fn unknown_targets_name_the_valid_ones() {
        let e = "sm_70".parse::<TargetSpec>().unwrap_err();
        let text = e.to_string();
        assert!(text.contains("`sm_70`") && text.contains("cpu:llvm") && text.contains("sm_90a"), "{text}");
    }

    #[test]
    fn architectures_run_where_they_may() {
        assert!(GpuArch::Sm90a.runs_on((9, 0)));
        assert!(!GpuArch::Sm90a.runs_on((10, 0)));
        assert!(GpuArch::Sm80.runs_on((9, 0)));
        assert!(!GpuArch::Sm80.runs_on((7, 5)));
    }
}
