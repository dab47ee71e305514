//! The runtime: CPU and CUDA devices, buffers, compiled-module caches and launches; the only
//! crate with unsafe FFI. (Being built: see issues 4 and 5.)

#![warn(missing_docs)]
