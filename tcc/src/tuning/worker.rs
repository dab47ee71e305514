//! The worker side of measuring one candidate (`tcc worker`, a child process of the tuner):
//!
//! 1. read one [`WorkerRequest`] line whose payload is a [`Payload`];
//! 2. compile the kernel under the candidate's schedule as a one-launch program and print
//!    [`COMPILED_MARKER`] (the tuner compiles several candidates at once this way);
//! 3. wait for a `go` line, then validate the outputs against the reference file and time the
//!    program (warm-up, then the median of the repeats), and print the result line.
//!
//! A hang, a crash or a fault here kills this process only; the tuner reports the candidate as
//! failed and goes on.

use std::io::{BufRead, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use tcc_autotune::Outcome;
use tcc_autotune::search::worker::{
    Check, MAX_REQUEST_BYTES, PROTOCOL, RESULT_MARKER, Timing, WorkerRequest, validate_then_time,
};
use tcc_ir::{Bindings, Kernel, Launch, Program, Schedule, ValueRef};
use tcc_runtime::{CompiledProgram, CpuDevice, HostTensor};

use super::reference::{Reference, allowance, compare};
use tcc_ir::target::{CpuTier, Target};

/// The line a worker prints once its candidate is compiled; it then waits for [`GO`].
pub const COMPILED_MARKER: &str = "TCC-WORKER-COMPILED";

/// The line that tells a compiled worker to validate and time.
pub const GO: &str = "go";

/// What the tuner sends a worker besides the candidate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Payload {
    /// The kernel (its schedule is replaced by the candidate's).
    pub kernel: Kernel,
    /// Sizes of its shape variables.
    pub bindings: Bindings,
    /// The reference file (inputs and expected outputs) written by the tuner.
    pub reference: PathBuf,
    /// What to measure on.
    pub target: Target,
    /// When set, the candidate is the known-good kernel: its outputs are not compared but written,
    /// with the inputs, as a complete reference file at this path.
    #[serde(default)]
    pub produce: Option<PathBuf>,
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

/// A one-launch program running `kernel` on the program's parameters, writing one buffer per
/// kernel output and returning them.
pub fn one_launch_program(kernel: &Kernel) -> Result<Program, String> {
    let g = &kernel.graph;
    let buffers = g
        .outputs
        .iter()
        .map(|&o| g.ty(o).cloned().ok_or_else(|| format!("kernel `{}` has an untyped output", kernel.name)))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs: Vec<ValueRef> = (0..buffers.len()).map(ValueRef::Buffer).collect();
    Ok(Program {
        name: kernel.name.clone(),
        params: g.params.clone(),
        buffers,
        launches: vec![Launch {
            kernel: kernel.clone(),
            inputs: (0..g.params.len()).map(ValueRef::Param).collect(),
            outputs: outputs.clone(),
        }],
        outputs,
    })
}

/// A compiled candidate.
pub enum Compiled {
    /// On a CPU tier: the program and the device it runs on.
    Cpu {
        /// The compiled program.
        program: Arc<CompiledProgram>,
        /// Its device (owns the thread pool).
        device: CpuDevice,
    },
    /// For the GPU: the PTX (loaded only when measured).
    #[cfg(feature = "llvm")]
    Gpu(tcc_codegen::ptx::PtxKernel),
}

/// Compiles `payload`'s kernel under `schedule` for `payload.target`.
pub fn compile(payload: &Payload, schedule: &Schedule) -> Result<Compiled, String> {
    let target = payload.target;
    if schedule.tier != target.tier() {
        return Err(format!("schedule of tier {} on the {} target", schedule.tier.name(), target.name()));
    }
    let kernel = Kernel { schedule: *schedule, ..payload.kernel.clone() };
    let device = match target {
        // The cranelift tier honours `threads` when it runs; the LLVM tier plans its row blocks for it.
        Target::Cpu(CpuTier::Cranelift) => {
            crate::pipeline::cpu_device(CpuTier::Cranelift, 0, true).map_err(|e| e.to_string())?
        }
        #[cfg(feature = "llvm")]
        Target::Cpu(CpuTier::Llvm) => {
            let threads = usize::try_from(schedule.threads).unwrap_or(0);
            crate::pipeline::cpu_device(CpuTier::Llvm, threads, true).map_err(|e| e.to_string())?
        }
        #[cfg(feature = "llvm")]
        Target::Gpu(arch) => return super::gpu::compile(&kernel, &payload.bindings, arch).map(Compiled::Gpu),
        Target::Interp => return Err("the interpreter has no schedules to measure".into()),
        #[cfg(not(feature = "llvm"))]
        Target::Cpu(CpuTier::Llvm) | Target::Gpu(_) => {
            return Err(format!("this worker has no LLVM: it cannot compile for {}", target.name()));
        }
    };
    let program = one_launch_program(&kernel)?;
    let compiled = device.compile(&program, &payload.bindings).map_err(|e| e.to_string())?;
    Ok(Compiled::Cpu { program: compiled, device })
}

/// Validates a compiled candidate against `reference`, then times it as `timing` says. With
/// `payload.produce` set, writes the outputs as a complete reference file instead of comparing.
pub fn measure(compiled: &Compiled, payload: &Payload, reference: &Reference, timing: &Timing) -> Outcome {
    match compiled {
        Compiled::Cpu { program, .. } => {
            let validate = || {
                let outputs = program.run(&reference.inputs).map_err(|e| e.to_string())?;
                check(payload, reference, outputs)
            };
            let run = || program.run(&reference.inputs).map(drop).map_err(|e| e.to_string());
            validate_then_time(timing, validate, run)
        }
        #[cfg(feature = "llvm")]
        Compiled::Gpu(ptx) => {
            match super::gpu::measure(
                &payload.kernel,
                &payload.bindings,
                ptx,
                reference,
                timing,
                payload.produce.is_some(),
            ) {
                Ok((outcome, outputs)) => {
                    if let (Outcome::Ok { .. }, Some(_)) = (&outcome, &payload.produce)
                        && let Err(detail) = check(payload, reference, outputs)
                    {
                        return Outcome::Failed { detail };
                    }
                    outcome
                }
                Err(detail) => Outcome::Failed { detail },
            }
        }
    }
}

/// Compares `outputs` with the reference, or writes them as the reference when producing one.
fn check(payload: &Payload, reference: &Reference, outputs: Vec<HostTensor>) -> Result<Check, String> {
    match &payload.produce {
        Some(path) => {
            let full = Reference { inputs: reference.inputs.clone(), expected: outputs };
            full.write(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(Check::Pass)
        }
        None => Ok(match compare(&reference.expected, &outputs, allowance(&payload.kernel, &payload.bindings)) {
            Ok(()) => Check::Pass,
            Err(detail) => Check::Wrong(detail),
        }),
    }
}

/// Serves one request: reads it from `input`, compiles, announces [`COMPILED_MARKER`] on `output`,
/// waits for [`GO`], measures and writes the result line. A compile or measurement failure is a
/// result (`Ok`); a request that cannot be understood is an error (after a result line saying so).
/// If the input ends instead of saying `go`, nothing is measured.
pub fn serve(mut input: impl BufRead, mut output: impl Write) -> Result<(), WorkerError> {
    let mut line = String::new();
    (&mut input).take(MAX_REQUEST_BYTES).read_line(&mut line)?;
    let parsed = parse_request(&line);
    let (request, payload) = match parsed {
        Ok(p) => p,
        Err(e) => {
            write_result(&mut output, &Outcome::Failed { detail: e.to_string() })?;
            return Err(e);
        }
    };
    let compiled = catch_unwind(AssertUnwindSafe(|| compile(&payload, &request.candidate.schedule)))
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
    let outcome = match Reference::read(&payload.reference) {
        Ok(reference) => catch_unwind(AssertUnwindSafe(|| measure(&compiled, &payload, &reference, &request.timing)))
            .unwrap_or_else(|_| Outcome::Failed { detail: "the worker panicked while measuring".into() }),
        Err(e) => Outcome::Failed { detail: format!("reference: {e}") },
    };
    write_result(&mut output, &outcome)
}

fn parse_request(line: &str) -> Result<(WorkerRequest, Payload), WorkerError> {
    let request: WorkerRequest = serde_json::from_str(line).map_err(|e| WorkerError::BadRequest(e.to_string()))?;
    if request.protocol != PROTOCOL {
        return Err(WorkerError::BadRequest(format!("protocol {}, this worker speaks {PROTOCOL}", request.protocol)));
    }
    let payload: Payload = serde_json::from_value(request.payload.clone())
        .map_err(|e| WorkerError::BadRequest(format!("payload: {e}")))?;
    Ok((request, payload))
}

fn write_result(output: &mut impl Write, outcome: &Outcome) -> Result<(), WorkerError> {
    let json = serde_json::to_string(outcome).map_err(std::io::Error::other)?;
    writeln!(output, "{RESULT_MARKER}{json}")?;
    output.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcc_autotune::Candidate;
    use tcc_ir::{BinaryOp, DType, Graph, KernelClass, Op, Shape, TensorType, Tier};

    fn payload(dir: &std::path::Path) -> Payload {
        let mut g = Graph::new("k");
        let x = g.add_param("x", TensorType { dtype: DType::F32, shape: Shape::from_consts(&[3, 5]) }).unwrap();
        let y = g.push(Op::Binary(BinaryOp::Mul, x, x)).unwrap();
        g.outputs = vec![y];
        let kernel = Kernel {
            name: "k0".into(),
            class: KernelClass::Pointwise,
            graph: g,
            schedule: Schedule::default_for(Tier::Cranelift),
        };
        let reference = dir.join("k.ref");
        Reference::compute(&kernel, &Bindings::new(), 1, 1 << 20).unwrap().write(&reference).unwrap();
        Payload { kernel, bindings: Bindings::new(), reference, target: Target::Cpu(CpuTier::Cranelift), produce: None }
    }

    fn request(payload: &Payload, schedule: Schedule) -> String {
        let r = WorkerRequest {
            protocol: PROTOCOL,
            payload: serde_json::to_value(payload).unwrap(),
            artifact: None,
            candidate: Candidate { variant: 0, schedule, cost: 0.0 },
            timing: Timing { warmup: 1, repeats: 3 },
            seed: 0,
        };
        serde_json::to_string(&r).unwrap()
    }

    #[test]
    fn compiles_then_waits_for_go_then_measures() {
        let dir = tempfile::tempdir().unwrap();
        let p = payload(dir.path());
        let line = request(&p, Schedule { threads: 1, ..p.kernel.schedule });
        let mut out = Vec::new();
        serve(format!("{line}\n{GO}\n").as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(COMPILED_MARKER), "{text}");
        assert!(matches!(tcc_autotune::search::worker::parse_result(&text), Some(Outcome::Ok { .. })), "{text}");

        // Without `go`, nothing is measured.
        let mut out = Vec::new();
        serve(format!("{line}\n").as_bytes(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().trim(), COMPILED_MARKER);
    }

    #[test]
    fn bad_requests_and_foreign_schedules_fail() {
        let dir = tempfile::tempdir().unwrap();
        let p = payload(dir.path());
        let mut out = Vec::new();
        assert!(matches!(serve("{}\n".as_bytes(), &mut out), Err(WorkerError::BadRequest(_))));
        let ptx = request(&p, Schedule::default_for(Tier::Ptx));
        let mut out = Vec::new();
        serve(format!("{ptx}\n{GO}\n").as_bytes(), &mut out).unwrap();
        let outcome = tcc_autotune::search::worker::parse_result(&String::from_utf8(out).unwrap());
        assert!(matches!(outcome, Some(Outcome::Failed { ref detail }) if detail.contains("tier ptx")), "{outcome:?}");
        // A reference file that went missing is a failed measurement, not a crash.
        std::fs::remove_file(&p.reference).unwrap();
        let mut out = Vec::new();
        serve(format!("{}\n{GO}\n", request(&p, p.kernel.schedule)).as_bytes(), &mut out).unwrap();
        let outcome = tcc_autotune::search::worker::parse_result(&String::from_utf8(out).unwrap());
        assert!(
            matches!(outcome, Some(Outcome::Failed { ref detail }) if detail.starts_with("reference")),
            "{outcome:?}"
        );
    }
}
