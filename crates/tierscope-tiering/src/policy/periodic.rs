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
        counts.sort_by(|a, b| hottest_first((a.1, a.0.start), (b.1, b.0.start)));
        counts.truncate(
            (view.tiers[0].capacity / PAGE)
                .try_into()
                .unwrap_or(usize::MAX),
        );
        counts.retain(|&(r, _)| view.bytes_on(r, 0) == 0);
        // Fast pages, least recently used first (never seen: oldest); equal by address.
        let mut fast = vec![];
        for r in view.runs_on(0) {
            let mut at = r.start;
            while at < r.end {
                fast.push(AddrRange::new(at, (at + PAGE).min(r.end)));
                at += PAGE;
            }
        }
        let seen = |p: &AddrRange| self.last_seen.get(&p.start).copied().unwrap_or(0);
        fast.sort_by(|a, b| seen(a).cmp(&seen(b)).then(a.start.cmp(&b.start)));
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
