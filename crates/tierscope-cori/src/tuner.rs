//! Cori's Tuner and the paper's insight-less baselines (Doudali et al., IPDPS 2021,
//! sections IV-C, IV-D and V-B), as pure functions over a cost function
//! `Fn(period) -> runtime`, so they tune anything whose cost is a number.
//!
//! - [`tune`]: trials of the candidate periods in the given order (Cori's: shortest first)
//!   until a stopping rule fires; the choice is the best period tried.
//! - [`base_grid`]: the baselines' periods, Eq. 3: `timestep, 2 timestep, ..., runtime / 2`.
//! - [`base_left`], [`base_right`], [`base_random`]: the orders the baselines try that grid
//!   in. The paper: "the base-left baseline starts from low frequencies (large periods)
//!   and moves to the left towards higher frequencies (short periods) ... The base-right
//!   baseline starts from high frequencies and moves towards the right to lower ones,
//!   similar to Cori ... a base-random approach that randomly explores values".
//! - [`trials_to_within`], [`mean_trials_to_within`]: how many trials an order needs before
//!   one lands within a given percentage of a target (the exhaustive best), the paper's
//!   Figure 5a measure.

use tierscope_core::rng::Rng;

/// When the Tuner stops. The paper (IV-C, IV-D) leaves it open: "There can be a fixed
/// number of trials or tuning can stop after performance reaches desired levels or shows
/// no significant variation from the last trial"; the Tuner stops "if performance is
/// within desired levels or the best one observed". docs/techniques/CORI.md gives our reading.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this many trials.
    Trials(usize),
    /// After a trial, from the second on, whose runtime is within this many percent of the
    /// best runtime seen before it, above or below: the curve has settled ("no significant
    /// variation").
    WithinBest(f64),
    /// After this many trials in a row none of which beat the best runtime seen before it.
    NoGain(usize),
}

/// One trial: a period and the runtime the cost function gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    pub period: u64,
    pub runtime: f64,
}

/// A tuning run: the trials made, in order, and the best of them (the first on ties).
#[derive(Debug, Clone, PartialEq)]
pub struct Tuning {
    pub trials: Vec<Trial>,
    pub chosen: Option<Trial>,
}

/// Tries `periods` in order until one of `stops` fires (or the periods run out), and
/// chooses the best period tried.
pub fn tune(periods: &[u64], cost: impl Fn(u64) -> f64, stops: &[Stop]) -> Tuning {
    let mut trials: Vec<Trial> = vec![];
    let mut chosen: Option<Trial> = None;
    let mut without_gain = 0;
    for &period in periods {
        let trial = Trial {
            period,
            runtime: cost(period),
        };
        trials.push(trial);
        let best_before = chosen.map(|c| c.runtime);
        match best_before {
            Some(best) if trial.runtime >= best => without_gain += 1,
            _ => {
                without_gain = 0;
                chosen = Some(trial);
            }
        }
        let stop = stops.iter().any(|s| match *s {
            Stop::Trials(n) => trials.len() >= n,
            Stop::WithinBest(pct) => {
                best_before.is_some_and(|b| (trial.runtime - b).abs() <= b * pct / 100.0)
            }
            Stop::NoGain(k) => k > 0 && without_gain >= k,
        });
        if stop {
            break;
        }
    }
    Tuning { trials, chosen }
}

/// Eq. 3's grid: `timestep, 2 timestep, ...` while at most `runtime / 2` (the same
/// inclusive bound as Cori's candidates). Empty for a timestep of 0.
pub fn base_grid(timestep: u64, runtime: u64) -> Vec<u64> {
    if timestep == 0 {
        return vec![];
    }
    (1..=runtime / 2 / timestep).map(|k| k * timestep).collect()
}

/// base-left: the grid from its longest period to its shortest.
pub fn base_left(grid: &[u64]) -> Vec<u64> {
    let mut v = grid.to_vec();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v
}

/// base-right: the grid from its shortest period to its longest, as Cori orders its own.
pub fn base_right(grid: &[u64]) -> Vec<u64> {
    let mut v = grid.to_vec();
    v.sort_unstable();
    v
}

/// base-random: the grid in a uniformly random order (Fisher-Yates), fixed by `seed`.
pub fn base_random(grid: &[u64], seed: u64) -> Vec<u64> {
    let mut v = grid.to_vec();
    let mut rng = Rng::for_stream(seed, "base-random");
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// True when `runtime` is at most `percent` % above `best`.
pub fn within(runtime: f64, best: f64, percent: f64) -> bool {
    runtime <= best * (1.0 + percent / 100.0)
}

/// Trials (1-based) an order needs before one runs within `percent` % of `best`, or
/// `None` when none does.
pub fn trials_to_within(
    order: &[u64],
    cost: impl Fn(u64) -> f64,
    best: f64,
    percent: f64,
) -> Option<usize> {
    order
        .iter()
        .position(|&p| within(cost(p), best, percent))
        .map(|i| i + 1)
}

/// [`trials_to_within`] for base-random, averaged over `seeds`; `None` when some seed's
/// order never gets there (never the case when `best` is the grid's own minimum).
pub fn mean_trials_to_within(
    grid: &[u64],
    cost: impl Fn(u64) -> f64,
    best: f64,
    percent: f64,
    seeds: &[u64],
) -> Option<f64> {
    let mut sum = 0usize;
    for &seed in seeds {
        sum += trials_to_within(&base_random(grid, seed), &cost, best, percent)?;
    }
    (!seeds.is_empty()).then(|| sum as f64 / seeds.len() as f64)
}

/// The exhaustive curve: every period's runtime, and the best (the first on ties).
pub fn exhaustive(grid: &[u64], cost: impl Fn(u64) -> f64) -> (Vec<Trial>, Option<Trial>) {
    let curve: Vec<Trial> = grid
        .iter()
        .map(|&period| Trial {
            period,
            runtime: cost(period),
        })
        .collect();
    let best = curve
        .iter()
        .copied()
        .reduce(|a, b| if b.runtime < a.runtime { b } else { a });
    (curve, best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runtimes given by hand for periods 1, 2, 3, ...
    fn table(runtimes: &[f64]) -> impl Fn(u64) -> f64 + '_ {
        move |p| runtimes[p as usize - 1]
    }

    fn periods(n: u64) -> Vec<u64> {
        (1..=n).collect()
    }

    fn tried(t: &Tuning) -> Vec<u64> {
        t.trials.iter().map(|t| t.period).collect()
    }

    #[test]
    fn a_fixed_count_stops_after_that_many_trials() {
        let r = [100.0, 80.0, 60.0, 70.0];
        let t = tune(&periods(4), table(&r), &[Stop::Trials(2)]);
        assert_eq!(tried(&t), [1, 2]);
        assert_eq!(t.chosen.unwrap().period, 2);
        // More trials than periods: all of them, the best is period 3.
        let t = tune(&periods(4), table(&r), &[Stop::Trials(9)]);
        assert_eq!(tried(&t), [1, 2, 3, 4]);
        assert_eq!(t.chosen.unwrap().period, 3);
    }

    #[test]
    fn within_best_stops_once_the_curve_settles() {
        // 80 vs 100: 20 % better, go on; 79 vs 80: 1.25 % <= 3 %, stop after trial 3.
        let r = [100.0, 80.0, 79.0, 50.0, 49.0];
        let t = tune(&periods(5), table(&r), &[Stop::WithinBest(3.0)]);
        assert_eq!(tried(&t), [1, 2, 3]);
        assert_eq!(t.chosen.unwrap().runtime, 79.0);
        // Slightly worse counts too: 82 is 2.5 % above 80.
        let r = [100.0, 80.0, 82.0, 50.0];
        let t = tune(&periods(4), table(&r), &[Stop::WithinBest(3.0)]);
        assert_eq!(tried(&t), [1, 2, 3]);
        assert_eq!(t.chosen.unwrap().period, 2);
        // Much worse does not settle: 90 is 12.5 % above 80, 50 is better, 50.5 settles.
        let r = [100.0, 80.0, 90.0, 50.0, 50.5, 10.0];
        let t = tune(&periods(6), table(&r), &[Stop::WithinBest(3.0)]);
        assert_eq!(tried(&t), [1, 2, 3, 4, 5]);
        assert_eq!(t.chosen.unwrap().period, 4);
    }

    #[test]
    fn no_gain_counts_trials_in_a_row_without_a_new_best() {
        // Best 80 at trial 2; 90 and 85 do not beat it: two without gain, stop after 4.
        let r = [100.0, 80.0, 90.0, 85.0, 70.0];
        let t = tune(&periods(5), table(&r), &[Stop::NoGain(2)]);
        assert_eq!(tried(&t), [1, 2, 3, 4]);
        assert_eq!(t.chosen.unwrap().period, 2);
        // A new best resets the count: 90 (1), 70 new best (0), 75 (1), 72 (2) -> stop.
        let r = [100.0, 80.0, 90.0, 70.0, 75.0, 72.0, 10.0];
        let t = tune(&periods(7), table(&r), &[Stop::NoGain(2)]);
        assert_eq!(tried(&t), [1, 2, 3, 4, 5, 6]);
        assert_eq!(t.chosen.unwrap().period, 4);
        // An equal runtime is no gain, and the first of equals is kept.
        let r = [50.0, 50.0, 40.0];
        let t = tune(&periods(3), table(&r), &[Stop::NoGain(1)]);
        assert_eq!(tried(&t), [1, 2]);
        assert_eq!(t.chosen.unwrap().period, 1);
    }

    #[test]
    fn rules_combine_and_the_first_to_fire_stops() {
        // NoGain(2) would stop after trial 4, Trials(3) after 3.
        let r = [100.0, 80.0, 90.0, 85.0];
        let t = tune(&periods(4), table(&r), &[Stop::NoGain(2), Stop::Trials(3)]);
        assert_eq!(tried(&t), [1, 2, 3]);
        assert!(tune(&[], table(&r), &[Stop::Trials(1)]).chosen.is_none());
    }

    #[test]
    fn grid_and_orders_by_hand() {
        // 10500 requests: periods up to 5250, steps of 1000 -> 1000 ... 5000.
        let g = base_grid(1000, 10_500);
        assert_eq!(g, [1000, 2000, 3000, 4000, 5000]);
        // Inclusive bound: 2 * 5000 = 10000.
        assert_eq!(base_grid(1000, 10_000).last(), Some(&5000));
        assert!(base_grid(1000, 1999).is_empty());
        assert!(base_grid(0, 1999).is_empty());
        assert_eq!(base_left(&g), [5000, 4000, 3000, 2000, 1000]);
        assert_eq!(base_right(&base_left(&g)), g);
    }

    #[test]
    fn base_random_is_a_seeded_permutation() {
        let g = base_grid(10, 2000);
        let a = base_random(&g, 7);
        assert_eq!(a, base_random(&g, 7));
        assert_ne!(a, base_random(&g, 8));
        assert_ne!(a, g);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, g);
    }

    #[test]
    fn trials_to_within_on_a_u_shaped_curve() {
        // Runtime 100 + 10 * |p - 7| on periods 1 ..= 10: best 100 at 7; within 3 % means
        // <= 103, so only period 7 (110 at 6 and 8 are 10 % above).
        let u = |p: u64| 100.0 + 10.0 * (p as f64 - 7.0).abs();
        let g = periods(10);
        let (curve, best) = exhaustive(&g, u);
        assert_eq!(curve.len(), 10);
        assert_eq!(best.unwrap().period, 7);
        // Shortest first: 1..7 -> 7 trials; longest first: 10, 9, 8, 7 -> 4.
        assert_eq!(trials_to_within(&base_right(&g), u, 100.0, 3.0), Some(7));
        assert_eq!(trials_to_within(&base_left(&g), u, 100.0, 3.0), Some(4));
        // 15 % admits 6, 7, 8: shortest first reaches 6 at trial 6.
        assert_eq!(trials_to_within(&base_right(&g), u, 100.0, 15.0), Some(6));
        // An order missing the good periods never gets there.
        assert_eq!(trials_to_within(&[1, 2, 3], u, 100.0, 3.0), None);
    }

    #[test]
    fn base_random_mean_matches_the_expected_first_hit() {
        // With G good periods among M, placed uniformly at random, the first good one is at
        // position (M + 1) / (G + 1) on average. M = 40, good: periods 11..=13 (G = 3)
        // -> 41 / 4 = 10.25. A V-shaped curve with its bottom at 12.
        let v = |p: u64| 100.0 + (p as f64 - 12.0).abs();
        let g = periods(40);
        let seeds: Vec<u64> = (0..20_000).collect();
        let mean = mean_trials_to_within(&g, v, 100.0, 1.0, &seeds).unwrap();
        assert!((mean - 10.25).abs() < 0.15, "{mean}");
        assert_eq!(mean_trials_to_within(&g, v, 100.0, 1.0, &[]), None);
    }
}
