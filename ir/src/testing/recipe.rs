//! Recipes: the raw random choices a program is built from. Every field is a small integer that
//! shrinks toward 0, and 0 always means the simplest choice (the most recent value, the first op,
//! the base shape, the last axis), so shrinking a recipe simplifies the program.

use proptest::array::uniform8;
use proptest::collection::vec;
use proptest::prelude::any;
use proptest::strategy::Strategy;

use super::config::GenConfig;

/// Everything a generated program is built from.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    /// The shape most parameters derive from.
    pub base: BaseRecipe,
    /// One entry per parameter.
    pub params: Vec<ParamRecipe>,
    /// One entry per op step.
    pub steps: Vec<Step>,
    /// Picks of extra outputs (the last value is always an output).
    pub outputs: Vec<u16>,
}

/// The base shape: its rank, dimension picks and which dimensions are shape variables.
#[derive(Debug, Clone)]
pub(crate) struct BaseRecipe {
    pub rank: u8,
    pub dims: [u8; 8],
    pub vars: u8,
}

/// One parameter: its dtype, how its shape derives from the base shape, and two raw picks.
#[derive(Debug, Clone)]
pub(crate) struct ParamRecipe {
    pub dtype: u8,
    pub form: u8,
    pub mask: u8,
    pub size: u8,
}

/// One op step: the kind selector and four raw picks whose meaning depends on the kind.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub kind: u8,
    pub x: u16,
    pub y: u16,
    pub z: u16,
    pub w: u16,
}

/// Recipes of at most `cfg.max_params` parameters and `cfg.max_ops` steps.
pub(crate) fn arb_recipe(cfg: &GenConfig) -> impl Strategy<Value = Recipe> + use<> {
    let base = (any::<u8>(), uniform8(any::<u8>()), any::<u8>()).prop_map(|(rank, dims, vars)| BaseRecipe {
        rank,
        dims,
        vars,
    });
    let param = (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>())
        .prop_map(|(dtype, form, mask, size)| ParamRecipe { dtype, form, mask, size });
    let step = (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>(), any::<u16>())
        .prop_map(|(kind, x, y, z, w)| Step { kind, x, y, z, w });
    (base, vec(param, 1..=cfg.max_params), vec(step, 0..=cfg.max_ops), vec(any::<u16>(), 0..=2))
        .prop_map(|(base, params, steps, outputs)| Recipe { base, params, steps, outputs })
}
