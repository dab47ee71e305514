//! Cache records: a tuning decision (data only, never code) and its strict, bounds-checked decoding.

use std::fmt;

use tcc_ir::Schedule;

use crate::bounds::{BoundsError, MAX_RECORD_BYTES, MAX_RUNNERS_UP, MAX_VARIANT, check_schedule, check_time_ns};

/// Most candidates a record may say its search space had.
const MAX_SEARCHED: u32 = 100_000_000;
use crate::cache::key::CacheKey;
use crate::provenance::{Here, Provenance};

/// How far a stored record may be trusted, as the store knows it.
///
/// Whether a record is *fresh* or *borrowed* depends on who asks (which host, device and code
/// generator: [`Here`]), so it is not stored: [`CacheRecord::standing`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordState {
    /// Measured by a tuning run, or checked on the machine that measured it: trusted there.
    Fresh,
    /// Came from a shared cache or an import: checked once on this device before first use.
    Unverified,
    /// Failed re-validation on this device: never used; the kernel is re-tuned.
    Quarantined,
}

/// How a record stands on this machine: what `tcc cache ls` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Standing {
    /// Measured on this device by this code generator and schedule format: used as it is.
    Fresh,
    /// Measured here, but known from elsewhere (a shared cache, an import): checked once first.
    Unverified,
    /// Measured on another device or host, or by another code-generator or schedule-format
    /// version: a starting point, re-measured whenever tuning is allowed, never made fresh by a run.
    Borrowed,
    /// Failed on this device: never used.
    Quarantined,
}

impl Standing {
    /// Name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Standing::Fresh => "fresh",
            Standing::Unverified => "unverified",
            Standing::Borrowed => "borrowed",
            Standing::Quarantined => "quarantined",
        }
    }
}

/// How much of a kernel's search space its tuning measured: the record's share of the search
/// whose state (the tuning journal) a later `tcc tune` goes on from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Searched {
    /// Candidates measured, in this run and the runs it went on from.
    pub trials: u32,
    /// Candidates in the space.
    pub space: u32,
    /// True when the search ended because its strategy had nothing left to try; false when a
    /// budget cut it short.
    pub complete: bool,
}

impl RecordState {
    /// Name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            RecordState::Fresh => "fresh",
            RecordState::Unverified => "unverified",
            RecordState::Quarantined => "quarantined",
        }
    }
}

/// A candidate that lost, with its time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RunnerUp {
    /// Which of the optimizer's alternatives.
    pub variant: u32,
    /// Its schedule.
    pub schedule: Schedule,
    /// Its median time in nanoseconds.
    pub time_ns: u64,
}

/// One tuning decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CacheRecord {
    /// What was tuned.
    pub key: CacheKey,
    /// Which of the optimizer's top-k alternatives won (0 = its first choice).
    pub variant: u32,
    /// The winning schedule.
    pub schedule: Schedule,
    /// The encoding version of the schedules ([`tcc_ir::schedule::SCHEDULE_FORMAT`]; records
    /// written before it existed are format 1). A record of a later format is rejected (and so
    /// re-tuned), never misread.
    #[serde(default = "first_format")]
    pub schedule_format: u32,
    /// The winner's median time in nanoseconds.
    pub time_ns: u64,
    /// The next best candidates, fastest first.
    pub runners_up: Vec<RunnerUp>,
    /// Who measured it, when, with what.
    pub provenance: Provenance,
    /// How far it is trusted here.
    pub state: RecordState,
    /// How much of the space was searched (`None`: not said, as in records written before the
    /// field existed; taken as complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searched: Option<Searched>,
    /// For a record measured elsewhere: where and by what its choice was last checked to run
    /// correctly (a check, never a measurement: the record stays borrowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked: Option<Provenance>,
}

/// Format 1: what records and lockfile entries without a `schedule_format` field hold.
pub(crate) fn first_format() -> u32 {
    1
}

/// Accepts the schedule encodings this version reads (1 to [`tcc_ir::schedule::SCHEDULE_FORMAT`]).
pub(crate) fn check_schedule_format(format: u32) -> Result<(), BoundsError> {
    let current = tcc_ir::schedule::SCHEDULE_FORMAT;
    if format == 0 || format > current {
        return Err(BoundsError::new(
            "schedule_format",
            format!("{format} is not a schedule encoding this tcc reads (1 to {current})"),
        ));
    }
    Ok(())
}

/// Why a stored record could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Larger than [`MAX_RECORD_BYTES`].
    #[error("record is {0} bytes, more than the limit of {MAX_RECORD_BYTES}")]
    TooLarge(usize),
    /// Not a record in JSON.
    #[error("not a cache record: {0}")]
    Json(#[from] serde_json::Error),
    /// A value out of bounds.
    #[error("value out of bounds: {0}")]
    Bounds(#[from] BoundsError),
    /// The record is stored under another key's name.
    #[error("record is stored under {stored} but its key hashes to {actual}")]
    KeyMismatch {
        /// The name it was stored under.
        stored: String,
        /// The hash of its own key.
        actual: String,
    },
}

impl CacheRecord {
    /// Checks every field's bounds: key, schedules, times, runner-up count, provenance.
    pub fn validate(&self) -> Result<(), BoundsError> {
        self.key.validate()?;
        if self.variant > MAX_VARIANT {
            return Err(BoundsError::new("variant", format!("{} is more than {MAX_VARIANT}", self.variant)));
        }
        check_schedule_format(self.schedule_format)?;
        check_schedule(&self.schedule)?;
        check_time_ns("time_ns", self.time_ns)?;
        if self.runners_up.len() > MAX_RUNNERS_UP {
            return Err(BoundsError::new(
                "runners_up",
                format!("{} entries, more than {MAX_RUNNERS_UP}", self.runners_up.len()),
            ));
        }
        for r in &self.runners_up {
            if r.variant > MAX_VARIANT {
                return Err(BoundsError::new("runners_up.variant", format!("{} is too large", r.variant)));
            }
            check_schedule(&r.schedule)?;
            check_time_ns("runners_up.time_ns", r.time_ns)?;
        }
        if let Some(searched) = &self.searched
            && (searched.trials > searched.space || searched.space > MAX_SEARCHED)
        {
            return Err(BoundsError::new(
                "searched",
                format!("{} trials of {} candidates", searched.trials, searched.space),
            ));
        }
        if let Some(checked) = &self.checked {
            checked.validate()?;
        }
        self.provenance.validate()
    }

    /// True when this record was measured for `key` (its device) on this host by this code
    /// generator and schedule format ([`Here::measured`]).
    pub fn measured_here(&self, key: &CacheKey, here: &Here) -> bool {
        self.key == *key
            && self.schedule_format == tcc_ir::schedule::SCHEDULE_FORMAT
            && here.measured(&self.provenance, &key.device)
    }

    /// True when this record's choice was checked to run correctly for `key` on this host by this
    /// code generator (a borrowed record that `tcc run` may use without checking again).
    pub fn checked_here(&self, key: &CacheKey, here: &Here) -> bool {
        self.key == *key && self.checked.as_ref().is_some_and(|c| here.measured(c, &key.device))
    }

    /// How the record stands for its own key on the machine `here`.
    pub fn standing(&self, here: &Here) -> Standing {
        match self.state {
            RecordState::Quarantined => Standing::Quarantined,
            _ if !self.measured_here(&self.key, here) => Standing::Borrowed,
            RecordState::Unverified => Standing::Unverified,
            RecordState::Fresh => Standing::Fresh,
        }
    }

    /// True when measured by code-generator version `codegen_version` in this build's schedule
    /// format (whatever the device).
    pub fn by_codegen(&self, codegen_version: u32) -> bool {
        self.provenance.codegen_version == codegen_version && self.schedule_format == tcc_ir::schedule::SCHEDULE_FORMAT
    }

    /// False when a budget cut its search short (a later tune goes on from there).
    pub fn search_complete(&self) -> bool {
        self.searched.is_none_or(|s| s.complete)
    }

    /// The record as one line of JSON (fields in declaration order, so the text is stable).
    pub fn encode(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// Parses and bounds-checks a record. Rejects oversized text before parsing.
    pub fn decode(text: &str) -> Result<CacheRecord, DecodeError> {
        if text.len() > MAX_RECORD_BYTES {
            return Err(DecodeError::TooLarge(text.len()));
        }
        let record: CacheRecord = serde_json::from_str(text)?;
        record.validate()?;
        Ok(record)
    }

    /// [`CacheRecord::decode`], then checks that the record's key hashes to the name it was
    /// stored under.
    pub fn decode_stored(stored_under: &str, text: &str) -> Result<CacheRecord, DecodeError> {
        let record = CacheRecord::decode(text)?;
        let actual = record.key.hash();
        if actual.as_str() != stored_under {
            return Err(DecodeError::KeyMismatch { stored: stored_under.to_string(), actual: actual.to_string() });
        }
        Ok(record)
    }
}

impl fmt::Display for CacheRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} v{} {} {:.3} us [{} {} {}]",
            &self.key.hash().as_str()[..12],
            self.key.target,
            self.variant,
            self.schedule,
            self.time_ns as f64 / 1e3,
            self.state.name(),
            self.provenance.tcc_version,
            self.provenance.date
        )
    }
}

/// Which of two records for the same key a merge keeps: the faster measurement wins; ties go to
/// the one whose encoding sorts first, so merging is order-independent.
pub fn prefer<'a>(a: &'a CacheRecord, b: &'a CacheRecord) -> &'a CacheRecord {
    match a.time_ns.cmp(&b.time_ns) {
        std::cmp::Ordering::Less => a,
        std::cmp::Ordering::Greater => b,
        std::cmp::Ordering::Equal => {
            let ea = a.encode().unwrap_or_default();
            let eb = b.encode().unwrap_or_default();
            if ea <= eb { a } else { b }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cache::key::tests::key;
    use tcc_ir::Tier;

    pub(crate) fn record(time_ns: u64) -> CacheRecord {
        CacheRecord {
            key: key(),
            variant: 0,
            schedule: Schedule::default_for(Tier::Ptx),
            schedule_format: tcc_ir::schedule::SCHEDULE_FORMAT,
            time_ns,
            runners_up: vec![RunnerUp {
                variant: 1,
                schedule: Schedule { tile_m: 128, ..Schedule::default_for(Tier::Ptx) },
                time_ns: time_ns + 10,
            }],
            provenance: Provenance {
                tcc_version: "0.1.0".into(),
                driver: "cuda 13.0".into(),
                host: "box".into(),
                date: "2026-11-22T10:00:00Z".into(),
                device: None,
                codegen_version: 0,
            },
            state: RecordState::Fresh,
            searched: None,
            checked: None,
        }
    }

    #[test]
    fn round_trip() {
        let r = record(1000);
        let text = r.encode().unwrap();
        assert_eq!(CacheRecord::decode(&text).unwrap(), r);
        assert_eq!(CacheRecord::decode_stored(r.key.hash().as_str(), &text).unwrap(), r);
        assert!(matches!(CacheRecord::decode_stored(&"0".repeat(64), &text), Err(DecodeError::KeyMismatch { .. })));
    }

    #[test]
    fn garbage_and_absurd_values_are_rejected() {
        assert!(matches!(CacheRecord::decode("{not json"), Err(DecodeError::Json(_))));
        assert!(matches!(CacheRecord::decode(&"x".repeat(MAX_RECORD_BYTES + 1)), Err(DecodeError::TooLarge(_))));
        let mut r = record(1000);
        r.schedule.tile_m = 4096;
        let text = r.encode().unwrap();
        assert!(matches!(CacheRecord::decode(&text), Err(DecodeError::Bounds(_))));
        let mut r = record(1000);
        r.runners_up[0].schedule.stages = 100;
        assert!(matches!(CacheRecord::decode(&r.encode().unwrap()), Err(DecodeError::Bounds(_))));
        let mut r = record(1000);
        r.runners_up = vec![r.runners_up[0].clone(); MAX_RUNNERS_UP + 1];
        assert!(matches!(CacheRecord::decode(&r.encode().unwrap()), Err(DecodeError::Bounds(_))));
        let r = record(0);
        assert!(matches!(CacheRecord::decode(&r.encode().unwrap()), Err(DecodeError::Bounds(_))));
        // A negative or fractional knob does not even parse.
        let text = record(5).encode().unwrap().replace("\"warps\":4", "\"warps\":-4");
        assert!(matches!(CacheRecord::decode(&text), Err(DecodeError::Json(_))));
        let text = record(5).encode().unwrap().replace("\"tier\":\"Ptx\"", "\"tier\":\"Shellcode\"");
        assert!(matches!(CacheRecord::decode(&text), Err(DecodeError::Json(_))));
    }

    #[test]
    fn prefer_is_symmetric() {
        let a = record(100);
        let b = record(200);
        assert_eq!(prefer(&a, &b), &a);
        assert_eq!(prefer(&b, &a), &a);
        let mut c = record(100);
        c.provenance.host = "other".into();
        assert_eq!(prefer(&a, &c), prefer(&c, &a));
    }

    #[test]
    fn a_record_is_fresh_only_when_measured_here_by_this_code_generator() {
        let here = Here { host: "box".into(), codegen_version: tcc_ir::CODEGEN_VERSION };
        let mut r = record(1000);
        // Written before provenance named the device and the code generator: borrowed.
        assert_eq!(r.standing(&here), Standing::Borrowed);
        r.provenance.device = Some(r.key.device.clone());
        r.provenance.codegen_version = tcc_ir::CODEGEN_VERSION;
        assert_eq!(r.standing(&here), Standing::Fresh);
        // The crate version does not matter.
        r.provenance.tcc_version = "9.9.9".into();
        assert_eq!(r.standing(&here), Standing::Fresh);
        let other = |f: &dyn Fn(&mut CacheRecord)| {
            let mut o = r.clone();
            f(&mut o);
            o.standing(&here)
        };
        assert_eq!(other(&|o| o.provenance.host = "elsewhere".into()), Standing::Borrowed);
        assert_eq!(other(&|o| o.provenance.codegen_version += 1), Standing::Borrowed);
        assert_eq!(other(&|o| o.provenance.device.as_mut().unwrap().sm_count = Some(114)), Standing::Borrowed);
        assert_eq!(other(&|o| o.state = RecordState::Unverified), Standing::Unverified);
        assert_eq!(other(&|o| o.state = RecordState::Quarantined), Standing::Quarantined);
        // A check here is not a measurement.
        let mut borrowed = r.clone();
        borrowed.provenance.host = "elsewhere".into();
        borrowed.checked = Some(Provenance { host: "box".into(), ..r.provenance.clone() });
        assert!(borrowed.checked_here(&borrowed.key, &here));
        assert_eq!(borrowed.standing(&here), Standing::Borrowed);
        assert_eq!(CacheRecord::decode(&borrowed.encode().unwrap()).unwrap(), borrowed);
    }

    #[test]
    fn a_search_extent_is_bounded_and_optional() {
        let mut r = record(1000);
        assert!(r.search_complete());
        assert!(!r.encode().unwrap().contains("searched"), "absent fields are not written");
        r.searched = Some(Searched { trials: 3, space: 10, complete: false });
        assert!(!r.search_complete());
        assert_eq!(CacheRecord::decode(&r.encode().unwrap()).unwrap(), r);
        r.searched = Some(Searched { trials: 11, space: 10, complete: false });
        assert!(matches!(CacheRecord::decode(&r.encode().unwrap()), Err(DecodeError::Bounds(_))));
    }

    #[test]
    fn records_without_a_format_are_format_one_and_later_formats_are_refused() {
        let r = record(1000);
        let text = r.encode().unwrap();
        assert!(text.contains("\"schedule_format\":1"), "{text}");
        // A record written before the field existed reads as format 1, the same decision.
        let old = text.replace(",\"schedule_format\":1", "");
        assert_ne!(old, text);
        assert_eq!(CacheRecord::decode(&old).unwrap(), r);
        // A later encoding is never misread: the record is rejected (and its kernel re-tuned).
        let later = text.replace("\"schedule_format\":1", "\"schedule_format\":2");
        assert!(matches!(CacheRecord::decode(&later), Err(DecodeError::Bounds(_))));
        let zero = text.replace("\"schedule_format\":1", "\"schedule_format\":0");
        assert!(CacheRecord::decode(&zero).is_err());
    }
}
