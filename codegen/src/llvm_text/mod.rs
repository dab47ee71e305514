//! The one writer of LLVM IR text, for the PTX kernels and the CPU LLVM tier's phases. Code is
//! written as text that LLVM parses and verifies: it is easy to read, dump (`--emit llvm`) and
//! test, and a mistake in it is a verifier error, never a crash.
//!
//! - [`Func`]: the lines of one function body: fresh value names and block labels, blocks and
//!   branches, counted loops with loop-carried values (phis), `if` blocks, and calls with the
//!   declarations they need. Operands and types are plain text; the PTX kernels are written
//!   with it, and `ptx::module` puts them into an NVPTX module.
//! - [`TypedFunc`] (feature `llvm`): a [`Func`] whose instructions take and return typed values
//!   ([`V`]) and work the same for one lane or many, with stack slots in the entry block that
//!   LLVM's `mem2reg` turns into registers; the CPU tier's phases are written with it.
//!
//! The two kinds name and declare as they always have, so that the code they generate did not
//! change when they came to share this writer: a PTX kernel's values and labels share one count
//! from `%t1`, and [`Func::call`] declares intrinsics `nounwind` (barriers and shuffles without
//! attributes); a CPU phase's values count from `%t0`, its blocks `b0, b1, ...` apart, and
//! [`TypedFunc::call`] declares its callees without attributes.

mod func;
#[cfg(feature = "llvm")]
mod typed;

pub(crate) use func::{Func, Loop};
#[cfg(feature = "llvm")]
pub(crate) use typed::{Elem, FPred, IPred, Ty, TypedFunc, V};
