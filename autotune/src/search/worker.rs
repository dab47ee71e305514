//! The worker side of out-of-process measurement: a child process reads one [`WorkerRequest`]
//! (a JSON line on standard input), validates then times the candidate, and prints one result
//! line. The `tcc` binary's hidden `tcc worker` subcommand is meant to call [`serve_stdio`].

use std::io::{BufRead, BufReader, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::search::bench::Outcome;
use crate::search::candidate::Candidate;

/// The prefix of the result line on the worker's standard output (other output is ignored).
pub const RESULT_MARKER: &str = "TCC-WORKER-RESULT ";

/// Version of the request format.
pub const PROTOCOL: u32 = 1;

/// Largest request a worker reads (64 MiB): payloads are programs, artifacts are PTX text.
pub const MAX_REQUEST_BYTES: u64 = 64 << 20;

/// How a worker times a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    /// Untimed runs first.
    pub warmup: u32,
    /// Timed runs; the median is reported.
    pub repeats: u32,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing { warmup: 3, repeats: 10 }
    }
}

/// What the parent sends a worker.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerRequest {
    /// [`PROTOCOL`].
    pub protocol: u32,
    /// What to compile, as the caller defines it (program text, dims, target, ...).
    pub payload: serde_json::Value,
    /// What the parent compiled for this candidate, if anything.
    pub artifact: Option<serde_json::Value>,
    /// The candidate.
    pub candidate: Candidate,
    /// Warm-up and repeats.
    pub timing: Timing,
    /// Seed of the random inputs.
    pub seed: u64,
}

/// The result of checking a candidate against the trusted implementation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Same results within tolerance.
    Pass,
    /// Different results: what differed.
    Wrong(String),
}

/// Validates, then (only if it passed) runs `warmup` untimed and `repeats` timed runs and reports
/// the median. An `Err` from either closure is a failure.
pub fn validate_then_time(
    timing: &Timing,
    validate: impl FnOnce() -> Result<Check, String>,
    mut run: impl FnMut() -> Result<(), String>,
) -> Outcome {
    match validate() {
        Ok(Check::Pass) => {}
        Ok(Check::Wrong(detail)) => return Outcome::Wrong { detail },
        Err(detail) => {
            return Outcome::Failed { detail: format!("validation: {detail}") };
        }
    }
    for _ in 0..timing.warmup {
        if let Err(detail) = run() {
            return Outcome::Failed { detail };
        }
    }
    let mut times: Vec<Duration> = Vec::with_capacity(timing.repeats as usize);
    for _ in 0..timing.repeats.max(1) {
        let t = Instant::now();
        if let Err(detail) = run() {
            return Outcome::Failed { detail };
        }
        times.push(t.elapsed());
    }
    times.sort_unstable();
    Outcome::from_duration(times[times.len() / 2])
}

/// Reads one request from `input`, calls `handler` (a panic becomes a failure), and writes the
/// result line to `output`.
pub fn serve(
    input: impl Read,
    mut output: impl Write,
    handler: impl FnOnce(&WorkerRequest) -> Outcome,
) -> std::io::Result<()> {
    let mut line = String::new();
    BufReader::new(input.take(MAX_REQUEST_BYTES)).read_line(&mut line)?;
    let outcome = match serde_json::from_str::<WorkerRequest>(&line) {
        Ok(req) if req.protocol == PROTOCOL => catch_unwind(AssertUnwindSafe(|| handler(&req)))
            .unwrap_or_else(|_| Outcome::Failed { detail: "the worker panicked".into() }),
        Ok(req) => Outcome::Failed { detail: format!("worker speaks protocol {PROTOCOL}, got {}", req.protocol) },
        Err(e) => Outcome::Failed { detail: format!("bad worker request: {e}") },
    };
    let json = serde_json::to_string(&outcome).map_err(std::io::Error::other)?;
    writeln!(output, "{RESULT_MARKER}{json}")?;
    output.flush()
}

/// [`serve`] on standard input and output.
pub fn serve_stdio(handler: impl FnOnce(&WorkerRequest) -> Outcome) -> std::io::Result<()> {
    serve(std::io::stdin().lock(), std::io::stdout().lock(), handler)
}

/// Finds the last result line in a worker's standard output.
pub fn parse_result(stdout: &str) -> Option<Outcome> {
    stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT_MARKER))
        .and_then(|json| serde_json::from_str(json.trim()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_ir::{Schedule, Tier};

    fn request() -> WorkerRequest {
        WorkerRequest {
            protocol: PROTOCOL,
            payload: serde_json::json!({"k": 1}),
            artifact: None,
            candidate: Candidate { variant: 0, schedule: Schedule::default_for(Tier::Cranelift), cost: 0.0 },
            timing: Timing { warmup: 1, repeats: 3 },
            seed: 9,
        }
    }

    #[test]
    fn serve_round_trip() {
        let input = format!("{}\n", serde_json::to_string(&request()).unwrap());
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out, |r| {
            assert_eq!(r.seed, 9);
            Outcome::Ok { time_ns: 42 }
        })
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(parse_result(&format!("noise\n{text}more noise\n")), Some(Outcome::Ok { time_ns: 42 }));
    }

    #[test]
    fn bad_requests_and_panics_fail_cleanly() {
        let mut out = Vec::new();
        serve("garbage\n".as_bytes(), &mut out, |_| Outcome::Ok { time_ns: 1 }).unwrap();
        assert!(matches!(parse_result(&String::from_utf8(out).unwrap()), Some(Outcome::Failed { .. })));
        let input = format!("{}\n", serde_json::to_string(&request()).unwrap());
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out, |_| panic!("boom")).unwrap();
        assert_eq!(
            parse_result(&String::from_utf8(out).unwrap()),
            Some(Outcome::Failed { detail: "the worker panicked".into() })
        );
    }

    #[test]
    fn wrong_results_are_never_timed() {
        let mut runs = 0;
        let o = validate_then_time(
            &Timing::default(),
            || Ok(Check::Wrong("max error 3.5".into())),
            || {
                runs += 1;
                Ok(())
            },
        );
        assert_eq!(o, Outcome::Wrong { detail: "max error 3.5".into() });
        assert_eq!(runs, 0);
        let o = validate_then_time(
            &Timing { warmup: 2, repeats: 5 },
            || Ok(Check::Pass),
            || {
                runs += 1;
                Ok(())
            },
        );
        assert!(matches!(o, Outcome::Ok { .. }));
        assert_eq!(runs, 7);
    }
}
