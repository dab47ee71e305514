//! Measuring each candidate in a child worker process, so a hang, a crash or a corrupted device
//! context kills the worker, never the tuner or the cache. A worker past its timeout is killed.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::search::bench::{Benchmarker, Outcome};
use crate::search::candidate::Candidate;
use crate::search::worker::{PROTOCOL, Timing, WorkerRequest, parse_result};

/// Most bytes kept of a worker's standard output and of its standard error.
const MAX_CAPTURE: usize = 1 << 20;

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

/// Compiles candidates in the parent process (on host threads) into data a worker can load.
pub type Precompile = dyn Fn(&Candidate) -> Result<serde_json::Value, String> + Send + Sync;

/// A [`Benchmarker`] that measures each candidate in a fresh worker process.
pub struct ProcessBenchmarker {
    command: WorkerCommand,
    payload: serde_json::Value,
    timeout: Duration,
    timing: Timing,
    seed: u64,
    precompile: Option<Box<Precompile>>,
}

impl std::fmt::Debug for ProcessBenchmarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessBenchmarker")
            .field("command", &self.command)
            .field("timeout", &self.timeout)
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

impl ProcessBenchmarker {
    /// Workers started by `command`, each sent `payload` with its candidate; a 60 s timeout,
    /// 3 warm-up runs and the median of 10.
    pub fn new(command: WorkerCommand, payload: serde_json::Value) -> ProcessBenchmarker {
        ProcessBenchmarker {
            command,
            payload,
            timeout: Duration::from_secs(60),
            timing: Timing::default(),
            seed: 0,
            precompile: None,
        }
    }

    /// Kills a worker that runs longer than `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> ProcessBenchmarker {
        self.timeout = timeout;
        self
    }

    /// Warm-up and repeats for each measurement.
    pub fn with_timing(mut self, timing: Timing) -> ProcessBenchmarker {
        self.timing = timing;
        self
    }

    /// Seed of the random inputs.
    pub fn with_seed(mut self, seed: u64) -> ProcessBenchmarker {
        self.seed = seed;
        self
    }

    /// Compiles in the parent, in parallel, and sends the result to the worker as its artifact.
    pub fn with_precompile(mut self, f: Box<Precompile>) -> ProcessBenchmarker {
        self.precompile = Some(f);
        self
    }

    /// Runs one worker for `candidate` and returns what it reported, or why it reported nothing.
    pub fn run_worker(&self, candidate: &Candidate, artifact: Option<&serde_json::Value>) -> Outcome {
        let request = WorkerRequest {
            protocol: PROTOCOL,
            payload: self.payload.clone(),
            artifact: artifact.cloned(),
            candidate: candidate.clone(),
            timing: self.timing,
            seed: self.seed,
        };
        let line = match serde_json::to_string(&request) {
            Ok(l) => l + "\n",
            Err(e) => {
                return Outcome::Failed { detail: format!("encoding the worker request: {e}") };
            }
        };
        let mut child = match Command::new(&self.command.program)
            .args(&self.command.args)
            .envs(self.command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                return Outcome::Failed {
                    detail: format!("cannot start worker {}: {e}", self.command.program.display()),
                };
            }
        };
        let (tx, rx) = mpsc::channel();
        if let Some(mut stdin) = child.stdin.take() {
            // A worker that never reads its input must not block the parent: write on a thread.
            std::thread::spawn(move || {
                let _ = stdin.write_all(line.as_bytes());
            });
        }
        if let Some(out) = child.stdout.take() {
            capture(out, 0, tx.clone());
        }
        if let Some(err) = child.stderr.take() {
            capture(err, 1, tx);
        }
        let status = wait_or_kill(&mut child, self.timeout);
        // Readers end when the pipes close; a grandchild holding them open is not waited for.
        let (mut out, mut err) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            match rx.recv_timeout(Duration::from_secs(2)) {
                Ok((0, bytes)) => out = bytes,
                Ok((_, bytes)) => err = bytes,
                Err(_) => break,
            }
        }
        let stderr_tail = tail(&String::from_utf8_lossy(&err), 400);
        match status {
            Err(e) => Outcome::Failed { detail: format!("waiting for the worker: {e}") },
            Ok(None) => Outcome::Timeout { after_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX) },
            Ok(Some(st)) => match parse_result(&String::from_utf8_lossy(&out)) {
                Some(outcome) if st.success() => bounded(outcome),
                _ => Outcome::Failed {
                    detail: format!("worker {} without a result; stderr: {stderr_tail}", describe(st)),
                },
            },
        }
    }
}

impl Benchmarker for ProcessBenchmarker {
    type Artifact = Option<serde_json::Value>;

    fn compile(&self, candidate: &Candidate) -> Result<Self::Artifact, String> {
        match &self.precompile {
            Some(f) => f(candidate).map(Some),
            None => Ok(None),
        }
    }

    fn measure(&self, candidate: &Candidate, artifact: &Self::Artifact) -> Outcome {
        self.run_worker(candidate, artifact.as_ref())
    }
}

fn capture(mut pipe: impl Read + Send + 'static, which: u8, tx: mpsc::Sender<(u8, Vec<u8>)>) {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = MAX_CAPTURE.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        let _ = tx.send((which, kept));
    });
}

/// Waits for the child until `timeout`; then kills it (SIGKILL) and returns `None`.
fn wait_or_kill(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended".to_string(),
    }
}

fn tail(text: &str, max_chars: usize) -> String {
    let chars: Vec<char> = text.trim_end().chars().collect();
    chars[chars.len().saturating_sub(max_chars)..].iter().collect()
}

/// Keeps a worker's free-text details short.
fn bounded(outcome: Outcome) -> Outcome {
    let cut = |d: String| d.chars().take(1000).collect::<String>();
    match outcome {
        Outcome::Wrong { detail } => Outcome::Wrong { detail: cut(detail) },
        Outcome::Failed { detail } => Outcome::Failed { detail: cut(detail) },
        other => other,
    }
}
