//! The generator configurations the driver rotates through, one per seed: mixed programs, pointwise
//! chains, float programs with matmuls and reductions, long chains and tiny shapes (where dims of 1
//! and small primes dominate).

use tcc_ir::testing::GenConfig;

/// A named generator configuration.
#[derive(Debug, Clone)]
pub struct Preset {
    /// Short name, printed with failing seeds.
    pub name: &'static str,
    /// The configuration.
    pub config: GenConfig,
}

/// Every preset, in the order seeds select them (`seed % len`).
pub fn all() -> Vec<Preset> {
    vec![
        Preset { name: "mixed", config: GenConfig { max_ops: 24, max_elements: 6_000, ..GenConfig::default() } },
        Preset { name: "pointwise", config: GenConfig { max_ops: 32, ..GenConfig::pointwise_only() } },
        Preset { name: "float", config: GenConfig { max_ops: 16, max_elements: 8_000, ..GenConfig::float_only() } },
        Preset {
            name: "tiny",
            config: GenConfig { max_ops: 24, max_dim: 8, max_elements: 512, ..GenConfig::default() },
        },
        Preset { name: "long", config: GenConfig { max_ops: 80, max_elements: 2_000, ..GenConfig::long_chains() } },
    ]
}

/// Presets outside the rotation, chosen by name (`soak --preset NAME`): `high_rank`, values of
/// rank 5 to 8 with dims of 1 to 4.
pub fn extra() -> Vec<Preset> {
    vec![Preset {
        name: "high_rank",
        config: GenConfig { max_ops: 20, max_rank: 8, max_dim: 4, max_elements: 2_000, ..GenConfig::default() },
    }]
}

/// The preset called `name`, in the rotation or among [`extra`].
pub fn by_name(name: &str) -> Option<Preset> {
    all().into_iter().chain(extra()).find(|p| p.name == name)
}

/// The preset seed `seed` uses.
pub fn for_seed(seed: u64) -> Preset {
    let presets = all();
    let i = usize::try_from(seed % presets.len() as u64).unwrap_or(0);
    presets.into_iter().nth(i).unwrap_or_else(|| Preset { name: "mixed", config: GenConfig::default() })
}
