//! Cori's periodic page schedulers (cori-sim): once per period, rank pages by their
//! access counts in a period and swap the pages on the slow tier among the hottest the
//! fast tier could hold with the least recently used pages of the fast tier. `history` (the
//! reactive scheduler) ranks by the period that just ended; `oracle` (the predictive one)
//! by the coming period, which the runner reads from an engine one period ahead.
//!
//! Fed by the engine's exact per-page counts, not by a monitor: cori-sim's schedulers see
//! every access. Pages are the truth's blocks (set `block_size = "4KiB"` for cori-sim's
//! 4 KiB pages). Deterministic ties, where cori-sim's numpy argsort is unstable: equal
//! counts by address, equal recency by address. `count_quantum` rounds each period's
//! counts down to its multiples (cori-sim's 20: a page needs 20 accesses in a period to
//! move). Costs are the migration engine's (cori-sim: 1 us per migrated page, a swap being
//! two, and 3 us per period: `stall_per_page`, `stall_per_round`).

use super::{due_if, Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use std::collections::BTreeMap;
use tierscope_core::units::Duration;
use tierscope_core::{AddrRange, FieldError, Nanos, PolicyInput, Snapshot};

/// cori-sim's page.
const PAGE: u64 = 4096;

/// The order Cori's schedulers rank pages in, on `(count, tie)` pairs: higher counts
/// first, equal counts by `tie` ascending (an address or a page number). cori-sim sorts
/// with numpy's `argsort(counts)[::-1]`, whose order among equal counts is unspecified
/// (numpy's quicksort is unstable); a total order makes every run reproducible. Shared
/// with `tierscope-cori`'s trace model, so both rank alike.
pub fn hottest_first(a: (u64, u64), b: (u64, u64)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Cori's scheduling decision, the one copy both its runs use (this policy on the engines,
/// `tierscope-cori`'s trace model for the tuner): of the counted pages (`(page, count)`,
/// pages with a zero count left out), keep the `capacity` hottest ([`hottest_first`], equal
/// counts by `tie(page)`), drop those already on the fast tier, and leave the rest hottest
/// first in `counted`: the pages to promote (cori-sim's `get_l2_hot_pages`).
pub fn hottest_not_fast<P: Copy>(
    counted: &mut Vec<(P, u64)>,
    capacity: usize,
    tie: impl Fn(P) -> u64,
    on_fast: impl Fn(P) -> bool,
) {
    let cmp = |a: &(P, u64), b: &(P, u64)| hottest_first((a.1, tie(a.0)), (b.1, tie(b.0)));
    if counted.len() > capacity {
        if capacity > 0 {
            counted.select_nth_unstable_by(capacity - 1, cmp);
        }
        counted.truncate(capacity);
    }
    counted.retain(|&(p, _)| !on_fast(p));
    counted.sort_unstable_by(cmp);
}

/// The other half of Cori's decision: moves the `k` least recently used of `fast` (by
/// `recency(page)`, `(last use, tie)`, smallest first) to its front, in that order: the
/// fast pages a swap sends down, one per promoted page that does not fit.
pub fn least_recent_first<P: Copy>(fast: &mut [P], k: usize, recency: impl Fn(P) -> (u64, u64)) {
    let k = k.min(fast.len());
    if k == 0 {
        return;
    }
    if k < fast.len() {
        fast.select_nth_unstable_by_key(k - 1, |&p| recency(p));
    }
    fast[..k].sort_unstable_by_key(|&p| recency(p));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The period that just ended (reactive).
    History,
    /// The coming period (predictive).
    Oracle,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeriodicConfig {
    pub mode: Mode,
    /// Counts are rounded down to multiples of this (0 or 1: not at all).
    #[serde(default)]
    pub count_quantum: u64,
    /// How often it acts: the period it ranks pages over (default 100 ms). What Cori
    /// tunes (`tierscope tune --param tiering.policies[NAME].period`).
    #[serde(default = "default_period")]
    pub period: Duration,
}

/// The period of Cori's schedulers and the oracle bound when none is given.
pub fn default_period() -> Duration {
    Duration(100_000_000)
}

impl PolicyTechnique for PeriodicConfig {
    const HELP: &'static str = "Cori's periodic schedulers: each period, swap the hottest slow pages with \
         the least recently used fast ones (mode history or oracle)";

    /// The engine's exact per-page counts: the period just ended (history) or the coming
    /// one (oracle).
    fn input(&self) -> PolicyInput {
        match self.mode {
            Mode::History => PolicyInput::EngineHistory,
            Mode::Oracle => PolicyInput::Lookahead,
        }
    }

    fn period_ns(&self) -> Option<u64> {
        Some(self.period.0)
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.period.0 == 0 {
            return Err(FieldError::new("period", "must be positive"));
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(Periodic {
            config: self.clone(),
            counts: None,
            period: 0,
            last_seen: BTreeMap::new(),
        })
    }
}

pub struct Periodic {
    config: PeriodicConfig,
    /// The counts to rank by: page range -> accesses.
    counts: Option<Vec<(AddrRange, u64)>>,
    period: u64,
    /// Page start -> the last period it was accessed in (for LRU).
    last_seen: BTreeMap<u64, u64>,
}

impl Policy for Periodic {
    fn observe(&mut self, _: &Snapshot) {}

    fn observe_heat(&mut self, heat: &[(AddrRange, f64)]) {
        self.period += 1;
        let q = self.config.count_quantum.max(1);
        let mut counts = vec![];
        for &(r, per_byte) in heat {
            // A range's density is uniform over it: one count per 4 KiB page of the range,
            // each the page's expected accesses (exact counts on the exact engine with
            // 4 KiB truth blocks). Ranges with less than one access per page are skipped
            // whole, so a huge cold range costs nothing.
            let per_page = (per_byte * PAGE as f64).round() as u64;
            if per_page == 0 {
                continue;
            }
            let mut at = r.start;
            while at < r.end {
                let end = (at + PAGE).min(r.end);
                self.last_seen.insert(at, self.period);
                let c = per_page / q * q;
                if c > 0 {
                    counts.push((AddrRange::new(at, end), c));
                }
                at = end;
            }
        }
        self.counts = Some(counts);
    }

    fn next_action(&self) -> Nanos {
        due_if(self.counts.is_some())
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        let Some(mut counts) = self.counts.take() else {
            return;
        };
        let slow = view.slowest();
        // The pages the fast tier would hold if it held the hottest (cori-sim's
        // get_l2_hot_pages: the `capacity` hottest counted pages, equal counts by
        // address); those of them on the slow tier move up, hottest first. A slow page
        // colder than every fast one stays where it is.
        let capacity = (view.tiers[0].capacity / PAGE)
            .try_into()
            .unwrap_or(usize::MAX);
        hottest_not_fast(&mut counts, capacity, |r| r.start, |r| view.bytes_on(r, 0) > 0);
        // Fast pages, least recently used first (never seen: oldest); equal by address.
        let mut fast = vec![];
        for r in view.runs_on(0) {
            let mut at = r.start;
            while at < r.end {
                fast.push(AddrRange::new(at, (at + PAGE).min(r.end)));
                at += PAGE;
            }
        }
        // At most one goes down per page promoted.
        let seen = |p: AddrRange| self.last_seen.get(&p.start).copied().unwrap_or(0);
        least_recent_first(&mut fast, counts.len(), |p| (seen(p), p.start));
        let mut room = view.room(0);
        let mut victims = fast.into_iter();
        let mut promote = vec![];
        for (page, _) in counts {
            if room < page.len() {
                // A swap: the least recently used fast page goes down.
                let Some(v) = victims.next() else {
                    break;
                };
                room += v.len();
                out.push(Move { range: v, to: slow });
            }
            room -= page.len();
            promote.push(Move { range: page, to: 0 });
        }
        out.extend(promote);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The selections equal a full sort's head, whatever the input: the set and the
        /// order the schedulers act in do not depend on the selection algorithm.
        #[test]
        fn selections_equal_a_full_sorts_head(
            counts in prop::collection::vec(0u64..6, 0..40),
            capacity in 0usize..45,
            fast_mask in any::<u64>(),
            recency in prop::collection::vec(0u64..5, 40),
            k in 0usize..45,
        ) {
            let on_fast = |p: u32| fast_mask >> (p % 64) & 1 == 1;
            let mut counted: Vec<(u32, u64)> =
                counts.iter().enumerate().map(|(p, &c)| (p as u32, c)).collect();
            let mut want = counted.clone();
            want.sort_by(|a, b| hottest_first((a.1, u64::from(a.0)), (b.1, u64::from(b.0))));
            want.truncate(capacity);
            want.retain(|&(p, _)| !on_fast(p));
            hottest_not_fast(&mut counted, capacity, u64::from, on_fast);
            prop_assert_eq!(counted, want);

            let rec = |p: u32| (recency[p as usize], u64::from(p));
            let mut fast: Vec<u32> = (0..40).collect();
            let mut sorted = fast.clone();
            sorted.sort_by_key(|&p| rec(p));
            least_recent_first(&mut fast, k, rec);
            let k = k.min(40);
            prop_assert_eq!(&fast[..k], &sorted[..k]);
        }
    }

    #[test]
    fn periodic_moves_only_slow_pages_among_the_hottest() {
        use tierscope_core::Placement;
        // Fast pages A (100 accesses), B (90); slow C (5), D (95); room for two pages.
        let tiers = super::super::test_tiers(2 * PAGE);
        let mut placement = Placement::new(AddrRange::new(0, 4 * PAGE), 1, 2);
        placement.set(AddrRange::new(0, 2 * PAGE), 0);
        let page = |i: u64| AddrRange::new(i * PAGE, (i + 1) * PAGE);
        let per_byte = |n: f64| n / PAGE as f64;
        let view = View {
            now: 0,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[100.0, 100.0],
        };
        let mut p = PeriodicConfig {
            mode: Mode::History,
            count_quantum: 0,
            period: default_period(),
        }
        .policy(&PolicyContext::for_tests());
        // C alone is colder than both fast pages: nothing moves.
        p.observe_heat(&[
            (page(0), per_byte(100.0)),
            (page(1), per_byte(90.0)),
            (page(2), per_byte(5.0)),
        ]);
        let mut out = vec![];
        p.act(&view, &mut out);
        assert!(out.is_empty(), "{out:?}");
        // D is among the two hottest: it swaps with the fast page seen least recently (B,
        // not counted this period), and C stays.
        p.observe_heat(&[
            (page(0), per_byte(100.0)),
            (page(2), per_byte(5.0)),
            (page(3), per_byte(95.0)),
        ]);
        p.act(&view, &mut out);
        assert_eq!(
            out,
            [
                Move {
                    range: page(1),
                    to: 1
                },
                Move {
                    range: page(3),
                    to: 0
                }
            ]
        );
    }

    #[test]
    fn hottest_first_orders_by_count_then_tie_ascending() {
        let mut v = vec![(1, 30), (5, 10), (5, 20), (9, 40), (5, 5)];
        v.sort_by(|&a, &b| hottest_first(a, b));
        assert_eq!(v, [(9, 40), (5, 5), (5, 10), (5, 20), (1, 30)]);
    }
}
