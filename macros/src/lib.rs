//! The `kernel!` function-like macro, re-exported as `tcc::kernel!`.
//!
//! ```text
//!  kernel! { fn f(..) -> .. { .. } ... }
//!     │ tcc_frontend::parse_tokens: the same parser and checks as `.tc` files
//!     ├─ errors ──▶ one compile_error! per error, at the user's tokens
//!     └─ ir::Module ──▶ per fn: canonical IR text embedded in the generated items (no code
//!                       generation here: the first call optimizes and compiles, see tcc::Kernel)
//! ```
//!
//! For each `fn f(x: f32[N], y: f16[N, 4]) -> ..` the macro generates (the design is argued in `expand.rs`):
//!
//! - `pub fn f<'a>(x: impl tcc::IntoTensor<'a, f32>, y: impl tcc::IntoTensor<'a, tcc::f16>)
//!   -> Result<tcc::HostTensor, tcc::Error>`, running on the process-wide CPU device;
//! - `pub mod f` with `on(device, x, y)` (the same on any `tcc::Device`), `kernel()` (the
//!   `&'static tcc::Kernel`), and the constants `NAME`, `IR` and `PARAMS`.
//!
//! A fn with several results returns a tuple of `HostTensor`s.

#![warn(missing_docs)]

mod expand;
mod names;

use proc_macro::TokenStream;

/// Checks tensor functions written in the tcc DSL at compile time and generates a typed Rust
/// function (plus a module of the same name) for each.
///
/// ```text
/// tcc::kernel! {
///     fn softmax(x: f32[N, D]) -> f32[N, D] {
///         let e = exp(x - x.max(-1, keepdim));
///         e / e.sum(-1, keepdim)
///     }
/// }
/// let y = softmax((&data, [n, d]))?;                 // on the CPU
/// let y = softmax::on(&tcc::Device::cuda(0)?, (&data, [n, d]))?;
/// ```
///
/// Parse, name, shape and dtype errors are compile errors pointing at the DSL tokens; shape
/// variables (`N`, `D`) are bound from the arguments at each call.
#[proc_macro]
pub fn kernel(input: TokenStream) -> TokenStream {
    let tokens = proc_macro2::TokenStream::from(input);
    let names = names::scan(&tokens);
    match tcc_frontend::parse_tokens(tokens) {
        Ok(module) => expand::module(&module, &names),
        Err(errors) => errors.into_iter().map(syn::Error::into_compile_error).collect(),
    }
    .into()
}
