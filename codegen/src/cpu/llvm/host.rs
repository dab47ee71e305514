//! The host CPU as the LLVM tier sees it: LLVM's name and feature string for it (detected at run
//! time) and what the emitter derives from them (vector lanes, FMA, F16C).

use std::sync::OnceLock;

use inkwell::targets::{InitializationConfig, Target, TargetMachine};

use crate::error::CodegenError;

/// What the emitter may use on the CPU it generates code for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostCpu {
    /// LLVM's CPU name (`znver4`, `skylake-avx512`, ...), set as each function's `target-cpu`.
    pub cpu: String,
    /// LLVM's feature string (`+avx512f,+fma,...`), set as each function's `target-features`.
    pub features: String,
    /// f32 lanes of the vectors the emitter uses: 16 with AVX-512, 8 with AVX2, else 4.
    pub lanes: u32,
    /// Fused multiply-add is available.
    pub fma: bool,
    /// Hardware f16 conversions (F16C) are available.
    pub f16c: bool,
}

/// Initializes LLVM's native target once per process.
pub(crate) fn init_llvm() -> Result<(), CodegenError> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| Target::initialize_native(&InitializationConfig::default()))
        .clone()
        .map_err(CodegenError::UnsupportedHost)?;
    if cfg!(target_arch = "x86_64") {
        Ok(())
    } else {
        Err(CodegenError::UnsupportedHost("the LLVM CPU tier generates x86-64 code only".into()))
    }
}

impl HostCpu {
    /// The CPU this process runs on.
    pub fn detect() -> Result<HostCpu, CodegenError> {
        init_llvm()?;
        let cpu = TargetMachine::get_host_cpu_name().to_string();
        let features = TargetMachine::get_host_cpu_features().to_string();
        Ok(HostCpu::from_features(cpu, features))
    }

    /// A CPU described by LLVM's name and feature string, with AVX512-FP16 switched off (and so
    /// AVX10, which implies it).
    ///
    /// The emitter computes f16 in f32 and needs none of it, and LLVM 19 miscompiles it: it folds
    /// `fcmp ogt (fpext a), (fpext b)` on `<8 x half>` into a `vcmpltph` whose memory operand is
    /// `b`, i.e. `a < b` (seed 20007843 of the differential soak, on a CPU with AVX512-FP16).
    pub fn from_features(cpu: String, features: String) -> HostCpu {
        let features =
            if features.split(',').any(|f| f == "+avx512fp16") { format!("{features},-avx512fp16") } else { features };
        let has = |name: &str| features.split(',').any(|f| f == format!("+{name}"));
        let lanes = if has("avx512f") {
            16
        } else if has("avx2") {
            8
        } else {
            4
        };
        HostCpu { fma: has("fma"), f16c: has("f16c"), lanes, cpu, features }
    }

    /// The same CPU seen as an older one with vectors of at most `lanes` f32 lanes: below 16,
    /// AVX-512 is switched off (AVX2 code); below 8, AVX too (SSE code, no FMA or F16C). Used to
    /// test those code paths on a newer machine.
    pub fn with_max_lanes(mut self, lanes: u32) -> HostCpu {
        let lanes = lanes.clamp(4, 16).next_power_of_two();
        if lanes < self.lanes {
            // LLVM switches off every feature that implies a switched-off one.
            self.features.push_str(if lanes < 8 { ",-avx" } else { ",-avx512f" });
            self.lanes = lanes;
            if lanes < 8 {
                self.fma = false;
                self.f16c = false;
            }
        }
        self
    }

    /// The same CPU with the hardware f16 conversions switched off or on (tests compare both).
    pub fn with_f16c(mut self, on: bool) -> HostCpu {
        self.f16c = self.f16c && on;
        self
    }

    /// The function attributes every emitted function carries.
    pub fn attributes(&self) -> String {
        let width = self.lanes * 32;
        format!(
            "nounwind \"target-cpu\"=\"{}\" \"target-features\"=\"{}\" \"min-legal-vector-width\"=\"{width}\" \"prefer-vector-width\"=\"{width}\"",
            self.cpu, self.features
        )
    }
}

#[cfg(test)]
mod tests {
    use super::HostCpu;

    #[test]
    fn avx512_fp16_is_switched_off_and_nothing_else() {
        let h = HostCpu::from_features("sapphirerapids".into(), "+avx512f,+avx512fp16,+f16c,+fma".into());
        assert!(h.features.ends_with(",-avx512fp16"), "{}", h.features);
        assert_eq!((h.lanes, h.f16c, h.fma), (16, true, true));
        let plain = HostCpu::from_features("znver3".into(), "+avx2,+f16c,+fma".into());
        assert_eq!(plain.features, "+avx2,+f16c,+fma");
    }
}
