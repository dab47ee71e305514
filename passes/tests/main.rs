//! Integration tests of tcc-passes (one binary, modules per topic).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod attention;
mod cases;
mod chain;
mod common;
mod dual;
mod joined;
mod property;
mod scaling;
mod transformer;
