//! cori-sim's runtime model of a periodic page scheduler on a trace (`sim/scheduler.py`,
//! `sim/memory.py`, `sim/perf_model.py`), periods counted in requests.
//!
//! The run: pages start interleaved (even first-touch ids on the fast tier until it holds
//! its share); before request `e * period` of every period `e >= 1` the scheduler ranks
//! pages by their access counts (`history`: in period `e - 1`; `oracle`: in period `e`),
//! takes the `capacity` hottest with a nonzero count, and swaps each of them that is on the
//! slow tier with a fast page, least recently used first. A request is a hit when its page
//! is on the fast tier during its period. docs/CORI.md lists each rule's source.
//!
//! Cost per run: O(N) for the requests (a hit test and a recency stamp each, no
//! allocation), plus per period O(period) to count the ranked period, O(touched pages) to
//! select the hottest, and O(capacity) to select the least recently used fast pages when
//! something moves (cori-sim walks every page and its LRU list every period).

use crate::trace::Trace;
use tierscope_core::tiers::tier_preset;
use tierscope_core::FieldError;
use tierscope_tiering::policy::periodic::hottest_first;

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
    let mut ranked: Vec<(u32, u32)> = vec![];
    let mut promote: Vec<u32> = vec![];
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
            ranked.clear();
            for &p in &touched {
                let c = std::mem::take(&mut counts[p as usize]);
                let c = if busiest.is_empty() {
                    c
                } else {
                    binned(c, busiest[p as usize], q)
                };
                // cori-sim ranks only pages with a nonzero count (`if pcnt != 0`).
                if c > 0 {
                    ranked.push((p, c));
                }
            }
            touched.clear();
            // The `capacity` hottest (`while npages < self.l1_pages`); their order among
            // themselves does not matter, only which they are.
            let cmp = |a: &(u32, u32), b: &(u32, u32)| {
                hottest_first(
                    (u64::from(a.1), page_numbers[a.0 as usize]),
                    (u64::from(b.1), page_numbers[b.0 as usize]),
                )
            };
            if ranked.len() > capacity {
                if capacity > 0 {
                    ranked.select_nth_unstable_by(capacity - 1, cmp);
                }
                ranked.truncate(capacity);
            }
            promote.clear();
            promote.extend(ranked.iter().map(|&(p, _)| p).filter(|&p| !fast[p as usize]));
            let k = promote.len();
            if k > 0 {
                // `k <= capacity = fast_list.len()`: the k least recently used fast pages
                // go down, each replaced in the list by a promoted page.
                if k < fast_list.len() {
                    fast_list.select_nth_unstable_by_key(k - 1, |&p| (last[p as usize], p));
                }
                for (slot, &up) in fast_list[..k].iter_mut().zip(&promote) {
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
    let periods = if period == 0 {
        1
    } else {
        requests / period + 1
    };
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
        transfer + if transfer < allowed { allowed - transfer } else { 0.0 }
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
