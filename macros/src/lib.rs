//! The `kernel!` function-like macro (being built: see issue 9).

#![warn(missing_docs)]
