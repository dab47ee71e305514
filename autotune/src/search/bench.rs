//! Measuring candidates: the [`Benchmarker`] the tuner is given, and what one trial produced.

use std::fmt;
use std::time::Duration;

use crate::bounds::{BoundsError, MAX_RECORD_BYTES, MAX_VARIANT, check_schedule};
use crate::search::candidate::Candidate;

/// What measuring one candidate produced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Outcome {
    /// Validated against the trusted implementation, then timed: the median in nanoseconds.
    Ok {
        /// Median time in nanoseconds (at least 1).
        time_ns: u64,
    },
    /// Gave results that differ from the trusted implementation: rejected, never chosen.
    Wrong {
        /// What differed.
        detail: String,
    },
    /// Did not compile, crashed or reported an error.
    Failed {
        /// What happened.
        detail: String,
    },
    /// Did not finish in time and was killed.
    Timeout {
        /// The limit it ran into, in milliseconds.
        after_ms: u64,
    },
}

impl Outcome {
    /// Name used in tables.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Ok { .. } => "ok",
            Outcome::Wrong { .. } => "wrong",
            Outcome::Failed { .. } => "failed",
            Outcome::Timeout { .. } => "timeout",
        }
    }

    /// The time of a validated, timed candidate.
    pub fn time_ns(&self) -> Option<u64> {
        match self {
            Outcome::Ok { time_ns } => Some(*time_ns),
            _ => None,
        }
    }

    /// An `Ok` outcome from a duration (clamped to at least 1 ns).
    pub fn from_duration(d: Duration) -> Outcome {
        Outcome::Ok { time_ns: u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1) }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok { time_ns } => write!(f, "ok {:.3} us", *time_ns as f64 / 1e3),
            Outcome::Wrong { detail } => write!(f, "wrong: {detail}"),
            Outcome::Failed { detail } => write!(f, "failed: {detail}"),
            Outcome::Timeout { after_ms } => write!(f, "timeout after {after_ms} ms"),
        }
    }
}

/// One measured candidate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Trial {
    /// What was measured.
    pub candidate: Candidate,
    /// What came of it.
    pub outcome: Outcome,
    /// Wall time spent compiling and measuring it, in milliseconds.
    pub wall_ms: u64,
    /// True when it was read back from the journal of an interrupted run.
    #[serde(default)]
    pub resumed: bool,
}

impl Trial {
    /// Parses and bounds-checks a journal entry.
    pub fn decode(text: &str) -> Result<Trial, String> {
        if text.len() > MAX_RECORD_BYTES {
            return Err(format!("journal entry of {} bytes is too large", text.len()));
        }
        let trial: Trial = serde_json::from_str(text).map_err(|e| e.to_string())?;
        check_schedule(&trial.candidate.schedule).map_err(|e| e.to_string())?;
        if trial.candidate.variant > MAX_VARIANT {
            return Err(BoundsError::new("variant", "too large").to_string());
        }
        if trial.outcome == (Outcome::Ok { time_ns: 0 }) {
            return Err("journal entry with a zero time".to_string());
        }
        Ok(trial)
    }
}

/// Compiles and measures candidates for the tuner. On the GPU it is the device; in tests, a fake.
///
/// `compile` runs on several host threads at once; `measure` runs one candidate at a time and
/// must validate the candidate against a trusted implementation on random inputs before timing
/// it, returning [`Outcome::Wrong`] when they differ.
pub trait Benchmarker: Sync {
    /// What compiling produces (code, a PTX module, nothing when the worker compiles).
    type Artifact: Send;

    /// Compiles one candidate; an error becomes an [`Outcome::Failed`] trial.
    fn compile(&self, candidate: &Candidate) -> Result<Self::Artifact, String>;

    /// Validates, then times, one compiled candidate.
    fn measure(&self, candidate: &Candidate, artifact: &Self::Artifact) -> Outcome;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{Schedule, Tier};

    #[test]
    fn trial_json_round_trip_and_bounds() {
        let t = Trial {
            candidate: Candidate { variant: 1, schedule: Schedule::default_for(Tier::Cranelift), cost: 2.5 },
            outcome: Outcome::Ok { time_ns: 1234 },
            wall_ms: 7,
            resumed: false,
        };
        let text = serde_json::to_string(&t).unwrap();
        assert!(text.contains("\"status\":\"ok\""));
        assert_eq!(Trial::decode(&text).unwrap(), t);
        let bad = text.replace("\"tile_m\":64", "\"tile_m\":65");
        assert!(Trial::decode(&bad).is_err());
        assert!(Trial::decode("{").is_err());
        assert_eq!(Outcome::from_duration(Duration::ZERO), Outcome::Ok { time_ns: 1 });
    }
}
