//! Shared helpers for the workspace integration tests, and the differential driver
//! ([`differential`]) that the CI test and the `soak` binary run.

pub mod differential;
