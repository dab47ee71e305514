//! Candidates and the search space: the optimizer's alternatives × the schedule knobs, pruned by
//! hardware limits and ordered by a cost model.

use std::collections::HashMap;
use std::fmt;

use tcc_ir::{Schedule, Tier};

use crate::bounds::{MAX_VARIANT, check_schedule};

/// One point of the search: an optimizer alternative under one schedule.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    /// Which of the optimizer's top-k alternatives (0 = its first choice).
    pub variant: u32,
    /// The schedule.
    pub schedule: Schedule,
    /// The cost model's estimate (lower is better; only orders the search).
    pub cost: f64,
}

impl Candidate {
    /// A stable identity for journals and tables (the cost is not part of it).
    pub fn id(&self) -> String {
        format!("v{} {}", self.variant, self.schedule)
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

/// Estimates a candidate's cost; `None` prunes it (the model knows it cannot run or cannot win).
pub trait CostModel: Sync {
    /// The estimated cost of `schedule` for optimizer alternative `variant`.
    fn cost(&self, variant: u32, schedule: &Schedule) -> Option<f64>;
}

impl<F: Fn(u32, &Schedule) -> Option<f64> + Sync> CostModel for F {
    fn cost(&self, variant: u32, schedule: &Schedule) -> Option<f64> {
        self(variant, schedule)
    }
}

/// The values each knob may take; the space is their product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// Code generator.
    pub tier: Tier,
    /// Tile rows.
    pub tile_m: Vec<u32>,
    /// Tile columns.
    pub tile_n: Vec<u32>,
    /// Tile depth.
    pub tile_k: Vec<u32>,
    /// Micro-tile rows.
    pub micro_m: Vec<u32>,
    /// Micro-tile columns.
    pub micro_n: Vec<u32>,
    /// Vector widths.
    pub vector_width: Vec<u32>,
    /// Pipeline stages.
    pub stages: Vec<u32>,
    /// Warps per block.
    pub warps: Vec<u32>,
    /// k-splits.
    pub split_k: Vec<u32>,
    /// Swizzle group sizes.
    pub swizzle: Vec<u32>,
    /// Host threads.
    pub threads: Vec<u32>,
}

impl Knobs {
    /// Every knob fixed to the value it has in `s`.
    pub fn fixed(s: &Schedule) -> Knobs {
        Knobs {
            tier: s.tier,
            tile_m: vec![s.tile_m],
            tile_n: vec![s.tile_n],
            tile_k: vec![s.tile_k],
            micro_m: vec![s.micro_m],
            micro_n: vec![s.micro_n],
            vector_width: vec![s.vector_width],
            stages: vec![s.stages],
            warps: vec![s.warps],
            split_k: vec![s.split_k],
            swizzle: vec![s.swizzle],
            threads: vec![s.threads],
        }
    }

    fn lists(&self) -> [&[u32]; 11] {
        [
            &self.tile_m,
            &self.tile_n,
            &self.tile_k,
            &self.micro_m,
            &self.micro_n,
            &self.vector_width,
            &self.stages,
            &self.warps,
            &self.split_k,
            &self.swizzle,
            &self.threads,
        ]
    }

    /// Number of knob combinations (saturating).
    pub fn combinations(&self) -> u64 {
        self.lists().iter().fold(1u64, |acc, l| acc.saturating_mul(l.len() as u64))
    }
}

fn knob_values(s: &Schedule) -> [u32; 11] {
    [
        s.tile_m,
        s.tile_n,
        s.tile_k,
        s.micro_m,
        s.micro_n,
        s.vector_width,
        s.stages,
        s.warps,
        s.split_k,
        s.swizzle,
        s.threads,
    ]
}

fn with_knobs(tier: Tier, v: [u32; 11]) -> Schedule {
    Schedule {
        tier,
        tile_m: v[0],
        tile_n: v[1],
        tile_k: v[2],
        micro_m: v[3],
        micro_n: v[4],
        vector_width: v[5],
        stages: v[6],
        warps: v[7],
        split_k: v[8],
        swizzle: v[9],
        threads: v[10],
    }
}

/// What the device can run: candidates beyond it are pruned before anything is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HardwareLimits {
    /// Most threads per block (GPU tiers).
    pub max_threads_per_block: u32,
    /// Most shared memory per block in bytes (GPU tiers).
    pub max_shared_bytes: u64,
    /// Bytes per element of the operands staged in shared memory.
    pub element_bytes: u32,
    /// Most host threads worth using (CPU tiers; 0 = no limit).
    pub max_host_threads: u32,
}

impl HardwareLimits {
    /// Whether a schedule fits: knobs in bounds, micro-tiles within tiles, and on the GPU the
    /// block's threads and multi-stage shared-memory tiles within the device's limits.
    pub fn admits(&self, s: &Schedule) -> bool {
        if check_schedule(s).is_err() || s.micro_m > s.tile_m || s.micro_n > s.tile_n {
            return false;
        }
        match s.tier {
            Tier::Ptx => {
                let threads = u64::from(s.warps) * 32;
                let tile_elems = u64::from(s.tile_m) * u64::from(s.tile_k) + u64::from(s.tile_k) * u64::from(s.tile_n);
                let shared = tile_elems * u64::from(self.element_bytes) * u64::from(s.stages);
                threads <= u64::from(self.max_threads_per_block) && shared <= self.max_shared_bytes
            }
            Tier::Interp | Tier::Cranelift | Tier::LlvmCpu => {
                self.max_host_threads == 0 || s.threads <= self.max_host_threads
            }
        }
    }
}

/// Why a search space could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpaceError {
    /// The knob product is larger than allowed.
    #[error("{combinations} knob combinations × {variants} variants exceed the limit of {limit}")]
    TooLarge {
        /// Knob combinations.
        combinations: u64,
        /// Optimizer alternatives.
        variants: u32,
        /// The limit.
        limit: u64,
    },
    /// Too many optimizer alternatives.
    #[error("{0} variants, more than {MAX_VARIANT}")]
    TooManyVariants(u32),
}

/// Most knobs a move to a neighbour changes ([`SearchSpace::neighbors`]).
pub const NEIGHBOR_KNOBS: usize = 3;

/// Most combinations [`SearchSpace::enumerate`] will visit.
pub const MAX_ENUMERATED: u64 = 4_000_000;

/// An ordered, de-duplicated set of valid candidates, cheapest estimate first.
#[derive(Debug, Clone, Default)]
pub struct SearchSpace {
    candidates: Vec<Candidate>,
    index: HashMap<(u32, Schedule), usize>,
    /// Distinct values of each knob over the space, sorted (for neighbourhoods).
    values: [Vec<u32>; 11],
}

impl SearchSpace {
    /// A space of the given candidates: drops out-of-bounds schedules, non-finite costs and
    /// duplicates (keeping the first), then sorts by cost (ties by id).
    pub fn new(candidates: Vec<Candidate>) -> SearchSpace {
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<Candidate> = candidates
            .into_iter()
            .filter(|c| c.cost.is_finite() && c.variant <= MAX_VARIANT && check_schedule(&c.schedule).is_ok())
            .filter(|c| seen.insert((c.variant, c.schedule)))
            .collect();
        kept.sort_by(|a, b| a.cost.total_cmp(&b.cost).then_with(|| a.id().cmp(&b.id())));
        let index = kept.iter().enumerate().map(|(i, c)| ((c.variant, c.schedule), i)).collect();
        let mut values: [Vec<u32>; 11] = Default::default();
        for c in &kept {
            for (k, v) in knob_values(&c.schedule).into_iter().enumerate() {
                values[k].push(v);
            }
        }
        for v in &mut values {
            v.sort_unstable();
            v.dedup();
        }
        SearchSpace { candidates: kept, index, values }
    }

    /// The product of `variants` optimizer alternatives and the knob values, pruned by `limits`
    /// and by the cost model, cheapest first, at most `max_candidates` kept.
    pub fn enumerate(
        variants: u32,
        knobs: &Knobs,
        limits: &HardwareLimits,
        model: &dyn CostModel,
        max_candidates: usize,
    ) -> Result<SearchSpace, SpaceError> {
        if variants > MAX_VARIANT + 1 {
            return Err(SpaceError::TooManyVariants(variants));
        }
        let combinations = knobs.combinations();
        if combinations.saturating_mul(u64::from(variants)) > MAX_ENUMERATED {
            return Err(SpaceError::TooLarge { combinations, variants, limit: MAX_ENUMERATED });
        }
        let lists = knobs.lists();
        let mut out = Vec::new();
        let mut digits = [0usize; 11];
        if lists.iter().any(|l| l.is_empty()) {
            return Ok(SearchSpace::new(out));
        }
        loop {
            let mut v = [0u32; 11];
            for k in 0..11 {
                v[k] = lists[k][digits[k]];
            }
            let s = with_knobs(knobs.tier, v);
            if limits.admits(&s) {
                for variant in 0..variants {
                    if let Some(cost) = model.cost(variant, &s) {
                        out.push(Candidate { variant, schedule: s, cost });
                    }
                }
            }
            // Odometer increment over the knob lists.
            let mut k = 0;
            loop {
                if k == 11 {
                    let mut space = SearchSpace::new(out);
                    space.truncate(max_candidates);
                    return Ok(space);
                }
                digits[k] += 1;
                if digits[k] < lists[k].len() {
                    break;
                }
                digits[k] = 0;
                k += 1;
            }
        }
    }

    fn truncate(&mut self, n: usize) {
        if self.candidates.len() > n {
            let mut kept = std::mem::take(&mut self.candidates);
            kept.truncate(n);
            *self = SearchSpace::new(kept);
        }
    }

    /// Adds a candidate (a cached schedule to start from) at the front unless already present;
    /// returns its index, or `None` when it is out of bounds.
    pub fn seed(&mut self, variant: u32, schedule: Schedule) -> Option<usize> {
        if let Some(&i) = self.index.get(&(variant, schedule)) {
            return Some(i);
        }
        let cheapest = self.candidates.first().map_or(0.0, |c| c.cost);
        let below = cheapest - cheapest.abs().max(1.0);
        let cost = if below.is_finite() { below } else { cheapest };
        let mut all = vec![Candidate { variant, schedule, cost }];
        all.append(&mut self.candidates);
        *self = SearchSpace::new(all);
        self.index.get(&(variant, schedule)).copied()
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// All candidates, cheapest estimate first.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// The index of a candidate.
    pub fn position(&self, variant: u32, schedule: &Schedule) -> Option<usize> {
        self.index.get(&(variant, *schedule)).copied()
    }

    /// Positions of a schedule's knob values among the values present in the space.
    fn steps(&self, s: &Schedule) -> Option<[usize; 11]> {
        let v = knob_values(s);
        let mut out = [0usize; 11];
        for k in 0..11 {
            out[k] = self.values[k].binary_search(&v[k]).ok()?;
        }
        Some(out)
    }

    /// The neighbourhood of candidate `i`: candidates of the same variant whose knobs are each at
    /// most one step (to the next smaller or larger value present in the space) from its own, with
    /// at most [`NEIGHBOR_KNOBS`] knobs changed (so a move that must change a derived knob too,
    /// such as the block tile and the warp count, is one move), and the same schedule under the
    /// variant one lower or higher.
    pub fn neighbors(&self, i: usize) -> Vec<usize> {
        let Some(c) = self.candidates.get(i) else {
            return Vec::new();
        };
        let Some(own) = self.steps(&c.schedule) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (j, other) in self.candidates.iter().enumerate() {
            if j == i || other.variant != c.variant || other.schedule.tier != c.schedule.tier {
                continue;
            }
            let Some(theirs) = self.steps(&other.schedule) else { continue };
            let mut changed = 0;
            let near = own.iter().zip(&theirs).all(|(&a, &b)| {
                changed += usize::from(a != b);
                a.abs_diff(b) <= 1
            });
            if near && changed <= NEIGHBOR_KNOBS {
                out.push(j);
            }
        }
        for variant in [c.variant.checked_sub(1), c.variant.checked_add(1)].into_iter().flatten() {
            if let Some(&j) = self.index.get(&(variant, c.schedule)) {
                out.push(j);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A candidate taking each knob from `a` or `b` as `pick(k)` says, if it is in the space.
    pub fn crossover(&self, a: usize, b: usize, mut pick: impl FnMut(usize) -> bool) -> Option<usize> {
        let (ca, cb) = (self.candidates.get(a)?, self.candidates.get(b)?);
        let (va, vb) = (knob_values(&ca.schedule), knob_values(&cb.schedule));
        let mut w = [0u32; 11];
        for k in 0..11 {
            w[k] = if pick(k) { va[k] } else { vb[k] };
        }
        let variant = if pick(11) { ca.variant } else { cb.variant };
        self.index.get(&(variant, with_knobs(ca.schedule.tier, w))).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu_limits() -> HardwareLimits {
        HardwareLimits {
            max_threads_per_block: 1024,
            max_shared_bytes: 48 * 1024,
            element_bytes: 2,
            max_host_threads: 0,
        }
    }

    fn knobs() -> Knobs {
        Knobs {
            tile_m: vec![32, 64, 128],
            tile_n: vec![32, 64, 128],
            tile_k: vec![32, 64],
            stages: vec![2, 3, 4],
            warps: vec![4, 8, 64],
            ..Knobs::fixed(&Schedule::default_for(Tier::Ptx))
        }
    }

    #[test]
    fn enumerate_prunes_and_orders() {
        let model = |_: u32, s: &Schedule| Some(f64::from(s.tile_m * s.tile_n) / f64::from(s.stages));
        let space = SearchSpace::enumerate(2, &knobs(), &gpu_limits(), &model, usize::MAX).unwrap();
        assert!(!space.is_empty());
        for c in space.candidates() {
            assert!(c.schedule.warps <= 32, "64 warps is 2048 threads: pruned");
            let shared =
                (c.schedule.tile_m * c.schedule.tile_k + c.schedule.tile_k * c.schedule.tile_n) * 2 * c.schedule.stages;
            assert!(shared <= 48 * 1024);
        }
        let costs: Vec<f64> = space.candidates().iter().map(|c| c.cost).collect();
        assert!(costs.windows(2).all(|w| w[0] <= w[1]));
        let truncated = SearchSpace::enumerate(2, &knobs(), &gpu_limits(), &model, 5).unwrap();
        assert_eq!(truncated.len(), 5);
        assert_eq!(truncated.candidates(), &space.candidates()[..5]);
    }

    #[test]
    fn model_can_prune_and_size_is_bounded() {
        let none = |_: u32, _: &Schedule| None;
        assert!(SearchSpace::enumerate(1, &knobs(), &gpu_limits(), &none, 100).unwrap().is_empty());
        let mut big = knobs();
        big.micro_m = (1..=64).collect();
        big.micro_n = (1..=64).collect();
        big.threads = (0..64).collect();
        let model = |_: u32, _: &Schedule| Some(1.0);
        assert!(matches!(SearchSpace::enumerate(1, &big, &gpu_limits(), &model, 10), Err(SpaceError::TooLarge { .. })));
    }

    #[test]
    fn dedup_invalid_and_neighbors() {
        let base = Schedule::default_for(Tier::Cranelift);
        let mk = |tile_m: u32, cost: f64| Candidate { variant: 0, schedule: Schedule { tile_m, ..base }, cost };
        let space =
            SearchSpace::new(vec![mk(64, 3.0), mk(32, 2.0), mk(64, 1.0), mk(128, 4.0), mk(48, 0.0), mk(16, f64::NAN)]);
        let ids: Vec<u32> = space.candidates().iter().map(|c| c.schedule.tile_m).collect();
        assert_eq!(ids, vec![32, 64, 128]);
        let i64_ = space.position(0, &Schedule { tile_m: 64, ..base }).unwrap();
        let n: Vec<u32> = space.neighbors(i64_).iter().map(|&j| space.candidates()[j].schedule.tile_m).collect();
        assert_eq!(n, vec![32, 128]);
    }

    #[test]
    fn a_move_may_change_a_derived_knob_too() {
        let base = Schedule::default_for(Tier::Ptx);
        // Warps follow the tile: (tile_m, warps) pairs only, as a tensor-core space lists them.
        let mk = |tile_m: u32, warps: u32, stages: u32| Candidate {
            variant: 0,
            schedule: Schedule { tile_m, warps, stages, ..base },
            cost: 0.0,
        };
        let space = SearchSpace::new(vec![mk(64, 2, 2), mk(128, 4, 2), mk(256, 8, 2), mk(128, 4, 3), mk(256, 8, 4)]);
        let at = |m: u32, w: u32, st: u32| space.position(0, &mk(m, w, st).schedule).unwrap();
        let n = space.neighbors(at(128, 4, 2));
        assert_eq!(n, {
            let mut v = vec![at(64, 2, 2), at(256, 8, 2), at(128, 4, 3)];
            v.sort_unstable();
            v
        });
        // Two steps away in stages is not a neighbour.
        assert!(!space.neighbors(at(128, 4, 2)).contains(&at(256, 8, 4)));
    }

    #[test]
    fn seeding_puts_a_schedule_first() {
        let base = Schedule::default_for(Tier::Cranelift);
        let mut space = SearchSpace::new(vec![Candidate { variant: 0, schedule: base, cost: 5.0 }]);
        let seeded = Schedule { tile_n: 256, ..base };
        assert_eq!(space.seed(0, seeded), Some(0));
        assert_eq!(space.len(), 2);
        assert_eq!(space.seed(0, base), Some(1));
        assert_eq!(space.seed(0, Schedule { stages: 99, ..base }), None);
    }
}
