//! What identifies a tuning decision on this machine: the canonical target name, the host CPU as a
//! [`DeviceKey`], and a kernel's [`CacheKey`] (its fingerprint without the schedule, bound shapes,
//! dtypes, target and device).

use tcc_autotune::{CacheKey, DeviceKey};
use tcc_codegen::ptx::GpuArch;
use tcc_ir::{Bindings, Kernel, Schedule, Tier};

use super::TuningError;

/// The cranelift CPU tier's target name.
pub const CPU_TARGET: &str = "cpu:cranelift";
/// The LLVM CPU tier's target name.
pub const LLVM_CPU_TARGET: &str = "cpu:llvm";

/// What a tuning run measures on: a CPU tier, or the local GPU through the PTX backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum TuneTarget {
    /// The cranelift CPU tier (`cpu:cranelift`; `cpu` without the `llvm` feature).
    #[default]
    Cranelift,
    /// The LLVM CPU tier (`cpu:llvm`; `cpu` with the `llvm` feature).
    LlvmCpu,
    /// The local CUDA GPU, compiled for this PTX target (`cuda`, `sm_80`, `sm_90a`).
    Gpu(GpuArch),
}

impl From<TuneTarget> for String {
    fn from(t: TuneTarget) -> String {
        t.name().to_string()
    }
}

impl TryFrom<String> for TuneTarget {
    type Error = String;

    /// The inverse of [`TuneTarget::name`] (opens no device).
    fn try_from(name: String) -> Result<TuneTarget, String> {
        match name.as_str() {
            CPU_TARGET => Ok(TuneTarget::Cranelift),
            LLVM_CPU_TARGET => Ok(TuneTarget::LlvmCpu),
            other => GpuArch::from_name(other).map(TuneTarget::Gpu).ok_or_else(|| format!("unknown target `{other}`")),
        }
    }
}

impl TuneTarget {
    /// The target name records are stored under (`cpu:cranelift`, `cpu:llvm`, `sm_90a`).
    pub fn name(self) -> &'static str {
        match self {
            TuneTarget::Cranelift => CPU_TARGET,
            TuneTarget::LlvmCpu => LLVM_CPU_TARGET,
            TuneTarget::Gpu(arch) => arch.name(),
        }
    }

    /// The tier of the schedules it measures.
    pub fn tier(self) -> Tier {
        match self {
            TuneTarget::Cranelift => Tier::Cranelift,
            TuneTarget::LlvmCpu => Tier::LlvmCpu,
            TuneTarget::Gpu(_) => Tier::Ptx,
        }
    }

    /// The code generator recorded in the provenance of its measurements.
    pub fn driver(self) -> &'static str {
        match self {
            TuneTarget::Cranelift => "cranelift 0.135",
            TuneTarget::LlvmCpu => "llvm 19 x86",
            TuneTarget::Gpu(_) => "llvm 19 nvptx",
        }
    }

    /// True for the GPU.
    pub fn is_gpu(self) -> bool {
        matches!(self, TuneTarget::Gpu(_))
    }
}

/// The target a `--target` value tunes: `cpu` is the best CPU tier built in (as `tcc run` has it),
/// `cpu:cranelift` and `cpu:llvm` name a tier, `sm_80` and `sm_90a` the local GPU compiled for that
/// target, `cuda` the local GPU for its own architecture (found by opening it: no driver or no
/// device is [`TuningError::NoDevice`]). The interpreter has nothing to tune; a target that needs
/// the `llvm` feature in a build without it is [`TuningError::NoBenchmarker`].
pub fn tuning_target(name: &str) -> Result<TuneTarget, TuningError> {
    let needs_llvm = |what: &str| {
        TuningError::NoBenchmarker(format!("{what} (this build has no LLVM: rebuild tcc with `--features llvm`)"))
    };
    match name {
        "cpu" if cfg!(feature = "llvm") => Ok(TuneTarget::LlvmCpu),
        "cpu" | "cpu:cranelift" => Ok(TuneTarget::Cranelift),
        "cpu:llvm" if cfg!(feature = "llvm") => Ok(TuneTarget::LlvmCpu),
        "cpu:llvm" => Err(needs_llvm(name)),
        "interp" => Err(TuningError::NotTunable(name.to_string())),
        "cuda" => {
            let info = super::gpu::probe()?;
            if !cfg!(feature = "llvm") {
                return Err(needs_llvm(name));
            }
            Ok(TuneTarget::Gpu(info.arch))
        }
        other => match GpuArch::from_name(other) {
            Some(arch) => {
                let info = super::gpu::probe()?;
                if !cfg!(feature = "llvm") {
                    return Err(needs_llvm(name));
                }
                let (have, want) = (info.compute_capability, arch.caps().compute_capability);
                if have < want || (arch == GpuArch::Sm90a && have != want) {
                    return Err(TuningError::NoDevice(format!(
                        "the local GPU ({}, compute capability {}.{}) cannot run {other} code",
                        info.name, have.0, have.1
                    )));
                }
                Ok(TuneTarget::Gpu(arch))
            }
            None => Err(TuningError::UnknownTarget(other.to_string())),
        },
    }
}

/// The host CPU: its model name and the number of threads tcc may use (a winner's thread count
/// depends on it), and an architecture naming the widest vector extension present (records of the
/// same architecture are borrowed when this exact CPU has none).
pub fn host_device() -> DeviceKey {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == "model name")
                .map(|(_, v)| v.trim().to_string())
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| format!("{} cpu", std::env::consts::ARCH));
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let name: String = format!("{model}, {threads} threads").chars().filter(|c| !c.is_control()).take(200).collect();
    DeviceKey { name, arch: host_arch(), compute_capability: None, sm_count: None }
}

fn host_arch() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let level = if std::arch::is_x86_feature_detected!("avx512f") {
            "-avx512"
        } else if std::arch::is_x86_feature_detected!("avx2") {
            "-avx2"
        } else {
            ""
        };
        format!("x86_64{level}")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH.to_string()
    }
}

/// The cache key of `kernel` under `bindings` for `target` on `device`. The fingerprint is the
/// kernel's with its schedule reset to the tier default, so every schedule of one kernel shares a
/// key; shapes are its parameters' and outputs' bound sizes (`p0=[8,64] o0=[8,256]`).
pub fn kernel_key(
    kernel: &Kernel,
    bindings: &Bindings,
    target: &str,
    device: &DeviceKey,
) -> Result<CacheKey, TuningError> {
    let normalized = Kernel { schedule: Schedule::default_for(kernel.schedule.tier), ..kernel.clone() };
    let fingerprint = tcc_ir::fingerprint::fingerprint_kernel(&normalized, target).to_string();
    let graph = &kernel.graph;
    let mut shapes = Vec::new();
    let mut dtypes = Vec::new();
    for (i, p) in graph.params.iter().enumerate() {
        shapes.push(format!("p{i}={}", resolved(&p.ty.shape, bindings, &kernel.name)?));
        dtypes.push(p.ty.dtype);
    }
    for (i, &o) in graph.outputs.iter().enumerate() {
        let ty = graph
            .ty(o)
            .ok_or_else(|| TuningError::Internal(format!("kernel `{}` output {i} has no type", kernel.name)))?;
        shapes.push(format!("o{i}={}", resolved(&ty.shape, bindings, &kernel.name)?));
        dtypes.push(ty.dtype);
    }
    let key =
        CacheKey { fingerprint, shapes: shapes.join(" "), dtypes, target: target.to_string(), device: device.clone() };
    key.validate()
        .map_err(|e| TuningError::Internal(format!("kernel `{}` has no valid cache key: {e}", kernel.name)))?;
    Ok(key)
}

fn resolved(shape: &tcc_ir::Shape, bindings: &Bindings, kernel: &str) -> Result<String, TuningError> {
    let dims = shape
        .resolve(bindings)
        .ok_or_else(|| TuningError::Unbound(format!("kernel `{kernel}` has an unbound shape {shape}")))?;
    let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
    Ok(format!("[{}]", dims.join(",")))
}
