//! Kernels as the `kernel!` macro embeds them: checked IR text, prepared on first use.
//!
//! ```text
//!  kernel! { fn f(..) }  ──compile time──▶  front end checks, IR text embedded in a static Kernel
//!  first call of f       ──▶ parse the IR text, verify (once per process)
//!                        ──▶ optimize for the device's target model (once per target)
//!                        ──▶ bind shape variables from the arguments; compile for those bindings
//!                            (once per device and bindings: see crate::Device)
//!  later calls           ──▶ bind, reuse the compiled program, run
//! ```
//!
//! Every "once" above is a lock-protected cell: threads calling the same kernel at the same time
//! wait for the one thread doing the work.
//!
//! Tuning cache: at the per-bindings compile step, each kernel's schedule is replaced by its locked
//! winner (lockfile `$TCC_LOCKFILE`, else `tcc.lock` in the working directory) or its cached winner
//! from `tcc tune` (the same local cache, `TCC_CACHE_DIR`). Records measured on another machine are
//! not re-checked from a user's executable (that needs a `tcc worker`); they are left unused until
//! `tcc tune` or `tcc run` validates them.

mod args;

use std::sync::{Arc, Mutex, OnceLock};

use tcc_ir::Graph;
use tcc_ir::Program;
use tcc_ir::target::Target;
use tcc_passes::PassError;
use tcc_runtime::{CpuDevice, HostTensor, HostView};

pub use args::{IntoTensor, TensorArg};

use crate::device::{Device, DeviceTensor};
use crate::error::Error;
use crate::pipeline::{Pipeline, PipelineError, PlanOptions};

/// A program optimized for one target, with the fingerprint its compiled forms are cached under.
#[derive(Debug)]
struct Optimized {
    program: Program,
    fingerprint: String,
}

type OptimizedCell = Arc<OnceLock<Result<Arc<Optimized>, PassError>>>;

/// A tensor function embedded as IR text, parsed and optimized on first use.
///
/// The `kernel!` macro puts one in a `static` for each `fn` it checks; it can also be built by
/// hand from the text form of [`tcc_ir::text`]. All methods take `&self` and are thread-safe.
#[derive(Debug)]
pub struct Kernel {
    name: &'static str,
    ir: &'static str,
    graph: OnceLock<Result<Graph, String>>,
    optimized: Mutex<Vec<(Target, OptimizedCell)>>,
}

impl Kernel {
    /// A kernel named `name` whose program is the canonical IR text `ir` (one function, the
    /// output of [`tcc_ir::text::print_graph`]). Nothing is parsed until the first use.
    pub const fn from_ir(name: &'static str, ir: &'static str) -> Kernel {
        Kernel { name, ir, graph: OnceLock::new(), optimized: Mutex::new(Vec::new()) }
    }

    /// The function's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The embedded IR text.
    pub fn ir(&self) -> &'static str {
        self.ir
    }

    /// The checked graph (parsed and verified on first use): what the interpreter runs and the
    /// optimizer starts from.
    pub fn graph(&self) -> Result<&Graph, Error> {
        let parsed = self.graph.get_or_init(|| {
            let g = tcc_ir::text::parse_graph(self.ir).map_err(|e| format!("it does not parse: {e}"))?;
            tcc_ir::verify::verify(&g).map_err(|e| format!("it does not verify: {e}"))?;
            if g.name != self.name {
                return Err(format!("it defines `{}`", g.name));
            }
            Ok(g)
        });
        parsed.as_ref().map_err(|message| Error::Ir { kernel: self.name.to_string(), message: message.clone() })
    }

    /// Names of the parameters, in order.
    pub fn param_names(&self) -> Result<Vec<&str>, Error> {
        Ok(self.graph()?.params.iter().map(|p| p.name.as_str()).collect())
    }

    /// The program optimized by `pipeline` (once per target; later calls share it).
    fn optimized(&self, pipeline: &Pipeline) -> Result<Arc<Optimized>, Error> {
        let graph = self.graph()?;
        let target = pipeline.target();
        let cell = {
            let mut cells = self.optimized.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match cells.iter().find(|(t, _)| *t == target) {
                Some((_, cell)) => cell.clone(),
                None => {
                    let cell = OptimizedCell::default();
                    cells.push((target, cell.clone()));
                    cell
                }
            }
        };
        let result = cell.get_or_init(|| {
            let program = pipeline
                .optimize(graph, &tcc_ir::Bindings::new(), PlanOptions::default())
                .map_err(|e| match e {
                    PipelineError::Optimizer { message, .. } => PassError::Internal(message),
                    other => PassError::Internal(other.to_string()),
                })?
                .program;
            let fingerprint = CpuDevice::fingerprint(&program).map_err(|e| PassError::Internal(e.to_string()))?;
            Ok(Arc::new(Optimized { program, fingerprint }))
        });
        result.clone().map_err(|source| Error::Optimize {
            kernel: self.name.to_string(),
            target: target.name().to_string(),
            source: Box::new(source),
        })
    }

    /// The optimized program this kernel runs on `device` (`None` on the interpreter, which runs
    /// [`Kernel::graph`] as it is).
    pub fn program_for(&self, device: &Device) -> Result<Option<Program>, Error> {
        match device.pipeline() {
            Some(pipeline) => Ok(Some(self.optimized(pipeline)?.program.clone())),
            None => Ok(None),
        }
    }

    /// Runs the kernel on `device`: converts the arguments (one per parameter, in order), binds the
    /// shape variables from their shapes (a mismatch is an [`Error::Shape`] naming the parameter
    /// and both shapes), compiles for those bindings unless `device` already has, and returns the
    /// outputs in order.
    pub fn run(&self, device: &Device, args: Vec<TensorArg<'_>>) -> Result<Vec<HostTensor>, Error> {
        let graph = self.graph()?;
        if args.len() != graph.params.len() {
            return Err(Error::InputCount {
                kernel: self.name.to_string(),
                expected: graph.params.len(),
                got: args.len(),
            });
        }
        if args.iter().any(TensorArg::is_device) {
            // Device tensors stay where they are: run there, then copy the outputs back.
            let outputs = self.run_device(device, args)?;
            return outputs.iter().map(|t| device.download(t)).collect();
        }
        let held = args
            .into_iter()
            .zip(&graph.params)
            .map(|(a, p)| a.into_host(self.name, &p.name, device))
            .collect::<Result<Vec<_>, _>>()?;
        let inputs: Vec<HostView<'_>> = held.iter().map(args::HostArg::view).collect();
        let bindings = tcc_runtime::bind::bind_views(self.name, &graph.params, &inputs)
            .map_err(|e| Error::from_binding(self.name, e))?;
        let outputs = match device.pipeline() {
            Some(pipeline) => {
                let opt = self.optimized(pipeline)?;
                self.within_limit(device, |limit| crate::memory::check_program(&opt.program, &bindings, limit))?;
                device.execute(self.name, &opt.program, &opt.fingerprint, &bindings, &inputs)?
            }
            None => {
                self.within_limit(device, |limit| crate::memory::check_graph(graph, &bindings, limit))?;
                self.interpret(graph, &inputs)?
            }
        };
        self.check_output_count(device, outputs.len(), graph.outputs.len())?;
        Ok(outputs)
    }

    /// [`Kernel::run`] for a kernel with exactly `N` outputs, as an array (what the code the macro
    /// generates destructures).
    pub fn run_array<const N: usize>(
        &self,
        device: &Device,
        args: Vec<TensorArg<'_>>,
    ) -> Result<[HostTensor; N], Error> {
        let outputs = self.run(device, args)?;
        self.outputs_array(outputs)
    }

    /// Runs the kernel on a CUDA `device` and leaves the outputs in its memory: arguments already
    /// in that device's memory ([`DeviceTensor`]) are used in place, host ones are uploaded for
    /// the call. Shapes bind as in [`Kernel::run`]; a device that is not a CUDA GPU, or a device
    /// tensor of another device, is an error naming the parameter.
    pub fn run_device(&self, device: &Device, args: Vec<TensorArg<'_>>) -> Result<Vec<DeviceTensor>, Error> {
        let graph = self.graph()?;
        if args.len() != graph.params.len() {
            return Err(Error::InputCount {
                kernel: self.name.to_string(),
                expected: graph.params.len(),
                got: args.len(),
            });
        }
        let resident = args
            .into_iter()
            .zip(&graph.params)
            .map(|(a, p)| a.into_resident(self.name, &p.name, device))
            .collect::<Result<Vec<_>, _>>()?;
        let bindings = args::bind_shapes(self.name, &graph.params, resident.iter().map(|r| r.dtype_shape()))?;
        device.require_cuda(&format!("kernel `{}` with outputs in device memory", self.name))?;
        let pipeline = device.pipeline().ok_or_else(|| Error::Internal {
            kernel: self.name.to_string(),
            message: format!("{} has no pipeline", device.name()),
        })?;
        let opt = self.optimized(pipeline)?;
        self.within_limit(device, |limit| crate::memory::check_program(&opt.program, &bindings, limit))?;
        let outputs = device.execute_resident(self.name, &opt.program, &opt.fingerprint, &bindings, resident)?;
        self.check_output_count(device, outputs.len(), graph.outputs.len())?;
        Ok(outputs)
    }

    /// [`Kernel::run_device`] for a kernel with exactly `N` outputs, as an array (what the code the
    /// macro generates for `on_device` destructures).
    pub fn run_device_array<const N: usize>(
        &self,
        device: &Device,
        args: Vec<TensorArg<'_>>,
    ) -> Result<[DeviceTensor; N], Error> {
        let outputs = self.run_device(device, args)?;
        self.outputs_array(outputs)
    }

    /// Runs `check` with `device`'s memory limit, if it has one ([`Device::with_max_memory`]):
    /// [`Error::MemoryLimit`] when the run would exceed it.
    fn within_limit(
        &self,
        device: &Device,
        check: impl FnOnce(u64) -> Result<(), crate::memory::MemoryError>,
    ) -> Result<(), Error> {
        match device.max_memory() {
            Some(limit) => check(limit).map_err(|source| Error::MemoryLimit { kernel: self.name.to_string(), source }),
            None => Ok(()),
        }
    }

    /// An error unless the device returned as many outputs as the kernel has.
    fn check_output_count(&self, device: &Device, got: usize, expected: usize) -> Result<(), Error> {
        if got == expected {
            return Ok(());
        }
        Err(Error::Internal {
            kernel: self.name.to_string(),
            message: format!("{} returned {got} outputs, expected {expected}", device.name()),
        })
    }

    /// The outputs as an array of the `N` the caller expects.
    fn outputs_array<T, const N: usize>(&self, outputs: Vec<T>) -> Result<[T; N], Error> {
        let got = outputs.len();
        <[T; N]>::try_from(outputs).map_err(|_| Error::Internal {
            kernel: self.name.to_string(),
            message: format!("the kernel has {got} outputs, the caller expects {N}"),
        })
    }

    fn interpret(&self, graph: &Graph, inputs: &[HostView<'_>]) -> Result<Vec<HostTensor>, Error> {
        let tensors: Vec<_> = inputs.iter().map(HostView::to_interp).collect();
        let outputs = tcc_ir::interp::run_graph(graph, &tensors)
            .map_err(|source| Error::Interp { kernel: self.name.to_string(), source: Box::new(source) })?;
        outputs
            .iter()
            .map(|t| {
                HostTensor::from_interp(t).map_err(|e| Error::Internal {
                    kernel: self.name.to_string(),
                    message: format!("an interpreter output: {e}"),
                })
            })
            .collect()
    }
}
