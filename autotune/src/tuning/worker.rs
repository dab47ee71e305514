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

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use crate::Outcome;
pub use crate::search::worker::{COMPILED_MARKER, GO, WorkerError};
use crate::search::worker::{Check, Timing, validate_then_time};
use tcc_ir::{Bindings, Kernel, Launch, Program, Schedule, ValueRef};
use tcc_runtime::{CompiledProgram, CpuDevice, HostTensor};

use super::reference::{Reference, allowance, compare};
use tcc_ir::target::{CpuTier, Target};

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
            CpuDevice::for_tier(CpuTier::Cranelift, 0, true).map_err(|e| e.to_string())?
        }
        #[cfg(feature = "llvm")]
        Target::Cpu(CpuTier::Llvm) => {
            let threads = usize::try_from(schedule.threads).unwrap_or(0);
            CpuDevice::for_tier(CpuTier::Llvm, threads, true).map_err(|e| e.to_string())?
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

/// Serves one request of the tuner ([`crate::search::worker::serve`] with a [`Payload`]): compiles
/// the kernel under the candidate's schedule, then, after `go`, validates it against the reference
/// file and times it.
pub fn serve(input: impl BufRead, output: impl Write) -> Result<(), WorkerError> {
    crate::search::worker::serve(
        input,
        output,
        |request| serde_json::from_value::<Payload>(request.payload.clone()).map_err(|e| format!("payload: {e}")),
        |request, payload| compile(payload, &request.candidate.schedule),
        |request, payload, compiled| match Reference::read(&payload.reference) {
            Ok(reference) => measure(compiled, payload, &reference, &request.timing),
            Err(e) => Outcome::Failed { detail: format!("reference: {e}") },
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Candidate;
    use crate::search::worker::{PROTOCOL, WorkerRequest};
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
        assert!(matches!(crate::search::worker::parse_result(&text), Some(Outcome::Ok { .. })), "{text}");

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
        let outcome = crate::search::worker::parse_result(&String::from_utf8(out).unwrap());
        assert!(matches!(outcome, Some(Outcome::Failed { ref detail }) if detail.contains("tier ptx")), "{outcome:?}");
        // A reference file that went missing is a failed measurement, not a crash.
        std::fs::remove_file(&p.reference).unwrap();
        let mut out = Vec::new();
        serve(format!("{}\n{GO}\n", request(&p, p.kernel.schedule)).as_bytes(), &mut out).unwrap();
        let outcome = crate::search::worker::parse_result(&String::from_utf8(out).unwrap());
        assert!(
            matches!(outcome, Some(Outcome::Failed { ref detail }) if detail.starts_with("reference")),
            "{outcome:?}"
        );
    }
}
