//! The warpgroup GEMM's knobs, encoded in the shared [`Schedule`] so that the `mma.sync`
//! validation rejects every one of them (and the other way round). The encoding is decoded in one
//! place, `tcc_ir::schedule::WgmmaSchedule`; this module validates a decoded schedule against a
//! problem and a target and lists the space:
//!
//! - `micro_m = 64`, `micro_n = tile_n`: each consumer warpgroup owns 64 rows and the whole width;
//! - `tile_m` = 64 x consumer warpgroups (1 or 2), `tile_n` = 64, 128, 192 or 256 (the wgmma N),
//!   `tile_k = 64` (one 128-byte swizzle row of 16-bit elements);
//! - `warps` = 4 x consumers (every warp copies and multiplies) or 4 x consumers + 4 (a producer
//!   warpgroup copies, the consumers multiply); `tile_m = 64` with 12 warps is the ping-pong
//!   variant: a producer and two consumer warpgroups that take alternate 64-row tiles, so one
//!   stores its tile while the other multiplies;
//! - `stages` 3 to 8 shared-memory stages; `swizzle` the block-order group;
//! - `split_k` k splits across blocks (1 = none), each of `WgmmaSchedule::split_k_tiles`
//!   k-tiles (the last one's past the end read as zeros): f32 partial sums that the matmul's
//!   reduce entry adds up before the fused epilogue;
//! - `vector_width` how tiles reach shared memory: 8 for 16-byte `cp.async` copies by every
//!   copying thread, 64 for TMA (`cp.async.bulk.tensor`, one 128-byte swizzle row of 64
//!   elements per box row, issued by one thread, completing on an mbarrier per stage).
//!
//! `mma.sync` needs `warps = (tile_m / micro_m) x (tile_n / micro_n)`, here `tile_m / 64`, never
//! `4 x tile_m / 64`: the two encodings cannot overlap.

use tcc_ir::schedule::{WgmmaSchedule, is_warpgroup_encoding};
use tcc_ir::{DType, Schedule};

use crate::ptx::arch::{CapsExt, Feature, GpuArch, GpuCaps};
use crate::ptx::error::PtxError;
use crate::ptx::mma::{BLayout, MatmulProblem};

/// Rows of one wgmma (and of one consumer warpgroup's tile).
pub(crate) const WG_M: u32 = tcc_ir::schedule::WGMMA_M;
/// The k-tile: 64 16-bit elements, one 128-byte swizzle row.
pub(crate) const BK: u32 = tcc_ir::schedule::WGMMA_K;
/// Extra dynamic shared memory so that the stages can start on a 1024-byte boundary.
pub(crate) const ALIGN_SLACK: u32 = 1024;

/// A validated warpgroup tiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WgConfig {
    /// Consumer warpgroups (each computes 64 rows x `bn`).
    pub(crate) consumers: u32,
    /// Block tile columns (the wgmma N).
    pub(crate) bn: u32,
    /// Shared-memory stages.
    pub(crate) stages: u32,
    /// A producer warpgroup does every copy (else every thread copies).
    pub(crate) producer: bool,
    /// The consumers take alternate tiles of 64 rows (else they share one tile).
    pub(crate) pingpong: bool,
    /// Block-index swizzle group (along M).
    pub(crate) swizzle: u32,
    /// Tiles arrive by TMA (else by `cp.async`).
    pub(crate) tma: bool,
    /// k splits across blocks (1 = none; each has a k-tile of its own).
    pub(crate) splits: u32,
}

impl WgConfig {
    /// Block tile rows.
    pub(crate) fn bm(&self) -> u32 {
        if self.pingpong { WG_M } else { self.consumers * WG_M }
    }

    /// Threads per block.
    pub(crate) fn threads(&self) -> u32 {
        128 * (self.consumers + u32::from(self.producer))
    }

    /// Bytes of one stage (A tile, then B tile).
    pub(crate) fn stage_bytes(&self) -> u32 {
        (self.bm() + self.bn) * BK * 2
    }

    /// How many k-tiles ahead the copies run when every thread copies (one stage is being
    /// read by the wgmmas in flight).
    pub(crate) fn prefetch(&self) -> u32 {
        self.stages - 1
    }

    /// Bytes after the stages where TMA variants stage output subtiles for TMA stores: two
    /// 64 x 64 buffers of 16-bit elements per consumer warpgroup.
    pub(crate) fn store_staging_bytes(&self) -> u32 {
        if self.tma { self.consumers * 2 * 64 * 128 } else { 0 }
    }

    /// Dynamic shared memory per block, bytes (stages, store staging, mbarriers, alignment slack).
    pub(crate) fn shared_bytes(&self) -> u32 {
        let bars = if self.producer || self.tma { 16 * self.stages + 16 } else { 0 };
        self.stages * self.stage_bytes() + self.store_staging_bytes() + bars + ALIGN_SLACK
    }

    /// The typed schedule of this tiling.
    pub(crate) fn typed(&self) -> WgmmaSchedule {
        WgmmaSchedule {
            consumers: self.consumers,
            producer: self.producer,
            pingpong: self.pingpong,
            bn: self.bn,
            stages: self.stages,
            swizzle: self.swizzle,
            tma: self.tma,
            splits: self.splits,
        }
    }

    /// The schedule that encodes this tiling.
    pub(crate) fn schedule(&self) -> Schedule {
        self.typed().encode()
    }
}

fn reject(caps: &GpuCaps, s: &Schedule, why: &str) -> PtxError {
    PtxError::Unsupported { target: caps.name, what: format!("wgmma schedule `{s}`: {why}") }
}

/// True when `s` is in the wgmma encoding at all (`micro_m = 64`, `micro_n = tile_n`, warps a
/// multiple of 4): such a schedule is meant for this lowering, valid or not
/// ([`tcc_ir::schedule::is_warpgroup_encoding`]).
pub fn is_wgmma_schedule(s: &Schedule) -> bool {
    is_warpgroup_encoding(s)
}

/// Checks that `schedule` can run `problem` with the warpgroup GEMM on `arch`, without
/// generating code.
pub fn validate_wgmma_schedule(problem: &MatmulProblem, schedule: &Schedule, arch: GpuArch) -> Result<(), PtxError> {
    config(problem, schedule, &arch.caps()).map(|_| ())
}

/// The validated tiling of `s` for `problem`, or why it cannot run.
pub(crate) fn config(problem: &MatmulProblem, s: &Schedule, caps: &GpuCaps) -> Result<WgConfig, PtxError> {
    caps.require(Feature::Wgmma, "a warpgroup matmul")?;
    caps.require(Feature::CpAsync, "a warpgroup matmul")?;
    if !matches!(problem.dtype, DType::F16 | DType::BF16) {
        return Err(reject(caps, s, &format!("wgmma takes f16 or bf16, not {}", problem.dtype)));
    }
    if problem.m == 0 || problem.n == 0 || problem.k == 0 || problem.batch == 0 {
        return Err(reject(caps, s, "empty matmul"));
    }
    let w = WgmmaSchedule::decode(s).map_err(|why| reject(caps, s, &why))?;
    if !(3..=8).contains(&w.stages) {
        return Err(reject(caps, s, "stages must be 3 to 8"));
    }
    if !w.swizzle.is_power_of_two() || w.swizzle > 64 {
        return Err(reject(caps, s, "swizzle must be a power of two up to 64"));
    }
    if w.tma {
        caps.require(Feature::Tma, "a warpgroup matmul fed by TMA")?;
    }
    let (consumers, producer, pingpong, tma) = (w.consumers, w.producer, w.pingpong, w.tma);
    if tma && (problem.m > u64::from(u32::MAX) || problem.n > u64::from(u32::MAX) || problem.k > u64::from(u32::MAX)) {
        return Err(reject(caps, s, "TMA tensor dims must stay below 2^32"));
    }
    let splits = w.splits;
    let c = WgConfig { consumers, bn: s.tile_n, stages: s.stages, producer, pingpong, swizzle: s.swizzle, tma, splits };
    if c.shared_bytes() > caps.max_shared_optin_bytes {
        return Err(reject(caps, s, &format!("needs {} bytes of shared memory", c.shared_bytes())));
    }
    // Every-thread cp.async copies of a `[k, n]` B tile need the copying threads to be a multiple
    // of its 16-byte chunks per row (`bn / 8`): a 192-wide one comes by TMA or from `[n, k]`.
    if c.bn == 192 && !tma && problem.b_layout == BLayout::KN {
        return Err(reject(caps, s, "a 192-wide tile of a [k, n] B must arrive by TMA"));
    }
    // Accumulators (bn / 2 f32 per thread) plus addressing: tiles of 192 or 256 columns on one
    // consumer warpgroup with every thread copying leave too few registers.
    if c.bn >= 192 && consumers == 1 && !producer && !tma {
        return Err(reject(caps, s, "a 64x192 or 64x256 tile needs a second warpgroup to share the copies"));
    }
    if !WgmmaSchedule::splits_fit(problem.k, splits) {
        return Err(reject(caps, s, "split_k must leave every split a k-tile (of 64) of its own"));
    }
    let tiles = problem.m.div_ceil(u64::from(c.bm())) * problem.n.div_ceil(u64::from(c.bn));
    if tiles.saturating_mul(problem.batch).saturating_mul(u64::from(splits)) >= (1 << 31) {
        return Err(reject(caps, s, "too many tiles"));
    }
    Ok(c)
}

/// Every warpgroup schedule worth measuring for `problem` on `arch` (empty without wgmma or for
/// other dtypes), each valid. Deterministic. On targets with TMA only TMA variants are listed:
/// their `cp.async` twins (`vector_width` 8) stay valid but measured 1-2% slower with the same
/// epilogue, and persistent ones cannot store by TMA (H100, BENCHMARKS.md). Where a tiling's
/// tiles cannot fill the SMs, its k splits that keep at least as many k-tiles per split as
/// stages and make at most two waves of blocks are listed too (block order unswizzled).
pub fn wgmma_schedule_space(problem: &MatmulProblem, arch: GpuArch) -> Vec<Schedule> {
    let caps = arch.caps();
    let sms = u64::from(caps.typical_sm_count);
    let tma = caps.has(Feature::Tma);
    let mut out = Vec::new();
    // (consumers, producer, ping-pong)
    let kinds = [(1u32, false, false), (1, true, false), (2, false, false), (2, true, false), (2, true, true)];
    for (consumers, producer, pingpong) in kinds {
        for bn in [64u32, 128, 192, 256] {
            let tiling = WgConfig { consumers, bn, stages: 3, producer, pingpong, swizzle: 1, tma, splits: 1 };
            let tiles = problem.m.div_ceil(u64::from(tiling.bm())) * problem.n.div_ceil(u64::from(bn)) * problem.batch;
            for stages in 3u32..=6 {
                let splits = (0..=6).map(|e| 1u32 << e).filter(|&sp| {
                    let sp64 = u64::from(sp);
                    sp == 1
                        || (tiles < sms
                            && tiles * sp64 <= 2 * sms
                            && WgmmaSchedule::split_k_tiles(problem.k, sp) >= u64::from(stages))
                });
                for splits in splits {
                    for swizzle in [1u32, 8].into_iter().filter(|&z| splits == 1 || z == 1) {
                        let s = WgConfig { stages, swizzle, splits, ..tiling }.schedule();
                        if config(problem, &s, &caps).is_ok() {
                            out.push(s);
                        }
                    }
                }
            }
        }
    }
    out
}

/// A good warpgroup schedule for `problem` on `arch` without tuning
/// ([`tcc_ir::WgmmaSchedule::untuned`], k split for few tiles over a long k: the optimizer's
/// choice too for one product; a dual product's is [`tcc_ir::dual::untuned_warpgroup`]), or
/// `None` when the target has no wgmma, the product is too small to fill the GPU with it, or the
/// schedule does not fit it.
///
/// Measured on an H100 (same process as cuBLAS): 3 stages beat 4 by 0.8% on 8192^3 and 0.3% on
/// 8192 x 14336 x 4096, 4 beat 3 by 0.7% on 4096^3 (session 4); TMA beat every-thread cp.async
/// copies by 1-2%, and the TMA-store epilogue made the persistent blocks 10-12% faster. On
/// 2048^3 (128 tiles of 128 x 256) the 128 x 256 blocks took 0.0276 ms against the mma.sync
/// default's 0.0441 and cuBLAS's 0.0279; on 1024^3 64 x 128 blocks took 0.0099 ms against
/// 0.0126 and 0.0089, and 128 x 256 ones 0.0154 (session 5, BENCHMARKS.md).
pub fn default_wgmma_schedule(problem: &MatmulProblem, arch: GpuArch) -> Option<Schedule> {
    let caps = arch.caps();
    let sms = u64::from(caps.typical_sm_count);
    let (m, n, k, batch) = (problem.m, problem.n, problem.k, problem.batch);
    let w = tcc_ir::WgmmaSchedule::untuned(m, n, k, batch, sms)?;
    let s = w.encode();
    config(problem, &s, &caps).is_ok().then_some(s)
}
