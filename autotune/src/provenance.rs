//! Where a measurement came from (tcc version, code generator, host, device and date), and what
//! makes it *fresh* on this machine ([`Here`]).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::bounds::{BoundsError, MAX_SHORT_TEXT, check_text};
use crate::cache::DeviceKey;

/// The version of tcc this crate belongs to (the workspace version). Recorded for people; whether
/// a record is fresh depends on [`tcc_ir::CODEGEN_VERSION`] instead.
pub const TCC_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Who measured a record, with what, on which device, and when.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    /// tcc version that measured it.
    pub tcc_version: String,
    /// Driver or code generator version (`cuda 13.0`, `cranelift 0.135`); may be empty.
    pub driver: String,
    /// Host name of the machine that measured it.
    pub host: String,
    /// UTC date and time, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    /// The device it was measured on (`None` in records written before this field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceKey>,
    /// The code generators' version ([`tcc_ir::CODEGEN_VERSION`]) that generated the measured code
    /// (0 in records written before this field existed: unknown, so never fresh).
    #[serde(default)]
    pub codegen_version: u32,
}

impl Provenance {
    /// Provenance for a measurement made now, on `device` of this host, by this build's code
    /// generators.
    pub fn here(driver: &str, device: &DeviceKey) -> Provenance {
        Provenance {
            tcc_version: TCC_VERSION.to_string(),
            driver: sanitize(driver),
            host: hostname(),
            date: format_utc(unix_now()),
            device: Some(device.clone()),
            codegen_version: tcc_ir::CODEGEN_VERSION,
        }
    }

    /// Checks every field's bounds.
    pub fn validate(&self) -> Result<(), BoundsError> {
        check_text("provenance.tcc_version", &self.tcc_version, MAX_SHORT_TEXT, false)?;
        check_text("provenance.driver", &self.driver, MAX_SHORT_TEXT, true)?;
        check_text("provenance.host", &self.host, MAX_SHORT_TEXT, true)?;
        check_text("provenance.date", &self.date, 64, false)?;
        if parse_utc(&self.date).is_none() {
            return Err(BoundsError::new("provenance.date", "is not YYYY-MM-DDTHH:MM:SSZ"));
        }
        if let Some(device) = &self.device {
            device.validate()?;
        }
        Ok(())
    }

    /// Where and by what it was measured, for messages: `host box, code generator 1`.
    pub fn describe(&self) -> String {
        let host = if self.host.is_empty() { "an unknown host" } else { self.host.as_str() };
        let device = self.device.as_ref().map_or_else(String::new, |d| format!("{d} on "));
        match self.codegen_version {
            0 => format!("{device}host {host}, an unknown code generator (tcc {})", self.tcc_version),
            v => format!("{device}host {host}, code generator {v}"),
        }
    }
}

/// The machine and build asking for records: a record is *fresh* here only when it was measured
/// on the device it is looked up for, on this host, by this build's code generators and schedule
/// format; every other record is *borrowed* (a starting point, re-measured whenever tuning is
/// allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Here {
    /// This machine's host name.
    pub host: String,
    /// This build's code-generator version.
    pub codegen_version: u32,
}

impl Here {
    /// This host and build.
    pub fn this_machine() -> Here {
        Here { host: hostname(), codegen_version: tcc_ir::CODEGEN_VERSION }
    }

    /// True when `provenance` says: measured on `device` of this host by this code generator.
    pub fn measured(&self, provenance: &Provenance, device: &DeviceKey) -> bool {
        provenance.host == self.host
            && provenance.codegen_version == self.codegen_version
            && provenance.device.as_ref() == Some(device)
    }
}

/// Drops control characters and truncates to [`MAX_SHORT_TEXT`] bytes.
pub fn sanitize(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_SHORT_TEXT {
            break;
        }
        out.push(c);
    }
    out
}

/// This machine's host name (from the kernel, `/etc/hostname` or `$HOSTNAME`), or `unknown`.
pub fn hostname() -> String {
    let from_files = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty());
    let name = from_files.or_else(|| std::env::var("HOSTNAME").ok()).unwrap_or_default();
    let name = sanitize(name.trim());
    if name.is_empty() { "unknown".to_string() } else { name }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Parses `YYYY-MM-DDTHH:MM:SSZ` back to Unix seconds; `None` if malformed or before 1970.
pub fn parse_utc(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> { text.get(r)?.parse::<u64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(y as i64, mo as i64, d as i64);
    let secs = days.checked_mul(86_400)? + (h * 3600 + mi * 60 + s) as i64;
    u64::try_from(secs).ok()
}

// Howard Hinnant's civil-date algorithms (public domain).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        for t in [0u64, 86_399, 951_782_400, 1_795_000_123, 4_102_444_800] {
            assert_eq!(parse_utc(&format_utc(t)), Some(t));
        }
        assert_eq!(parse_utc("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse_utc("2026-01-01 00:00:00Z"), None);
    }

    fn device(name: &str) -> DeviceKey {
        DeviceKey { name: name.into(), arch: "x86_64".into(), compute_capability: None, sm_count: None }
    }

    #[test]
    fn here_is_valid_and_measured_here() {
        let p = Provenance::here("test\ndriver", &device("cpu a"));
        assert_eq!(p.driver, "testdriver");
        assert_eq!(p.validate(), Ok(()));
        let here = Here::this_machine();
        assert!(here.measured(&p, &device("cpu a")));
        // Another device, host or code generator: borrowed.
        assert!(!here.measured(&p, &device("cpu b")));
        assert!(!here.measured(&Provenance { host: "elsewhere".into(), ..p.clone() }, &device("cpu a")));
        assert!(!here.measured(&Provenance { codegen_version: 0, ..p.clone() }, &device("cpu a")));
        assert!(!here.measured(&Provenance { device: None, ..p }, &device("cpu a")));
    }
}
