//! What the cost model and the schedule rules know about a target, as data: bandwidth, throughput
//! per dtype class, launch overhead and the limits a schedule must respect.
//!
//! The numbers are nominal model parameters (vendor peak figures, or the measurements quoted in
//! BENCHMARKS.md where one exists), not measurements made by this crate; the cost model only
//! needs them to rank alternatives.

use tcc_ir::schedule::AttentionDevice;
use tcc_ir::target::{CpuTier, GpuArch, Target};
use tcc_ir::{DType, Tier};

/// A matrix-multiply-accumulate instruction shape the target's tensor cores execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaShape {
    /// Rows.
    pub m: u32,
    /// Columns.
    pub n: u32,
    /// Depth.
    pub k: u32,
}

/// A target as the cost model and the schedule rules see it: the [`Target`] and its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetModel {
    /// The target it models.
    pub target: Target,
    /// Sustained memory bandwidth, bytes per second.
    pub bandwidth: f64,
    /// f32 arithmetic throughput (SIMD/CUDA cores), flop per second.
    pub flops_f32: f64,
    /// f16/bf16 matmul throughput on tensor cores (or the SIMD units on a CPU), flop per second.
    pub flops_f16_matmul: f64,
    /// f32 matmul throughput, flop per second.
    pub flops_f32_matmul: f64,
    /// Fixed cost of one kernel launch, seconds.
    pub launch_overhead: f64,
    /// Number of streaming multiprocessors (GPU) or cores (CPU).
    pub cores: u32,
    /// Shared memory one block may use, bytes (0 on CPUs).
    pub shared_memory_per_block: u32,
    /// Registers per thread at most (GPU), or vector registers (CPU).
    pub registers_per_thread: u32,
    /// Width of a vector load/store in bytes.
    pub vector_bytes: u32,
    /// The tensor-core instruction shapes for f16/bf16 (empty when there are none).
    pub mma_shapes: Vec<MmaShape>,
}

impl TargetModel {
    /// What the GPU attention kernel may use on this target (no warpgroup MMAs off the GPU).
    pub fn attention_device(&self) -> AttentionDevice {
        match self.target {
            Target::Gpu(arch) => AttentionDevice::of(&arch.caps()),
            _ => AttentionDevice { shared: self.shared_memory_per_block, wgmma: false },
        }
    }

    /// The model of `target`.
    pub fn for_target(target: Target) -> TargetModel {
        match target {
            Target::Interp => TargetModel::interp(),
            Target::Cpu(CpuTier::Cranelift) => TargetModel::cpu_host(),
            Target::Cpu(CpuTier::Llvm) => TargetModel::cpu_llvm(),
            Target::Gpu(GpuArch::Sm80) => TargetModel::sm_80(),
            Target::Gpu(GpuArch::Sm90a) => TargetModel::sm_90a(),
        }
    }

    /// The target's canonical name (`cpu:cranelift`, `sm_90a`, ...).
    pub fn name(&self) -> &'static str {
        self.target.name()
    }

    /// The code generator that compiles for it.
    pub fn tier(&self) -> Tier {
        self.target.tier()
    }

    /// True for GPU targets (schedules use blocks, warps and shared memory).
    pub fn gpu(&self) -> bool {
        self.target.is_gpu()
    }

    /// Whether the target's code generator has an attention kernel, so that fusion may form one:
    /// every target. On a GPU the kernel runs only the bodies [`tcc_ir::attention::GpuAttention`]
    /// accepts; the cost model prices any other attention body out ([`crate::cost`]), so such an
    /// attention keeps its three kernels there.
    pub fn attention_kernels(&self) -> bool {
        true
    }

    /// Whether the target's code generator runs a dual product ([`tcc_ir::DualProduct`]) as one
    /// kernel with both accumulators, so that fusion may form one: the GPUs (on tensor cores, by
    /// `mma.sync`). A CPU would run its products one after the other, gaining nothing.
    pub fn dual_products(&self) -> bool {
        self.gpu() && !self.mma_shapes.is_empty()
    }

    /// Whether the target's GEMM reads a B concatenated along its columns from several tensors
    /// in place, so that products of one left operand may become one (`join-sibling-products`):
    /// the GPUs' tensor-core GEMMs (`mma.sync` chunk by chunk, the warpgroup GEMM by a TMA map per
    /// tensor). A CPU would copy such a B per call.
    pub fn grouped_products(&self) -> bool {
        self.gpu() && !self.mma_shapes.is_empty()
    }

    /// The host CPU with the Cranelift tier: this project's 2-core machines, 128-bit vectors
    /// (the matmul tiles, assembled apart from cranelift, on 256-bit ones).
    pub fn cpu_host() -> TargetModel {
        TargetModel {
            target: Target::Cpu(CpuTier::Cranelift),
            bandwidth: 40e9,
            flops_f32: 50e9,
            // An estimate, near what the 256-bit register tiles' 1024^3 GEMM measured: 60-79
            // GFLOP/s on two shared Cascade Lake cores (BENCHMARKS.md, session 22).
            flops_f16_matmul: 80e9,
            flops_f32_matmul: 80e9,
            launch_overhead: 2e-6,
            cores: 2,
            shared_memory_per_block: 0,
            registers_per_thread: 16,
            vector_bytes: 16,
            mma_shapes: Vec::new(),
        }
    }

    /// The host CPU with the LLVM x86 tier (512-bit vectors).
    pub fn cpu_llvm() -> TargetModel {
        TargetModel {
            target: Target::Cpu(CpuTier::Llvm),
            flops_f32: 150e9,
            flops_f16_matmul: 300e9,
            flops_f32_matmul: 300e9,
            registers_per_thread: 32,
            vector_bytes: 64,
            ..TargetModel::cpu_host()
        }
    }

    /// The f64 reference interpreter: slow everywhere; only the number of ops matters.
    pub fn interp() -> TargetModel {
        TargetModel {
            target: Target::Interp,
            bandwidth: 1e9,
            flops_f32: 1e8,
            flops_f16_matmul: 1e8,
            flops_f32_matmul: 1e8,
            launch_overhead: 1e-6,
            cores: 1,
            vector_bytes: 8,
            ..TargetModel::cpu_host()
        }
    }

    /// NVIDIA A100 (sm_80): HBM2e, mma.sync m16n8k16 tensor cores, 164 KiB of shared memory.
    pub fn sm_80() -> TargetModel {
        TargetModel {
            target: Target::Gpu(GpuArch::Sm80),
            bandwidth: 1.8e12,
            flops_f32: 19.5e12,
            flops_f16_matmul: 312e12,
            flops_f32_matmul: 19.5e12,
            launch_overhead: 4e-6,
            cores: 108,
            shared_memory_per_block: 163 * 1024,
            registers_per_thread: 255,
            vector_bytes: 16,
            mma_shapes: vec![MmaShape { m: 16, n: 8, k: 16 }],
        }
    }

    /// NVIDIA H100 SXM (sm_90a): BENCHMARKS.md measured 2992 GB/s of device copy bandwidth and 653 TF/s
    /// mma.sync ceiling; wgmma adds 64xNx16 shapes; 227 KiB of shared memory per block.
    pub fn sm_90a() -> TargetModel {
        TargetModel {
            target: Target::Gpu(GpuArch::Sm90a),
            bandwidth: 3.0e12,
            flops_f32: 60e12,
            flops_f16_matmul: 634e12,
            flops_f32_matmul: 60e12,
            launch_overhead: 3e-6,
            cores: 132,
            shared_memory_per_block: 227 * 1024,
            registers_per_thread: 255,
            vector_bytes: 16,
            mma_shapes: vec![MmaShape { m: 16, n: 8, k: 16 }, MmaShape { m: 64, n: 128, k: 16 }],
        }
    }

    /// Matmul throughput for operands of `dtype`, flop per second.
    pub fn matmul_flops(&self, dtype: DType) -> f64 {
        match dtype {
            DType::F16 | DType::BF16 => self.flops_f16_matmul,
            _ => self.flops_f32_matmul,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_has_its_model() {
        for t in Target::ALL {
            assert_eq!(TargetModel::for_target(t).target, t);
        }
    }

    #[test]
    fn gpu_targets_have_tensor_cores() {
        assert!(TargetModel::sm_80().mma_shapes.iter().any(|s| (s.m, s.n, s.k) == (16, 8, 16)));
        assert!(TargetModel::cpu_host().mma_shapes.is_empty());
    }
}
