//! Search strategies: which candidates to measure next, given what has been measured.

use crate::search::budget::Budget;
use crate::search::candidate::SearchSpace;

/// How the tuner walks the space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// [`Strategy::Exhaustive`] when the space is small (at most [`AUTO_EXHAUSTIVE_MAX`]
    /// candidates, or no more than the trial budget), else [`Strategy::Evolutionary`].
    Auto,
    /// Every candidate, cheapest estimate first.
    Exhaustive,
    /// The cheapest `top_fraction` of the space by the cost model, then best-first hill-climbing:
    /// the unmeasured neighbours ([`SearchSpace::neighbors`]) of the fastest candidate so far, then
    /// of the next fastest, and so on; when no measured candidate has an unmeasured neighbour, the
    /// next cheapest by the model. Meant to run under a trial or time budget; without one it ends
    /// when every candidate is measured.
    Guided {
        /// Fraction of the space measured first, in (0, 1].
        top_fraction: f64,
    },
    /// The cheapest `population` candidates, then mutation (a random neighbour) and crossover
    /// (knobs mixed from two parents) of tournament-selected fast candidates; falls back to the
    /// next unmeasured candidate by cost when those are used up, so it ends only at the budget or
    /// when every candidate is measured.
    Evolutionary {
        /// Size of the initial population.
        population: usize,
        /// Seed of the pseudo-random choices (the same seed gives the same search).
        seed: u64,
    },
}

/// Largest space [`Strategy::Auto`] searches exhaustively.
pub const AUTO_EXHAUSTIVE_MAX: usize = 256;

impl Strategy {
    /// The concrete strategy for a space of `len` candidates under `budget`.
    pub fn resolve(self, len: usize, budget: &Budget) -> Strategy {
        match self {
            Strategy::Auto if len <= AUTO_EXHAUSTIVE_MAX || budget.max_trials.is_some_and(|n| n >= len) => {
                Strategy::Exhaustive
            }
            Strategy::Auto => Strategy::Evolutionary { population: (len / 20).clamp(8, 64), seed: 0x7cc },
            other => other,
        }
    }

    /// Name used in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Exhaustive => "exhaustive",
            Strategy::Guided { .. } => "guided",
            Strategy::Evolutionary { .. } => "evolutionary",
        }
    }
}

/// SplitMix64: a tiny, stable pseudo-random generator (the same seed gives the same search on
/// every platform and version).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// What the selector knows about the run so far.
pub(crate) struct Progress<'a> {
    /// Whether each candidate has been measured (or is being measured).
    pub(crate) done: &'a [bool],
    /// Validated candidates as (time, index), fastest first.
    pub(crate) ranked: &'a [(u64, usize)],
}

/// Picks the next batch of candidates for a resolved strategy.
pub(crate) struct Selector {
    strategy: Strategy,
    rng: SplitMix64,
    seeds: Vec<usize>,
}

impl Selector {
    pub(crate) fn new(strategy: Strategy, seeds: Vec<usize>) -> Selector {
        let seed = match strategy {
            Strategy::Evolutionary { seed, .. } => seed,
            _ => 0,
        };
        Selector { strategy, rng: SplitMix64::new(seed), seeds }
    }

    /// Up to `n` unmeasured candidates to measure next; empty when the strategy is finished.
    pub(crate) fn next(&mut self, space: &SearchSpace, p: &Progress<'_>, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let take = |i: usize, out: &mut Vec<usize>| {
            if i < p.done.len() && !p.done[i] && !out.contains(&i) && out.len() < n {
                out.push(i);
            }
        };
        for &s in &self.seeds {
            take(s, &mut out);
        }
        let in_order = |limit: usize, out: &mut Vec<usize>| {
            for i in 0..limit.min(space.len()) {
                if out.len() >= n {
                    break;
                }
                if !p.done[i] && !out.contains(&i) {
                    out.push(i);
                }
            }
        };
        match self.strategy {
            Strategy::Auto | Strategy::Exhaustive => in_order(space.len(), &mut out),
            Strategy::Guided { top_fraction } => {
                let f = if top_fraction.is_finite() { top_fraction.clamp(0.0, 1.0) } else { 1.0 };
                let initial = ((space.len() as f64 * f).ceil() as usize).max(1);
                in_order(initial, &mut out);
                for &(_, parent) in p.ranked {
                    if out.len() >= n {
                        break;
                    }
                    for j in space.neighbors(parent) {
                        take(j, &mut out);
                    }
                }
                if out.is_empty() {
                    in_order(space.len(), &mut out);
                }
            }
            Strategy::Evolutionary { population, .. } => {
                in_order(population.max(1), &mut out);
                self.evolve(space, p, n, &mut out);
                // Fallbacks so the search ends only at the budget or when everything is measured.
                for &(_, parent) in p.ranked {
                    for j in space.neighbors(parent) {
                        take(j, &mut out);
                    }
                }
                if out.is_empty() {
                    in_order(space.len(), &mut out);
                }
            }
        }
        out
    }

    fn tournament(&mut self, ranked: &[(u64, usize)]) -> Option<usize> {
        if ranked.is_empty() {
            return None;
        }
        let a = self.rng.below(ranked.len());
        let b = self.rng.below(ranked.len());
        // `ranked` is sorted fastest first, so the smaller position wins.
        Some(ranked[a.min(b)].1)
    }

    fn evolve(&mut self, space: &SearchSpace, p: &Progress<'_>, n: usize, out: &mut Vec<usize>) {
        let mut attempts = 32 * n;
        while out.len() < n && attempts > 0 {
            attempts -= 1;
            let Some(parent) = self.tournament(p.ranked) else {
                return;
            };
            let child = if self.rng.below(10) < 7 {
                let near: Vec<usize> = space.neighbors(parent).into_iter().filter(|&j| !p.done[j]).collect();
                if near.is_empty() { None } else { Some(near[self.rng.below(near.len())]) }
            } else {
                let other = self.tournament(p.ranked).unwrap_or(parent);
                let bits = self.rng.next_u64();
                space.crossover(parent, other, |k| bits >> k & 1 == 1)
            };
            if let Some(c) = child
                && !p.done[c]
                && !out.contains(&c)
            {
                out.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::candidate::Candidate;
    use tcc_ir::{Schedule, Tier};

    fn space(n: u32) -> SearchSpace {
        let base = Schedule::default_for(Tier::Cranelift);
        SearchSpace::new(
            (0..n)
                .map(|i| Candidate {
                    variant: 0,
                    schedule: Schedule { tile_m: 1 << (i % 8), tile_n: 1 << (i / 8), ..base },
                    cost: f64::from(i),
                })
                .collect(),
        )
    }

    #[test]
    fn auto_resolution() {
        let b = Budget::unlimited();
        assert_eq!(Strategy::Auto.resolve(10, &b), Strategy::Exhaustive);
        assert!(matches!(Strategy::Auto.resolve(10_000, &b), Strategy::Evolutionary { .. }));
        assert_eq!(Strategy::Auto.resolve(1000, &Budget::trials(2000)), Strategy::Exhaustive);
    }

    #[test]
    fn exhaustive_takes_in_order_after_seeds() {
        let s = space(16);
        let mut sel = Selector::new(Strategy::Exhaustive, vec![9]);
        let done = vec![false; 16];
        let got = sel.next(&s, &Progress { done: &done, ranked: &[] }, 3);
        assert_eq!(got, vec![9, 0, 1]);
    }

    #[test]
    fn guided_climbs_from_the_fastest_first_then_follows_the_model() {
        let s = space(64);
        let mut sel = Selector::new(Strategy::Guided { top_fraction: 0.05 }, vec![]);
        let mut done = vec![false; 64];
        let first = sel.next(&s, &Progress { done: &done, ranked: &[] }, 100);
        assert_eq!(first, vec![0, 1, 2, 3]);
        for &i in &first {
            done[i] = true;
        }
        // The fastest so far is candidate 2: its unmeasured neighbours come first.
        let ranked = vec![(5, 2), (9, 0)];
        let near: Vec<usize> = s.neighbors(2).into_iter().filter(|&j| !done[j]).collect();
        assert!(!near.is_empty());
        let next = sel.next(&s, &Progress { done: &done, ranked: &ranked }, near.len());
        assert_eq!(next, near);
        // With every neighbour measured, the next cheapest by the model follows.
        for &i in &next {
            done[i] = true;
        }
        for j in s.neighbors(0) {
            done[j] = true;
        }
        let after = sel.next(&s, &Progress { done: &done, ranked: &ranked }, 1);
        assert_eq!(after, vec![(0..64).find(|&i| !done[i]).unwrap()]);
        // It ends only when everything is measured.
        let all = vec![true; 64];
        assert!(sel.next(&s, &Progress { done: &all, ranked: &ranked }, 4).is_empty());
    }

    #[test]
    fn evolutionary_covers_everything_eventually_and_is_deterministic() {
        let s = space(64);
        let run = || {
            let mut sel = Selector::new(Strategy::Evolutionary { population: 4, seed: 7 }, vec![]);
            let mut done = vec![false; 64];
            let mut ranked: Vec<(u64, usize)> = Vec::new();
            let mut order = Vec::new();
            loop {
                let batch = sel.next(&s, &Progress { done: &done, ranked: &ranked }, 2);
                if batch.is_empty() {
                    break;
                }
                for i in batch {
                    assert!(!done[i]);
                    done[i] = true;
                    ranked.push(((i as u64 * 37) % 64, i));
                    order.push(i);
                }
                ranked.sort_unstable();
            }
            order
        };
        let a = run();
        assert_eq!(a.len(), 64);
        assert_eq!(a, run());
    }
}
