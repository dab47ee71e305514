//! Integration tests of the front end (one test binary, contract §9).

// Test code: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod corpus;
mod nasty;
mod props;
mod tokens;
mod valid;
