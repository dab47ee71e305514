//! The differential driver: for seeded random programs of the shared generator
//! ([`tcc_ir::testing::generate`]), the reference interpreter's outputs against those of every
//! backend built in — the interpreter after the optimizer, `cpu:cranelift`, `cpu:llvm` (feature
//! `llvm`) and the CUDA GPU (feature `gpu-tests`) — within per-dtype tolerances
//! ([`tolerance`]), with a coverage report ([`coverage`]).
//!
//! Seed `s` always means the same program (preset `s % 5` of the rotation, see [`presets`], or the
//! one preset given to [`Driver::with_preset`]) and the same inputs, so a failing seed printed by a
//! long run is replayed by `soak --seed s` (with the same `--preset`).

pub mod coverage;
pub mod paths;
pub mod presets;
pub mod tolerance;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use tcc_ir::interp::{Tensor, run_graph, run_program};
use tcc_ir::target::{CpuTier, GpuArch, Target};
use tcc_ir::testing::{GeneratedProgram, Mismatch, Tolerance, compare_outputs, generate};
use tcc_ir::{Bindings, Graph, KernelClass, Launch, Program, Schedule, ValueRef};
use tcc_runtime::{CpuDevice, HostTensor};

use tolerance::ErrorStats;

/// One implementation checked against the reference interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// The interpreter running the optimizer's programs (`passes::optimize` + `run_program`).
    InterpOptimized,
    /// The cranelift CPU tier.
    Cranelift,
    /// The LLVM CPU tier (feature `llvm`).
    Llvm,
    /// The CUDA GPU through the PTX backend (feature `gpu-tests`).
    Cuda,
}

impl Backend {
    /// Every backend, in check order.
    pub const ALL: [Backend; 4] = [Backend::InterpOptimized, Backend::Cranelift, Backend::Llvm, Backend::Cuda];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::InterpOptimized => "interp-opt",
            Backend::Cranelift => "cpu:cranelift",
            Backend::Llvm => "cpu:llvm",
            Backend::Cuda => "cuda",
        }
    }

    /// Parses a name of [`Backend::name`].
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// True if this build can run the backend (`cpu:llvm` needs feature `llvm`, `cuda` needs
    /// feature `gpu-tests`).
    pub fn built_in(self) -> bool {
        match self {
            Backend::InterpOptimized | Backend::Cranelift => true,
            Backend::Llvm => cfg!(feature = "llvm"),
            Backend::Cuda => cfg!(feature = "gpu-tests"),
        }
    }

    /// The CPU backends this build has (what the CI test and a plain soak check).
    pub fn cpu_defaults() -> Vec<Backend> {
        [Backend::InterpOptimized, Backend::Cranelift, Backend::Llvm].into_iter().filter(|b| b.built_in()).collect()
    }
}

/// Why the driver could not start.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A backend is not built into this binary.
    #[error("backend `{0}` is not built in (cpu:llvm needs --features llvm, cuda needs --features gpu-tests)")]
    NotBuilt(&'static str),
    /// A device could not be opened.
    #[error("cannot open the device of `{backend}`: {message}")]
    Device {
        /// The backend.
        backend: &'static str,
        /// Why.
        message: String,
    },
}

/// One disagreement (or error, or panic) of a backend on one program.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The backend (`None`: the generator or the reference interpreter itself failed).
    pub backend: Option<Backend>,
    /// Which program of the backend: `best`, `alternative 1`, `whole graph`.
    pub variant: String,
    /// What went wrong.
    pub message: String,
}

/// The result of one seed.
#[derive(Debug, Clone)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// The generator preset it used.
    pub preset: &'static str,
    /// The program (absent if the generator failed).
    pub program: Option<GeneratedProgram>,
    /// Every failure.
    pub failures: Vec<Failure>,
    /// Error statistics per backend.
    pub stats: BTreeMap<Backend, ErrorStats>,
    /// Time per backend (optimizing, compiling and running).
    pub times: BTreeMap<Backend, Duration>,
}

impl Failure {
    /// A failure of the reference side (the generator, the inputs or the interpreter itself).
    pub fn reference(message: String) -> Failure {
        Failure { backend: None, variant: "reference".into(), message }
    }
}

impl SeedReport {
    /// The report of a seed whose program could not be made: one reference failure, nothing run.
    pub fn unrun(seed: u64, preset: &'static str, message: String) -> SeedReport {
        SeedReport {
            seed,
            preset,
            program: None,
            failures: vec![Failure::reference(message)],
            stats: BTreeMap::new(),
            times: BTreeMap::new(),
        }
    }

    /// The failures as text, one per line, each naming the seed and preset.
    pub fn describe(&self) -> String {
        self.failures
            .iter()
            .map(|f| {
                format!(
                    "seed {} ({}): {} {}: {}",
                    self.seed,
                    self.preset,
                    f.backend.map_or("reference", Backend::name),
                    f.variant,
                    f.message
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// How a backend's outputs are held against the interpreter's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Check {
    /// Within the per-dtype tolerances of [`tolerance`] (outliers allowed where the program has
    /// a discontinuity): what random programs are checked with.
    #[default]
    Tolerance,
    /// Bit for bit, every value of every output, no outliers: for programs whose every value the
    /// interpreter defines exactly (elementwise ops, layout ops and comparisons; see [`paths`]).
    Exact,
}

/// Which programs of each seed a compiled backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variants {
    /// The optimizer's best program, its first alternative and the whole graph as one generic
    /// kernel.
    #[default]
    All,
    /// Only the optimizer's best program (what users run; a third of the compile time).
    Best,
}

/// The devices of the chosen backends, opened once and reused for every seed.
pub struct Driver {
    backends: Vec<Backend>,
    variants: Variants,
    preset: Option<presets::Preset>,
    cranelift: Option<CpuDevice>,
    llvm: Option<CpuDevice>,
    #[cfg(feature = "gpu-tests")]
    cuda: Option<tcc_runtime::cuda::CudaDevice>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("backends", &self.backends).finish_non_exhaustive()
    }
}

impl Driver {
    /// A driver checking `backends` (each must be [`Backend::built_in`]).
    pub fn new(backends: &[Backend]) -> Result<Driver, DriverError> {
        let mut d = Driver {
            backends: backends.to_vec(),
            variants: Variants::All,
            preset: None,
            cranelift: None,
            llvm: None,
            #[cfg(feature = "gpu-tests")]
            cuda: None,
        };
        for &b in backends {
            if !b.built_in() {
                return Err(DriverError::NotBuilt(b.name()));
            }
            d.open(b)?;
        }
        Ok(d)
    }

    /// The same driver running `variants` of each program.
    pub fn with_variants(mut self, variants: Variants) -> Driver {
        self.variants = variants;
        self
    }

    /// The same driver drawing every program from `preset` instead of the rotation (seed `s` then
    /// means `generate(preset, s)`).
    pub fn with_preset(mut self, preset: presets::Preset) -> Driver {
        self.preset = Some(preset);
        self
    }

    /// The backends checked.
    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    fn open(&mut self, b: Backend) -> Result<(), DriverError> {
        let err = |e: &dyn std::fmt::Display| DriverError::Device { backend: b.name(), message: e.to_string() };
        match b {
            Backend::InterpOptimized => {}
            Backend::Cranelift => self.cranelift = Some(CpuDevice::new().map_err(|e| err(&e))?),
            #[cfg(feature = "llvm")]
            Backend::Llvm => self.llvm = Some(CpuDevice::with_llvm(0).map_err(|e| err(&e))?),
            #[cfg(feature = "gpu-tests")]
            Backend::Cuda => self.cuda = Some(tcc_runtime::cuda::CudaDevice::open(0).map_err(|e| err(&e))?),
            #[allow(unreachable_patterns, reason = "reached only in builds without `llvm` or `gpu-tests`")]
            _ => return Err(DriverError::NotBuilt(b.name())),
        }
        Ok(())
    }

    /// Generates the program of `seed`, runs it on the interpreter and on every backend, and
    /// reports every disagreement. A panic in a backend is caught and reported as a failure (its
    /// device is reopened).
    pub fn run_seed(&mut self, seed: u64) -> SeedReport {
        let preset = self.preset.clone().unwrap_or_else(|| presets::for_seed(seed));
        match generate(&preset.config, seed) {
            Ok(gp) => self.run_program(seed, preset.name, gp, Check::Tolerance),
            Err(e) => SeedReport::unrun(seed, preset.name, format!("generator: {e}")),
        }
    }

    /// Runs a given program on inputs drawn from `seed`, on the interpreter and on every backend,
    /// under `check`; `family` names where the program came from in the report. A panic in a
    /// backend is caught and reported as a failure (its device is reopened).
    pub fn run_program(&mut self, seed: u64, family: &'static str, gp: GeneratedProgram, check: Check) -> SeedReport {
        let mut report = SeedReport {
            seed,
            preset: family,
            program: None,
            failures: Vec::new(),
            stats: BTreeMap::new(),
            times: BTreeMap::new(),
        };
        let prepared = gp.random_inputs(seed).map_err(|e| format!("inputs: {e}")).and_then(|inputs| {
            run_graph(&gp.graph, &inputs).map(|out| (inputs, out)).map_err(|e| format!("interpreter: {e}"))
        });
        let (inputs, expected) = match prepared {
            Ok(x) => x,
            Err(e) => {
                report.failures.push(Failure::reference(e));
                report.program = Some(gp);
                return report;
            }
        };
        for b in self.backends.clone() {
            let start = Instant::now();
            let mut stats = ErrorStats::default();
            let outcome = catch_unwind(AssertUnwindSafe(|| self.check(b, &gp, &inputs, &expected, check, &mut stats)));
            let failures = match outcome {
                Ok(f) => f,
                Err(payload) => {
                    let what = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
                        .unwrap_or_else(|| "a panic".into());
                    // The device's cache lock may be poisoned: start over with a fresh one.
                    let _ = self.open(b);
                    vec![Failure { backend: Some(b), variant: "any".into(), message: format!("panicked: {what}") }]
                }
            };
            report.failures.extend(failures);
            report.stats.insert(b, stats);
            report.times.insert(b, start.elapsed());
        }
        report.program = Some(gp);
        report
    }

    /// Runs one backend on the program; every failure it finds.
    fn check(
        &self,
        b: Backend,
        gp: &GeneratedProgram,
        inputs: &[Tensor],
        expected: &[Tensor],
        check: Check,
        stats: &mut ErrorStats,
    ) -> Vec<Failure> {
        let g = &gp.graph;
        let mut failures = Vec::new();
        let mut fail = |variant: &str, message: String| {
            failures.push(Failure { backend: Some(b), variant: variant.to_string(), message });
        };
        let target = match b {
            Backend::InterpOptimized | Backend::Cranelift => Target::Cpu(CpuTier::Cranelift),
            Backend::Llvm => Target::Cpu(CpuTier::Llvm),
            Backend::Cuda => Target::Gpu(self.cuda_arch()),
        };
        let programs = match optimized(g, &gp.bindings, target, self.variants) {
            Ok(p) => p,
            Err(e) => {
                fail("optimizer", e);
                return failures;
            }
        };
        let tol = match (check, b) {
            (Check::Exact, _) => Tolerance::exact(),
            (Check::Tolerance, Backend::InterpOptimized) => tolerance::interp_optimized(g),
            (Check::Tolerance, _) => tolerance::backend(g),
        };
        for (variant, program) in &programs {
            let actual = match b {
                Backend::InterpOptimized => run_program(program, inputs).map_err(|e| e.to_string()),
                _ => self.run_compiled(b, program, inputs),
            };
            match actual {
                Ok(actual) => {
                    stats.add(expected, &actual, &tol);
                    if let Err(m) = compare(expected, &actual, &tol) {
                        fail(variant, m.to_string());
                    }
                }
                Err(e) => fail(variant, e),
            }
        }
        failures
    }

    #[cfg(feature = "gpu-tests")]
    fn cuda_arch(&self) -> GpuArch {
        self.cuda.as_ref().map_or(GpuArch::Sm90a, |d| d.info().arch)
    }

    #[cfg(not(feature = "gpu-tests"))]
    fn cuda_arch(&self) -> GpuArch {
        GpuArch::Sm90a
    }

    /// Runs `program` on the device of `b` (then empties its cache, so a long run does not grow).
    fn run_compiled(&self, b: Backend, program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let host: Vec<HostTensor> =
            inputs.iter().map(HostTensor::from_interp).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
        let out = match b {
            Backend::Cranelift | Backend::Llvm => {
                let device = if b == Backend::Cranelift { &self.cranelift } else { &self.llvm };
                let device = device.as_ref().ok_or_else(|| format!("{} is not open", b.name()))?;
                let out = device.run(program, &host).map_err(|e| e.to_string());
                device.clear_cache();
                out?
            }
            #[cfg(feature = "gpu-tests")]
            Backend::Cuda => {
                let device = self.cuda.as_ref().ok_or("cuda is not open")?;
                device.run_program(program, &host).map_err(|e| e.to_string())?
            }
            _ => return Err(format!("{} does not compile", b.name())),
        };
        Ok(out.iter().map(HostTensor::to_interp).collect())
    }
}

/// [`compare_outputs`] output by output; where `tol` allows outliers (a program with a
/// discontinuity), an output with at most [`tolerance::allowed_outliers`] values outside the bound
/// passes.
fn compare(expected: &[Tensor], actual: &[Tensor], tol: &Tolerance) -> Result<(), Mismatch> {
    if expected.len() != actual.len() {
        return Err(Mismatch::Count { expected: expected.len(), actual: actual.len() });
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        match compare_outputs(std::slice::from_ref(e), std::slice::from_ref(a), tol) {
            Ok(()) => {}
            Err(Mismatch::Value { bad, total, .. })
                if tol.outlier_fraction > 0.0 && bad <= tolerance::allowed_outliers(total) => {}
            Err(m) => return Err(renumber(m, i)),
        }
    }
    Ok(())
}

/// `m` (found comparing one output alone) as output `index` of the program.
fn renumber(m: Mismatch, index: usize) -> Mismatch {
    match m {
        Mismatch::Type { expected_dtype, expected_shape, actual_dtype, actual_shape, .. } => {
            Mismatch::Type { output: index, expected_dtype, expected_shape, actual_dtype, actual_shape }
        }
        Mismatch::Value { dtype, index: element, expected, actual, bound, bad, total, .. } => {
            Mismatch::Value { output: index, dtype, index: element, expected, actual, bound, bad, total }
        }
        other => other,
    }
}

/// The optimizer's best program for `target`; with [`Variants::All`] also its
/// first alternative and the whole graph as one generic kernel (the path that lowers any graph).
fn optimized(
    g: &Graph,
    bindings: &Bindings,
    target: Target,
    variants: Variants,
) -> Result<Vec<(String, Program)>, String> {
    let top_k = if variants == Variants::All { 1 } else { 0 };
    // The pipeline's first step, without lockfile or tuning cache: the optimizer's own schedules
    // are what is checked here (tuned ones are validated by the tuner before they are recorded).
    let options = tcc::pipeline::PlanOptions { explain: false, top_k };
    let o = tcc::pipeline::Pipeline::untuned(target)
        .optimize(g, bindings, options)
        .map_err(|e| format!("optimizer: {e}"))?;
    let mut programs = vec![("best".to_string(), o.program)];
    if variants == Variants::Best {
        return Ok(programs);
    }
    programs.extend(o.alternatives.into_iter().enumerate().map(|(i, p)| (format!("alternative {}", i + 1), p)));
    programs.push(("whole graph".to_string(), whole_graph(g, target)));
    Ok(programs)
}

/// `g` as one kernel of class Generic.
pub fn whole_graph(g: &Graph, target: Target) -> Program {
    let tier = target.tier();
    let outputs: Vec<ValueRef> = (0..g.outputs.len()).map(ValueRef::Buffer).collect();
    let launch = Launch {
        kernel: tcc_ir::Kernel {
            name: format!("{}_all", g.name),
            class: KernelClass::Generic,
            graph: g.clone(),
            schedule: Schedule::default_for(tier),
        },
        inputs: (0..g.params.len()).map(ValueRef::Param).collect(),
        outputs: outputs.clone(),
    };
    Program {
        name: g.name.clone(),
        params: g.params.clone(),
        buffers: g.outputs.iter().filter_map(|o| g.nodes.get(o.index()).map(|n| n.ty.clone())).collect(),
        launches: vec![launch],
        outputs,
    }
}

/// Totals of a run of many seeds.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Seeds run.
    pub programs: u64,
    /// Program × backend checks per backend.
    pub checked: BTreeMap<Backend, u64>,
    /// Failing seeds with their descriptions.
    pub failing: Vec<(u64, String)>,
    /// Error statistics per backend.
    pub stats: BTreeMap<Backend, ErrorStats>,
    /// Time per backend.
    pub times: BTreeMap<Backend, Duration>,
    /// What the programs exercised.
    pub coverage: coverage::Coverage,
}

impl Totals {
    /// Adds one seed's report.
    pub fn add(&mut self, r: &SeedReport) {
        self.programs += 1;
        for (b, s) in &r.stats {
            *self.checked.entry(*b).or_insert(0) += 1;
            self.stats.entry(*b).or_default().merge(s);
        }
        for (b, t) in &r.times {
            *self.times.entry(*b).or_default() += *t;
        }
        if let Some(p) = &r.program {
            self.coverage.add(p);
        }
        if !r.failures.is_empty() {
            self.failing.push((r.seed, r.describe()));
        }
    }

    /// A Markdown summary: counts per backend, worst error ratio per backend and dtype, failing
    /// seeds.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "{} programs, {} failing seeds.\n", self.programs, self.failing.len());
        let _ = writeln!(
            s,
            "| backend | programs | time (s) | worst error / bound: f32 | f16 | bf16 | i32 | bool | values outside (allowed outliers) |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (b, n) in &self.checked {
            let st = self.stats.get(b).cloned().unwrap_or_default();
            let cells: Vec<String> = tcc_ir::DType::ALL
                .iter()
                .map(|d| st.worst.get(d).map_or("-".to_string(), |w| format!("{w:.3}")))
                .collect();
            let outside: u64 = st.outside.values().sum();
            let compared: u64 = st.compared.values().sum();
            let t = self.times.get(b).map_or(0.0, Duration::as_secs_f64);
            let _ = writeln!(s, "| {} | {n} | {t:.0} | {} | {outside} of {compared} |", b.name(), cells.join(" | "));
        }
        for (seed, d) in &self.failing {
            let _ = writeln!(s, "\nFAILING seed {seed}:\n{d}");
        }
        s
    }
}
