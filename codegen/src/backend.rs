//! The interface every code generator implements.

use tcc_ir::{Bindings, Kernel, Tier};

use crate::error::CodegenError;

/// A code generator: compiles one kernel, specialized to concrete shape bindings, into an artifact
/// the runtime can load and launch. A backend never launches anything itself.
pub trait Backend {
    /// What compilation produces (JIT'd code, PTX text, ...).
    type Artifact;

    /// The tier this backend implements.
    fn tier(&self) -> Tier;

    /// Compiles `kernel` with every shape variable taken from `bindings`.
    fn compile(&self, kernel: &Kernel, bindings: &Bindings) -> Result<Self::Artifact, CodegenError>;
}
