//! cori-sim's runtime model of a periodic page scheduler on a trace (`sim/scheduler.py`,
//! `sim/memory.py`, `sim/perf_model.py`), periods counted in requests.
//!
//! The run: pages start interleaved (even first-touch ids on the fast tier until it holds
//! its share); before request `e * period` of every period `e >= 1` the scheduler ranks
//! pages by their access counts (`history`: in period `e - 1`; `oracle`: in period `e`),
//! takes the `capacity` hottest with a nonzero count, and swaps each of them that is on the
//! slow tier with a fast page, least recently used first. A request is a hit when its page
//! is on the fast tier during its period. docs/techniques/CORI.md lists each rule's source.
//!
//! Cost per run: O(N) for the requests (a hit test and a recency stamp each, no
//! allocation), plus per period O(period) to count the ranked period, O(touched pages) to
//! select the hottest, and O(capacity) to select the least recently used fast pages when
//! something moves, plus O(k log k) to order the k pages that move (cori-sim walks every
//! page and its LRU list every period). The selections are the periodic tiering policy's
//! (`tierscope_tiering::policy::periodic::{hottest_not_fast, least_recent_first}`): one
//! scheduling rule for the tuner's traces and the engines.

use crate::trace::Trace;
use tierscope_core::tiers::tier_preset;
use tierscope_core::FieldError;
use tierscope_tiering::policy::periodic::{hottest_not_fast, least_recent_first};

/// Which period's counts rank the pages (`memory.py`, `get_l2_hot_pages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// Reactive: the period that just ended (`oracle_counts_binned_ep[curr_ep - 1]`).
    History,
    /// Predictive: the coming period (`oracle_counts_binned_ep[curr_ep]`).
    Oracle,
}

impl Scheduler {
    pub const ALL: [Scheduler; 2] = [Scheduler::History, Scheduler::Oracle];

    pub fn name(self) -> &'static str {
        match self {
            Scheduler::History => "history",
            Scheduler::Oracle => "oracle",
        }
    }
}

/// The platform's constants, in ns and bytes per ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    pub fast_latency_ns: f64,
    pub slow_latency_ns: f64,
    pub fast_bytes_per_ns: f64,
    pub slow_bytes_per_ns: f64,
    /// Charged for every period, the unused last one included (`period_cost = 3000`).
    pub period_cost_ns: f64,
    /// Charged per migrated page, a swap being two (`migr_cost = 1000`).
    pub migration_cost_ns: f64,
    /// Bytes a request moves (`num_reqs * 64` in `compute_perf`).
    pub line_bytes: f64,
    /// Bytes a migrated page moves (`num_migr * 4096`).
    pub page_bytes: f64,
}

impl Platform {
    /// cori-sim's `Fast:NearSlow` platform (`perf_model.py`, `set_platform`), the one
    /// `run_cori.py` tunes on: 50 ns and 10 GB/s fast, 3x the latency and 0.37x the
    /// bandwidth slow, from our `cori-fast` and `cori-slow` tier presets (the same
    /// numbers: 3.7e9 / 1e9 and cori-sim's 0.37 * 10 are the same double).
    pub fn cori_sim() -> Platform {
        let (fast, slow) = match (tier_preset("cori-fast"), tier_preset("cori-slow")) {
            (Some(f), Some(s)) => (f, s),
            _ => unreachable!("tierscope-core lists the cori-fast and cori-slow presets"),
        };
        Platform {
            fast_latency_ns: fast.latency_ns,
            slow_latency_ns: slow.latency_ns,
            fast_bytes_per_ns: fast.bandwidth / 1e9,
            slow_bytes_per_ns: slow.bandwidth / 1e9,
            period_cost_ns: 3000.0,
            migration_cost_ns: 1000.0,
            line_bytes: 64.0,
            page_bytes: 4096.0,
        }
    }
}

/// A model run's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub platform: Platform,
    pub scheduler: Scheduler,
    /// The fast tier's share of the trace's pages (`cap_ratio`, 0.2 in `run_cori.py`):
    /// `int(ratio * pages)` pages.
    pub fast_ratio: f64,
    /// Counts are binned to multiples of this before ranking, as cori-sim's
    /// `set_oracle_cnts` does with 20 (see [`binned`]); 0 or 1: raw counts.
    pub count_quantum: u32,
}

impl ModelConfig {
    /// cori-sim's defaults: its platform, 20 % fast, counts binned by 20.
    pub fn cori_sim(scheduler: Scheduler) -> ModelConfig {
        ModelConfig {
            platform: Platform::cori_sim(),
            scheduler,
            fast_ratio: 0.2,
            count_quantum: 20,
        }
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        let r = self.fast_ratio;
        // cori-sim places only even ids on the fast tier, so a share in (0.5, 1) never
        // fills it, and its swaps then push it past its capacity (`capacity_check`
        // prints ERROR): refused rather than reproduced.
        if !(0.0..=0.5).contains(&r) && r != 1.0 {
            return Err(FieldError::new(
                "fast_ratio",
                format!(
                    "{r} is not a share cori-sim's interleaved placement can fill: use 0 to \
                     0.5, or 1 (every page fast)"
                ),
            ));
        }
        Ok(())
    }

    /// Pages the fast tier holds: `int(fast_ratio * pages)` as cori-sim's `init_tier`.
    pub fn fast_capacity(&self, pages: usize) -> usize {
        (self.fast_ratio * pages as f64) as usize
    }
}

/// A count as cori-sim ranks it with quantum `q > 1`: `set_oracle_cnts` bins each page's
/// per-period counts with `np.digitize(counts, range(0, int(max(counts)), q))` and keeps
/// the bin's lower edge. `busiest` is the page's largest count over all periods of the
/// run (the future ones too). The edges stop below `busiest`, so a count equal to
/// `busiest` that is a multiple of `q` falls to the edge below it: the bin of `count` is
/// `q * floor(min(count, busiest - 1) / q)`. A page never counted more than `q` times in a
/// period is therefore never ranked (its counts all bin to 0).
pub fn binned(count: u32, busiest: u32, q: u32) -> u32 {
    if q <= 1 {
        return count;
    }
    count.min(busiest.saturating_sub(1)) / q * q
}

/// One run's counts and times, each component as cori-sim's `compute_perf` names it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStats {
    pub requests: u64,
    /// Requests per period (0: a single period, cori-sim's `num_reqs_per_ep == 0`).
    pub period: u64,
    /// cori-sim's `num_periods`: `int(requests / period) + 1`, one more than the periods
    /// holding requests when `period` divides `requests`; charged as such.
    pub periods: u64,
    /// Times the scheduler ran (before each period but the first).
    pub reschedules: u64,
    pub fast_hits: u64,
    /// Pages moved, both ways (a swap is two).
    pub migrated_pages: u64,
    pub fast_ns: f64,
    pub slow_ns: f64,
    pub period_ns: f64,
    pub migration_ns: f64,
    /// cori-sim's `Queue_Overhead`: if all the bytes (requests and migrations) take longer
    /// at the slow tier's bandwidth than the fast, slow and migration times together, the
    /// difference.
    pub queue_ns: f64,
    pub runtime_ns: f64,
    /// Every request on one tier (`compute_single_tiering`).
    pub all_fast_ns: f64,
    pub all_slow_ns: f64,
}

/// Runs `config`'s scheduler on `trace` with periods of `period` requests (0: never).
pub fn run(trace: &Trace, config: &ModelConfig, period: u64) -> Result<RunStats, FieldError> {
    config.validate()?;
    let ids = trace.ids();
    let n = ids.len();
    let pages = trace.num_pages();
    let capacity = config.fast_capacity(pages);

    // Initial placement (`init_tier`): all fast at 1, all slow at 0, else even ids until the
    // fast tier holds its share.
    let mut fast = vec![false; pages];
    let mut fast_list: Vec<u32> = Vec::with_capacity(capacity);
    if config.fast_ratio == 1.0 {
        fast.fill(true);
        fast_list.extend(0..pages as u32);
    } else if config.fast_ratio > 0.0 {
        for id in (0..pages).step_by(2).take(capacity) {
            fast[id] = true;
            fast_list.push(id as u32);
        }
    }

    let chunk = match usize::try_from(period) {
        Ok(0) | Err(_) => n,
        Ok(p) => p.min(n),
    };
    let q = config.count_quantum;
    let busiest = if q > 1 && chunk < n {
        busiest_counts(ids, pages, chunk)
    } else {
        vec![]
    };

    // 0: not accessed yet in this run; else the index of the last access + 1. cori-sim's
    // LRU list starts as the ids in order and moves a page to its end when accessed, so
    // the least recently used are the never-accessed pages by id, then by last access.
    let mut last = vec![0usize; pages];
    let mut counts = vec![0u32; pages];
    let mut touched: Vec<u32> = vec![];
    let mut promote: Vec<(u32, u64)> = vec![];
    let page_numbers = trace.page_numbers();
    let (mut hits, mut migrated, mut reschedules) = (0u64, 0u64, 0u64);

    for start in (0..n).step_by(chunk) {
        let end = (start + chunk).min(n);
        if start > 0 {
            reschedules += 1;
            let window = match config.scheduler {
                Scheduler::History => &ids[start - chunk..start],
                Scheduler::Oracle => &ids[start..end],
            };
            for &p in window {
                if counts[p as usize] == 0 {
                    touched.push(p);
                }
                counts[p as usize] += 1;
            }
            promote.clear();
            for &p in &touched {
                let c = std::mem::take(&mut counts[p as usize]);
                let c = if busiest.is_empty() {
                    c
                } else {
                    binned(c, busiest[p as usize], q)
                };
                // cori-sim ranks only pages with a nonzero count (`if pcnt != 0`).
                if c > 0 {
                    promote.push((p, u64::from(c)));
                }
            }
            touched.clear();
            // The `capacity` hottest (`while npages < self.l1_pages`) not yet fast: the
            // scheduling rule the periodic policy uses too.
            hottest_not_fast(
                &mut promote,
                capacity,
                |p| page_numbers[p as usize],
                |p| fast[p as usize],
            );
            let k = promote.len();
            if k > 0 {
                // `k <= capacity = fast_list.len()`: the k least recently used fast pages
                // go down, each replaced in the list by a promoted page.
                least_recent_first(&mut fast_list, k, |p| {
                    (last[p as usize] as u64, u64::from(p))
                });
                for (slot, &(up, _)) in fast_list[..k].iter_mut().zip(&promote) {
                    fast[*slot as usize] = false;
                    fast[up as usize] = true;
                    *slot = up;
                }
                migrated += 2 * k as u64;
            }
        }
        for (i, &p) in ids[start..end].iter().enumerate() {
            hits += u64::from(fast[p as usize]);
            last[p as usize] = start + i + 1;
        }
    }

    let requests = n as u64;
    // `Scheduler.init`: one period when `num_reqs_per_ep == 0`.
    let periods = requests.checked_div(period).map_or(1, |k| k + 1);
    Ok(cost(
        &config.platform,
        requests,
        period,
        periods,
        reschedules,
        hits,
        migrated,
    ))
}

/// Each page's largest count in any period of `chunk` requests.
fn busiest_counts(ids: &[u32], pages: usize, chunk: usize) -> Vec<u32> {
    let mut busiest = vec![0u32; pages];
    let mut counts = vec![0u32; pages];
    let mut touched: Vec<u32> = vec![];
    for window in ids.chunks(chunk) {
        for &p in window {
            if counts[p as usize] == 0 {
                touched.push(p);
            }
            counts[p as usize] += 1;
        }
        for &p in &touched {
            let c = std::mem::take(&mut counts[p as usize]);
            busiest[p as usize] = busiest[p as usize].max(c);
        }
        touched.clear();
    }
    busiest
}

/// cori-sim's `compute_perf` and `compute_baselines`, in its order of operations (f64, as
/// Python's floats).
fn cost(
    platform: &Platform,
    requests: u64,
    period: u64,
    periods: u64,
    reschedules: u64,
    hits: u64,
    migrated: u64,
) -> RunStats {
    let p = platform;
    let fast_ns = hits as f64 * p.fast_latency_ns;
    let slow_ns = (requests - hits) as f64 * p.slow_latency_ns;
    let period_ns = periods as f64 * p.period_cost_ns;
    let migration_ns = migrated as f64 * p.migration_cost_ns;
    let bytes = requests as f64 * p.line_bytes + migrated as f64 * p.page_bytes;
    let allowed = bytes / p.slow_bytes_per_ns;
    let transfer = fast_ns + slow_ns + migration_ns;
    let queue_ns = if transfer < allowed {
        allowed - transfer
    } else {
        0.0
    };
    let single = |latency: f64, bytes_per_ns: f64| {
        let transfer = requests as f64 * latency;
        let allowed = requests as f64 * p.line_bytes / bytes_per_ns;
        transfer
            + if transfer < allowed {
                allowed - transfer
            } else {
                0.0
            }
    };
    RunStats {
        requests,
        period,
        periods,
        reschedules,
        fast_hits: hits,
        migrated_pages: migrated,
        fast_ns,
        slow_ns,
        period_ns,
        migration_ns,
        queue_ns,
        runtime_ns: fast_ns + slow_ns + period_ns + migration_ns + queue_ns,
        all_fast_ns: single(p.fast_latency_ns, p.fast_bytes_per_ns),
        all_slow_ns: single(p.slow_latency_ns, p.slow_bytes_per_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A trace touching the given page numbers (one address per page).
    fn trace(pages: &[u64]) -> Trace {
        Trace::from_addresses(pages.iter().map(|p| p << 12)).unwrap()
    }

    fn config(scheduler: Scheduler, count_quantum: u32) -> ModelConfig {
        ModelConfig {
            count_quantum,
            ..ModelConfig::cori_sim(scheduler)
        }
    }

    fn assert_close(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-6, "{got} != {want}");
    }

    /// Pages 0..9 once each, then page 5 twenty times: ids are the page numbers.
    fn ten_then_five() -> Trace {
        let mut p: Vec<u64> = (0..10).collect();
        p.extend([5; 20]);
        trace(&p)
    }

    #[test]
    fn history_by_hand() {
        // 10 pages: capacity int(0.2 * 10) = 2, fast {0, 2}. Periods of 10 requests.
        // Period 0 (0..9 once): hits on 0 and 2 -> 2.
        // Before period 1, ranked by period 0: all 1, ties by page number -> top 2 = {0, 1};
        // 1 is slow: promote 1, demote the least recent fast page (0 at request 0, 2 at
        // request 2) -> 0; fast {1, 2}, 2 pages moved. Period 1 (page 5 x 10): 0 hits.
        // Before period 2, ranked by period 1: only 5 -> promote 5, demote the least recent
        // of {1 (request 1), 2 (request 2)} -> 1; fast {5, 2}, 4 moved. Period 2: 10 hits.
        let s = run(&ten_then_five(), &config(Scheduler::History, 0), 10).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages, s.reschedules), (12, 4, 2));
        // int(30 / 10) + 1 = 4 periods charged although 3 hold requests.
        assert_eq!(s.periods, 4);
        // 12 * 50 = 600, 18 * 150 = 2700, 4 * 3000 = 12000, 4 * 1000 = 4000;
        // bytes 30 * 64 + 4 * 4096 = 18304 take 18304 / 3.7 = 4947.03 ns < 600 + 2700 + 4000
        // = 7300: no queueing. Runtime 600 + 2700 + 12000 + 4000 = 19300.
        assert_close(s.fast_ns, 600.0);
        assert_close(s.slow_ns, 2700.0);
        assert_close(s.period_ns, 12000.0);
        assert_close(s.migration_ns, 4000.0);
        assert_close(s.queue_ns, 0.0);
        assert_close(s.runtime_ns, 19300.0);
        // 30 * 50 (64 / 10 = 6.4 ns per request of bandwidth is less) and 30 * 150.
        assert_close(s.all_fast_ns, 1500.0);
        assert_close(s.all_slow_ns, 4500.0);
    }

    #[test]
    fn oracle_by_hand() {
        // Same trace. Before period 1, ranked by period 1: only 5 -> promote 5, demote 0
        // (least recent of {0, 2}); fast {5, 2}, 2 moved; period 1: 10 hits. Before period
        // 2, ranked by period 2: 5, already fast: nothing. Hits 2 + 10 + 10 = 22.
        let s = run(&ten_then_five(), &config(Scheduler::Oracle, 0), 10).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages, s.reschedules), (22, 2, 2));
        // 22 * 50 = 1100, 8 * 150 = 1200, 12000, 2000; bytes 1920 + 8192 = 10112 take
        // 2732.97 ns < 4300: no queueing. 1100 + 1200 + 12000 + 2000 = 16300.
        assert_close(s.runtime_ns, 16300.0);
    }

    #[test]
    fn equal_counts_rank_by_page_number_not_first_touch() {
        // Pages 9, 8, ..., 0 once each (ids 0..9 are pages 9..0), then page 4 ten times.
        // Fast: ids 0 and 2 = pages 9 and 7. Before period 1, history ranks period 0, all
        // counts 1: by page number, pages 0 and 1 (ids 9 and 8), both slow: both promoted,
        // both fast pages demoted, 4 moved. Ranking by id would have picked ids 0 and 1
        // (pages 9 and 8): one move. Period 1 (page 4 x 10) misses either way.
        let mut p: Vec<u64> = (0..10).rev().collect();
        p.extend([4; 10]);
        let s = run(&trace(&p), &config(Scheduler::History, 0), 10).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages), (2, 4));
    }

    #[test]
    fn fast_pages_not_yet_accessed_are_the_least_recently_used() {
        // Pages 0..9 once each, periods of 2, oracle. Fast {0, 2}.
        // Period 0 (0, 1): 1 hit. Before period 1, ranked by (2, 3): 3 is slow; the least
        // recent fast page is 2, never accessed yet (cori-sim's LRU list starts with every
        // id), not 0 (request 0): fast {0, 3}, 2 moved; period 1: 2 misses, 3 hits.
        // Periods 2, 3, 4: both pages promoted each time, both fast pages demoted: 4 moved
        // and 2 hits each. Hits 1 + 1 + 6 = 8 (demoting 0 instead would make it 9).
        let s = run(
            &trace(&(0..10).collect::<Vec<_>>()),
            &config(Scheduler::Oracle, 0),
            2,
        )
        .unwrap();
        assert_eq!(
            (s.fast_hits, s.migrated_pages, s.reschedules, s.periods),
            (8, 14, 4, 6)
        );
        // 8 * 50 = 400, 2 * 150 = 300, 6 * 3000 = 18000, 14000; bytes 640 + 14 * 4096 =
        // 57984 take 57984 / 3.7 = 15671.351351 ns > 400 + 300 + 14000 = 14700, so
        // queueing 971.351351; runtime 400 + 300 + 18000 + 14000 + 971.351351.
        assert_close(s.queue_ns, 57984.0 / 3.7 - 14700.0);
        assert_close(s.runtime_ns, 33671.351351351);
    }

    #[test]
    fn queueing_by_hand() {
        // Pages 0..4 once each, periods of 1 request: capacity int(0.2 * 5) = 1, fast {0}.
        // History: request 0 hits; before request 1 the ranked page (0) is fast; before
        // requests 2, 3, 4 the page of the request before is slow and swaps with the one
        // fast page: 6 moved, 1 hit, int(5 / 1) + 1 = 6 periods.
        let t = trace(&[0, 1, 2, 3, 4]);
        let s = run(&t, &config(Scheduler::History, 0), 1).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages, s.periods), (1, 6, 6));
        // 50 + 4 * 150 = 650, 18000, 6000; bytes 5 * 64 + 6 * 4096 = 24896 take
        // 24896 / 3.7 = 6728.648649 ns > 650 + 6000 = 6650: queueing 78.648649.
        assert_close(s.queue_ns, 78.648_648_648_6);
        assert_close(s.runtime_ns, 24_728.648_648_648_6);
        // Oracle: every request's page is promoted before it: 5 hits, 8 moved; bytes
        // 320 + 8 * 4096 = 33088 take 8942.702703 ns > 250 + 8000: queueing 692.702703.
        let s = run(&t, &config(Scheduler::Oracle, 0), 1).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages), (5, 8));
        assert_close(s.queue_ns, 692.702_702_702_7);
        assert_close(s.runtime_ns, 26_942.702_702_702_7);
    }

    #[test]
    fn binned_as_numpy_digitize_by_hand() {
        // busiest 45: edges range(0, 45, 20) = 0, 20, 40.
        assert_eq!(
            [45, 40, 39, 19, 0].map(|c| binned(c, 45, 20)),
            [40, 40, 20, 0, 0]
        );
        // busiest 40: edges 0, 20; 40 is past the last edge and falls in its bin, 20.
        assert_eq!([40, 39, 20].map(|c| binned(c, 40, 20)), [20, 20, 20]);
        // busiest 20: edges 0 only; busiest 21: edges 0, 20.
        assert_eq!(binned(20, 20, 20), 0);
        assert_eq!(binned(20, 21, 20), 20);
        assert_eq!(binned(7, 7, 0), 7);
        assert_eq!(binned(7, 7, 1), 7);
    }

    #[test]
    fn a_page_never_counted_more_than_the_quantum_never_moves() {
        // Periods of 25. Period 0: pages 0..4, then page 1 nineteen times, then page 0:
        // page 1 counted 20, page 0 twice. Period 1: page 0 x 25. Capacity 1, fast {0}.
        let mut p: Vec<u64> = (0..5).collect();
        p.extend([1; 19]);
        p.push(0);
        p.extend([0; 25]);
        let t = trace(&p);
        // Quantum 20: page 1's busiest period has 20, so its edges are range(0, 20, 20) =
        // [0] and 20 bins to 0; page 0 (busiest 25) bins 2 to 0. Nothing ranked, nothing
        // moves: hits 2 + 25 = 27; 27 * 50 + 23 * 150 + 3 * 3000 = 13800.
        let s = run(&t, &config(Scheduler::History, 20), 25).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages), (27, 0));
        assert_close(s.runtime_ns, 13800.0);
        // Raw counts: page 1 (20) outranks page 0 (2) and swaps with it; period 1 then
        // misses 25 times: hits 2; 100 + 48 * 150 + 9000 + 2000 = 18300.
        let s = run(&t, &config(Scheduler::History, 0), 25).unwrap();
        assert_eq!((s.fast_hits, s.migrated_pages), (2, 2));
        assert_close(s.runtime_ns, 18300.0);
    }

    #[test]
    fn one_period_never_reschedules() {
        // Period 0 is cori-sim's single period; a period longer than the trace is one too
        // but charged as int(10 / 50) + 1 = 1. Fast {0, 2}: 2 hits.
        let t = trace(&(0..10).collect::<Vec<_>>());
        for period in [0, 10, 50] {
            let s = run(&t, &config(Scheduler::Oracle, 20), period).unwrap();
            assert_eq!((s.fast_hits, s.migrated_pages, s.reschedules), (2, 0, 0));
        }
        assert_eq!(
            run(&t, &config(Scheduler::Oracle, 20), 10).unwrap().periods,
            2
        );
    }

    #[test]
    fn shares_the_interleaving_cannot_fill_are_refused() {
        let t = trace(&[1, 2, 3]);
        for r in [0.6, 0.99, 1.5, -0.1, f64::NAN] {
            let c = ModelConfig {
                fast_ratio: r,
                ..ModelConfig::cori_sim(Scheduler::History)
            };
            let e = run(&t, &c, 1).unwrap_err();
            assert_eq!(e.field, "fast_ratio");
        }
    }

    /// cori-sim's scheduler written out as it is, on small traces: dense per-period
    /// counts, numpy's digitize as a loop, a full sort per period, the LRU as a list.
    fn reference(pages: &[u64], c: &ModelConfig, period: usize) -> (u64, u64, u64) {
        let t = trace(pages);
        let ids: Vec<usize> = t.ids().iter().map(|&i| i as usize).collect();
        let np = t.num_pages();
        let n = ids.len();
        let num_periods = n.checked_div(period).map_or(1, |k| k + 1);
        let ep = |i: usize| i.checked_div(period).unwrap_or(0);
        let mut counts = vec![vec![0u32; np]; num_periods];
        for (i, &p) in ids.iter().enumerate() {
            counts[ep(i)][p] += 1;
        }
        let q = c.count_quantum;
        let bin = |p: usize, e: usize| -> u32 {
            let x = counts[e][p];
            if q <= 1 {
                return x;
            }
            let max = (0..num_periods).map(|e| counts[e][p]).max().unwrap();
            let edges: Vec<u32> = (0..max).step_by(q as usize).collect();
            let idx = edges.iter().filter(|&&b| b <= x).count();
            edges[idx - 1]
        };
        let cap = (c.fast_ratio * np as f64) as usize;
        let mut fast = vec![false; np];
        if c.fast_ratio == 1.0 {
            fast.fill(true);
        } else {
            let mut placed = 0;
            for (i, f) in fast.iter_mut().enumerate() {
                if i % 2 == 0 && placed < cap {
                    *f = true;
                    placed += 1;
                }
            }
        }
        let mut lru: Vec<usize> = (0..np).collect();
        let (mut hits, mut migr, mut retiers) = (0, 0, 0);
        for (i, &p) in ids.iter().enumerate() {
            if period > 0 && i % period == 0 && i != 0 {
                retiers += 1;
                let e = i / period;
                let e = match c.scheduler {
                    Scheduler::History => e - 1,
                    Scheduler::Oracle => e,
                };
                let mut hot: Vec<(usize, u32)> = (0..np)
                    .map(|p| (p, bin(p, e)))
                    .filter(|x| x.1 != 0)
                    .collect();
                hot.sort_by(|a, b| {
                    b.1.cmp(&a.1)
                        .then(t.page_numbers()[a.0].cmp(&t.page_numbers()[b.0]))
                });
                let up: Vec<usize> = hot
                    .iter()
                    .take(cap)
                    .map(|x| x.0)
                    .filter(|&p| !fast[p])
                    .collect();
                let down: Vec<usize> = lru.iter().copied().filter(|&p| fast[p]).collect();
                for (&u, &d) in up.iter().zip(&down) {
                    fast[u] = true;
                    fast[d] = false;
                }
                migr += 2 * up.len() as u64;
            }
            hits += u64::from(fast[p]);
            let at = lru.iter().position(|&x| x == p).unwrap();
            lru.remove(at);
            lru.push(p);
        }
        (hits, migr, retiers)
    }

    proptest! {
        #[test]
        fn matches_a_direct_transcription_of_cori_sim(
            pages in proptest::collection::vec(0u64..16, 1..200),
            period in 0usize..30,
            ratio in proptest::sample::select(vec![0.0, 0.2, 0.3, 0.5, 1.0]),
            quantum in proptest::sample::select(vec![0u32, 2, 3, 20]),
            oracle in any::<bool>(),
        ) {
            let scheduler = if oracle { Scheduler::Oracle } else { Scheduler::History };
            let c = ModelConfig { fast_ratio: ratio, ..config(scheduler, quantum) };
            let s = run(&trace(&pages), &c, period as u64).unwrap();
            prop_assert_eq!(
                (s.fast_hits, s.migrated_pages, s.reschedules),
                reference(&pages, &c, period)
            );
        }
    }

    #[test]
    fn the_same_trace_gives_the_same_numbers() {
        let mut x = 12345u64;
        let pages: Vec<u64> = (0..20_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % 500
            })
            .collect();
        let t = trace(&pages);
        for s in Scheduler::ALL {
            let c = ModelConfig::cori_sim(s);
            assert_eq!(run(&t, &c, 700).unwrap(), run(&t.clone(), &c, 700).unwrap());
        }
    }
}
