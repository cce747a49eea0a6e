//! Colloid (SOSP'24) on HeMem's hotness: instead of packing hot pages into the default
//! (fast) tier, balance the tiers' loaded latencies. It searches for the share `p` of the
//! hot pages' accesses the default tier should serve: every quantum (500 ms) it measures
//! the current share (from the sampled counts and the placement) and the two tiers'
//! latencies; when the default tier is slower by more than `delta` (5 %) the current share
//! is too high and becomes the search's upper bound, when faster by more than `delta` its
//! lower bound, and pages whose counts add up to the step to the middle of the bounds move
//! (hottest first when promoting, least hot first when demoting), at most
//! `max_per_quantum`. Within `delta` it holds; when the bounds have closed and the
//! latencies drift apart again (the load changed), the search restarts.
//!
//! Colloid reads the latencies from the memory controllers' queue occupancy and arrival
//! rate; here they are the performance model's loaded latencies of the last window
//! ([`View::latency_ns`]). The bisection over the access share is our reading of its
//! page-selection step (docs/techniques/COLLOID.md).

use super::counts::PageCounts;
use super::{promote_with_room, Policy, View};
use crate::migration::Move;
use tierscope_core::units::{Duration, Size};
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::{FeedKind, PolicyInput, AddrRange, FieldError, Nanos, Snapshot};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ColloidConfig {
    /// HeMem's: samples that make a page hot, and the count that triggers cooling.
    pub hot_threshold: u64,
    pub cooling_threshold: u64,
    /// Relative latency gap tolerated.
    pub delta: f64,
    pub quantum: Duration,
    pub max_per_quantum: Size,
    pub page: Size,
}

impl Default for ColloidConfig {
    fn default() -> Self {
        ColloidConfig {
            hot_threshold: 8,
            cooling_threshold: 18,
            delta: 0.05,
            quantum: Duration(500_000_000),
            max_per_quantum: Size(1 << 30),
            page: Size(2 << 20),
        }
    }
}

impl PolicyTechnique for ColloidConfig {
    const HELP: &'static str =
        "Colloid on HeMem's hotness: balance the tiers' loaded latencies (5%, 500 ms quantum)";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(&[FeedKind::Samples])
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.hot_threshold == 0 || self.cooling_threshold < self.hot_threshold {
            return Err(FieldError::new(
                "cooling_threshold",
                "expected 1 <= hot_threshold <= cooling_threshold",
            ));
        }
        if !(self.delta >= 0.0 && self.delta < 1.0) {
            return Err(FieldError::new("delta", "expected 0 <= delta < 1"));
        }
        if self.quantum.0 == 0 {
            return Err(FieldError::new("quantum", "must be positive"));
        }
        if self.page.0 < 4096 || !self.page.0.is_power_of_two() {
            return Err(FieldError::new(
                "page",
                "must be a power of two of at least 4KiB",
            ));
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(Colloid {
            config: self.clone(),
            counts: PageCounts::default(),
            next: self.quantum.0,
            bounds: (0.0, 1.0),
        })
    }
}

pub struct Colloid {
    config: ColloidConfig,
    counts: PageCounts,
    next: Nanos,
    /// The search's bounds on the default tier's share of hot accesses.
    bounds: (f64, f64),
}

/// Bounds closer than this have converged.
const CONVERGED: f64 = 0.01;

impl Policy for Colloid {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.counts.add(snapshot);
        if self.counts.max() > self.config.cooling_threshold {
            self.counts.cool();
        }
    }

    fn next_action(&self) -> Nanos {
        self.next
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        let c = self.config.clone();
        self.next = view.now + c.quantum.0;
        let (fast, slow) = (view.latency_ns[0], view.latency_ns[view.slowest() as usize]);
        let hot = self.counts.hot(c.hot_threshold);
        let total: f64 = hot.iter().map(|r| f64::from(r.nr_accesses)).sum();
        if total == 0.0 {
            return;
        }
        let on_fast =
            |r: &tierscope_core::RegionReport| view.bytes_on(AddrRange::new(r.start, r.end), 0) > 0;
        let share: f64 = hot
            .iter()
            .filter(|r| on_fast(r))
            .map(|r| f64::from(r.nr_accesses))
            .sum::<f64>()
            / total;
        let (lo, hi) = self.bounds;
        let shed = fast > slow * (1.0 + c.delta);
        let gain = fast < slow * (1.0 - c.delta);
        if !shed && !gain {
            return;
        }
        if hi - lo < CONVERGED {
            self.bounds = (0.0, 1.0);
        }
        if shed {
            self.bounds.1 = share.min(self.bounds.1);
        } else {
            self.bounds.0 = share.max(self.bounds.0);
        }
        let target = 0.5 * (self.bounds.0 + self.bounds.1);
        let mut left = c.max_per_quantum.0;
        let mut moved = 0.0;
        let step = (share - target).abs() * total;
        if shed {
            // Least hot fast pages first, until their counts make up the step.
            for r in hot.iter().rev().filter(|r| on_fast(r)) {
                let range = AddrRange::new(r.start, r.end);
                let on = view.bytes_on(range, 0);
                if moved >= step || left < on {
                    break;
                }
                left -= on;
                moved += f64::from(r.nr_accesses);
                out.push(Move {
                    range,
                    to: view.slowest(),
                });
            }
        } else {
            let mut up = vec![];
            for r in hot.iter().filter(|r| !on_fast(r)) {
                if moved >= step {
                    break;
                }
                moved += f64::from(r.nr_accesses);
                up.push(*r);
            }
            let cold = self.counts.cold_on_fast(view, c.page.0, c.hot_threshold);
            promote_with_room(view, &up, &cold, left, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::tiers::TierSpec;
    use tierscope_core::{Placement, RegionReport};

    #[test]
    fn sheds_hot_pages_when_the_default_tier_is_slower_and_promotes_when_faster() {
        let mib2 = 2u64 << 20;
        let heap = AddrRange::new(1 << 40, (1 << 40) + 8 * mib2);
        // Pages 0-3 fast, 4-7 slow; pages 0, 1 (fast) and 4 (slow) hot.
        let mut placement = Placement::new(heap, 1, 2);
        placement.set(AddrRange::new(heap.start, heap.start + 4 * mib2), 0);
        let t = |capacity| TierSpec {
            name: "t".into(),
            capacity,
            latency_ns: 100.0,
            bandwidth: 1e9,
            queueing: 0.1,
            curve: Vec::new(),
            background: 0.0,
        };
        let tiers = vec![t(4 * mib2), t(u64::MAX)];
        let page = |i: u64, n: u32| RegionReport {
            start: heap.start + i * mib2,
            end: heap.start + (i + 1) * mib2,
            nr_accesses: n,
            age: 0,
        };
        let fresh = || {
            let mut policy = ColloidConfig {
                max_per_quantum: Size(mib2),
                ..Default::default()
            }
            .policy(&PolicyContext::for_tests());
            policy.observe(&Snapshot {
                start: 0,
                end: 1,
                regions: vec![page(0, 16), page(1, 9), page(4, 12)],
            });
            policy
        };
        let mut policy = fresh();
        let act = |policy: &mut Box<dyn Policy>, latency: [f64; 2]| {
            let view = View {
                now: 0,
                tiers: &tiers,
                placement: &placement,
                latency_ns: &latency,
            };
            let mut out = vec![];
            policy.act(&view, &mut out);
            out
        };
        // Hot accesses: 16 + 9 on fast, 12 on slow: share 25/37. The default tier is
        // slower: the share becomes the upper bound, the target is halfway to 0 (12.5/37
        // on fast), so pages worth 12.5 samples leave, the least hot first: page 1 (9),
        // then page 0 would exceed the one-page budget.
        assert_eq!(
            act(&mut policy, [500.0, 300.0]),
            vec![Move {
                range: AddrRange::new(heap.start + mib2, heap.start + 2 * mib2),
                to: 1
            }]
        );
        // Within delta: nothing.
        assert!(act(&mut policy, [310.0, 300.0]).is_empty());
        // (Placement unchanged, the same share now reads as too low: the bounds meet and
        // there is no step to take.)
        assert!(act(&mut policy, [100.0, 300.0]).is_empty());
        // A fresh search with the default tier faster: halfway from 25/37 up to all, pages
        // worth 6 samples come up (page 4), a cold fast page goes to make room.
        let moves = act(&mut fresh(), [100.0, 300.0]);
        assert_eq!(moves.len(), 2, "{moves:?}");
        assert_eq!(moves[0].to, 1);
        assert_eq!(moves[1].range.start, heap.start + 4 * mib2);
        assert_eq!(moves[1].to, 0);
    }
}
