//! A JIT'd kernel made callable: the one place where the runtime calls into generated code.

use tcc_codegen::{BufDecl, CpuKernel};

/// The uniform ABI of every cranelift (and LLVM tier) kernel.
type KernelFn = unsafe extern "C" fn(*const *mut u8, u64, u64);

/// A compiled kernel whose code lives as long as this value.
pub struct LoadedKernel {
    kernel: Option<CpuKernel>,
    /// A kernel of the LLVM tier instead (its code is freed when it drops, after `drop`).
    #[cfg(feature = "llvm")]
    llvm: Option<tcc_codegen::LlvmCpuKernel>,
    entries: Vec<KernelFn>,
}

impl std::fmt::Debug for LoadedKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedKernel").field("kernel", &self.kernel).finish_non_exhaustive()
    }
}

impl LoadedKernel {
    /// Takes ownership of a compiled kernel.
    pub fn new(kernel: CpuKernel) -> LoadedKernel {
        // SAFETY: each phase's `entry` is the address of a finalized function that cranelift compiled with the
        // signature (i64, i64, i64) -> () in the host's default (System V / C) calling convention,
        // which is exactly `KernelFn`; the code stays mapped while `kernel` (its module) is alive,
        // and `kernel` lives in `self` until `drop`, after every call through `entry`.
        let entries =
            kernel.phases().iter().map(|p| unsafe { std::mem::transmute::<usize, KernelFn>(p.entry) }).collect();
        LoadedKernel {
            kernel: Some(kernel),
            #[cfg(feature = "llvm")]
            llvm: None,
            entries,
        }
    }

    /// Takes ownership of a kernel compiled by the LLVM tier.
    #[cfg(feature = "llvm")]
    pub fn from_llvm(kernel: tcc_codegen::LlvmCpuKernel) -> LoadedKernel {
        // SAFETY: each phase's `entry` is the address of a function that LLVM JIT-compiled from
        // `define void @phaseN(ptr, i64, i64)` in the C calling convention, which is exactly
        // `KernelFn`; the code stays mapped while `kernel` (which owns its execution engine) is
        // alive, and `kernel` lives in `self` until `self` drops, after every call through `entry`.
        let entries =
            kernel.phases().iter().map(|p| unsafe { std::mem::transmute::<usize, KernelFn>(p.entry) }).collect();
        LoadedKernel { kernel: None, llvm: Some(kernel), entries }
    }

    /// The buffers the kernel expects, in pointer-array order.
    pub fn buffers(&self) -> &[BufDecl] {
        #[cfg(feature = "llvm")]
        if let Some(k) = &self.llvm {
            return k.buffers();
        }
        self.kernel.as_ref().map_or(&[], |k| k.buffers())
    }

    /// `(rows, work)` of each phase, in order.
    pub fn phases(&self) -> Vec<(u64, u64)> {
        #[cfg(feature = "llvm")]
        if let Some(k) = &self.llvm {
            return k.phases().iter().map(|p| (p.rows, p.work)).collect();
        }
        self.kernel.as_ref().map_or(Vec::new(), |k| k.phases().iter().map(|p| (p.rows, p.work)).collect())
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        #[cfg(feature = "llvm")]
        if let Some(k) = &self.llvm {
            return k.name();
        }
        self.kernel.as_ref().map_or("", |k| k.name())
    }

    /// Runs rows `begin..end` of phase `phase` (nothing if there is no such phase).
    ///
    /// # Safety
    /// `ptrs` must hold one pointer per entry of [`LoadedKernel::buffers`], each valid for
    /// `len * dtype.size_bytes()` bytes; output, scratch and local buffers must be writable and
    /// alias no other buffer; local buffers must not be shared with a call running at the same
    /// time; every earlier phase must have finished; and calls running at the same time must cover
    /// disjoint row ranges (the lowering guarantees that disjoint rows of a phase touch disjoint
    /// output and scratch elements).
    pub unsafe fn call(&self, phase: usize, ptrs: &[usize], begin: u64, end: u64) {
        let Some(entry) = self.entries.get(phase) else {
            return;
        };
        // SAFETY: the caller upholds the pointer and aliasing contract above; the function only
        // reads and writes within the declared buffers for the rows it is given.
        unsafe { entry(ptrs.as_ptr().cast::<*mut u8>(), begin, end) }
    }
}

impl Drop for LoadedKernel {
    fn drop(&mut self) {
        if let Some(kernel) = self.kernel.take() {
            let module = kernel.into_module();
            // SAFETY: `&mut self` means no call through `self.entries` is running or can start
            // (calls borrow `self`), and `entries` is dropped with `self`: nothing uses the code again.
            unsafe { module.free_memory() }
        }
    }
}
