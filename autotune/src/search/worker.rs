//! The protocol of out-of-process measurement, and its worker side: a child process reads one
//! [`WorkerRequest`] (a JSON line on standard input), compiles the candidate and prints
//! [`COMPILED_MARKER`], waits for [`GO`], validates then times it, and prints one result line.
//! [`serve`] is that loop; the `tcc` binary's hidden `tcc worker` subcommand serves it with
//! [`crate::tuning::worker`]'s compile and measure, the parent side is
//! [`WorkerBenchmarker`](crate::search::WorkerBenchmarker).

use std::io::{BufRead, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::search::bench::Outcome;
use crate::search::candidate::Candidate;

/// The prefix of the result line on the worker's standard output (other output is ignored).
pub const RESULT_MARKER: &str = "TCC-WORKER-RESULT ";

/// The line a worker prints once its candidate is compiled; it then waits for [`GO`].
pub const COMPILED_MARKER: &str = "TCC-WORKER-COMPILED";

/// The line that tells a compiled worker to validate and time.
pub const GO: &str = "go";

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

/// Why a worker could not serve a request.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The request was not a valid request (garbage, another protocol, a bad payload).
    #[error("bad worker request: {0}")]
    BadRequest(String),
    /// Reading standard input or writing standard output failed.
    #[error("worker I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves one request: reads it from `input`, decodes its payload (`parse`), compiles
/// (`compile`), announces [`COMPILED_MARKER`] on `output`, waits for [`GO`], measures (`measure`)
/// and writes the result line. A compile or measurement failure, or a panic in either, is a
/// result (`Ok`); a request that cannot be understood is an error (after a result line saying
/// so). If the input ends instead of saying `go`, nothing is measured.
pub fn serve<P, C>(
    mut input: impl BufRead,
    mut output: impl Write,
    parse: impl FnOnce(&WorkerRequest) -> Result<P, String>,
    compile: impl FnOnce(&WorkerRequest, &P) -> Result<C, String>,
    measure: impl FnOnce(&WorkerRequest, &P, &C) -> Outcome,
) -> Result<(), WorkerError> {
    let mut line = String::new();
    (&mut input).take(MAX_REQUEST_BYTES).read_line(&mut line)?;
    let parsed = parse_request(&line).and_then(|r| parse(&r).map(|p| (r, p)).map_err(WorkerError::BadRequest));
    let (request, payload) = match parsed {
        Ok(p) => p,
        Err(e) => {
            write_result(&mut output, &Outcome::Failed { detail: e.to_string() })?;
            return Err(e);
        }
    };
    let compiled = catch_unwind(AssertUnwindSafe(|| compile(&request, &payload)))
        .unwrap_or_else(|_| Err("the compiler panicked".to_string()));
    let compiled = match compiled {
        Ok(c) => c,
        Err(detail) => return write_result(&mut output, &Outcome::Failed { detail: format!("compile: {detail}") }),
    };
    writeln!(output, "{COMPILED_MARKER}")?;
    output.flush()?;
    let mut go = String::new();
    (&mut input).take(64).read_line(&mut go)?;
    if go.trim() != GO {
        return Ok(());
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| measure(&request, &payload, &compiled)))
        .unwrap_or_else(|_| Outcome::Failed { detail: "the worker panicked while measuring".into() });
    write_result(&mut output, &outcome)
}

fn parse_request(line: &str) -> Result<WorkerRequest, WorkerError> {
    let request: WorkerRequest = serde_json::from_str(line).map_err(|e| WorkerError::BadRequest(e.to_string()))?;
    if request.protocol != PROTOCOL {
        return Err(WorkerError::BadRequest(format!("protocol {}, this worker speaks {PROTOCOL}", request.protocol)));
    }
    Ok(request)
}

fn write_result(output: &mut impl Write, outcome: &Outcome) -> Result<(), WorkerError> {
    let json = serde_json::to_string(outcome).map_err(std::io::Error::other)?;
    writeln!(output, "{RESULT_MARKER}{json}")?;
    output.flush()?;
    Ok(())
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
        let input = format!("{}\n{GO}\n", serde_json::to_string(&request()).unwrap());
        let mut out = Vec::new();
        serve(
            input.as_bytes(),
            &mut out,
            |r| Ok(r.payload.clone()),
            |r, payload| {
                assert_eq!(payload["k"], 1);
                Ok(r.seed)
            },
            |_, _, &seed| {
                assert_eq!(seed, 9);
                Outcome::Ok { time_ns: 42 }
            },
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(COMPILED_MARKER), "{text}");
        assert_eq!(parse_result(&format!("noise\n{text}more noise\n")), Some(Outcome::Ok { time_ns: 42 }));
    }

    #[test]
    fn bad_requests_and_panics_fail_cleanly() {
        let ok = |_: &WorkerRequest| Ok(());
        let mut out = Vec::new();
        let served = serve("garbage\n".as_bytes(), &mut out, ok, |_, _| Ok(()), |_, _, _| Outcome::Ok { time_ns: 1 });
        assert!(matches!(served, Err(WorkerError::BadRequest(_))));
        assert!(matches!(parse_result(&String::from_utf8(out).unwrap()), Some(Outcome::Failed { .. })));
        let input = format!("{}\n{GO}\n", serde_json::to_string(&request()).unwrap());
        let mut out = Vec::new();
        serve(input.as_bytes(), &mut out, ok, |_, _| Ok(()), |_, _, _| panic!("boom")).unwrap();
        assert_eq!(
            parse_result(&String::from_utf8(out).unwrap()),
            Some(Outcome::Failed { detail: "the worker panicked while measuring".into() })
        );
        let mut out = Vec::new();
        serve(
            input.as_bytes(),
            &mut out,
            ok,
            |_, _| -> Result<(), String> { panic!("boom") },
            |_, _, _| Outcome::Ok { time_ns: 1 },
        )
        .unwrap();
        assert_eq!(
            parse_result(&String::from_utf8(out).unwrap()),
            Some(Outcome::Failed { detail: "compile: the compiler panicked".into() })
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
