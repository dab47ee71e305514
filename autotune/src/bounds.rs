//! Bounds every decoded value must meet. Cache records come from disk, a shared server or a file
//! someone committed: each is checked against these limits before anything uses it, so a hostile or
//! corrupt entry can at worst be rejected.

use tcc_ir::Schedule;

/// Largest tile edge (`tile_m`, `tile_n`, `tile_k`).
pub const MAX_TILE: u32 = 1024;
/// Largest micro-tile edge (`micro_m`, `micro_n`).
pub const MAX_MICRO: u32 = 256;
/// Largest vector width in elements.
pub const MAX_VECTOR: u32 = 64;
/// Most pipeline stages.
pub const MAX_STAGES: u32 = 8;
/// Most warps per block.
pub const MAX_WARPS: u32 = 32;
/// Most k-splits (the `mma.sync` lowering's limit; warpgroup schedules take at most 64).
pub const MAX_SPLIT_K: u32 = 128;
/// Largest block swizzle group.
pub const MAX_SWIZZLE: u32 = 256;
/// Most host threads.
pub const MAX_THREADS: u32 = 1024;
/// Longest measured time a record may carry (one hour, in nanoseconds).
pub const MAX_TIME_NS: u64 = 3_600_000_000_000;
/// Most runners-up a record keeps.
pub const MAX_RUNNERS_UP: usize = 16;
/// Longest short text field (names, versions, hosts, targets).
pub const MAX_SHORT_TEXT: usize = 256;
/// Longest shapes text of a key.
pub const MAX_SHAPES_TEXT: usize = 4096;
/// Most dtypes in a key.
pub const MAX_DTYPES: usize = 64;
/// Largest encoded record (bytes); larger ones are rejected before parsing.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;
/// Largest optimizer variant index.
pub const MAX_VARIANT: u32 = 1024;

/// A value outside the bounds above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct BoundsError {
    /// Which field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl BoundsError {
    /// A new error for `field`.
    pub fn new(field: &'static str, problem: impl Into<String>) -> BoundsError {
        BoundsError { field, problem: problem.into() }
    }
}

fn pow2_in(field: &'static str, value: u32, max: u32) -> Result<(), BoundsError> {
    if value == 0 || !value.is_power_of_two() || value > max {
        return Err(BoundsError::new(field, format!("{value} is not a power of two in 1..={max}")));
    }
    Ok(())
}

/// A block tile edge: a power of two, or a multiple of 64 (the warpgroup GEMM's 192-wide tile).
fn tile_in(field: &'static str, value: u32, max: u32) -> Result<(), BoundsError> {
    if value.is_multiple_of(64) && (64..=max).contains(&value) {
        return Ok(());
    }
    pow2_in(field, value, max).map_err(|_| {
        BoundsError::new(field, format!("{value} is neither a power of two nor a multiple of 64 in 1..={max}"))
    })
}

fn in_range(field: &'static str, value: u32, min: u32, max: u32) -> Result<(), BoundsError> {
    if value < min || value > max {
        return Err(BoundsError::new(field, format!("{value} is not in {min}..={max}")));
    }
    Ok(())
}

/// Checks every knob of a schedule against the limits above.
pub fn check_schedule(s: &Schedule) -> Result<(), BoundsError> {
    tile_in("tile_m", s.tile_m, MAX_TILE)?;
    tile_in("tile_n", s.tile_n, MAX_TILE)?;
    pow2_in("tile_k", s.tile_k, MAX_TILE)?;
    // Micro-kernels are often not powers of two (6x16 on AVX-512), so only a range.
    in_range("micro_m", s.micro_m, 1, MAX_MICRO)?;
    in_range("micro_n", s.micro_n, 1, MAX_MICRO)?;
    pow2_in("vector_width", s.vector_width, MAX_VECTOR)?;
    in_range("stages", s.stages, 1, MAX_STAGES)?;
    in_range("warps", s.warps, 1, MAX_WARPS)?;
    in_range("split_k", s.split_k, 1, MAX_SPLIT_K)?;
    in_range("swizzle", s.swizzle, 1, MAX_SWIZZLE)?;
    in_range("threads", s.threads, 0, MAX_THREADS)?;
    Ok(())
}

/// Checks a measured time in nanoseconds: positive and at most [`MAX_TIME_NS`].
pub fn check_time_ns(field: &'static str, ns: u64) -> Result<(), BoundsError> {
    if ns == 0 || ns > MAX_TIME_NS {
        return Err(BoundsError::new(field, format!("{ns} ns is not in 1..={MAX_TIME_NS}")));
    }
    Ok(())
}

/// Checks a text field: non-empty unless `allow_empty`, at most `max` bytes, no control characters
/// (so the canonical key text, one field per line, stays unambiguous).
pub fn check_text(field: &'static str, text: &str, max: usize, allow_empty: bool) -> Result<(), BoundsError> {
    if text.is_empty() && !allow_empty {
        return Err(BoundsError::new(field, "is empty"));
    }
    if text.len() > max {
        return Err(BoundsError::new(field, format!("is {} bytes, more than {max}", text.len())));
    }
    if text.chars().any(char::is_control) {
        return Err(BoundsError::new(field, "contains a control character"));
    }
    Ok(())
}

/// Checks a lowercase hexadecimal digest of 16 to 128 digits.
pub fn check_hex(field: &'static str, text: &str) -> Result<(), BoundsError> {
    let ok_len = (16..=128).contains(&text.len());
    if !ok_len || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(BoundsError::new(field, "is not 16 to 128 lowercase hex digits"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::Tier;

    #[test]
    fn default_schedules_pass() {
        for tier in [Tier::Interp, Tier::Cranelift, Tier::LlvmCpu, Tier::Ptx] {
            assert_eq!(check_schedule(&Schedule::default_for(tier)), Ok(()));
        }
    }

    #[test]
    fn warpgroup_tiles_192_wide_and_128_splits_pass() {
        let base = Schedule::default_for(Tier::Ptx);
        assert_eq!(check_schedule(&Schedule { tile_n: 192, micro_n: 192, ..base }), Ok(()));
        assert_eq!(check_schedule(&Schedule { split_k: 128, ..base }), Ok(()));
    }

    #[test]
    fn absurd_knobs_fail() {
        let base = Schedule::default_for(Tier::Ptx);
        let cases: [(&str, Schedule); 8] = [
            ("tile_m", Schedule { tile_m: 48, ..base }),
            ("tile_n", Schedule { tile_n: 2048, ..base }),
            ("tile_k", Schedule { tile_k: 0, ..base }),
            ("stages", Schedule { stages: 9, ..base }),
            ("warps", Schedule { warps: 33, ..base }),
            ("split_k", Schedule { split_k: 129, ..base }),
            ("split_k", Schedule { split_k: 0, ..base }),
            ("threads", Schedule { threads: 5000, ..base }),
        ];
        for (field, s) in cases {
            assert_eq!(check_schedule(&s).map_err(|e| e.field), Err(field), "{s}");
        }
    }

    #[test]
    fn text_and_hex() {
        assert!(check_text("t", "sm_90a", 16, false).is_ok());
        assert!(check_text("t", "a\nb", 16, false).is_err());
        assert!(check_text("t", "", 16, false).is_err());
        assert!(check_text("t", "", 16, true).is_ok());
        assert!(check_text("t", "abcdefgh", 4, false).is_err());
        assert!(check_hex("h", "0123456789abcdef").is_ok());
        assert!(check_hex("h", "0123456789ABCDEF").is_err());
        assert!(check_hex("h", "abc").is_err());
    }
    #[test]
    fn times() {
        assert!(check_time_ns("t", 1).is_ok());
        assert!(check_time_ns("t", 0).is_err());
        assert!(check_time_ns("t", MAX_TIME_NS + 1).is_err());
    }
}
