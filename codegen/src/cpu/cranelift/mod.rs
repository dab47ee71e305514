//! The cranelift tier: loop kernels JIT-compiled for the host CPU, one function per phase with
//! the uniform ABI (see [`crate::cpu`]).

pub mod convert;
pub mod emit;
pub mod math;
pub mod simd;
pub mod tile;

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use cranelift_codegen::ir::{AbiParam, types};
use cranelift_codegen::isa::CallConv;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module};
use tcc_ir::{Bindings, Kernel, Tier};

use crate::backend::Backend;
use crate::cpu::target::{self, CpuCaps};
use crate::cpu::{PhaseFn, lower_kernel, tcc_powf};
use crate::error::CodegenError;
use crate::loops::{BufDecl, GemmTiles, LoopKernel, LowerOptions, Phase, Stmt};
use tile::TileShape;

/// The cranelift code generator for the host CPU.
pub struct CraneliftBackend {
    isa: OwnedTargetIsa,
    caps: CpuCaps,
    options: LowerOptions,
}

impl std::fmt::Debug for CraneliftBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CraneliftBackend").field("caps", &self.caps).field("options", &self.options).finish()
    }
}

/// A compiled kernel: JIT'd code plus what the runtime needs to call it.
pub struct CpuKernel {
    name: String,
    bufs: Vec<BufDecl>,
    phases: Vec<PhaseFn>,
    module: Mutex<JITModule>,
}

impl std::fmt::Debug for CpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuKernel").field("name", &self.name).field("phases", &self.phases).finish_non_exhaustive()
    }
}

impl CpuKernel {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The buffers the function expects, in pointer-array order.
    pub fn buffers(&self) -> &[BufDecl] {
        &self.bufs
    }

    /// The phases, in the order they must run.
    pub fn phases(&self) -> &[PhaseFn] {
        &self.phases
    }

    /// Gives up the code's memory owner; the caller frees it (after the last call) with
    /// `JITModule::free_memory`. Dropping a `CpuKernel` without doing so leaks the code.
    pub fn into_module(self) -> JITModule {
        self.module.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl CraneliftBackend {
    /// A backend for the host CPU with the default lowering.
    pub fn new() -> Result<CraneliftBackend, CodegenError> {
        CraneliftBackend::with_options(LowerOptions::default())
    }

    /// A backend for the host CPU with the given lowering options.
    pub fn with_options(options: LowerOptions) -> Result<CraneliftBackend, CodegenError> {
        let (isa, caps) = target::host()?;
        Ok(CraneliftBackend { isa, caps, options })
    }

    /// The same backend with FMA use switched off or on (for tests comparing both).
    pub fn with_fma(mut self, on: bool) -> CraneliftBackend {
        self.caps.has_fma = self.caps.has_fma && on;
        self
    }

    /// What this backend may use on the host.
    pub fn caps(&self) -> CpuCaps {
        self.caps
    }

    /// Lowers a kernel to the loop IR this backend emits (with rows split where that is safe);
    /// matmul tiles come from the kernel's schedule.
    pub fn lower(&self, kernel: &Kernel, bindings: &Bindings) -> Result<LoopKernel, CodegenError> {
        lower_kernel(kernel, bindings, self.options, || self.tiles_from_schedule(&kernel.schedule))
    }

    /// Tiles from a schedule's knobs (`micro_m x micro_n` registers, `tile_m x tile_n x tile_k`
    /// panels), rounded to register tiles this backend builds well: `micro_n` to a multiple of 4
    /// (at most 32) and `micro_m` (at most 8) down until the tile's assembled kernel fits the
    /// 16 vector registers ([`TileShape::for_tile`]: 6 x 16 is twelve `ymm` accumulators) on a
    /// host that assembles them; elsewhere (cranelift IR, `xmm` only) to at most 16 columns and
    /// twelve f32x4 accumulators.
    pub fn tiles_from_schedule(&self, s: &tcc_ir::Schedule) -> GemmTiles {
        let assembled = self.caps.assembled_tiles();
        let nr_cap = if assembled { 32 } else { 16 };
        let nr = (s.micro_n.clamp(4, nr_cap) / 4) * 4;
        let mut mr = s.micro_m.clamp(1, 8);
        if assembled {
            while mr > 1 && TileShape::for_tile(mr, nr).is_none() {
                mr -= 1;
            }
        } else {
            mr = mr.min(48 / nr).max(1);
        }
        GemmTiles::with_schedule_panels(s, mr, nr)
    }

    /// The cranelift IR of every phase of a loop kernel, as text (for `--emit` and debugging).
    pub fn clif_text(&self, lk: &LoopKernel) -> Result<String, CodegenError> {
        let mut module = Self::module(&self.isa);
        let tiles = self.declare_tiles(&mut module, lk)?;
        let mut text = String::new();
        for phase in &lk.phases {
            let (ctx, _) = self.build(&mut module, lk, phase, &tiles)?;
            text.push_str(&ctx.func.display().to_string());
        }
        Ok(text)
    }

    /// The machine code of every phase of a loop kernel, disassembled (for `--emit asm`).
    pub fn disassemble(&self, lk: &LoopKernel) -> Result<String, CodegenError> {
        let mut module = Self::module(&self.isa);
        let tiles = self.declare_tiles(&mut module, lk)?;
        let mut text = String::new();
        for (i, phase) in lk.phases.iter().enumerate() {
            let (mut ctx, _) = self.build(&mut module, lk, phase, &tiles)?;
            ctx.set_disasm(true);
            let code = ctx
                .compile(&*self.isa, &mut Default::default())
                .map_err(|e| self.cl_err(lk, format!("{:?}", e.inner)))?;
            text.push_str(&format!("; phase {i}: rows {}\n", phase.rows));
            text.push_str(code.vcode.as_deref().unwrap_or(""));
        }
        for &(shape, _) in &tiles {
            let bytes = tile::assemble(shape).len();
            text.push_str(&format!(
                "; {}: the assembled {}x{} register tile ({bytes} bytes of vfmadd231ps loops on {:?} registers, see tile.rs)\n",
                shape.symbol(),
                shape.mr,
                shape.nr(),
                shape.width,
            ));
        }
        Ok(text)
    }

    fn module(isa: &OwnedTargetIsa) -> JITModule {
        let mut jb = JITBuilder::with_isa(isa.clone(), cranelift_module::default_libcall_names());
        let powf: extern "C" fn(f32, f32) -> f32 = tcc_powf;
        jb.symbol("tcc_powf", powf as *const u8);
        JITModule::new(jb)
    }

    fn cl_err(&self, lk: &LoopKernel, e: impl std::fmt::Display) -> CodegenError {
        CodegenError::Cranelift { kernel: lk.name.clone(), message: e.to_string() }
    }

    fn build(
        &self,
        module: &mut JITModule,
        lk: &LoopKernel,
        phase: &Phase,
        tile_ids: &[(TileShape, cranelift_module::FuncId)],
    ) -> Result<(cranelift_codegen::Context, cranelift_module::FuncId), CodegenError> {
        let mut sig = module.make_signature();
        for _ in 0..3 {
            sig.params.push(AbiParam::new(types::I64));
        }
        let func_id = module.declare_anonymous_function(&sig).map_err(|e| self.cl_err(lk, e))?;
        let mut pow_sig = module.make_signature();
        pow_sig.params.push(AbiParam::new(types::F32));
        pow_sig.params.push(AbiParam::new(types::F32));
        pow_sig.returns.push(AbiParam::new(types::F32));
        let pow_id = module.declare_function("tcc_powf", Linkage::Import, &pow_sig).map_err(|e| self.cl_err(lk, e))?;
        let mut ctx = module.make_context();
        ctx.func.signature = sig;
        let mut fctx = FunctionBuilderContext::new();
        let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let pow = module.declare_func_in_func(pow_id, b.func);
        let tiles: HashMap<TileShape, _> =
            tile_ids.iter().map(|&(shape, id)| (shape, module.declare_func_in_func(id, b.func))).collect();
        let imports = emit::Imports { pow, tiles };
        emit::emit_phase(lk, phase, self.caps, b, imports, module.isa().frontend_config())?;
        Ok((ctx, func_id))
    }

    /// The shapes of the register tiles of `lk` that run as assembled kernels: every tile's,
    /// where the host has AVX and FMA and its registers hold the tile.
    fn tile_shapes(&self, lk: &LoopKernel) -> BTreeSet<TileShape> {
        let mut shapes = BTreeSet::new();
        if !self.caps.assembled_tiles() {
            return shapes;
        }
        for phase in &lk.phases {
            for s in &phase.body {
                s.for_each_root(&mut |st| {
                    if let Stmt::MicroKernel(mk) = st
                        && let Some(shape) = TileShape::for_tile(mk.mr, mk.nr)
                    {
                        shapes.insert(shape);
                    }
                });
            }
        }
        shapes
    }

    /// Declares the tile kernel of every shape of [`Self::tile_shapes`] in `module`
    /// (`tile(a, b, depth, out)`, System V), once for all the phases.
    fn declare_tiles(
        &self,
        module: &mut JITModule,
        lk: &LoopKernel,
    ) -> Result<Vec<(TileShape, cranelift_module::FuncId)>, CodegenError> {
        let mut sig = module.make_signature();
        sig.call_conv = CallConv::SystemV;
        for _ in 0..4 {
            sig.params.push(AbiParam::new(types::I64));
        }
        self.tile_shapes(lk)
            .into_iter()
            .map(|shape| {
                let id = module.declare_function(&shape.symbol(), Linkage::Local, &sig);
                Ok((shape, id.map_err(|e| self.cl_err(lk, e))?))
            })
            .collect()
    }

    /// Compiles a loop kernel (every phase) to machine code.
    pub fn compile_loops(&self, lk: &LoopKernel) -> Result<CpuKernel, CodegenError> {
        let mut module = Self::module(&self.isa);
        let tiles = self.declare_tiles(&mut module, lk)?;
        let mut ids = Vec::with_capacity(lk.phases.len());
        for phase in &lk.phases {
            let (mut ctx, func_id) = self.build(&mut module, lk, phase, &tiles)?;
            module.define_function(func_id, &mut ctx).map_err(|e| self.cl_err(lk, format!("{e:?}")))?;
            ids.push((func_id, phase.rows, phase.work()));
        }
        for &(shape, id) in &tiles {
            module
                .define_function_bytes(id, 16, &tile::assemble(shape), &[])
                .map_err(|e| self.cl_err(lk, format!("{e:?}")))?;
        }
        module.finalize_definitions().map_err(|e| self.cl_err(lk, e))?;
        let phases = ids
            .into_iter()
            .map(|(id, rows, work)| PhaseFn { entry: module.get_finalized_function(id) as usize, rows, work })
            .collect();
        Ok(CpuKernel { name: lk.name.clone(), bufs: lk.bufs.clone(), phases, module: Mutex::new(module) })
    }
}

impl Backend for CraneliftBackend {
    type Artifact = CpuKernel;

    fn tier(&self) -> Tier {
        Tier::Cranelift
    }

    fn compile(&self, kernel: &Kernel, bindings: &Bindings) -> Result<CpuKernel, CodegenError> {
        let lk = self.lower(kernel, bindings)?;
        self.compile_loops(&lk)
    }
}
