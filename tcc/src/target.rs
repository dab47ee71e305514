//! From what a user asked for to the [`Target`] this build and machine compile for: the one place
//! where `cpu` becomes a tier and `cuda` the local GPU's architecture. Parsing the text is
//! [`TargetSpec`]'s job (`tcc_ir::target`); this module only knows the build's features and the
//! local GPU.

use tcc_autotune::tuning::TuningError;
use tcc_ir::target::{GpuArch, Target, TargetSpec};

/// The environment variable the library reads when a caller names no target.
pub const TARGET_ENV: &str = "TCC_TARGET";

/// Why a target cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetUnavailable {
    /// The target needs the `llvm` feature and this build has none.
    #[error("target `{0}` needs the `llvm` feature: rebuild tcc with `--features llvm` (LLVM 19, see the README)")]
    NeedsLlvm(String),
    /// No usable CUDA GPU (no driver, no device, one older than sm_80).
    #[error("target `{target}` needs a CUDA GPU: {reason}")]
    NoGpu {
        /// The target asked for.
        target: String,
        /// Why none is usable.
        reason: String,
    },
    /// The local GPU cannot run code for the architecture asked for.
    #[error("the local GPU ({name}, compute capability {}.{}) cannot run {arch} code", .capability.0, .capability.1)]
    WrongGpu {
        /// The architecture asked for.
        arch: GpuArch,
        /// The local GPU's name.
        name: String,
        /// Its compute capability.
        capability: (u32, u32),
    },
}

/// True in a build with the `llvm` feature (the LLVM CPU tier and the PTX backend).
pub const HAS_LLVM: bool = cfg!(feature = "llvm");

/// The target `spec` means in this build on this machine: `cpu` is the best CPU tier built in,
/// `cuda` the local GPU's architecture (found by opening device 0; a build without LLVM cannot
/// use it: [`TargetUnavailable::NeedsLlvm`]). An exact target is taken as it is: it can be
/// explained, and compiled to the stages that need no LLVM, in any build and without its device;
/// running it needs its code generator ([`require_code_generator`]) and device.
pub fn resolve(spec: TargetSpec) -> Result<Target, TargetUnavailable> {
    match spec.resolve_without_device(HAS_LLVM) {
        Some(t) => Ok(t),
        None if !HAS_LLVM => Err(TargetUnavailable::NeedsLlvm(spec.to_string())),
        None => Ok(Target::Gpu(probe(spec)?.arch)),
    }
}

/// `Ok` when this build has `target`'s code generator (the LLVM CPU tier and the GPU need the
/// `llvm` feature).
pub fn require_code_generator(target: Target) -> Result<(), TargetUnavailable> {
    if target.needs_llvm() && !HAS_LLVM {
        return Err(TargetUnavailable::NeedsLlvm(target.name().to_string()));
    }
    Ok(())
}

/// The target named by `TCC_TARGET`, if set (`Err` when it is set to something else than a
/// target: the message names the variable and the valid spellings).
pub fn from_env() -> Option<Result<TargetSpec, String>> {
    let text = std::env::var(TARGET_ENV).ok().filter(|t| !t.trim().is_empty())?;
    Some(text.parse::<TargetSpec>().map_err(|e| format!("{TARGET_ENV}: {e}")))
}

/// The target a `--target` request tunes ([`resolve`]); the interpreter has nothing to tune, and
/// a GPU target needs a local GPU that runs its code.
pub fn tuning_target(spec: TargetSpec) -> Result<Target, TuningError> {
    let target = resolve(spec)?;
    require_code_generator(target)?;
    match target {
        Target::Interp => Err(TuningError::NotTunable(target.name().to_string())),
        Target::Gpu(arch) => {
            local_gpu(arch)?;
            Ok(target)
        }
        Target::Cpu(_) => Ok(target),
    }
}

impl From<TargetUnavailable> for TuningError {
    fn from(e: TargetUnavailable) -> TuningError {
        match e {
            TargetUnavailable::NeedsLlvm(_) => TuningError::NoBenchmarker(e.to_string()),
            _ => TuningError::NoDevice(e.to_string()),
        }
    }
}

/// The local GPU (device 0), checked to run code for `arch`.
pub fn local_gpu(arch: GpuArch) -> Result<tcc_runtime::cuda::DeviceInfo, TargetUnavailable> {
    let info = probe(TargetSpec::Exact(Target::Gpu(arch)))?;
    if !arch.runs_on(info.compute_capability) {
        return Err(TargetUnavailable::WrongGpu { arch, name: info.name, capability: info.compute_capability });
    }
    Ok(info)
}

fn probe(spec: TargetSpec) -> Result<tcc_runtime::cuda::DeviceInfo, TargetUnavailable> {
    tcc_runtime::cuda::CudaDevice::open(0)
        .map(|d| d.info().clone())
        .map_err(|e| TargetUnavailable::NoGpu { target: spec.to_string(), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::target::CpuTier;

    #[test]
    fn cpu_is_the_best_tier_built_in() {
        let want = if HAS_LLVM { CpuTier::Llvm } else { CpuTier::Cranelift };
        assert_eq!(resolve(TargetSpec::BestCpu), Ok(Target::Cpu(want)));
        assert_eq!(resolve(TargetSpec::Exact(Target::Interp)), Ok(Target::Interp));
    }

    #[test]
    fn targets_without_their_code_generator_say_so() {
        let llvm = Target::Cpu(CpuTier::Llvm);
        assert_eq!(resolve(TargetSpec::Exact(llvm)), Ok(llvm));
        let needed = require_code_generator(llvm);
        if HAS_LLVM {
            assert_eq!(needed, Ok(()));
        } else {
            assert!(matches!(needed, Err(TargetUnavailable::NeedsLlvm(_))), "{needed:?}");
            let cuda = resolve(TargetSpec::LocalGpu);
            assert!(matches!(cuda, Err(TargetUnavailable::NeedsLlvm(_))), "{cuda:?}");
        }
        assert_eq!(require_code_generator(Target::Cpu(CpuTier::Cranelift)), Ok(()));
    }
}
