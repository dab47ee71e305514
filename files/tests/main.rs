//! Integration tests of tcc-files (one test binary).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod atomic;
