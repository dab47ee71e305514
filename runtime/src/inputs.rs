//! Random input values: normal and never exactly zero for floats, deterministic for a seed. One
//! sampler serves `tcc run`, the benchmarks and the tuner's validation inputs.

use rand::Rng;
use rand_distr::StandardNormal;
use tcc_ir::DType;

/// One random input value of `dtype`: normal and never exactly zero for floats, a small nonzero
/// integer for i32, a fair coin for bool. Shared by `tcc run`, the benchmarks and the tuner.
pub fn sample(rng: &mut impl Rng, dtype: DType) -> f64 {
    match dtype {
        DType::Bool => f64::from(u8::from(rng.gen_bool(0.5))),
        DType::I32 => {
            let v: i32 = rng.gen_range(1..=8);
            f64::from(if rng.gen_bool(0.5) { v } else { -v })
        }
        _ => loop {
            let v: f64 = rng.sample(StandardNormal);
            let rounded = dtype.round(v);
            if rounded != 0.0 {
                break rounded;
            }
        },
    }
}
