//! Number formatting for the table and the charts.

/// A number exactly as read: Rust's shortest representation that parses back to the same `f64`.
///
/// JSON's `212370.0` prints as `212370`; both parse to the same value. Magnitudes below 1e-3
/// or from 1e15 up use exponent notation (`2.1e-7`), which is just as exact and easier to read.
pub(crate) fn exact(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e15).contains(&a) { format!("{v:e}") } else { format!("{v}") }
}

/// An optional number exactly as read, or `n/a`.
pub(crate) fn exact_or_na(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), exact)
}

/// A derived number rounded to `digits` significant digits, in plain (not exponent) notation.
pub(crate) fn sig(v: f64, digits: i32) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    format!("{v:.decimals$}")
}

/// A derived number for a chart label: `digits` significant digits, trailing zeros dropped.
pub(crate) fn short(v: f64, digits: i32) -> String {
    trim(&sig(v, digits))
}

/// A compact axis label: 3 significant digits with a k/M/G/T suffix, trailing zeros dropped.
pub(crate) fn si(v: f64) -> String {
    let units = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, suffix) in units {
        if v.abs() >= scale {
            return format!("{}{suffix}", trim(&sig(v / scale, 3)));
        }
    }
    trim(&sig(v, 3))
}

/// Drops trailing zeros after a decimal point (and the point itself if nothing is left).
fn trim(s: &str) -> String {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(exact(212370.0), "212370");
        assert_eq!(exact(0.7155519723892212), "0.7155519723892212");
        assert_eq!(exact(2.1e-7), "2.1e-7");
        assert_eq!(exact(0.0), "0");
        assert_eq!(exact(1e300).parse::<f64>().ok(), Some(1e300));
        assert_eq!(sig(173.4090909, 4), "173.4");
        assert_eq!(sig(0.127123, 4), "0.1271");
        assert_eq!(sig(12345.6, 4), "12346");
        assert_eq!(short(20.0, 4), "20");
        assert_eq!(short(0.75056, 3), "0.751");
        assert_eq!(si(1000.0), "1k");
        assert_eq!(si(2500000.0), "2.5M");
        assert_eq!(si(0.01), "0.01");
        assert_eq!(si(5.0), "5");
    }
}
