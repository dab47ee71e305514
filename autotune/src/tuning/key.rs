//! What identifies a tuning decision on this machine: the canonical target name, the host CPU as a
//! [`DeviceKey`], and a kernel's [`CacheKey`] (its fingerprint without the schedule, bound shapes,
//! dtypes, target and device).

use crate::{CacheKey, DeviceKey};
use tcc_ir::target::{CpuTier, Target};
use tcc_ir::{Bindings, Kernel, Schedule};

use super::TuningError;

/// The code generator recorded in the provenance of measurements on `target`.
pub fn driver(target: Target) -> &'static str {
    match target {
        Target::Cpu(CpuTier::Cranelift) => "cranelift 0.135",
        Target::Cpu(CpuTier::Llvm) => "llvm 19 x86",
        Target::Gpu(_) => "llvm 19 nvptx",
        Target::Interp => "interp",
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
    target: Target,
    device: &DeviceKey,
) -> Result<CacheKey, TuningError> {
    let normalized = Kernel { schedule: Schedule::default_for(kernel.schedule.tier), ..kernel.clone() };
    let fingerprint = tcc_ir::fingerprint::fingerprint_kernel(&normalized, target.name()).to_string();
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
    let key = CacheKey {
        fingerprint,
        shapes: shapes.join(" "),
        dtypes,
        target: target.name().to_string(),
        device: device.clone(),
    };
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
