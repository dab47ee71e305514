//! Code generation: lowers optimized programs to CPU code (cranelift, LLVM x86) and PTX.
//! Codegen never launches anything. (Being built: see issues 4 and 5.)

#![warn(missing_docs)]
