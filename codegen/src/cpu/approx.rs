//! The constants of the f32 approximations both CPU tiers compute transcendentals with
//! (Cephes-style range reduction plus polynomials). One home, so that both tiers compute the same
//! functions and share the error bounds the `math` tests measure. Polynomials are Horner
//! coefficients, the highest degree first.

/// Below this `exp` is 0 (the smallest subnormal is about `e^-103.3`).
pub(crate) const EXP_MIN: f32 = -104.0;
/// Above this `exp` is inf (`ln(f32::MAX)` is about 88.7).
pub(crate) const EXP_MAX: f32 = 89.0;
/// The high part of ln 2 (Cody-Waite): few mantissa bits, so `k · LN2_HI` is exact.
pub(crate) const LN2_HI: f32 = 0.693_359_4;
/// The low part of ln 2: `LN2_HI + LN2_LO` is ln 2 to beyond f32 precision.
pub(crate) const LN2_LO: f32 = -2.121_944_4e-4;
/// `P(r)` with `e^r ≈ 1 + r + r² P(r)` for `|r| ≤ ln 2 / 2`.
pub(crate) const EXP_POLY: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5];
/// `P(m)` with `ln(1 + m) ≈ m - m²/2 + m³ P(m)` for `m` in `[√½ - 1, √2 - 1]`.
pub(crate) const LOG_POLY: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    0.333_333_3,
];
/// Below this `|x|`, `tanh` is the polynomial; above it `1 - 2 / (e^2|x| + 1)`.
pub(crate) const TANH_SMALL: f32 = 0.625;
/// `P(z)` with `tanh(x) ≈ x + x z P(z)`, `z = x²`, for `|x| <` [`TANH_SMALL`].
pub(crate) const TANH_POLY: [f32; 5] = [-0.005_704_988_7, 2.063_909e-2, -5.373_971_6e-2, 1.333_144_2e-1, -0.333_332_8];
/// GELU's (tanh form) cubic coefficient: `u = √(2/π) (x + GELU_CUBIC x³)`.
pub(crate) const GELU_CUBIC: f32 = 0.044_715;
/// `√(2/π)`, GELU's scale.
pub(crate) const SQRT_2_OVER_PI: f32 = 0.797_884_6;
