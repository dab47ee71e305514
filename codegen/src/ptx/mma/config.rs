//! The tensor-core matmul's knobs: the shared [`Schedule`] read as block tile, warp tile, k-tile,
//! pipeline stages, split-k, block swizzle and (warps beyond the warp tiles of a one-warp-tile
//! block of at most 32 rows) warps splitting k inside the block; validation before codegen; the
//! valid schedule space for a problem; and a default pick.

use tcc_ir::{DType, Schedule, Tier};

use super::super::arch::{CapsExt, Feature, GpuArch, GpuCaps};
use super::super::error::PtxError;

/// How B is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BLayout {
    /// `[k, n]`, n contiguous.
    KN,
    /// `[n, k]`, k contiguous (a linear layer's weight).
    NK,
}

/// A matmul to run on tensor cores: `batch` products of `[m, k] x [k, n]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulProblem {
    /// Rows of the output.
    pub m: u64,
    /// Columns of the output.
    pub n: u64,
    /// Depth.
    pub k: u64,
    /// Independent products (1 for a plain GEMM).
    pub batch: u64,
    /// Element type of A and B (`f16` or `bf16`; accumulation is f32).
    pub dtype: DType,
    /// How B is stored.
    pub b_layout: BLayout,
}

/// A validated tensor-core tiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MmaConfig {
    /// Block tile rows.
    pub(crate) bm: u32,
    /// Block tile columns.
    pub(crate) bn: u32,
    /// K-tile depth.
    pub(crate) bk: u32,
    /// Warp tile rows.
    pub(crate) wm: u32,
    /// Warp tile columns.
    pub(crate) wn: u32,
    /// Shared-memory pipeline stages.
    pub(crate) stages: u32,
    /// K splits.
    pub(crate) split_k: u32,
    /// Block-index swizzle group (along M).
    pub(crate) swizzle: u32,
    /// Warps splitting the block's k-tiles among themselves (1: none). With more than one, the
    /// block tile is one warp tile: each warp runs its own `cp.async` ring over every `kw`-th
    /// k-tile, and the warps' accumulators are summed in warp order through shared memory.
    pub(crate) kw: u32,
}

impl MmaConfig {
    /// Warps sharing one ring (and one set of k-tiles): the warp tiles of the block tile.
    pub(crate) fn group_warps(&self) -> u32 {
        (self.bm / self.wm) * (self.bn / self.wn)
    }

    /// Threads sharing one ring.
    pub(crate) fn group_threads(&self) -> u32 {
        self.group_warps() * 32
    }

    /// Warps per block.
    pub(crate) fn warps(&self) -> u32 {
        self.group_warps() * self.kw
    }

    /// Threads per block.
    pub(crate) fn threads(&self) -> u32 {
        self.warps() * 32
    }

    /// Bytes of one ring: `stages` A and B tiles.
    pub(crate) fn ring_bytes(&self) -> u32 {
        self.stages * (self.bm + self.bn) * self.bk * 2
    }

    /// Bytes of shared memory each ring owns: its tiles, and with a k split inside the block at
    /// least one warp tile of f32 accumulators (written there for the final sum).
    pub(crate) fn ring_region_bytes(&self) -> u32 {
        if self.kw > 1 { self.ring_bytes().max(self.wm * self.wn * 4) } else { self.ring_bytes() }
    }

    /// Bytes of the block tile staged in shared memory by the fused epilogue (f16 and bf16 alike),
    /// from offset 0 (with a k split inside the block, within warp 0's ring region, whose f32
    /// accumulators take more).
    pub(crate) fn staging_bytes(&self) -> u32 {
        super::epilogue::staging_bytes(self.bm, self.bn, DType::F16)
    }

    /// Dynamic shared memory per block, bytes: the rings, or the staged tile where it is larger.
    pub(crate) fn shared_bytes(&self) -> u32 {
        (self.kw * self.ring_region_bytes()).max(self.staging_bytes())
    }

    /// A rough count of the registers a thread needs: accumulators, two sets of fragments (the
    /// main loop loads the next step's while the current one multiplies), about three per 16-byte
    /// chunk the thread copies (source offset, predicate, shared offset), and a fixed reserve.
    /// With a k split inside the block one warp copies a whole tile, and ptxas keeps about seven
    /// registers per chunk (measured on sm_90a: 162 at 16x32x64, 194 at 16x64x32, 240 at 32x32x64).
    pub(crate) fn registers(&self) -> u32 {
        let chunks = ((self.bm + self.bn) * self.bk / 8).div_ceil(self.group_threads());
        let (per_chunk, reserve) = if self.kw > 1 { (7, 40) } else { (3, 16) };
        self.wm * self.wn / 32 + 2 * ((self.wm / 16) * 4 + (self.wn / 16) * 4) + per_chunk * chunks + reserve
    }
}

/// Most registers the estimate may reach (ptxas needs some slack below 255 to avoid spills).
const REGISTER_BUDGET: u32 = 240;
/// Most k splits.
const MAX_SPLIT_K: u32 = 128;
/// Most warps splitting k inside a block.
const MAX_K_WARPS: u32 = 8;
/// Most rows of a block whose warps split k.
const MAX_K_SPLIT_ROWS: u32 = 32;

fn reject(caps: &GpuCaps, s: &Schedule, why: &str) -> PtxError {
    PtxError::Unsupported { target: caps.name, what: format!("tensor-core schedule `{s}`: {why}") }
}

/// Checks that `schedule` can run `problem` on tensor cores of `arch`, without generating code.
pub fn validate_matmul_schedule(problem: &MatmulProblem, schedule: &Schedule, arch: GpuArch) -> Result<(), PtxError> {
    config(problem, schedule, &arch.caps()).map(|_| ())
}

/// The validated tiling of `schedule` for `problem`, or why it cannot run.
pub(crate) fn config(problem: &MatmulProblem, s: &Schedule, caps: &GpuCaps) -> Result<MmaConfig, PtxError> {
    caps.require(Feature::MmaM16N8K16, "a tensor-core matmul")?;
    caps.require(Feature::CpAsync, "a tensor-core matmul")?;
    if !matches!(problem.dtype, DType::F16 | DType::BF16) {
        return Err(reject(caps, s, &format!("tensor cores take f16 or bf16, not {}", problem.dtype)));
    }
    if problem.m == 0 || problem.n == 0 || problem.k == 0 || problem.batch == 0 {
        return Err(reject(caps, s, "empty matmul"));
    }
    let c = MmaConfig {
        bm: s.tile_m,
        bn: s.tile_n,
        bk: s.tile_k,
        wm: s.micro_m,
        wn: s.micro_n,
        stages: s.stages,
        split_k: s.split_k,
        swizzle: s.swizzle,
        kw: 1,
    };
    let pow2_in = |v: u32, lo: u32, hi: u32| v.is_power_of_two() && (lo..=hi).contains(&v);
    if !pow2_in(c.bm, 16, 256) || !pow2_in(c.bn, 16, 256) {
        return Err(reject(caps, s, "block tiles must be powers of two from 16 to 256"));
    }
    if !pow2_in(c.bk, 16, 128) {
        return Err(reject(caps, s, "the k-tile must be 16, 32, 64 or 128"));
    }
    if !pow2_in(c.wm, 16, 128) || !pow2_in(c.wn, 16, 128) || c.wm > c.bm || c.wn > c.bn {
        return Err(reject(caps, s, "warp tiles must be powers of two from 16 up to the block tile"));
    }
    // Warps beyond the warp tiles split k inside the block; only when the block tile is one warp
    // tile of at most 32 rows (every warp then owns its ring; wgmma's encoding has 64 rows).
    let sliced = c.group_warps() == 1 && c.bm <= MAX_K_SPLIT_ROWS;
    let c = MmaConfig { kw: if sliced { s.warps.max(1) } else { 1 }, ..c };
    // At most 8 warps: a block of 256 threads can still give each thread 255 registers.
    if c.warps() != s.warps || c.threads() > caps.max_threads_per_block.min(256) || !pow2_in(c.kw, 1, MAX_K_WARPS) {
        return Err(reject(
            caps,
            s,
            "warps must equal (tile_m/micro_m)*(tile_n/micro_n), at most 8 (or, when the block tile is one \
             warp tile of at most 32 rows, 1, 2, 4 or 8 warps splitting k)",
        ));
    }
    if !(2..=8).contains(&c.stages) {
        return Err(reject(caps, s, "stages must be 2 to 8"));
    }
    if c.shared_bytes() > caps.max_shared_optin_bytes {
        return Err(reject(caps, s, &format!("needs {} bytes of shared memory", c.shared_bytes())));
    }
    if c.registers() > REGISTER_BUDGET {
        return Err(reject(caps, s, "the warp tile needs too many registers"));
    }
    if !pow2_in(c.swizzle, 1, 64) {
        return Err(reject(caps, s, "swizzle must be a power of two up to 64"));
    }
    let k_tiles = problem.k.div_ceil(u64::from(c.bk));
    if c.split_k == 0 || c.split_k > MAX_SPLIT_K || u64::from(c.split_k) > k_tiles {
        return Err(reject(caps, s, "split_k must be 1 up to the number of k-tiles (at most 128)"));
    }
    let tiles = problem.m.div_ceil(u64::from(c.bm)) * problem.n.div_ceil(u64::from(c.bn));
    if tiles.saturating_mul(problem.batch).saturating_mul(u64::from(c.split_k)) >= (1 << 31) {
        return Err(reject(caps, s, "too many tiles"));
    }
    Ok(c)
}

fn schedule_of(c: &MmaConfig, dtype: DType) -> Schedule {
    Schedule {
        tier: Tier::Ptx,
        tile_m: c.bm,
        tile_n: c.bn,
        tile_k: c.bk,
        micro_m: c.wm,
        micro_n: c.wn,
        vector_width: u32::try_from(16 / dtype.size_bytes().max(1)).unwrap_or(8),
        stages: c.stages,
        warps: c.warps(),
        split_k: c.split_k,
        swizzle: c.swizzle,
        threads: 0,
    }
}

/// Every schedule worth measuring for `problem` on `arch`, each valid: block tiles no larger
/// than the problem needs, warp tiles, k-tiles, stages, swizzle, and k splits when the tiles
/// alone cannot fill the GPU; for skinny products (at most 32 rows) also one-warp-tile blocks
/// whose 2, 4 or 8 warps split k. Deterministic; empty when the problem cannot use tensor cores.
pub fn matmul_schedule_space(problem: &MatmulProblem, arch: GpuArch) -> Vec<Schedule> {
    let caps = arch.caps();
    let fit = |v: u64| v.next_power_of_two().clamp(16, 256) as u32;
    let (max_bm, max_bn) = (fit(problem.m), fit(problem.n));
    let fills = |bm: u32, bn: u32| {
        problem.m.div_ceil(u64::from(bm)) * problem.n.div_ceil(u64::from(bn)) * problem.batch
            >= u64::from(caps.typical_sm_count)
    };
    let mut out = Vec::new();
    let mut push = |c: MmaConfig| {
        let s = schedule_of(&c, problem.dtype);
        if c.warps() >= 2 && config(problem, &s, &caps).is_ok() {
            out.push(s);
        }
    };
    for bm in [16u32, 32, 64, 128, 256].into_iter().filter(|&b| b <= max_bm) {
        for bn in [16u32, 32, 64, 128, 256].into_iter().filter(|&b| b <= max_bn) {
            let splits: &[u32] = if fills(bm, bn) { &[1] } else { &[1, 2, 4, 8, 16, 32, 64, 128] };
            for bk in [32u32, 64] {
                for wm in [16u32, 32, 64] {
                    for wn in [16u32, 32, 64] {
                        for stages in [2u32, 3, 4, 5] {
                            for &split_k in splits {
                                for swizzle in [1u32, 8] {
                                    if swizzle > 1 && problem.m.div_ceil(u64::from(bm)) <= 1 {
                                        continue;
                                    }
                                    push(MmaConfig { bm, bn, bk, wm, wn, stages, split_k, swizzle, kw: 1 });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if problem.m <= 32 {
        for bm in [16u32, 32].into_iter().filter(|&b| b <= max_bm) {
            for bn in [16u32, 32, 64, 128].into_iter().filter(|&b| b <= max_bn) {
                let splits: &[u32] = if fills(bm, bn) { &[1] } else { &[1, 2, 4, 8] };
                for bk in [32u32, 64, 128] {
                    for kw in [2u32, 4, 8] {
                        for stages in [2u32, 3, 4, 6] {
                            for &split_k in splits {
                                push(MmaConfig { bm, bn, bk, wm: bm, wn: bn, stages, split_k, swizzle: 1, kw });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// A good schedule for `problem` without tuning: 128x128 blocks of four 64x64 warps (two blocks
/// per SM) for large products, narrower tiles for small ones, one-warp-tile blocks whose four
/// warps split k for skinny ones (at most 32 rows), and k splits when the tiles cannot fill the GPU.
pub fn default_matmul_schedule(problem: &MatmulProblem, arch: GpuArch) -> Schedule {
    let caps = arch.caps();
    let sms = u64::from(caps.typical_sm_count);
    let tiles = |bm: u64, bn: u64| problem.m.div_ceil(bm) * problem.n.div_ceil(bn) * problem.batch;
    let skinny = problem.m <= 32;
    let mut c = if skinny {
        // Memory-bound: stream B through narrow blocks, one per SM, each of whose four warps
        // keeps its own four-stage ring of every fourth k-tile in flight.
        let bm = if problem.m <= 16 { 16 } else { 32 };
        MmaConfig { bm, bn: 32, bk: 64, wm: bm, wn: 32, stages: 4, split_k: 1, swizzle: 1, kw: 4 }
    } else if tiles(128, 128) >= sms {
        MmaConfig { bm: 128, bn: 128, bk: 32, wm: 64, wn: 64, stages: 4, split_k: 1, swizzle: 8, kw: 1 }
    } else {
        MmaConfig { bm: 64, bn: 64, bk: 32, wm: 32, wn: 32, stages: 4, split_k: 1, swizzle: 1, kw: 1 }
    };
    // Split k while the blocks cannot fill half the GPU and each split keeps 4 k-tiles or more.
    let t = tiles(u64::from(c.bm), u64::from(c.bn));
    let k_tiles = problem.k.div_ceil(u64::from(c.bk));
    while 2 * t * u64::from(c.split_k) < sms && u64::from(c.split_k) * 2 * 4 <= k_tiles && c.split_k < MAX_SPLIT_K {
        c.split_k *= 2;
    }
    schedule_of(&c, problem.dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big() -> MatmulProblem {
        MatmulProblem { m: 4096, n: 4096, k: 4096, batch: 1, dtype: DType::F16, b_layout: BLayout::KN }
    }

    #[test]
    fn defaults_are_valid_for_every_bench_shape() {
        for (m, n, k) in [(4096, 4096, 4096), (8192, 14336, 4096), (16, 4096, 4096), (1999, 3001, 997), (1, 1, 1)] {
            for arch in GpuArch::ALL {
                let p = MatmulProblem { m, n, k, ..big() };
                let s = default_matmul_schedule(&p, arch);
                validate_matmul_schedule(&p, &s, arch).unwrap();
            }
        }
        // A skinny product streams B through one narrow block per SM; a smaller one splits k.
        let skinny = MatmulProblem { m: 16, ..big() };
        let s = default_matmul_schedule(&skinny, GpuArch::Sm90a);
        assert_eq!(s.split_k, 1);
        // One warp tile per block, its warps splitting k.
        assert_eq!((s.tile_m, s.tile_n, s.micro_m, s.micro_n), (16, 32, 16, 32));
        assert_eq!(s.warps, 4);
        let small = MatmulProblem { m: 16, n: 512, ..big() };
        assert!(default_matmul_schedule(&small, GpuArch::Sm90a).split_k >= 4);
    }

    #[test]
    fn the_space_of_a_big_gemm_has_hundreds_of_valid_schedules() {
        for arch in GpuArch::ALL {
            let space = matmul_schedule_space(&big(), arch);
            assert!(space.len() >= 200, "{}", space.len());
            assert!(space.iter().all(|s| validate_matmul_schedule(&big(), s, arch).is_ok()));
        }
        let skinny = MatmulProblem { m: 16, ..big() };
        let space = matmul_schedule_space(&skinny, GpuArch::Sm90a);
        assert!(space.iter().any(|s| s.split_k > 1));
        let sliced = |s: &&Schedule| s.tile_m == s.micro_m && s.tile_n == s.micro_n && s.warps > 1;
        for kw in [2, 4, 8] {
            assert!(space.iter().filter(sliced).any(|s| s.warps == kw), "no schedule with {kw} k warps");
        }
        // Large products keep their space as it was.
        assert!(!matmul_schedule_space(&big(), GpuArch::Sm90a).iter().any(|s| sliced(&s)));
    }

    #[test]
    fn warps_beyond_one_warp_tile_split_k() {
        let p = MatmulProblem { m: 16, ..big() };
        let base = default_matmul_schedule(&p, GpuArch::Sm80);
        for kw in [1, 2, 4, 8] {
            let s = Schedule { warps: kw, ..base };
            let c = config(&p, &s, &GpuArch::Sm90a.caps()).unwrap();
            assert_eq!((c.kw, c.threads()), (kw, 32 * kw));
            assert_eq!(c.shared_bytes(), kw * c.stages * (16 + 32) * 64 * 2);
        }
        // Eight rings of four stages do not fit sm_80's shared memory.
        assert!(validate_matmul_schedule(&p, &Schedule { warps: 8, ..base }, GpuArch::Sm80).is_err());
        for warps in [3, 16] {
            assert!(validate_matmul_schedule(&p, &Schedule { warps, ..base }, GpuArch::Sm80).is_err(), "{warps}");
        }
        // A 64-row tile (wgmma's encoding) or a block of two warp tiles cannot also split k.
        let tall = MatmulProblem { m: 64, ..big() };
        let s64 = Schedule { tile_m: 64, micro_m: 64, ..base };
        assert!(validate_matmul_schedule(&tall, &s64, GpuArch::Sm80).is_err());
        assert!(validate_matmul_schedule(&tall, &Schedule { warps: 1, ..s64 }, GpuArch::Sm80).is_ok());
        let two = Schedule { micro_n: 16, warps: 4, ..base };
        assert!(validate_matmul_schedule(&p, &two, GpuArch::Sm80).is_err());
        assert!(validate_matmul_schedule(&p, &Schedule { warps: 2, ..two }, GpuArch::Sm80).is_ok());
    }

    #[test]
    fn impossible_schedules_are_rejected() {
        let good = default_matmul_schedule(&big(), GpuArch::Sm90a);
        let bad = [
            Schedule { warps: good.warps + 1, ..good },
            Schedule { tile_m: 96, ..good },
            Schedule { micro_m: 128, micro_n: 128, warps: 2, ..good },
            Schedule { stages: 8, tile_k: 128, ..good },
            Schedule { split_k: 0, ..good },
            Schedule { split_k: 1000, ..good },
            Schedule { swizzle: 3, ..good },
            Schedule { tile_k: 8, ..good },
        ];
        for s in bad {
            assert!(validate_matmul_schedule(&big(), &s, GpuArch::Sm90a).is_err(), "{s}");
        }
        let f32p = MatmulProblem { dtype: DType::F32, ..big() };
        assert!(validate_matmul_schedule(&f32p, &good, GpuArch::Sm90a).is_err());
        // sm_80 has less shared memory than sm_90a.
        let deep = Schedule { tile_n: 256, warps: 8, stages: 8, ..good };
        assert!(validate_matmul_schedule(&big(), &deep, GpuArch::Sm80).is_err());
        assert!(validate_matmul_schedule(&big(), &deep, GpuArch::Sm90a).is_ok());
    }
}
