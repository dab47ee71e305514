//! GPU targets and their capabilities. The data ([`GpuArch`], [`GpuCaps`], [`Feature`]) lives with
//! the one `Target` type in `tcc_ir::target`; this module adds what only code generation needs.
//!
//! LLVM aborts the whole process when asked for an instruction the target lacks, so every emitter
//! asks [`CapsExt::require`] before it uses an instruction that not every target has.

pub use tcc_ir::target::{Feature, GpuArch, GpuCaps};

use super::error::PtxError;

/// What the PTX emitters ask of a target's capabilities.
pub trait CapsExt {
    /// Fails with [`PtxError::Unsupported`] unless the target has `feature`; call it before
    /// emitting any instruction of that family.
    fn require(&self, feature: Feature, what: &str) -> Result<(), PtxError>;

    /// The LLVM target feature string (`+ptx80`).
    fn llvm_features(&self) -> String;
}

impl CapsExt for GpuCaps {
    fn require(&self, feature: Feature, what: &str) -> Result<(), PtxError> {
        if self.has(feature) {
            Ok(())
        } else {
            Err(PtxError::Unsupported { target: self.name, what: format!("{what} needs {feature:?}") })
        }
    }

    fn llvm_features(&self) -> String {
        format!("+ptx{}{}", self.ptx_isa.0, self.ptx_isa.1)
    }
}
