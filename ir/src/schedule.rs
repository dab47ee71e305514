//! What a [`Schedule`] means for its kernel: the one decoder of the shared knobs into a typed
//! schedule per kernel family ([`ScheduleKind`]), and its canonical text.
//!
//! A [`Schedule`] is the serialized form (the tuning cache, lockfiles and the optimizer's e-graph
//! store it, with [`SCHEDULE_FORMAT`]); the code generators, the optimizer and the tuner ask this
//! module what it encodes instead of testing magic values themselves. For example the warpgroup
//! (wgmma) encoding is `micro_m = 64, micro_n = tile_n`, warps a multiple of four, with
//! `vector_width` 64 meaning tiles loaded by TMA and 64-row tiles of 12 warps meaning the
//! ping-pong variant: [`WgmmaSchedule::decode`] is the only code that knows it.

use std::fmt;

use crate::dtype::DType;
use crate::op::Op;
use crate::program::{Kernel, KernelClass, Schedule, Tier};
use crate::target::{Feature, Target};

/// The query and key block sizes of an attention schedule: `tile_m` and `tile_n`, each within
/// 1..=1024 (a schedule made for another family reads as the default 16 x 64).
pub fn attention_blocks(s: &Schedule) -> [u32; 2] {
    let pick = |v: u32, default: u32| if (1..=1024).contains(&v) { v } else { default };
    [pick(s.tile_m, 16), pick(s.tile_n, 64)]
}

/// The version of the schedule encoding in tuning records and lockfiles. A record of a later
/// format is not decoded (it is re-tuned); records without one are format 1.
pub const SCHEDULE_FORMAT: u32 = 1;

/// The version of the code generators' output: raise it with any change to `tcc-codegen` (or the
/// runtime's launch code) that changes the code generated for a kernel and schedule, since a
/// measured time only holds for the code that was measured. A tuning record is *fresh* only when
/// measured on this device by this version and [`SCHEDULE_FORMAT`]; others are *borrowed* and
/// re-measured by the next `tcc tune`. It is not the crate version: a release that changes no
/// generated code re-tunes nothing.
pub const CODEGEN_VERSION: u32 = 6;

/// A warpgroup (wgmma) GEMM schedule: the knobs of the sm_90a warpgroup lowering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WgmmaSchedule {
    /// Consumer warpgroups (each multiplies 64 rows x `bn`).
    pub consumers: u32,
    /// A producer warpgroup does every copy (else every thread copies).
    pub producer: bool,
    /// The two consumers take alternate 64-row tiles (else they share one tile).
    pub pingpong: bool,
    /// Block tile columns (the wgmma N: 64, 128, 192 or 256).
    pub bn: u32,
    /// Shared-memory stages.
    pub stages: u32,
    /// Block-order swizzle group.
    pub swizzle: u32,
    /// Tiles arrive by TMA (else by `cp.async`).
    pub tma: bool,
    /// k splits across blocks (1 = none): each block of a split multiplies
    /// [`WgmmaSchedule::split_k_tiles`] consecutive k-tiles (the last split's past the end read
    /// as zeros) and writes f32 partial sums that a second entry adds up in split order before
    /// the fused epilogue. No split may be empty.
    pub splits: u32,
}

/// The most k splits of a warpgroup schedule.
pub const MAX_WARPGROUP_SPLITS: u32 = 64;

/// The work per block of the untuned 128 x 192 warpgroup tile against the wider tiles' (its
/// operand bytes per product are higher), as a fraction of theirs per output element: the
/// untuned schedule takes it where its rounds of blocks take a tenth less even so.
pub const NARROW_TILE_EFFICIENCY: f64 = 0.97;

/// An untuned warpgroup schedule splits k only when k is at least this many times the larger of
/// the product's rows and columns ([`WgmmaSchedule::untuned`]): 64 x 4096 x 4096 gained 4% split
/// in four, 127 x 4099 x 2053 lost 10% split in two (session 20).
pub const SPLIT_MIN_K_RATIO: u64 = 1;

/// The most k-tiles of a small product that the untuned one-consumer warpgroup tile takes
/// although its tiles fill less than half the SMs ([`WgmmaSchedule::untuned`]).
pub const SMALL_MAX_K_TILES: u64 = 48;

/// The fewest k-tiles of one split of an untuned warpgroup schedule
/// ([`WgmmaSchedule::untuned`]): 16 (1024 deep), so that the ring's fill and the partial
/// sums stay small beside the main loop.
pub const MIN_WARPGROUP_SPLIT_K_TILES: u64 = 16;

/// The longest k for which the untuned one-consumer warpgroup tile also runs products that fill
/// only half the SMs (a longer k there splits across blocks on `mma.sync` instead).
pub const WARPGROUP_HALF_FILL_MAX_K: u64 = 4096;

/// The fewest rows of a product that the untuned one-consumer warpgroup tile runs when it fills
/// only half the SMs (fewer rows stream their weights through the `mma.sync` tiles measured for
/// skinny products).
pub const WARPGROUP_HALF_FILL_MIN_M: u64 = 256;

/// Rows of one warpgroup MMA (and of one consumer warpgroup's tile).
pub const WGMMA_M: u32 = 64;
/// The warpgroup k-tile: 64 16-bit elements, one 128-byte swizzle row.
pub const WGMMA_K: u32 = 64;
/// Alignment of warpgroup operand tiles in shared memory (the 128-byte swizzle's period).
pub const WGMMA_ALIGN: u32 = 1024;
/// `vector_width` of a warpgroup schedule whose tiles arrive by 16-byte `cp.async` copies.
pub const WGMMA_CP_ASYNC_WIDTH: u32 = 8;
/// `vector_width` of a warpgroup schedule whose tiles arrive by TMA.
pub const WGMMA_TMA_WIDTH: u32 = 64;

/// True when `s` is in the warpgroup encoding at all (`micro_m = 64`, `micro_n = tile_n`, warps a
/// multiple of 4): such a schedule is meant for the wgmma lowering, valid or not. `mma.sync`
/// schedules need `warps = (tile_m / micro_m) x (tile_n / micro_n)`, never four times that, so the
/// two encodings cannot overlap.
pub fn is_warpgroup_encoding(s: &Schedule) -> bool {
    s.micro_m == WGMMA_M && s.micro_n == s.tile_n && s.warps >= 4 && s.warps.is_multiple_of(4)
}

impl WgmmaSchedule {
    /// The untuned warpgroup schedule of `batch` products of `m x n x k` on a GPU of `cores` SMs
    /// (the optimizer's candidate and the PTX backend's default), or `None` when no warpgroup tile
    /// suits it. In order, 128 x 256 and 128 x 128 (two consumer warpgroups) and 64 x 128 (one
    /// consumer beside a producer warpgroup), the first that
    /// - has tiles for 7/8 of the SMs;
    /// - or, where k is at least [`SPLIT_MIN_K_RATIO`] times the larger of m and n and the tile
    ///   is no taller and no wider than the product, reaches 7/8 of them within one wave with k
    ///   split into a power of two of parts of at least [`MIN_WARPGROUP_SPLIT_K_TILES`] k-tiles;
    /// - or (64 x 128 only) fills half of them with k at most [`WARPGROUP_HALF_FILL_MAX_K`], or an
    ///   eighth of them with more than 64 rows and at most [`SMALL_MAX_K_TILES`] k-tiles.
    ///
    /// An unsplit two-consumer tile becomes 128 x 192 where its rounds of blocks on the SMs take
    /// a tenth less even at [`NARROW_TILE_EFFICIENCY`] (wave quantization: 1536^3, 3072^3).
    /// Tiles arrive by TMA into the stages [`WgmmaSchedule::default_stages`] gives; block swizzle
    /// 8 (1 with splits). The caller checks that the schedule fits the problem and the device.
    ///
    /// Measured on an H100 (BENCHMARKS.md): 1.00-1.02 of cuBLAS on the suite's large f16/bf16
    /// GEMMs; on 768^3 (72 tiles of 64 x 128, 0.55 of the SMs) the 64 x 128 tile in six stages
    /// took 7.8 us against 9.5 for the best `mma.sync` schedule (session 13's exhaustive study).
    /// Split in k (session 20): 512 x 512 x 32768 on 128 x 256 tiles in 16 splits 0.0470 ms
    /// against 0.0616 on `mma.sync` splits; 1024 x 1024 x 16384 on 128 x 256 tiles in 4 splits
    /// 0.0596 against 0.0686 on the unsplit 64 x 128 tile.
    pub fn untuned(m: u64, n: u64, k: u64, batch: u64, cores: u64) -> Option<WgmmaSchedule> {
        WgmmaSchedule::untuned_tiles(m, n, k, batch, cores, true, true)
    }

    /// [`WgmmaSchedule::untuned`] of a dual product: without k splits (its kernel has none) or
    /// the 192-wide tile.
    pub fn untuned_unsplit(m: u64, n: u64, k: u64, batch: u64, cores: u64) -> Option<WgmmaSchedule> {
        WgmmaSchedule::untuned_tiles(m, n, k, batch, cores, false, false)
    }

    /// [`WgmmaSchedule::untuned`] without the 192-wide tile: for a joined B (sibling weights of
    /// multiples of 256 rows side by side), whose parts a 192-wide tile would straddle.
    pub fn untuned_power_of_two(m: u64, n: u64, k: u64, batch: u64, cores: u64) -> Option<WgmmaSchedule> {
        WgmmaSchedule::untuned_tiles(m, n, k, batch, cores, true, false)
    }

    /// [`WgmmaSchedule::untuned`]; only a `plain` product (not a dual one) splits k, and only with
    /// `narrow_ok` does it take the 192-wide tile.
    fn untuned_tiles(
        m: u64,
        n: u64,
        k: u64,
        batch: u64,
        cores: u64,
        plain: bool,
        narrow_ok: bool,
    ) -> Option<WgmmaSchedule> {
        for (consumers, bn, producer) in [(2u32, 256u32, false), (2, 128, false), (1, 128, true)] {
            let bm = u64::from(WGMMA_M * consumers);
            let tiles = m.div_ceil(bm) * n.div_ceil(u64::from(bn)) * batch;
            let fills = 8 * tiles >= 7 * cores;
            let half_fills =
                producer && 2 * tiles >= cores && k <= WARPGROUP_HALF_FILL_MAX_K && m >= WARPGROUP_HALF_FILL_MIN_M;
            // k splits only where k is long beside the output (their partial sums and the reduce
            // entry cost a few microseconds: 127 x 4099 x 2053 ran slower split in two).
            let long_k = k >= SPLIT_MIN_K_RATIO * m.max(n);
            // Only tiles inside the product split (8191 x 127 x 8193 ran 10% slower on 128 x 256
            // tiles split in two than on unsplit 64 x 128 ones).
            let inside = bm <= m.max(u64::from(WGMMA_M)) && u64::from(bn) <= n;
            let splits = if fills || half_fills || !plain || !long_k || !inside {
                1
            } else {
                let mut splits = 1u32;
                while tiles * u64::from(splits) * 2 <= cores
                    && WgmmaSchedule::split_k_tiles(k, splits * 2) >= MIN_WARPGROUP_SPLIT_K_TILES
                    && WgmmaSchedule::splits_fit(k, splits * 2)
                    && splits * 2 <= MAX_WARPGROUP_SPLITS
                {
                    splits *= 2;
                }
                splits
            };
            // A small product with a short k (an eighth of the SMs or more): the one-consumer tile
            // anyway, which beat the `mma.sync` tiles on 512^3 (6.3 us against 8.5) and on
            // 511 x 513 x 1025 and 127 x 4099 x 2053 (session 20).
            let small = plain
                && producer
                && splits == 1
                && 8 * tiles >= cores
                && m > u64::from(WGMMA_M)
                && k.div_ceil(u64::from(WGMMA_K)) <= SMALL_MAX_K_TILES;
            if fills || half_fills || small || (splits > 1 && 8 * tiles * u64::from(splits) >= 7 * cores) {
                // A two-consumer tile 192 wide where its rounds of blocks take a tenth less
                // (1536^3: 96 tiles in one round against 144 of 128 x 128 in two).
                let narrow = m.div_ceil(bm) * n.div_ceil(192) * batch;
                let rounds = |t: u64| t.div_ceil(cores) as f64;
                let take_192 = narrow_ok
                    && consumers == 2
                    && splits == 1
                    && rounds(narrow) * 192.0 / NARROW_TILE_EFFICIENCY < 0.9 * rounds(tiles) * f64::from(bn);
                let (bn, tiles) = if take_192 { (192, narrow) } else { (bn, tiles) };
                let stages = WgmmaSchedule::default_stages(tiles * u64::from(splits), cores, producer);
                return Some(WgmmaSchedule {
                    consumers,
                    producer,
                    pingpong: false,
                    bn,
                    stages,
                    swizzle: if splits > 1 { 1 } else { 8 },
                    tma: true,
                    splits,
                });
            }
        }
        None
    }

    /// The stages of the untuned warpgroup schedule of `tiles` block tiles on `cores` SMs: three
    /// from eight waves of tiles on; six for the one-consumer (`producer`) tile, whose stages are
    /// half the bytes of the two-consumer tiles' (the tuner's winners on an H100, BENCHMARKS.md
    /// session 13: 1024x1024x16384 68.0 us against 83.1 with four; 768^3 7.8 against 8.2 us,
    /// 1536^3 22.4 against 23.2 in the exhaustive study); else four.
    pub fn default_stages(tiles: u64, cores: u64, producer: bool) -> u32 {
        if tiles >= 8 * cores {
            3
        } else if producer {
            6
        } else {
            4
        }
    }

    /// The k-tiles each of `splits` splits multiplies for a depth of `k`: the k-tiles divided
    /// evenly, rounded up.
    pub fn split_k_tiles(k: u64, splits: u32) -> u64 {
        k.div_ceil(u64::from(WGMMA_K)).div_ceil(u64::from(splits.max(1)))
    }

    /// True when every one of `splits` splits of a depth of `k` has a k-tile of its own.
    pub fn splits_fit(k: u64, splits: u32) -> bool {
        let k_tiles = k.div_ceil(u64::from(WGMMA_K));
        splits >= 1 && (u64::from(splits) - 1) * WgmmaSchedule::split_k_tiles(k, splits) < k_tiles
    }

    /// Block tile rows: 64 for ping-pong, else 64 per consumer.
    pub fn bm(&self) -> u32 {
        if self.pingpong { WGMMA_M } else { self.consumers * WGMMA_M }
    }

    /// Warps per block: four per warpgroup.
    pub fn warps(&self) -> u32 {
        4 * (self.consumers + u32::from(self.producer))
    }

    /// The shared knobs that encode it.
    pub fn encode(&self) -> Schedule {
        Schedule {
            tier: Tier::Ptx,
            tile_m: self.bm(),
            tile_n: self.bn,
            tile_k: WGMMA_K,
            micro_m: WGMMA_M,
            micro_n: self.bn,
            vector_width: if self.tma { WGMMA_TMA_WIDTH } else { WGMMA_CP_ASYNC_WIDTH },
            stages: self.stages,
            warps: self.warps(),
            split_k: self.splits,
            swizzle: self.swizzle,
            threads: 0,
        }
    }

    /// The warpgroup schedule `s` encodes, or why it encodes none. Checks only the encoding (the
    /// lowering validates sizes, shared memory and registers against a problem and a target).
    pub fn decode(s: &Schedule) -> Result<WgmmaSchedule, String> {
        if !is_warpgroup_encoding(s) {
            return Err("needs micro_m = 64, micro_n = tile_n and warps a multiple of 4".into());
        }
        if s.tile_k != WGMMA_K {
            return Err("the k-tile must be 64".into());
        }
        if !matches!(s.tile_m, 64 | 128) {
            return Err("tile_m must be 64 or 128 (one or two consumer warpgroups)".into());
        }
        if !matches!(s.tile_n, 64 | 128 | 192 | 256) {
            return Err("tile_n must be 64, 128, 192 or 256".into());
        }
        let pingpong = s.tile_m == WGMMA_M && s.warps == 12;
        let consumers = if pingpong { 2 } else { s.tile_m / WGMMA_M };
        let producer = match s.warps {
            _ if pingpong => true,
            w if w == 4 * consumers => false,
            w if w == 4 * consumers + 4 => true,
            _ => return Err("warps must be 4 per consumer warpgroup, plus 4 for a producer".into()),
        };
        if s.split_k == 0 || s.split_k > MAX_WARPGROUP_SPLITS {
            return Err(format!("split_k must be 1 to {MAX_WARPGROUP_SPLITS}"));
        }
        let tma = match s.vector_width {
            WGMMA_CP_ASYNC_WIDTH => false,
            WGMMA_TMA_WIDTH => true,
            _ => return Err("vector_width must be 8 (cp.async) or 64 (TMA)".into()),
        };
        Ok(WgmmaSchedule {
            consumers,
            producer,
            pingpong,
            bn: s.tile_n,
            stages: s.stages,
            swizzle: s.swizzle,
            tma,
            splits: s.split_k,
        })
    }
}

/// The tiles of the SIMT matmul (GPU products of operands other than f16/bf16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimtTiles {
    /// Block tile rows, columns and depth.
    pub block: [u32; 3],
    /// Outputs per thread, rows and columns.
    pub thread: [u32; 2],
}

impl SimtTiles {
    /// What the SIMT matmul runs when a schedule's tiles do not fit: 128x64x8 blocks with 8x4
    /// outputs per thread (the fastest of those measured for f32 at 4096 on an H100).
    pub const FALLBACK: SimtTiles = SimtTiles { block: [128, 64, 8], thread: [8, 4] };

    /// The tiles `s` names (`tile_*` and `micro_*`).
    pub fn of(s: &Schedule) -> SimtTiles {
        SimtTiles { block: [s.tile_m, s.tile_n, s.tile_k], thread: [s.micro_m, s.micro_n] }
    }

    /// Threads per block (0 when a thread tile is empty or does not divide its block tile).
    pub fn threads(&self) -> u64 {
        let [bm, bn, _] = self.block.map(u64::from);
        let [tm, tn] = self.thread.map(u64::from);
        if tm == 0 || tn == 0 || !bm.is_multiple_of(tm) || !bn.is_multiple_of(tn) {
            return 0;
        }
        (bm / tm) * (bn / tn)
    }

    /// True when the SIMT matmul runs these tiles as they are on a target of `caps`: thread tiles
    /// that divide the block's, at most 64 outputs per thread, a depth of at most 32, whole warps,
    /// at most 4 elements of each operand tile loaded per thread, both tiles in static shared
    /// memory.
    pub fn fit(&self, caps: &crate::target::GpuCaps) -> bool {
        let [bm, bn, bk] = self.block.map(u64::from);
        let [tm, tn] = self.thread.map(u64::from);
        let threads = self.threads();
        threads > 0
            && bk > 0
            && tm * tn <= 64
            && bk <= 32
            && threads.is_multiple_of(32)
            && threads <= u64::from(caps.max_threads_per_block)
            && (bm * bk).is_multiple_of(threads)
            && (bk * bn).is_multiple_of(threads)
            && (bm * bk) / threads <= 4
            && (bk * bn) / threads <= 4
            && (bm + 4 + bn) * bk * 4 <= u64::from(caps.max_static_shared_bytes)
    }

    /// The tiles the SIMT matmul runs for `s`: its own when they fit, else [`SimtTiles::FALLBACK`].
    pub fn effective(s: &Schedule, caps: &crate::target::GpuCaps) -> SimtTiles {
        let own = SimtTiles::of(s);
        if own.fit(caps) { own } else { SimtTiles::FALLBACK }
    }
}

/// A GPU attention schedule: the knobs of the attention kernel (FlashAttention-2 structure, its
/// products on `mma.sync` or, with `wgmma`, on warpgroup MMAs). Encoded as `tile_m = Br`,
/// `tile_n = Bc`, `warps`, `stages`, `split_k = splits` and `micro_m = 64` for warpgroup MMAs;
/// every warp owns `Br / warps` query rows (16 or 32), and the keys and values of `stages - 1`
/// blocks are in flight while one is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpuAttentionSchedule {
    /// Queries (`Br`) and keys (`Bc`) per block.
    pub block: [u32; 2],
    /// Warps per block.
    pub warps: u32,
    /// Shared-memory stages of the key/value ring (2 or 3; 3 or 4 on warpgroup MMAs, whose
    /// ring keeps a block's values one block longer).
    pub stages: u32,
    /// Key splits (flash-decoding): each of `splits` blocks per query block takes a contiguous
    /// share of the live key blocks and writes its partial output and row statistics, and a
    /// second entry combines them by their log-sum-exp. 1: one kernel, no split; 0: chosen from
    /// the shape and the SM count ([`GpuAttentionSchedule::splits_for`]). At most
    /// [`MAX_ATTENTION_SPLITS`].
    pub splits: u32,
    /// The products run as warpgroup MMAs (`wgmma`, sm_90a): each warpgroup's 64 query rows
    /// times the key block read from shared memory, and the probabilities from registers times
    /// the value block. Head dimensions of 64 or 128, 16 rows per warp.
    pub wgmma: bool,
    /// On warpgroup MMAs: a producer warpgroup (four warps more than the consumers', counted in
    /// `warps`) copies every key and value block into the ring and signals each stage on an
    /// mbarrier; the consumer warpgroups wait for it and free it through another, so they run
    /// without a block-wide barrier per key block (else every thread copies, and a barrier per
    /// key block frees the ring's oldest stage).
    pub producer: bool,
    /// With a producer and two consumer warpgroups: their products take turns (ping-pong), each
    /// issuing its block's products once the other has issued its own, so that one warpgroup's
    /// softmax runs while the other's products occupy the tensor cores.
    pub pingpong: bool,
    /// With a producer: one of its threads copies each key and value block by TMA
    /// (`cp.async.bulk.tensor`, the bytes completing the stage's `full` barrier) instead of 128
    /// threads' 16-byte `cp.async`s. Operands whose layout no tensor map describes keep `cp.async`.
    pub tma: bool,
}

/// What the attention kernel may use on a device: shared memory per block and warpgroup MMAs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionDevice {
    /// Dynamic shared memory one block may use, bytes.
    pub shared: u32,
    /// The device runs `wgmma.mma_async` (sm_90a).
    pub wgmma: bool,
}

impl AttentionDevice {
    /// The device of `caps`.
    pub fn of(caps: &crate::target::GpuCaps) -> AttentionDevice {
        AttentionDevice { shared: caps.max_shared_optin_bytes, wgmma: caps.has(Feature::Wgmma) }
    }
}

/// The most key splits of an attention schedule.
pub const MAX_ATTENTION_SPLITS: u32 = 64;

/// What an attention's schedule must fit: its head dimensions and how many tensors its score
/// function reads per score (a bias or a mask passed as data; each costs registers per score).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionShape {
    /// The query/key head dimension.
    pub depth: u32,
    /// The value head dimension.
    pub width: u32,
    /// Tensors the score function reads.
    pub score_reads: u32,
    /// Query rows of one group of heads that share their keys and values (queries times the
    /// group, [`crate::attention::GpuAttention::rows`]); 0 when unknown. At most
    /// [`DECODE_ROWS`] picks the decode space.
    pub rows: u64,
}

/// Query rows per group up to which an attention is decoding: few queries, so small query
/// blocks and key splits.
pub const DECODE_ROWS: u64 = 32;

/// Registers per thread the attention kernel's estimate may reach ([`GpuAttentionSchedule::registers`]).
const ATTENTION_REGISTER_BUDGET: u32 = 224;

impl GpuAttentionSchedule {
    /// Query rows of one consumer warp.
    pub fn rows_per_warp(&self) -> u32 {
        self.block[0] / self.consumer_warps().max(1)
    }

    /// No producer, no ping-pong, no TMA (the fields a literal of the space fills in with
    /// `..GpuAttentionSchedule::plain()`); 64 x 64 on 4 warps, 2 stages, splits chosen.
    pub fn plain() -> GpuAttentionSchedule {
        GpuAttentionSchedule {
            block: [64, 64],
            warps: 4,
            stages: 2,
            splits: 0,
            wgmma: false,
            producer: false,
            pingpong: false,
            tma: false,
        }
    }

    /// The warps that compute (all but a producer warpgroup's four).
    pub fn consumer_warps(&self) -> u32 {
        if self.producer { self.warps.saturating_sub(4) } else { self.warps }
    }

    /// The same schedule with a producer warpgroup copying the ring (warpgroup schedules only).
    pub fn with_producer(&self) -> Option<GpuAttentionSchedule> {
        (self.wgmma && !self.producer).then_some(GpuAttentionSchedule {
            warps: self.warps + 4,
            producer: true,
            ..*self
        })
    }

    /// The same with a producer and its two consumer warpgroups taking turns (schedules of two
    /// warpgroups only).
    pub fn with_pingpong(&self) -> Option<GpuAttentionSchedule> {
        let p = if self.producer { Some(*self) } else { self.with_producer() }?;
        (p.consumer_warps() == 8).then_some(GpuAttentionSchedule { pingpong: true, ..p })
    }

    /// The same with a producer that copies by TMA (the emulator does not run TMA: the GPU tests
    /// check it against the interpreter).
    pub fn with_tma(&self) -> Option<GpuAttentionSchedule> {
        let p = if self.producer { Some(*self) } else { self.with_producer() }?;
        Some(GpuAttentionSchedule { tma: true, ..p })
    }

    /// Every variant of this warpgroup schedule with a producer: copying by `cp.async` or by TMA,
    /// with and without ping-pong where it has two consumers (none for an `mma.sync` schedule).
    pub fn producer_variants(&self) -> Vec<GpuAttentionSchedule> {
        let pingpong = self.with_pingpong();
        [self.with_producer(), pingpong, self.with_tma(), pingpong.and_then(|p| p.with_tma())]
            .into_iter()
            .flatten()
            .collect()
    }

    /// The shared knobs that encode it.
    pub fn encode(&self) -> Schedule {
        Schedule {
            tier: Tier::Ptx,
            tile_m: self.block[0],
            tile_n: self.block[1],
            warps: self.warps,
            stages: self.stages,
            split_k: self.splits,
            micro_m: if self.wgmma { WGMMA_M } else { Schedule::default_for(Tier::Ptx).micro_m },
            // Ping-pong doubles the micro tile's columns (the knob attention has no other use for).
            micro_n: Schedule::default_for(Tier::Ptx).micro_n * if self.pingpong { 2 } else { 1 },
            vector_width: if self.tma { WGMMA_TMA_WIDTH } else { Schedule::default_for(Tier::Ptx).vector_width },
            ..Schedule::default_for(Tier::Ptx)
        }
    }

    /// The attention schedule `s` encodes, or why it encodes none (the encoding only: whether it
    /// fits an attention is [`GpuAttentionSchedule::fits`]).
    pub fn decode(s: &Schedule) -> Result<GpuAttentionSchedule, String> {
        let wgmma = s.micro_m == WGMMA_M;
        // A producer warpgroup shows as four warps beyond the consumers' 16 rows each.
        let producer = wgmma && s.warps == s.tile_m / 16 + 4;
        let a = GpuAttentionSchedule {
            block: [s.tile_m, s.tile_n],
            warps: s.warps,
            stages: s.stages,
            splits: s.split_k,
            wgmma,
            producer,
            pingpong: s.micro_n == 2 * Schedule::default_for(Tier::Ptx).micro_n,
            tma: s.vector_width == WGMMA_TMA_WIDTH,
        };
        if !matches!(a.consumer_warps(), 1 | 2 | 4 | 8) {
            return Err("warps must be 1, 2, 4 or 8 (plus 4 for a producer warpgroup)".into());
        }
        if a.block[0] != a.consumer_warps() * a.rows_per_warp() || !matches!(a.rows_per_warp(), 16 | 32) {
            return Err("tile_m must be 16 or 32 rows per warp".into());
        }
        if !matches!(a.block[1], 32 | 64 | 128) {
            return Err("tile_n must be 32, 64 or 128".into());
        }
        if a.wgmma && !matches!(a.stages, 3 | 4) {
            return Err("stages must be 3 or 4 on warpgroup MMAs".into());
        }
        if !a.wgmma && !matches!(a.stages, 2 | 3) {
            return Err("stages must be 2 or 3".into());
        }
        if a.pingpong && !(a.producer && a.consumer_warps() == 8) {
            return Err("ping-pong needs a producer beside two consumer warpgroups".into());
        }
        if a.tma && !a.producer {
            return Err("TMA copies need a producer warpgroup".into());
        }
        if a.splits > MAX_ATTENTION_SPLITS {
            return Err(format!("split_k (key splits) must be at most {MAX_ATTENTION_SPLITS}"));
        }
        let consumers = a.consumer_warps();
        if a.wgmma && (a.rows_per_warp() != 16 || !matches!(consumers, 4 | 8) || !matches!(a.block[1], 64 | 128)) {
            return Err("warpgroup attention needs 16 rows per warp, 4 or 8 warps and tile_n 64 or 128".into());
        }
        Ok(a)
    }

    /// Dynamic shared memory for head dimensions `depth` (queries, keys) and `width` (values),
    /// 16-bit elements: the query block and `stages` blocks of keys and values, every row padded
    /// by 16 bytes (the output tile is staged in the same memory at the end).
    /// With `wgmma` the rows are not padded (the tiles are in the 128-byte swizzled layout that
    /// wgmma's descriptors read) and 1 KiB more aligns them to 1024 bytes.
    pub fn shared_bytes(&self, depth: u32, width: u32) -> u32 {
        let [br, bc] = self.block;
        let staged = br * (width + 8) * 2;
        if self.wgmma {
            let barriers = if self.producer { 16 * self.stages } else { 0 };
            return (WGMMA_ALIGN + br * depth * 2 + self.stages * bc * (depth + width) * 2 + barriers).max(staged);
        }
        (br * (depth * 2 + 16) + self.stages * bc * ((depth + width) * 2 + 32)).max(staged)
    }

    /// Whether the query fragments stay in registers for the whole tile (one 16-row tile per warp
    /// and a head dimension of at most 64); otherwise they are read from shared memory per block.
    pub fn queries_in_registers(&self, depth: u32) -> bool {
        !self.wgmma && self.rows_per_warp() == 16 && depth <= 64
    }

    /// A rough count of a thread's registers with a score function that reads no tensor: the
    /// output accumulators (`width / 2` per 16-row tile), about one per key of the block for the
    /// scores, their probabilities and the logits' temporaries (half as much again for a second
    /// 16-row tile), the query fragments when kept, and a reserve for addresses and statistics.
    /// Fitted to ptxas 12.9 on sm_80 and sm_90a, worst of a causal, a plain and a soft-capped
    /// score function (estimate, measured): 64x64 on 4 warps 184, 203 at d128; 128x64 on 4 warps
    /// 216, 238 at d64 and 248, 255 with spills at d96; 128x32 on 4 warps 216, 245 at d112 and
    /// 232, 255 with spills at d128; 64x128 on 4 warps 224, 242 at d80 and 232, 255 at d96.
    /// With `wgmma`: the output and score accumulators, the packed probabilities and the same
    /// reserve.
    pub fn registers(&self, depth: u32, width: u32) -> u32 {
        if self.wgmma {
            return width / 2 + self.block[1] / 2 + self.block[1] / 4 + 56;
        }
        let tiles = self.rows_per_warp() / 16;
        let queries = if self.queries_in_registers(depth) { depth / 4 } else { 0 };
        tiles * width / 2 + self.block[1] * (tiles + 1) / 2 + queries + 56
    }

    /// Whether the kernel runs this schedule for `shape` on a target with `shared` bytes of shared
    /// memory per block, without spilling registers. A score function that reads tensors loads
    /// each score's elements separately (ptxas: 240-255 registers at every head dimension): it
    /// runs only 16 rows per warp, 64 keys and 2 stages (no spills at any head dimension up to
    /// 128; 32 rows per warp, 128 keys or 3 stages spilled at some).
    /// Warpgroup schedules need a device with `wgmma`, head dimensions of 64 or 128 and a score
    /// function that reads no tensor.
    pub fn fits(&self, shape: &AttentionShape, device: AttentionDevice) -> bool {
        let lean = self.rows_per_warp() == 16 && self.block[1] == 64 && self.stages == 2;
        let warpgroup = !self.wgmma
            || (device.wgmma
                && matches!(shape.depth, 64 | 128)
                && matches!(shape.width, 64 | 128)
                && shape.score_reads == 0);
        warpgroup
            && self.shared_bytes(shape.depth, shape.width) <= device.shared
            && self.registers(shape.depth, shape.width) <= ATTENTION_REGISTER_BUDGET
            && (shape.score_reads == 0 || lean)
    }

    /// The default for `shape`: the first of [`Self::space`]. On a device with warpgroup MMAs and
    /// head dimensions of 64 or 128, 128 queries by 128 keys on two consumer warpgroups in
    /// ping-pong beside a producer warpgroup copying by TMA, 3 stages (64 by 64 on one warpgroup,
    /// no producer, at d64);
    /// else 64 queries by 64 keys on 4 warps with 2 stages where it fits (measured fastest of the
    /// `mma.sync` space on an H100 at d128, plain and causal: BENCHMARKS.md, session 11), else
    /// 128 by 64 on 8 warps; for decoding ([`DECODE_ROWS`]) 16 queries by 64 keys on one warp with
    /// 2 stages (on an H100 at b32, 32 query heads over 8, 8192 keys, d128: 0.384 ms, every
    /// schedule of the decode space within 0.381 to 0.402 ms; BENCHMARKS.md, session 14). Key
    /// splits are chosen at compile time (0).
    pub fn default_for(shape: &AttentionShape, device: AttentionDevice) -> GpuAttentionSchedule {
        GpuAttentionSchedule::space(shape, device).first().copied().unwrap_or(GpuAttentionSchedule {
            block: [128, 64],
            warps: 8,
            ..GpuAttentionSchedule::plain()
        })
    }

    /// The schedule the kernel runs for `s`: its own when it decodes and fits, else the default
    /// (with the key splits of `s` when it decodes: a warpgroup schedule on sm_80 keeps them).
    pub fn effective(s: &Schedule, shape: &AttentionShape, device: AttentionDevice) -> GpuAttentionSchedule {
        match GpuAttentionSchedule::decode(s) {
            Ok(a) if a.fits(shape, device) => a,
            Ok(a) => GpuAttentionSchedule { splits: a.splits, ..GpuAttentionSchedule::default_for(shape, device) },
            Err(_) => GpuAttentionSchedule::default_for(shape, device),
        }
    }

    /// The tuner's space for `shape`, best first (as measured on an H100 where measured): every
    /// candidate fits, each with its key splits chosen at compile time; for prefill the
    /// warpgroup schedules first where the device and head dimensions allow them, each of two
    /// consumer warpgroups preceded by its producer variants (TMA and ping-pong, TMA, ping-pong,
    /// `cp.async`); for decoding ([`DECODE_ROWS`]) small query blocks, then the first of them
    /// with fixed key splits.
    pub fn space(shape: &AttentionShape, device: AttentionDevice) -> Vec<GpuAttentionSchedule> {
        // Measured on an H200 (BENCHMARKS.md, session 15, the suite's shapes): at d128 128 x 128
        // on two warpgroups 2.350 ms plain and 1.370 causal, 64 x 64 on one 2.404 and 1.380; at
        // d64 64 x 64 0.768 ms against 0.892 for 128 x 128. On an H100 (session 18): 128 x 128
        // with a producer copying by TMA and the consumers in ping-pong 1.952 ms plain and 1.226
        // causal against 2.353 and 1.369 without the producer; the producer variants of one
        // consumer warpgroup (64 x 64 at d64, 1.30-1.37 ms against 0.761) are left out.
        const WARPGROUP: [(u32, u32, u32); 4] = [(128, 128, 8), (128, 64, 8), (64, 128, 4), (64, 64, 4)];
        const WARPGROUP_D64: [(u32, u32, u32); 4] = [(64, 64, 4), (64, 128, 4), (128, 64, 8), (128, 128, 8)];
        const PREFILL: [(u32, u32, u32); 6] =
            [(64, 64, 4), (128, 64, 8), (128, 64, 4), (128, 128, 8), (64, 128, 4), (128, 32, 4)];
        const DECODE: [(u32, u32, u32); 4] = [(16, 64, 1), (16, 32, 1), (32, 64, 2), (64, 64, 4)];
        let decoding = shape.rows > 0 && shape.rows <= DECODE_ROWS;
        let mut blocks: Vec<(u32, u32, u32, bool)> = Vec::new();
        if decoding {
            blocks.extend(DECODE.map(|(br, bc, w)| (br, bc, w, false)));
        } else {
            let warpgroup = if shape.depth <= 64 { WARPGROUP_D64 } else { WARPGROUP };
            blocks.extend(warpgroup.map(|(br, bc, w)| (br, bc, w, true)));
            blocks.extend(PREFILL.map(|(br, bc, w)| (br, bc, w, false)));
        }
        let mut out = Vec::new();
        for (br, bc, warps, wgmma) in blocks {
            // On warpgroup MMAs a block's values outlive its keys by one block: a stage more.
            for stages in if wgmma { [3, 4] } else { [2, 3] } {
                let a = GpuAttentionSchedule { block: [br, bc], warps, stages, splits: 0, wgmma, ..Self::plain() };
                if !a.fits(shape, device) {
                    continue;
                }
                if a.wgmma && a.consumer_warps() == 8 {
                    out.extend(a.producer_variants().into_iter().rev().filter(|v| v.fits(shape, device)));
                }
                out.push(a);
            }
        }
        if decoding && let Some(first) = out.first().copied() {
            out.extend([1, 2, 4, 8, 16, 32].map(|splits| GpuAttentionSchedule { splits, ..first }));
        }
        out
    }

    /// The space and the producer variants it leaves out (those of one consumer warpgroup, and
    /// any a stage count rules out of the space): every schedule of the kernel for `shape` that
    /// a tuning record may name. The tests run them all.
    pub fn space_and_variants(shape: &AttentionShape, device: AttentionDevice) -> Vec<GpuAttentionSchedule> {
        let mut all = GpuAttentionSchedule::space(shape, device);
        let variants: Vec<GpuAttentionSchedule> = all
            .iter()
            .filter(|a| !a.producer)
            .flat_map(GpuAttentionSchedule::producer_variants)
            .filter(|v| v.fits(shape, device))
            .collect();
        for v in variants {
            if !all.contains(&v) {
                all.push(v);
            }
        }
        all
    }

    /// Blocks of this schedule one SM holds at once on a target with `caps`, by its shared
    /// memory (each block also reserves 1 KiB), its registers ([`Self::registers`]), threads and
    /// the block limit.
    pub fn resident_blocks(&self, depth: u32, width: u32, caps: &crate::target::GpuCaps) -> u32 {
        const REGISTERS_PER_SM: u32 = 65536;
        let threads = 32 * self.warps.max(1);
        let by_shared = (caps.max_shared_optin_bytes + 1024) / (self.shared_bytes(depth, width) + 1024);
        let regs = self.registers(depth, width).div_ceil(8) * 8;
        let by_registers = REGISTERS_PER_SM / (threads * regs).max(1);
        let by_threads = caps.max_threads_per_sm / threads;
        by_shared.min(by_registers).min(by_threads).min(caps.max_blocks_per_sm).max(1)
    }

    /// The key splits the kernel runs for `tiles` (query blocks times batch entries) over
    /// `key_blocks` blocks of keys, with `slots` blocks resident on the whole device (SMs times
    /// [`Self::resident_blocks`]): the schedule's own (at most one per key block), or when 0, none
    /// when the tiles fill the slots, else flash-decoding's choice: the fewest splits (each at
    /// least two key blocks, at most [`MAX_ATTENTION_SPLITS`]) whose waves of blocks fill the
    /// slots within 85% of the best such count.
    pub fn splits_for(&self, tiles: u64, key_blocks: u64, slots: u64) -> u32 {
        if self.splits != 0 {
            return self.splits.min(u32::try_from(key_blocks).unwrap_or(u32::MAX)).max(1);
        }
        let slots = slots.max(1);
        if tiles >= slots || tiles == 0 {
            return 1;
        }
        let most = (key_blocks / 2).clamp(1, u64::from(MAX_ATTENTION_SPLITS));
        let efficiency = |s: u64| {
            let waves = (tiles * s) as f64 / slots as f64;
            waves / waves.ceil()
        };
        let best = (1..=most).map(efficiency).fold(0.0, f64::max);
        (1..=most).find(|&s| efficiency(s) >= 0.85 * best).map_or(1, |s| s as u32)
    }
}

/// A schedule as its kernel family's code generator reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleKind {
    /// The interpreter: nothing to choose.
    Interp,
    /// A CPU loop nest (either tier): the host threads it runs on (0 = every core).
    CpuLoops {
        /// Host threads.
        threads: u32,
    },
    /// A CPU matrix product: cache blocks and a register tile (each tier rounds them to what it
    /// emits), and the host threads.
    CpuGemm {
        /// Cache block rows, columns and depth.
        block: [u32; 3],
        /// Register tile rows and columns.
        register: [u32; 2],
        /// Host threads (0 = every core).
        threads: u32,
    },
    /// A CPU attention kernel: blocks of queries and keys (the online softmax runs over one block of
    /// keys at a time for one block of queries), and the host threads.
    CpuAttention {
        /// Queries and keys per block.
        block: [u32; 2],
        /// Host threads (0 = every core).
        threads: u32,
    },
    /// A GPU elementwise, row-reduction or generic kernel: the lowering picks its own launch shape
    /// from the data (vectors of up to 16 bytes, a warp or a block per row); no knob applies.
    GpuFixed,
    /// A GPU matrix product on CUDA cores (operands other than f16/bf16): the tiles it runs
    /// (the schedule's, or the lowering's fallback when those do not fit).
    SimtGemm(SimtTiles),
    /// An `mma.sync` tensor-core GEMM.
    MmaSync {
        /// Block tile rows, columns and depth.
        block: [u32; 3],
        /// Warp tile rows and columns.
        warp: [u32; 2],
        /// Warps per block (beyond the warp tiles: a k split inside the block).
        warps: u32,
        /// `cp.async` pipeline stages.
        stages: u32,
        /// k splits across blocks.
        split_k: u32,
        /// Block-order swizzle group.
        swizzle: u32,
    },
    /// A warpgroup (wgmma) GEMM (sm_90a).
    Wgmma(WgmmaSchedule),
    /// The GPU attention kernel (an attention body it runs: [`crate::attention::GpuAttention`]).
    GpuAttention(GpuAttentionSchedule),
}

impl ScheduleKind {
    /// The family name of the schedule (the first word of its canonical text).
    pub fn name(&self) -> &'static str {
        match self {
            ScheduleKind::Interp => "interp",
            ScheduleKind::CpuLoops { .. } => "cpu-loops",
            ScheduleKind::CpuGemm { .. } => "cpu-gemm",
            ScheduleKind::CpuAttention { .. } => "cpu-attention",
            ScheduleKind::GpuFixed => "gpu-fixed",
            ScheduleKind::SimtGemm(_) => "simt-gemm",
            ScheduleKind::MmaSync { .. } => "mma.sync",
            ScheduleKind::Wgmma(_) => "wgmma",
            ScheduleKind::GpuAttention(_) => "gpu-attention",
        }
    }
}

/// The dtype of the first matrix product's operands in `kernel` (what picks tensor cores).
fn product_dtype(kernel: &Kernel) -> Option<DType> {
    let g = &kernel.graph;
    g.nodes.iter().find_map(|n| match n.op {
        Op::MatMul(a, _) => g.ty(a).map(|t| t.dtype),
        _ => None,
    })
}

impl Kernel {
    /// The typed schedule of this kernel on `target`: the one place the shared knobs are decoded.
    pub fn schedule_kind(&self, target: Target) -> ScheduleKind {
        let s = &self.schedule;
        let product = self.class == KernelClass::MatMul;
        match target {
            Target::Interp => ScheduleKind::Interp,
            Target::Cpu(_) if product => ScheduleKind::CpuGemm {
                block: [s.tile_m, s.tile_n, s.tile_k],
                register: [s.micro_m, s.micro_n],
                threads: s.threads,
            },
            Target::Cpu(_) if self.class == KernelClass::Attention => {
                let [queries, keys] = attention_blocks(s);
                ScheduleKind::CpuAttention { block: [queries, keys], threads: s.threads }
            }
            Target::Cpu(_) => ScheduleKind::CpuLoops { threads: s.threads },
            Target::Gpu(arch) if self.class == KernelClass::Attention => {
                let caps = arch.caps();
                let tensor_cores = caps.has(Feature::MmaM16N8K16) && caps.has(Feature::CpAsync);
                match crate::attention::GpuAttention::find(&self.graph) {
                    Some(a) if tensor_cores => ScheduleKind::GpuAttention(GpuAttentionSchedule::effective(
                        s,
                        &a.shape(),
                        AttentionDevice::of(&caps),
                    )),
                    _ => ScheduleKind::GpuFixed,
                }
            }
            Target::Gpu(_) if !product => ScheduleKind::GpuFixed,
            Target::Gpu(arch) => {
                let caps = arch.caps();
                let tensor_cores = matches!(product_dtype(self), Some(DType::F16 | DType::BF16))
                    && caps.has(Feature::MmaM16N8K16)
                    && caps.has(Feature::CpAsync);
                if !tensor_cores {
                    return ScheduleKind::SimtGemm(SimtTiles::effective(s, &caps));
                }
                if caps.has(Feature::Wgmma)
                    && let Ok(wg) = WgmmaSchedule::decode(s)
                {
                    return ScheduleKind::Wgmma(wg);
                }
                ScheduleKind::MmaSync {
                    block: [s.tile_m, s.tile_n, s.tile_k],
                    warp: [s.micro_m, s.micro_n],
                    warps: s.warps,
                    stages: s.stages,
                    split_k: s.split_k,
                    swizzle: s.swizzle,
                }
            }
        }
    }
}

impl fmt::Display for ScheduleKind {
    /// The canonical text: the family, then its knobs (`mma.sync 128x128x32 warp=64x64 warps=4
    /// stages=4 split_k=1 swizzle=8`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let threads = |t: u32| if t == 0 { "all".to_string() } else { t.to_string() };
        match self {
            ScheduleKind::Interp | ScheduleKind::GpuFixed => f.write_str(self.name()),
            ScheduleKind::CpuLoops { threads: t } => write!(f, "cpu-loops threads={}", threads(*t)),
            ScheduleKind::CpuAttention { block: [q, k], threads: t } => {
                write!(f, "cpu-attention block={q}x{k} threads={}", threads(*t))
            }
            ScheduleKind::CpuGemm { block: [m, n, k], register: [rm, rn], threads: t } => {
                write!(f, "cpu-gemm block={m}x{n}x{k} register={rm}x{rn} threads={}", threads(*t))
            }
            ScheduleKind::SimtGemm(SimtTiles { block: [m, n, k], thread: [tm, tn] }) => {
                write!(f, "simt-gemm block={m}x{n}x{k} thread={tm}x{tn}")
            }
            ScheduleKind::MmaSync { block: [m, n, k], warp: [wm, wn], warps, stages, split_k, swizzle } => write!(
                f,
                "mma.sync block={m}x{n}x{k} warp={wm}x{wn} warps={warps} stages={stages} split_k={split_k} \
                 swizzle={swizzle}"
            ),
            ScheduleKind::Wgmma(w) => write!(
                f,
                "wgmma block={}x{}x{WGMMA_K} consumers={}{}{} stages={} load={} swizzle={}{}",
                w.bm(),
                w.bn,
                w.consumers,
                if w.producer { " producer" } else { "" },
                if w.pingpong { " ping-pong" } else { "" },
                w.stages,
                if w.tma { "tma" } else { "cp.async" },
                w.swizzle,
                if w.splits > 1 { format!(" split_k={}", w.splits) } else { String::new() }
            ),
            ScheduleKind::GpuAttention(a) => {
                let splits = if a.splits == 0 { "auto".to_string() } else { a.splits.to_string() };
                write!(
                    f,
                    "gpu-attention block={}x{} warps={} stages={} splits={splits}{}{}{}{}",
                    a.block[0],
                    a.block[1],
                    a.warps,
                    a.stages,
                    if a.wgmma { " wgmma" } else { "" },
                    if a.producer { " producer" } else { "" },
                    if a.pingpong { " ping-pong" } else { "" },
                    if a.tma { " tma" } else { "" }
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untuned_warpgroup_stages_are_six_for_one_consumer() {
        // 1024x1024x16384 on 132 SMs: 128 tiles of 64 x 128, one consumer beside a producer.
        assert_eq!(WgmmaSchedule::default_stages(128, 132, true), 6);
        assert_eq!(WgmmaSchedule::default_stages(128, 132, false), 4);
        assert_eq!(WgmmaSchedule::default_stages(8 * 132, 132, true), 3);
    }

    #[test]
    fn long_k_products_of_few_tiles_split_k_up_to_one_wave() {
        let split =
            |m, n, k| WgmmaSchedule::untuned(m, n, k, 1, 132).map(|w| (w.bm(), w.bn, w.producer, w.splits, w.stages));
        assert_eq!(split(512, 512, 32768), Some((128, 256, false, 16, 4)));
        // The two-consumer tile split before the one-consumer tile unsplit.
        assert_eq!(split(1024, 1024, 16384), Some((128, 256, false, 4, 4)));
        assert_eq!(
            WgmmaSchedule::untuned_unsplit(1024, 1024, 16384, 1, 132).map(|w| (w.bm(), w.splits)),
            Some((64, 1))
        );
        // No taller than the product: 64 rows take the one-consumer tile.
        assert_eq!(split(64, 2048, 65536), Some((64, 128, true, 8, 6)));
        // 16 k-tiles per split at least: 512 x 512 x 4096 on the one-consumer tile in 4.
        assert_eq!(split(512, 512, 4096), Some((64, 128, true, 4, 6)));
        assert_eq!(split(512, 512, 2048), None);
        // Filling tiles are not split; too few tiles for any split: none (mma.sync splits stay).
        assert_eq!(split(2048, 2048, 16384).map(|w| w.3), Some(1));
        assert_eq!(split(64, 64, 131072), None);
        // Uneven: 513 k-tiles in 16 splits of 33, the last one's past the end.
        assert_eq!(split(512, 512, 32768 + 64), Some((128, 256, false, 16, 4)));
        assert_eq!(WgmmaSchedule::split_k_tiles(32768 + 64, 16), 33);
        assert!(WgmmaSchedule::splits_fit(32768 + 64, 16) && !WgmmaSchedule::splits_fit(320, 4));
        for (m, n, k) in [(512, 512, 32768), (1024, 1024, 16384), (64, 2048, 65536), (512, 512, 32832)] {
            let w = WgmmaSchedule::untuned(m, n, k, 1, 132).unwrap();
            assert_eq!(WgmmaSchedule::decode(&w.encode()), Ok(w));
            assert!(WgmmaSchedule::splits_fit(k, w.splits));
        }
    }

    #[test]
    fn the_untuned_warpgroup_tile_is_the_largest_that_fills_the_gpu() {
        let tile = |m, n, k| WgmmaSchedule::untuned(m, n, k, 1, 132).map(|w| (w.bm(), w.bn, w.producer, w.stages));
        assert_eq!(tile(4096, 4096, 4096), Some((128, 256, false, 4)));
        assert_eq!(tile(8192, 8192, 8192), Some((128, 256, false, 3)));
        // 144 tiles of 128 x 128 take two rounds on 132 SMs, 96 of 128 x 192 one; 288 of 128 x 256
        // three, 384 of 128 x 192 three of less work; 4096^3 keeps 128 x 256.
        assert_eq!(tile(1536, 1536, 1536), Some((128, 192, false, 4)));
        assert_eq!(tile(3072, 3072, 3072), Some((128, 192, false, 4)));
        assert_eq!(WgmmaSchedule::untuned_unsplit(1536, 1536, 1536, 1, 132).map(|w| w.bn), Some(128));
        assert_eq!(tile(1024, 1024, 1024), Some((64, 128, true, 6)));
        // Half the SMs: the one-consumer tile while k is short, else none (k splits on mma.sync).
        assert_eq!(tile(768, 768, 768), Some((64, 128, true, 6)));
        assert_eq!(tile(768, 768, 4097), None);
        assert_eq!(tile(64, 14336, 4096), None);
        // A small product with a short k: the one-consumer tile, on an eighth of the SMs or more.
        assert_eq!(tile(512, 512, 1024), Some((64, 128, true, 6)));
        assert_eq!(tile(512, 512, 512), Some((64, 128, true, 6)));
        assert_eq!(tile(256, 256, 256), None);
        assert_eq!(tile(64, 4096, 2048), None);
        // k splits need k at least the larger of m and n (127 x 4099 x 2053 runs unsplit) and
        // a tile inside the product (8191 x 127 x 8193 runs unsplit 64 x 128 tiles).
        assert_eq!(WgmmaSchedule::untuned(8191, 127, 8193, 1, 132).map(|w| (w.bm(), w.splits)), Some((64, 1)));
        assert_eq!(WgmmaSchedule::untuned(127, 4099, 2053, 1, 132).map(|w| (w.bm(), w.splits)), Some((64, 1)));
        // Batches count their tiles: 32 products of 256 x 256 are 128 tiles of 128 x 128.
        assert_eq!(WgmmaSchedule::untuned(256, 256, 256, 32, 132).map(|w| (w.bm(), w.bn)), Some((128, 128)));
    }
    use crate::target::GpuArch;

    #[test]
    fn warpgroup_schedules_round_trip_through_their_encoding() {
        for consumers in [1, 2] {
            for (producer, pingpong) in [(false, false), (true, false), (true, true)] {
                if pingpong && consumers == 1 {
                    continue;
                }
                for bn in [64, 128, 256] {
                    for tma in [false, true] {
                        let w =
                            WgmmaSchedule { consumers, producer, pingpong, bn, stages: 4, swizzle: 8, tma, splits: 1 };
                        let s = w.encode();
                        assert!(is_warpgroup_encoding(&s));
                        assert_eq!(WgmmaSchedule::decode(&s), Ok(w));
                    }
                }
            }
        }
    }

    #[test]
    fn mma_sync_schedules_are_never_warpgroup_ones() {
        // mma.sync: warps = (tile_m / micro_m) x (tile_n / micro_n); with 64-row warp tiles as wide
        // as the block that is tile_m / 64, at most 2, never the 4 per warpgroup of wgmma.
        for (tm, tn) in [(64, 64), (128, 128), (128, 256), (64, 128)] {
            let s = Schedule {
                tile_m: tm,
                tile_n: tn,
                tile_k: 64,
                micro_m: 64,
                micro_n: tn,
                warps: tm / 64,
                ..Schedule::default_for(Tier::Ptx)
            };
            assert!(!is_warpgroup_encoding(&s), "{s}");
            assert!(WgmmaSchedule::decode(&s).is_err(), "{s}");
        }
    }

    fn product(dtype: DType, schedule: Schedule) -> Kernel {
        use crate::op::TensorType;
        use crate::shape::Shape;
        let mut g = crate::graph::Graph::new("k");
        let t = |dims: &[u64]| TensorType { dtype, shape: Shape::from_consts(dims) };
        let a = g.add_param("a", t(&[256, 64])).unwrap();
        let b = g.add_param("b", t(&[64, 128])).unwrap();
        let c = g.push(Op::MatMul(a, b)).unwrap();
        g.outputs = vec![c];
        Kernel { name: "k0".into(), class: KernelClass::MatMul, graph: g, schedule }
    }

    #[test]
    fn kernels_decode_by_family_dtype_and_target() {
        let w = WgmmaSchedule {
            consumers: 2,
            producer: false,
            pingpong: false,
            bn: 128,
            stages: 4,
            swizzle: 8,
            tma: true,
            splits: 1,
        };
        let f16 = product(DType::F16, w.encode());
        assert_eq!(f16.schedule_kind(Target::Gpu(GpuArch::Sm90a)), ScheduleKind::Wgmma(w));
        // sm_80 has no wgmma: the same knobs are an mma.sync schedule there.
        assert!(matches!(f16.schedule_kind(Target::Gpu(GpuArch::Sm80)), ScheduleKind::MmaSync { .. }));
        let f32 = product(DType::F32, w.encode());
        // Tiles the SIMT matmul cannot run are shown as what it runs instead.
        assert_eq!(f32.schedule_kind(Target::Gpu(GpuArch::Sm90a)), ScheduleKind::SimtGemm(SimtTiles::FALLBACK));
        let fits = Schedule { tile_m: 64, tile_n: 64, tile_k: 16, micro_m: 4, micro_n: 4, ..w.encode() };
        let fitting = Kernel { schedule: fits, ..f32.clone() };
        let want = SimtTiles { block: [64, 64, 16], thread: [4, 4] };
        assert_eq!(fitting.schedule_kind(Target::Gpu(GpuArch::Sm80)), ScheduleKind::SimtGemm(want));
        let cpu = product(DType::F32, Schedule::default_for(Tier::Cranelift));
        let kind = cpu.schedule_kind(Target::Cpu(crate::target::CpuTier::Cranelift));
        assert_eq!(kind.to_string(), "cpu-gemm block=64x64x32 register=4x8 threads=all");
        let rows = Kernel { class: KernelClass::RowReduction, ..cpu.clone() };
        assert_eq!(rows.schedule_kind(Target::Gpu(GpuArch::Sm80)), ScheduleKind::GpuFixed);
        assert_eq!(rows.schedule_kind(Target::Interp), ScheduleKind::Interp);
    }

    #[test]
    fn attention_schedules_round_trip_and_choose_their_key_splits() {
        let decode = AttentionShape { depth: 128, width: 128, score_reads: 0, rows: 4 };
        let shared = AttentionDevice::of(&GpuArch::Sm80.caps());
        let space = GpuAttentionSchedule::space(&decode, shared);
        assert_eq!(
            space[0],
            GpuAttentionSchedule {
                block: [16, 64],
                warps: 1,
                stages: 2,
                splits: 0,
                wgmma: false,
                producer: false,
                pingpong: false,
                tma: false
            }
        );
        assert!(space.iter().any(|a| a.splits > 1));
        for a in &space {
            assert_eq!(GpuAttentionSchedule::decode(&a.encode()), Ok(*a));
            assert!(a.fits(&decode, shared));
        }
        let prefill = AttentionShape { rows: 0, ..decode };
        assert_eq!(GpuAttentionSchedule::default_for(&prefill, shared).block, [64, 64]);
        let auto = space[0];
        // Many tiles: no split; few: enough splits to fill the device, each of two key blocks or more.
        assert_eq!(auto.splits_for(8192, 64, 264), 1);
        let s = auto.splits_for(256, 128, 396);
        assert!(s > 1 && (256 * u64::from(s)).div_ceil(396) * 396 <= 256 * u64::from(s) * 100 / 85, "{s}");
        assert_eq!(auto.splits_for(1, 3, 396), 1);
        assert!(auto.splits_for(1, 1000, 396) > MAX_ATTENTION_SPLITS / 2);
        // A fixed count, at most one per key block.
        let fixed = GpuAttentionSchedule { splits: 16, ..auto };
        assert_eq!(fixed.splits_for(1, 5, 396), 5);
        assert!(GpuAttentionSchedule::decode(&GpuAttentionSchedule { splits: 65, ..auto }.encode()).is_err());
        // sm_90a: warpgroup schedules first for prefill at head dimensions 64 and 128, never for
        // decoding, other head dimensions or score functions that read tensors.
        let hopper = AttentionDevice::of(&GpuArch::Sm90a.caps());
        let first = GpuAttentionSchedule::default_for(&prefill, hopper);
        assert_eq!((first.block, first.warps, first.stages, first.wgmma), ([128, 128], 12, 3, true));
        assert!(first.producer && first.pingpong && first.tma, "{first:?}");
        let space = GpuAttentionSchedule::space(&prefill, hopper);
        assert!(space.iter().any(|a| !a.wgmma), "the mma.sync schedules stay in the space");
        for a in &space {
            assert_eq!(GpuAttentionSchedule::decode(&a.encode()), Ok(*a));
            assert!(a.fits(&prefill, hopper) && (!a.wgmma || a.shared_bytes(128, 128) <= hopper.shared));
        }
        assert!(!first.fits(&prefill, shared), "sm_80 has no wgmma");
        assert!(GpuAttentionSchedule::space(&decode, hopper).iter().all(|a| !a.wgmma));
        let d80 = AttentionShape { depth: 80, width: 80, ..prefill };
        assert!(GpuAttentionSchedule::space(&d80, hopper).iter().all(|a| !a.wgmma));
        let biased = AttentionShape { score_reads: 1, ..prefill };
        assert!(!GpuAttentionSchedule::default_for(&biased, hopper).wgmma);
        let odd = GpuAttentionSchedule { warps: 2, block: [32, 64], ..first };
        assert!(GpuAttentionSchedule::decode(&odd.encode()).is_err());
        let caps = GpuArch::Sm90a.caps();
        assert_eq!(auto.resident_blocks(128, 128, &caps), 3);
    }

    #[test]
    fn attention_producer_pingpong_and_tma_variants_round_trip_and_fit() {
        let prefill = AttentionShape { depth: 128, width: 128, score_reads: 0, rows: 4096 };
        let hopper = AttentionDevice::of(&GpuArch::Sm90a.caps());
        let space = GpuAttentionSchedule::space(&prefill, hopper);
        // Two consumer warpgroups come after their four producer variants, best first.
        let first = space[4];
        assert_eq!((first.block, first.warps, first.producer), ([128, 128], 8, false), "{space:?}");
        assert_eq!(space[..4].iter().rev().copied().collect::<Vec<_>>(), first.producer_variants());
        // One consumer warpgroup keeps no producer in the space (measured slower).
        assert!(space.iter().filter(|a| a.producer).all(|a| a.consumer_warps() == 8));
        let d64 = AttentionShape { depth: 64, width: 64, ..prefill };
        let d64_first = GpuAttentionSchedule::default_for(&d64, hopper);
        assert_eq!((d64_first.block, d64_first.producer), ([64, 64], false));
        let producer = first.with_producer().unwrap();
        assert_eq!((producer.warps, producer.consumer_warps(), producer.rows_per_warp()), (12, 8, 16));
        let pingpong = first.with_pingpong().unwrap();
        let tma = pingpong.with_tma().unwrap();
        assert!(tma.producer && tma.pingpong && tma.tma);
        assert_eq!(first.producer_variants(), vec![producer, pingpong, first.with_tma().unwrap(), tma]);
        for a in [producer, pingpong, tma, first.with_tma().unwrap()] {
            assert_eq!(GpuAttentionSchedule::decode(&a.encode()), Ok(a));
            assert!(a.fits(&prefill, hopper), "{a:?}");
            assert!(a.shared_bytes(128, 128) > first.shared_bytes(128, 128), "the ring's mbarriers");
        }
        assert_eq!(
            ScheduleKind::GpuAttention(tma).to_string(),
            "gpu-attention block=128x128 warps=12 stages=3 splits=auto wgmma producer ping-pong tma"
        );
        // One consumer warpgroup has no ping-pong; mma.sync schedules have no producer.
        let one = space.iter().find(|a| a.wgmma && a.consumer_warps() == 4).copied().unwrap();
        assert!(one.with_pingpong().is_none() && one.with_producer().is_some());
        assert!(space.iter().filter(|a| !a.wgmma).all(|a| a.with_producer().is_none()));
        // The flags' encodings are refused where they do not apply.
        let mut knobs = first.encode();
        knobs.micro_n *= 2;
        assert!(GpuAttentionSchedule::decode(&knobs).is_err(), "ping-pong without a producer");
        let knobs = Schedule { vector_width: WGMMA_TMA_WIDTH, ..first.encode() };
        assert!(GpuAttentionSchedule::decode(&knobs).is_err(), "TMA without a producer");
    }

    #[test]
    fn the_canonical_text_names_the_family_and_its_knobs() {
        let w = WgmmaSchedule {
            consumers: 2,
            producer: true,
            pingpong: true,
            bn: 128,
            stages: 4,
            swizzle: 8,
            tma: true,
            splits: 1,
        };
        let kind = ScheduleKind::Wgmma(w);
        assert_eq!(
            kind.to_string(),
            "wgmma block=64x128x64 consumers=2 producer ping-pong stages=4 load=tma swizzle=8"
        );
    }
}
