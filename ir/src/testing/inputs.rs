//! Random inputs for generated (or any) graphs, deterministic for a seed.
//!
//! A small SplitMix64 generator (not `rand`'s `StdRng`, whose stream may change between versions)
//! keeps the values of a seed the same across toolchains and dependency updates.

use crate::dtype::DType;
use crate::graph::Graph;
use crate::interp::{InterpError, Tensor, numel_of, resolve_type};
use crate::limits;
use crate::op::{NodeId, Op};
use crate::shape::Bindings;

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast, well-mixed 64-bit generator whose stream
/// never changes between versions (seeded programs and inputs stay the same).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0; 0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// One of `items`, uniformly (`None` if empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(usize::try_from(self.below(items.len() as u64)).unwrap_or(0))
    }

    /// Uniform in `(0, 1]`.
    fn unit(&mut self) -> f64 {
        // 53 random bits, exactly representable.
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// One value of `dtype`: normal for floats (never exactly zero after rounding), a nonzero
    /// integer in -8..=8 for i32, a fair coin for bool.
    fn value(&mut self, dtype: DType) -> f64 {
        match dtype {
            DType::Bool => f64::from(u8::from(self.next_u64() >> 63 == 1)),
            DType::I32 => {
                let r = self.next_u64();
                let magnitude = f64::from(u32::try_from(r % 8).unwrap_or(0) + 1);
                if (r >> 32) & 1 == 1 { magnitude } else { -magnitude }
            }
            _ => {
                for _ in 0..16 {
                    let v = dtype.round(self.normal());
                    if v != 0.0 {
                        return v;
                    }
                }
                1.0
            }
        }
    }
}

/// One random tensor per parameter of `g`, shaped under `bindings`: standard normal values rounded
/// to the dtype (never exactly zero), nonzero integers in -8..=8 for i32, random bools. The same
/// seed always gives the same values; each parameter draws from its own stream.
pub fn random_inputs(g: &Graph, bindings: &Bindings, seed: u64) -> Result<Vec<Tensor>, InterpError> {
    let mut inputs = Vec::with_capacity(g.params.len());
    for (i, param) in g.params.iter().enumerate() {
        let shape = resolve_type(&param.ty, bindings, &format!("parameter `{}`", param.name))?;
        let stream = seed ^ (i as u64).wrapping_add(1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut rng = SplitMix64(stream);
        let what = format!("parameter `{}`", param.name);
        let numel = numel_of(&shape, &what)?;
        let bytes = u64::try_from(numel).unwrap_or(u64::MAX).saturating_mul(8);
        if bytes > limits::DEFAULT_MAX_MEMORY {
            let node = g.nodes.iter().position(|n| n.op == Op::Input { index: i });
            return Err(InterpError::MemoryLimit {
                node: NodeId(node.and_then(|n| u32::try_from(n).ok()).unwrap_or(u32::MAX)),
                op: "input".into(),
                shape,
                bytes,
                limit: limits::DEFAULT_MAX_MEMORY,
            });
        }
        let data = (0..numel).map(|_| rng.value(param.ty.dtype)).collect();
        inputs.push(Tensor::new(param.ty.dtype, shape, data)?);
    }
    Ok(inputs)
}
