//! Hard limits of contract §6: exceeding any of them is an error, never a crash.

/// Maximum nesting depth of expressions (parentheses, unary chains, calls).
pub const MAX_NESTING: usize = 256;
/// Maximum tensor rank.
pub const MAX_RANK: usize = 8;
/// Every dimension and every tensor's element count must be below this (2^40).
pub const MAX_ELEMENTS: u64 = 1 << 40;
/// Maximum number of ops in one program.
pub const MAX_OPS: usize = 100_000;
/// Default cap on the bytes of inputs `tcc run` will allocate (4 GiB).
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;
