//! Shared helpers: keys, records, spaces, fake benchmarkers, child-process commands.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tcc_autotune::cache::{CacheKey, CacheRecord, DeviceKey, RecordState};
use tcc_autotune::search::{Benchmarker, Candidate, Outcome, SearchSpace, WorkerCommand};
use tcc_autotune::{Provenance, TCC_VERSION};
use tcc_ir::{DType, Schedule, Tier};

pub const ROLE_ENV: &str = "TCC_AUTOTUNE_TEST_ROLE";
pub const DB_ENV: &str = "TCC_AUTOTUNE_TEST_DB";

pub fn h100() -> DeviceKey {
    DeviceKey {
        name: "NVIDIA H100 80GB HBM3".into(),
        arch: "sm_90a".into(),
        compute_capability: Some((9, 0)),
        sm_count: Some(132),
    }
}

pub fn h100_pcie() -> DeviceKey {
    DeviceKey {
        name: "NVIDIA H100 PCIe".into(),
        arch: "sm_90a".into(),
        compute_capability: Some((9, 0)),
        sm_count: Some(114),
    }
}

pub fn cpu() -> DeviceKey {
    DeviceKey { name: "test cpu".into(), arch: "x86_64-avx512".into(), compute_capability: None, sm_count: None }
}

pub fn key(shapes: &str, device: DeviceKey) -> CacheKey {
    CacheKey {
        fingerprint: "0123456789abcdef0123456789abcdef".into(),
        shapes: shapes.into(),
        dtypes: vec![DType::F32, DType::F32],
        target: "cpu:cranelift".into(),
        device,
    }
}

pub fn schedule(tile_m: u32, tile_n: u32, tile_k: u32) -> Schedule {
    Schedule { tile_m, tile_n, tile_k, ..Schedule::default_for(Tier::Cranelift) }
}

pub fn record(key: CacheKey, s: Schedule, time_ns: u64) -> CacheRecord {
    let key_device = key.device.clone();
    CacheRecord {
        key,
        variant: 0,
        schedule: s,
        schedule_format: tcc_ir::schedule::SCHEDULE_FORMAT,
        time_ns,
        runners_up: vec![],
        provenance: measured_here(&key_device),
        state: RecordState::Fresh,
        searched: None,
        checked: None,
    }
}

/// Provenance of a measurement on `device` of this host by this build's code generators (what
/// makes a record fresh here).
pub fn measured_here(device: &DeviceKey) -> Provenance {
    Provenance {
        tcc_version: TCC_VERSION.into(),
        driver: "test".into(),
        host: tcc_autotune::provenance::hostname(),
        date: "2026-11-22T10:00:00Z".into(),
        device: Some(device.clone()),
        codegen_version: tcc_ir::CODEGEN_VERSION,
    }
}

/// A record measured on another host (the same device model): borrowed here.
pub fn borrowed_record(key: CacheKey, s: Schedule, time_ns: u64) -> CacheRecord {
    let mut r = record(key, s, time_ns);
    r.provenance.host = "a-teammates-box".into();
    r
}

/// tile_m, tile_n, tile_k each in {1, 2, 4, ..., 2^(bits-1)}: a space of bits^3 candidates whose
/// cost-model order is the opposite of tile_m (so the best is never simply the first).
pub fn grid_space(bits: u32) -> SearchSpace {
    let mut cands = Vec::new();
    for a in 0..bits {
        for b in 0..bits {
            for c in 0..bits {
                let s = schedule(1 << a, 1 << b, 1 << c);
                cands.push(Candidate { variant: 0, schedule: s, cost: f64::from(bits - a) * 100.0 + f64::from(b + c) });
            }
        }
    }
    SearchSpace::new(cands)
}

/// A benchmarker whose outcome is a pure function of the candidate; counts calls and the most
/// compiles seen running at once.
pub struct FakeBench<F: Fn(&Candidate) -> Outcome + Sync> {
    pub outcome: F,
    pub compile_sleep: Duration,
    pub measure_sleep: Duration,
    pub measured: Mutex<Vec<String>>,
    pub compiling: AtomicUsize,
    pub max_compiling: AtomicUsize,
}

impl<F: Fn(&Candidate) -> Outcome + Sync> FakeBench<F> {
    pub fn new(outcome: F) -> Self {
        FakeBench {
            outcome,
            compile_sleep: Duration::ZERO,
            measure_sleep: Duration::ZERO,
            measured: Mutex::new(Vec::new()),
            compiling: AtomicUsize::new(0),
            max_compiling: AtomicUsize::new(0),
        }
    }

    pub fn measured(&self) -> Vec<String> {
        self.measured.lock().unwrap().clone()
    }
}

impl<F: Fn(&Candidate) -> Outcome + Sync> Benchmarker for FakeBench<F> {
    type Artifact = String;

    fn compile(&self, c: &Candidate) -> Result<String, String> {
        let now = self.compiling.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_compiling.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(self.compile_sleep);
        self.compiling.fetch_sub(1, Ordering::SeqCst);
        Ok(c.id())
    }

    fn measure(&self, c: &Candidate, artifact: &String) -> Outcome {
        assert_eq!(&c.id(), artifact, "measured with another candidate's artifact");
        std::thread::sleep(self.measure_sleep);
        self.measured.lock().unwrap().push(c.id());
        (self.outcome)(c)
    }
}

/// A smooth landscape with its unique minimum at tile 16x32x8.
pub fn bowl(c: &Candidate) -> Outcome {
    let d = |v: u32, at: i64| (i64::from(v.trailing_zeros()) - at).unsigned_abs();
    let s = &c.schedule;
    Outcome::Ok { time_ns: 1000 + 100 * (d(s.tile_m, 4) + d(s.tile_n, 5) + d(s.tile_k, 3)) }
}

/// This test binary, started so that it runs only `child::entry` in the given role.
pub fn child_command(role: &str, extra_env: &[(&str, &str)]) -> WorkerCommand {
    let mut env = vec![(ROLE_ENV.to_string(), role.to_string())];
    env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    WorkerCommand {
        program: std::env::current_exe().unwrap(),
        args: ["child::entry", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"]
            .map(String::from)
            .to_vec(),
        env,
    }
}

/// A std `Command` for the same.
pub fn child_process(role: &str, extra_env: &[(&str, &str)]) -> std::process::Command {
    let wc = child_command(role, extra_env);
    let mut cmd = std::process::Command::new(wc.program);
    cmd.args(wc.args).envs(wc.env);
    cmd
}
