//! Element types of tensors.

use std::fmt;

/// The element type of a tensor.
///
/// Floating-point types below f32 compute in f32 and round at each op's output (contract §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// Two's complement 32-bit integer; arithmetic wraps.
    I32,
    /// Boolean, the result of comparisons.
    Bool,
}

impl DType {
    /// Every dtype, in a fixed order (for generators and tables).
    pub const ALL: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool];

    /// The name used in source and IR text (`f32`, `f16`, `bf16`, `i32`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }

    /// Parses a dtype name as written in source and IR text.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for f32, f16 and bf16.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// Size of one element in bytes (bool is stored as one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Bool => 1,
        }
    }

    /// Rounds an f64 value to the nearest value representable in this dtype, as contract §5 defines:
    /// round to nearest even for floats (overflow gives inf), saturation for float → i32 with NaN → 0,
    /// and `x != 0` for bool.
    pub fn round(self, value: f64) -> f64 {
        match self {
            DType::F32 => f64::from(value as f32),
            DType::F16 => f64::from(half::f16::from_f64(value)),
            DType::BF16 => f64::from(half::bf16::from_f64(value)),
            // `as` saturates and maps NaN to 0, exactly the cast semantics we want.
            DType::I32 => f64::from(value as i32),
            DType::Bool => {
                if value != 0.0 && !value.is_nan() {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
