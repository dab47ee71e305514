//! What the optimizer did and why: phases with their stop reasons and e-graph sizes, and per kernel
//! the fused ops, schedule, the model's estimate and the rules that formed it. Its `Display` is what
//! `tcc explain` prints; [`Report::to_dot`] draws the kernel graph for Graphviz.

use std::fmt;

use tcc_ir::{KernelClass, Schedule, ScheduleKind, ScheduleSource};

/// Why a saturation phase stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    /// No rule could add anything: every alternative within the rules was found.
    Saturated,
    /// The iteration limit was reached.
    IterationLimit(usize),
    /// The node limit was reached.
    NodeLimit(usize),
    /// The wall-time safety net fired (results may then differ between machines).
    TimeLimit(f64),
    /// Anything else egg reports.
    Other(String),
}

impl StopReason {
    /// Converts egg's stop reason.
    pub fn from_egg(r: Option<&egg::StopReason>) -> StopReason {
        match r {
            Some(egg::StopReason::Saturated) | None => StopReason::Saturated,
            Some(egg::StopReason::IterationLimit(n)) => StopReason::IterationLimit(*n),
            Some(egg::StopReason::NodeLimit(n)) => StopReason::NodeLimit(*n),
            Some(egg::StopReason::TimeLimit(t)) => StopReason::TimeLimit(*t),
            Some(egg::StopReason::Other(s)) => StopReason::Other(s.clone()),
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Saturated => f.write_str("saturated"),
            StopReason::IterationLimit(n) => write!(f, "iteration limit ({n})"),
            StopReason::NodeLimit(n) => write!(f, "node limit ({n})"),
            StopReason::TimeLimit(t) => write!(f, "time limit ({t:.3} s)"),
            StopReason::Other(s) => write!(f, "stopped: {s}"),
        }
    }
}

/// One saturation phase.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    /// `algebra+layout`, `fusion` or `schedules`.
    pub name: &'static str,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Iterations run.
    pub iterations: usize,
    /// E-nodes at the end.
    pub nodes: usize,
    /// E-classes at the end.
    pub classes: usize,
    /// How often each rule added something, sorted by rule name.
    pub rules_applied: Vec<(String, usize)>,
}

/// One kernel of the chosen program.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelReport {
    /// The kernel's name in the program.
    pub name: String,
    /// Its class.
    pub class: KernelClass,
    /// The kinds of the ops it fuses, in order.
    pub ops: Vec<String>,
    /// Its schedule.
    pub schedule: Schedule,
    /// The schedule as its family reads it (what reports print).
    pub kind: ScheduleKind,
    /// Where the schedule came from (the optimizer's: `default`; the pipeline sets the others).
    pub source: ScheduleSource,
    /// The model's estimate, microseconds.
    pub estimate_us: f64,
    /// True when memory traffic bounds it, false when arithmetic does.
    pub memory_bound: bool,
    /// The fusion rules that formed it, in the order they fired (empty for a single op).
    pub rules: Vec<String>,
    /// What it reads: parameter names or kernel names.
    pub inputs: Vec<String>,
    /// With [`crate::OptimizeOptions::explain`]: the rules on egg's proof that the kernel equals
    /// the ops it replaces, in proof order.
    pub explanation: Option<Vec<String>>,
}

/// The optimizer's account of one compile.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The function optimized.
    pub function: String,
    /// The target's name.
    pub target: String,
    /// The first phase's stop reason that was not saturation, or saturation.
    pub stop_reason: StopReason,
    /// Iterations over all phases.
    pub iterations: usize,
    /// The largest e-graph's node count (the fusion phase's, with schedule variants).
    pub egraph_nodes: usize,
    /// That e-graph's class count.
    pub egraph_classes: usize,
    /// The phases in order.
    pub phases: Vec<PhaseReport>,
    /// The chosen kernels in launch order.
    pub kernels: Vec<KernelReport>,
    /// Which values the program returns (parameter or kernel names).
    pub outputs: Vec<String>,
    /// The model's estimate of the whole program, microseconds.
    pub total_us: f64,
    /// Kernels of the unfused baseline (one per op), for comparison.
    pub unfused_kernels: usize,
    /// Number of alternative programs returned.
    pub alternatives: usize,
    /// Anything unusual (fallbacks taken).
    pub notes: Vec<String>,
    /// Proof steps walked to explain the kernels (0 without explanations): what `tcc explain`
    /// costs beyond optimizing, bounded by a test on a large program.
    pub proof_steps: usize,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

impl Report {
    /// The kernel graph in Graphviz dot: parameters, kernels (with class, ops and estimate) and
    /// outputs, with an edge for every tensor a kernel reads.
    pub fn to_dot(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "digraph \"{}\" {{\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n",
            escape(&self.function)
        ));
        let mut params: Vec<&String> = self.kernels.iter().flat_map(|k| k.inputs.iter()).chain(&self.outputs).collect();
        params.retain(|p| !self.kernels.iter().any(|k| &k.name == *p));
        params.sort();
        params.dedup();
        for p in params {
            s.push_str(&format!("  \"{}\" [shape=ellipse];\n", escape(p)));
        }
        for k in &self.kernels {
            let label = format!(
                "{}\\n{}: {}\\n{:.2} us, {}-bound",
                escape(&k.name),
                k.class.name(),
                escape(&k.ops.join(" ")),
                k.estimate_us,
                if k.memory_bound { "memory" } else { "compute" }
            );
            s.push_str(&format!("  \"{}\" [shape=box, label=\"{label}\"];\n", escape(&k.name)));
            for i in &k.inputs {
                s.push_str(&format!("  \"{}\" -> \"{}\";\n", escape(i), escape(&k.name)));
            }
        }
        for (i, o) in self.outputs.iter().enumerate() {
            s.push_str(&format!("  \"out{i}\" [shape=doublecircle];\n  \"{}\" -> \"out{i}\";\n", escape(o)));
        }
        s.push_str("}\n");
        s
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fn {} on {}: {} kernels (unfused: {}), estimated {:.2} us",
            self.function,
            self.target,
            self.kernels.len(),
            self.unfused_kernels,
            self.total_us
        )?;
        for p in &self.phases {
            writeln!(
                f,
                "  phase {}: {}, {} iterations, {} e-nodes in {} classes",
                p.name, p.stop_reason, p.iterations, p.nodes, p.classes
            )?;
            if !p.rules_applied.is_empty() {
                let rules: Vec<String> = p.rules_applied.iter().map(|(r, n)| format!("{r} x{n}")).collect();
                writeln!(f, "    rules: {}", rules.join(", "))?;
            }
        }
        for k in &self.kernels {
            writeln!(
                f,
                "  {} [{}] {:.2} us, {}-bound",
                k.name,
                k.class.name(),
                k.estimate_us,
                if k.memory_bound { "memory" } else { "compute" }
            )?;
            writeln!(f, "    fuses: {}", k.ops.join(", "))?;
            writeln!(f, "    reads: {}", k.inputs.join(", "))?;
            writeln!(f, "    schedule: {} ({})", k.kind, k.source)?;
            if !k.rules.is_empty() {
                writeln!(f, "    formed by: {}", k.rules.join(" -> "))?;
            }
            if let Some(proof) = &k.explanation {
                writeln!(f, "    egg explanation: {}", proof.join(", "))?;
            }
        }
        writeln!(f, "  returns: {}", self.outputs.join(", "))?;
        if self.alternatives > 0 {
            writeln!(f, "  {} alternative programs for the autotuner", self.alternatives)?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        Ok(())
    }
}
