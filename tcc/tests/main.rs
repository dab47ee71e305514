//! Integration tests of the `tcc` library: devices, `kernel!` and the examples.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "candle")]
mod candle;
#[cfg(all(feature = "candle-cuda", feature = "llvm"))]
mod candle_cuda;
mod device_args;
mod examples;
mod macro_kernel;
mod macro_ui;
mod memory;
#[cfg(feature = "ndarray")]
mod ndarray;

/// Deterministic values in [-2, 2), none zero (SplitMix64): the array and tensor tests' inputs.
#[cfg(any(feature = "candle", feature = "ndarray"))]
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let v = ((z >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0;
            if v == 0.0 { 0.25 } else { v }
        })
        .collect()
}
