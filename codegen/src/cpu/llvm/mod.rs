//! The LLVM x86 tier (feature `llvm`): loop kernels emitted as LLVM IR with explicit wide vectors
//! (`<16 x float>` with AVX-512, `<8 x float>` with AVX2, chosen from the host CPU at run time),
//! optimized at O3 for the host CPU and JIT-compiled into this process (MCJIT).
//!
//! The artifact has the same shape as the cranelift tier's: one function per phase with the
//! uniform ABI `extern "C" fn(bufs: *const *mut u8, row_begin: u64, row_end: u64)` (see
//! [`crate::cpu`]); phases run in order, rows of a phase may run on different threads.
//!
//! ```text
//!  LoopKernel --emit (per phase)--> LLVM IR text --parse, verify, O3--> MCJIT --> PhaseFn
//! ```

pub mod convert;
pub mod emit;
pub mod gemm;
pub mod host;
pub mod jit;
pub mod math;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use tcc_ir::{Bindings, Kernel, Op, Program, Schedule, Tier};

use crate::backend::Backend;
use crate::cpu::{PhaseFn, lower_kernel, tcc_powf};
use crate::error::CodegenError;
use crate::loops::{BufDecl, GemmTiles, LoopKernel, LowerOptions, resolve_dims};
use crate::symbols;
pub use host::HostCpu;
use jit::JitCode;

/// A kernel compiled by the LLVM tier: JIT'd code plus what the runtime needs to call it. The code
/// is freed when this value is dropped.
pub struct LlvmCpuKernel {
    name: String,
    bufs: Vec<BufDecl>,
    phases: Vec<PhaseFn>,
    code: Mutex<JitCode>,
}

impl std::fmt::Debug for LlvmCpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlvmCpuKernel")
            .field("name", &self.name)
            .field("phases", &self.phases)
            .field("code", &self.code)
            .finish_non_exhaustive()
    }
}

impl LlvmCpuKernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The buffers the functions expect, in pointer-array order.
    pub fn buffers(&self) -> &[BufDecl] {
        &self.bufs
    }

    /// The phases, in the order they must run; each entry stays valid while `self` lives.
    pub fn phases(&self) -> &[PhaseFn] {
        &self.phases
    }
}

/// The LLVM x86 code generator for the host CPU.
#[derive(Debug, Clone)]
pub struct LlvmCpuBackend {
    host: HostCpu,
    options: LowerOptions,
    tiles: GemmTiles,
    schedule_tiles: bool,
    threads: usize,
}

impl LlvmCpuBackend {
    /// A backend for the host CPU with the default lowering.
    pub fn new() -> Result<LlvmCpuBackend, CodegenError> {
        LlvmCpuBackend::with_options(LowerOptions::default())
    }

    /// A backend for the host CPU with the given lowering options (`gemm: None` lowers matmuls to
    /// plain loop nests; any `Some` uses register tiles sized for the host, see
    /// [`LlvmCpuBackend::default_tiles`]).
    pub fn with_options(options: LowerOptions) -> Result<LlvmCpuBackend, CodegenError> {
        Ok(LlvmCpuBackend::with_host(HostCpu::detect()?, options))
    }

    /// A backend generating code for `host` (which must describe this machine or a subset of it:
    /// the code runs here).
    pub fn with_host(host: HostCpu, options: LowerOptions) -> LlvmCpuBackend {
        let tiles = LlvmCpuBackend::default_tiles(host.lanes);
        LlvmCpuBackend {
            host,
            options,
            tiles,
            schedule_tiles: false,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }

    /// The same backend with matmul tiles `tiles` (`nr` a multiple of 4).
    pub fn with_tiles(mut self, tiles: GemmTiles) -> LlvmCpuBackend {
        self.tiles = tiles;
        self
    }

    /// The same backend taking matmul tiles from each kernel's schedule (for the autotuner) when
    /// `on`, instead of the host's default tiles.
    pub fn with_schedule_tiles(mut self, on: bool) -> LlvmCpuBackend {
        self.schedule_tiles = on;
        self
    }

    /// The matmul tiles used when the schedule's are not (before [`LlvmCpuBackend::tiles_for`]
    /// fits them to a kernel).
    pub fn tiles(&self) -> GemmTiles {
        self.tiles
    }

    /// The CPU the code is generated for.
    pub fn host(&self) -> &HostCpu {
        &self.host
    }

    /// The matmul tiles used when the schedule's are not: a `12 x 32` register tile with 16
    /// lanes (24 zmm accumulators; 14 loads per 24 FMAs), `6 x 16` with 8 lanes (12 ymm), `4 x 8`
    /// with 4; depth panels of 512, A blocks of 43 tiles (516 rows) (`nc` is unused: B is packed whole).
    /// (On the 2-core Zen machine, shared with others: 12x32, 6x64 and 8x48 register tiles were
    /// within its timing noise of each other; depth 512 beat 256 and 384 by a few percent.)
    pub fn default_tiles(lanes: u32) -> GemmTiles {
        let (mr, nr) = match lanes {
            16.. => (12, 32),
            8..=15 => (6, 16),
            _ => (4, 8),
        };
        GemmTiles { mr, nr, mc: mr * 43, nc: 1024, kc: 512 }
    }

    /// The same backend planning matmul row blocks for `threads` threads (default: every core).
    pub fn with_threads(mut self, threads: usize) -> LlvmCpuBackend {
        self.threads = threads.max(1);
        self
    }

    /// The tiles for `kernel`: the schedule's (see [`LlvmCpuBackend::with_schedule_tiles`]) or
    /// the backend's, shrunk to fit its first matmul: no more rows or columns than the matrix has,
    /// and (unless batches already give every thread work) at least one row block per thread.
    pub fn tiles_for(&self, kernel: &Kernel, bindings: &Bindings) -> GemmTiles {
        let lanes = self.host.lanes.max(4);
        if self.schedule_tiles {
            return LlvmCpuBackend::tiles_from_schedule(&kernel.schedule, lanes);
        }
        let mut t = self.tiles;
        let shape = kernel.graph.nodes.iter().find_map(|node| match node.op {
            Op::MatMul(..) => resolve_dims(&node.ty.shape, bindings).ok(),
            _ => None,
        });
        let Some(dims) = shape else { return t };
        let r = dims.len();
        let (Some(&m), Some(&n)) = (dims.get(r.wrapping_sub(2)), dims.get(r.wrapping_sub(1))) else {
            return t;
        };
        let batch: u64 = dims.iter().take(r.saturating_sub(2)).product();
        let small = |x: u64| u32::try_from(x).unwrap_or(u32::MAX).max(1);
        let round_up = |x: u32, k: u32| x.max(k).div_ceil(k) * k;
        t.mr = t.mr.min(small(m));
        if u64::from(t.nr) > n {
            t.nr = round_up(small(n), lanes.min(t.nr)).min(t.nr);
        }
        let threads = u64::try_from(self.threads).unwrap_or(1);
        if batch < threads {
            t.mc = t.mc.min(small(m.div_ceil(threads)));
        }
        t.mc = round_up(t.mc, t.mr);
        t.nc = round_up(t.nc, t.nr);
        t
    }

    /// Tiles from a schedule's knobs: `micro_n` rounded to a multiple of the lanes (at most four
    /// vectors), `micro_m` capped so that the tile fits in 28 vector registers, panels rounded to
    /// the tile.
    pub fn tiles_from_schedule(s: &Schedule, lanes: u32) -> GemmTiles {
        let lanes = lanes.max(4);
        let nr = (s.micro_n.clamp(lanes, 4 * lanes) / lanes) * lanes;
        let mr = s.micro_m.clamp(1, 16).min(28 * lanes / nr).max(1);
        GemmTiles::with_schedule_panels(s, mr, nr)
    }

    /// Lowers a kernel to the loop IR this backend emits (rows split where that is safe).
    pub fn lower(&self, kernel: &Kernel, bindings: &Bindings) -> Result<LoopKernel, CodegenError> {
        lower_kernel(kernel, bindings, self.options, || self.tiles_for(kernel, bindings))
    }

    /// The LLVM IR module of a loop kernel as emitted (before optimization), with the names of
    /// its phase functions.
    pub fn module_text(&self, lk: &LoopKernel) -> Result<(String, Vec<String>), CodegenError> {
        let mut decls = BTreeSet::new();
        let mut defs = String::new();
        let mut names = Vec::with_capacity(lk.phases.len());
        for (i, phase) in lk.phases.iter().enumerate() {
            let name = format!("phase{i}");
            let (text, d) = emit::emit_phase(lk, phase, &self.host, &name)?;
            defs.push_str(&text);
            decls.extend(d);
            names.push(name);
        }
        let header = format!("; kernel {}\n", lk.name.replace('\n', " "));
        Ok((self.module(header, decls, &defs), names))
    }

    /// A whole module: `header` (comment lines), the declarations once each, the definitions,
    /// then the host's attribute group `#0` that every function uses.
    fn module(&self, header: String, decls: BTreeSet<String>, defs: &str) -> String {
        let mut module = header;
        for d in decls {
            module.push_str(&d);
            module.push('\n');
        }
        module.push_str(defs);
        module.push_str(&format!("attributes #0 = {{ {} }}\n", self.host.attributes()));
        module
    }

    /// The optimized LLVM IR of a loop kernel (for `--emit llvm`).
    pub fn llvm_ir(&self, lk: &LoopKernel) -> Result<String, CodegenError> {
        let (text, _) = self.module_text(lk)?;
        jit::optimized_ir(&text, &self.host, &lk.name)
    }

    /// ONE LLVM IR module (as emitted, before optimization) for every kernel of `program` under
    /// `bindings`, with the names of each launch's phase functions (in launch order, then phase
    /// order).
    ///
    /// Each kernel is lowered and emitted as by [`LlvmCpuBackend::module_text`], with its phases
    /// named `{kernel}_phase{i}` (the kernel name made symbol-safe) instead of `phase{i}`; a name
    /// an earlier kernel or a declaration took becomes `{name}_k{launch}` (then `_2`, `_3`, ...).
    /// Declarations are kept once (two different ones of one name are an error) and the module
    /// has one attribute group, `#0`, the host's, shared by every function.
    pub fn program_module_text(
        &self,
        program: &Program,
        bindings: &Bindings,
    ) -> Result<(String, Vec<Vec<String>>), CodegenError> {
        let mut decls = BTreeSet::new();
        let mut kernels = Vec::with_capacity(program.launches.len());
        for launch in &program.launches {
            let lk = self.lower(&launch.kernel, bindings)?;
            let base = symbols::symbol(&lk.name);
            let mut phases = Vec::with_capacity(lk.phases.len());
            for (i, phase) in lk.phases.iter().enumerate() {
                let name = format!("{base}_phase{i}");
                let (text, d) = emit::emit_phase(&lk, phase, &self.host, &name)?;
                decls.extend(d);
                phases.push((name, text));
            }
            kernels.push((lk.name, phases));
        }
        let link = |message: String| CodegenError::Llvm { kernel: program.name.clone(), stage: "link", message };
        let mut declared: BTreeMap<&str, &str> = BTreeMap::new();
        for decl in &decls {
            let name = symbols::declared_name(decl).ok_or_else(|| link(format!("`{decl}` declares no name")))?;
            if let Some(earlier) = declared.insert(name, decl) {
                return Err(link(format!("`{earlier}` and `{decl}` declare one name twice")));
            }
        }
        let mut taken: BTreeSet<String> = declared.keys().map(|n| (*n).to_string()).collect();
        let mut module = format!("; program {}: {} kernel(s)\n", symbols::comment_text(&program.name), kernels.len());
        let mut defs = String::new();
        let mut names = Vec::with_capacity(kernels.len());
        for (launch, (kernel, phases)) in kernels.into_iter().enumerate() {
            let own: BTreeSet<String> = phases.iter().map(|(n, _)| n.clone()).collect();
            let map = symbols::renames(&own, launch, &mut taken);
            let final_names: Vec<String> =
                phases.iter().map(|(n, _)| map.get(n).cloned().unwrap_or_else(|| n.clone())).collect();
            module.push_str(&format!(
                "; kernel {} (launch {launch}): {}\n",
                symbols::comment_text(&kernel),
                final_names.join(", ")
            ));
            for (_, text) in &phases {
                defs.push_str(&symbols::rename(text, &map));
            }
            names.push(final_names);
        }
        Ok((self.module(module, decls, &defs), names))
    }

    /// The optimized LLVM IR of every kernel of `program` in ONE module (for `--emit llvm` on the
    /// CPU LLVM tier): [`LlvmCpuBackend::program_module_text`] after O3 for the host, with the
    /// host's target triple and data layout, so that `llc` accepts it as it is.
    pub fn program_llvm_ir(&self, program: &Program, bindings: &Bindings) -> Result<String, CodegenError> {
        let (text, _) = self.program_module_text(program, bindings)?;
        jit::optimized_ir(&text, &self.host, &program.name)
    }

    /// The host assembly of a loop kernel (for `--emit asm`).
    pub fn assembly(&self, lk: &LoopKernel) -> Result<String, CodegenError> {
        let (text, _) = self.module_text(lk)?;
        jit::assembly(&text, &self.host, &lk.name)
    }

    /// Compiles a loop kernel (every phase) to machine code in this process.
    pub fn compile_loops(&self, lk: &LoopKernel) -> Result<LlvmCpuKernel, CodegenError> {
        let (text, names) = self.module_text(lk)?;
        let powf: extern "C" fn(f32, f32) -> f32 = tcc_powf;
        let (code, entries) = jit::jit(&text, &names, &self.host, &lk.name, powf as usize)?;
        let phases =
            lk.phases.iter().zip(entries).map(|(p, entry)| PhaseFn { entry, rows: p.rows, work: p.work() }).collect();
        Ok(LlvmCpuKernel { name: lk.name.clone(), bufs: lk.bufs.clone(), phases, code: Mutex::new(code) })
    }
}

impl Backend for LlvmCpuBackend {
    type Artifact = LlvmCpuKernel;

    fn tier(&self) -> Tier {
        Tier::LlvmCpu
    }

    fn compile(&self, kernel: &Kernel, bindings: &Bindings) -> Result<LlvmCpuKernel, CodegenError> {
        let lk = self.lower(kernel, bindings)?;
        self.compile_loops(&lk)
    }
}
