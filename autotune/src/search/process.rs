//! The one benchmarker: each candidate is measured in its own worker process (`tcc worker` for
//! the tuner, whatever serves [`serve`](crate::search::worker::serve) in tests). `compile` starts the worker and waits until it has compiled (the tuner calls it
//! for several candidates at once, so compilation runs in parallel); `measure` tells it to go and
//! waits for its result. A worker past its timeout is killed (SIGKILL); one that exits, crashes or
//! prints garbage is a failed candidate, never an error of the tuner.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::search::bench::{Benchmarker, Outcome};
use crate::search::candidate::Candidate;
use crate::search::worker::{COMPILED_MARKER, GO, PROTOCOL, Timing, WorkerRequest, parse_result};

/// How a worker process is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The executable (the `tcc` binary, or a test binary).
    pub program: PathBuf,
    /// Its arguments (`["worker"]` for `tcc worker`).
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

/// Most bytes of a worker's standard output read; most of its standard error kept (the tail).
const MAX_STDOUT: u64 = 1 << 20;
const MAX_STDERR: usize = 4096;

/// Measures candidates of one kernel in worker processes.
#[derive(Debug, Clone)]
pub struct WorkerBenchmarker {
    command: WorkerCommand,
    payload: serde_json::Value,
    timing: Timing,
    compile_timeout: Duration,
    measure_timeout: Duration,
}

impl WorkerBenchmarker {
    /// Workers started by `command` measure what `payload` describes (for `tcc worker`, a
    /// [`Payload`](crate::tuning::worker::Payload)); 3 warm-up runs, the median of 10, 120 s to
    /// compile and 60 s to measure.
    pub fn new(command: WorkerCommand, payload: &impl serde::Serialize) -> Result<WorkerBenchmarker, String> {
        Ok(WorkerBenchmarker {
            command,
            payload: serde_json::to_value(payload).map_err(|e| format!("encoding the worker payload: {e}"))?,
            timing: Timing::default(),
            compile_timeout: Duration::from_secs(120),
            measure_timeout: Duration::from_secs(60),
        })
    }

    /// Warm-up and timed runs of each measurement.
    pub fn with_timing(mut self, timing: Timing) -> WorkerBenchmarker {
        self.timing = timing;
        self
    }

    /// Time limits of the compile and the measure step.
    pub fn with_timeouts(mut self, compile: Duration, measure: Duration) -> WorkerBenchmarker {
        self.compile_timeout = compile;
        self.measure_timeout = measure;
        self
    }
}

/// A running worker that has compiled its candidate and waits for `go`.
pub struct Worker {
    child: Mutex<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

enum Event {
    Compiled,
    Result(Outcome),
    Ended(String),
    TimedOut,
}

impl Worker {
    fn start(command: &WorkerCommand, request: &str) -> Result<Worker, String> {
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the worker {}: {e}", command.program.display()))?;
        let (tx, lines) = std::sync::mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(out.take(MAX_STDOUT));
                let mut buf = Vec::new();
                while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
                    if tx.send(String::from_utf8_lossy(&buf).trim_end().to_string()).is_err() {
                        break;
                    }
                    buf.clear();
                }
            });
        }
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut err) = child.stderr.take() {
            let kept = stderr.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut k = kept.lock().unwrap_or_else(PoisonError::into_inner);
                    k.extend_from_slice(&buf[..n]);
                    let excess = k.len().saturating_sub(MAX_STDERR);
                    k.drain(..excess);
                }
            });
        }
        let mut worker = Worker { child: Mutex::new(child), stdin: None, lines, stderr };
        worker.stdin = worker.child.lock().unwrap_or_else(PoisonError::into_inner).stdin.take();
        worker.send(request)?;
        Ok(worker)
    }

    fn send(&self, line: &str) -> Result<(), String> {
        let mut stdin = self.stdin.as_ref().ok_or("the worker's input is closed")?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to the worker: {e}"))
    }

    /// Waits for the next line that means something, until `timeout`.
    fn next_event(&self, timeout: Duration) -> Event {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line == COMPILED_MARKER => return Event::Compiled,
                Ok(line) => {
                    if let Some(outcome) = parse_result(&line) {
                        return Event::Result(outcome);
                    }
                }
                Err(RecvTimeoutError::Timeout) => return Event::TimedOut,
                Err(RecvTimeoutError::Disconnected) => return Event::Ended(self.finish()),
            }
        }
    }

    /// Waits briefly for the worker to exit (killing it otherwise) and describes how it ended.
    fn finish(&self) -> String {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break describe(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break "did not exit and was killed".to_string();
                }
                Err(e) => break format!("could not be waited for: {e}"),
            }
        };
        let stderr = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let tail = String::from_utf8_lossy(&stderr);
        let tail = tail.trim();
        if tail.is_empty() { format!("the worker {status}") } else { format!("the worker {status}; stderr: {tail}") }
    }

    fn kill(&self) {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing its input ends a worker still waiting for `go`; kill it in case it does not.
        self.stdin = None;
        self.kill();
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_string(),
    }
}

impl Benchmarker for WorkerBenchmarker {
    type Artifact = Worker;

    fn compile(&self, candidate: &Candidate) -> Result<Worker, String> {
        let request = WorkerRequest {
            protocol: PROTOCOL,
            payload: self.payload.clone(),
            artifact: None,
            candidate: candidate.clone(),
            timing: self.timing,
            seed: 0,
        };
        let line = serde_json::to_string(&request).map_err(|e| format!("encoding the worker request: {e}"))?;
        let worker = Worker::start(&self.command, &line)?;
        match worker.next_event(self.compile_timeout) {
            Event::Compiled => Ok(worker),
            Event::Result(Outcome::Failed { detail }) => Err(detail),
            Event::Result(other) => Err(format!("the worker answered {other} before compiling")),
            Event::Ended(how) => Err(format!("{how} before compiling")),
            Event::TimedOut => {
                worker.kill();
                Err(format!("not compiled after {} s", self.compile_timeout.as_secs()))
            }
        }
    }

    fn measure(&self, _candidate: &Candidate, worker: &Worker) -> Outcome {
        if let Err(detail) = worker.send(GO) {
            return Outcome::Failed { detail };
        }
        match worker.next_event(self.measure_timeout) {
            Event::Result(outcome) => outcome,
            Event::Compiled => Outcome::Failed { detail: "the worker announced a second compile".into() },
            Event::Ended(how) => Outcome::Failed { detail: format!("{how} without a result") },
            Event::TimedOut => {
                worker.kill();
                Outcome::Timeout { after_ms: u64::try_from(self.measure_timeout.as_millis()).unwrap_or(u64::MAX) }
            }
        }
    }
}
