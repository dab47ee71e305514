//! The host CPU as the cranelift tier sees it: its capabilities as data, detected at run time.

use std::sync::Arc;

use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};

use crate::error::CodegenError;

/// What the emitter may use on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuCaps {
    /// f32 lanes of one vector register the emitter uses (cranelift's vectors are 128-bit).
    pub f32_lanes: u32,
    /// Fused multiply-add is available (cranelift lowers `fma` to `vfmadd` only with it).
    pub has_fma: bool,
    /// SSE4.1 is available (`roundps`, `pmulld`, `pminsd`).
    pub has_sse41: bool,
    /// AVX is available (VEX encodings: the assembled GEMM tile kernels need it with FMA).
    pub has_avx: bool,
}

impl CpuCaps {
    /// Whether matrix-product tiles run as assembled x86-64 kernels ([`super::cranelift::tile`]):
    /// an x86-64 host with AVX and FMA.
    pub fn assembled_tiles(&self) -> bool {
        cfg!(target_arch = "x86_64") && self.has_avx && self.has_fma
    }

    /// Capabilities of an ISA built for the host.
    pub fn of_isa(isa: &dyn TargetIsa) -> CpuCaps {
        let flag = |name: &str| isa.isa_flags().iter().any(|v| v.name == name && v.as_bool() == Some(true));
        CpuCaps { f32_lanes: 4, has_fma: flag("has_fma"), has_sse41: flag("has_sse41"), has_avx: flag("has_avx") }
    }
}

/// Builds a cranelift ISA for the host CPU with every feature it has (`opt_level = speed`; the IR
/// verifier only in debug builds).
pub fn host_isa() -> Result<OwnedTargetIsa, CodegenError> {
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, name: &str, value: &str| {
        flags.set(name, value).map_err(|e| CodegenError::UnsupportedHost(format!("setting {name}: {e}")))
    };
    set(&mut flags, "opt_level", "speed")?;
    // cranelift's IR verifier checks what the emitter builds: on in debug builds (every test),
    // off in release builds, where it was a tenth of the compile time of a large program.
    set(&mut flags, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    let isa_builder = cranelift_native::builder().map_err(|e| CodegenError::UnsupportedHost(e.to_string()))?;
    let isa =
        isa_builder.finish(settings::Flags::new(flags)).map_err(|e| CodegenError::UnsupportedHost(e.to_string()))?;
    Ok(isa)
}

/// The host ISA shared behind an `Arc`, with its capabilities.
pub fn host() -> Result<(Arc<dyn TargetIsa>, CpuCaps), CodegenError> {
    let isa = host_isa()?;
    let caps = CpuCaps::of_isa(&*isa);
    Ok((isa, caps))
}
