//! Telescope's tiering rule (paper section 6.3): after each aggregation window, a region
//! is hot when its access count exceeds 5; regions of 4 GB or more are skipped; hot
//! regions move to the fast tier hottest first, at most 10 GB per window. The paper does
//! not say how room is made when the fast tier is full; we demote the regions the same
//! snapshot reports coldest (fewest accesses, then oldest), only as much as the
//! promotions need (docs/techniques/TELESCOPE_RULE.md).
//!
//! "Subsequent profiling windows split larger hot regions, and hence they are eventually
//! migrated" (§6.3.2). A monitor's regions split on differences in access, so a uniformly
//! hot range stays one region and would be skipped for ever; with `split_large` (the
//! default) the rule does the splitting the paper relies on: a hot region of `max_region`
//! or more, reported with the same bounds window after window, is cut in two more halves
//! each window it stays hot (2, 4, 8, ... pieces, on 4 KiB boundaries), and its pieces
//! below `max_region` are candidates like any hot region.

use super::{due_if, promote_with_room, Policy, View};
use std::collections::HashMap;
use crate::migration::Move;
use tierscope_core::units::Size;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::{FeedKind, FieldError, Nanos, PolicyInput, RegionReport, Snapshot};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelescopeRuleConfig {
    /// A region is hot when its count is above this.
    pub min_count: u32,
    /// Regions this large or larger are never promoted.
    pub max_region: Size,
    /// Bytes promoted per window at most.
    pub max_per_window: Size,
    /// Split a hot region of `max_region` or more in later windows until its pieces can
    /// be migrated (the paper's §6.3.2); false skips it for as long as it is reported.
    pub split_large: bool,
}

impl Default for TelescopeRuleConfig {
    fn default() -> Self {
        TelescopeRuleConfig {
            min_count: 5,
            max_region: Size(4_000_000_000),
            max_per_window: Size(10_000_000_000),
            split_large: true,
        }
    }
}

impl PolicyTechnique for TelescopeRuleConfig {
    const HELP: &'static str =
        "Telescope section 6.3: count > 5, skip regions >= 4 GB, hottest first, 10 GB per window";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(FeedKind::ACCESSES)
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.max_region.0 == 0 || self.max_per_window.0 == 0 {
            return Err(FieldError::new(
                "max_region",
                "max_region and max_per_window must be positive",
            ));
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(TelescopeRule {
            config: self.clone(),
            pending: None,
            halvings: HashMap::new(),
        })
    }
}

pub struct TelescopeRule {
    config: TelescopeRuleConfig,
    pending: Option<Snapshot>,
    /// Large hot regions by their bounds: the windows in a row they were hot (the halvings
    /// so far). A region the monitor reports with other bounds starts again.
    halvings: HashMap<(u64, u64), u32>,
}

/// `r` cut into 2^`halvings` pieces on 4 KiB boundaries (fewer when it is small), each
/// with `r`'s count.
fn pieces(r: &RegionReport, halvings: u32, out: &mut Vec<RegionReport>) {
    let pages = (r.end - r.start) / 4096;
    let n = (1u64 << halvings.min(40)).min(pages.max(1));
    for i in 0..n {
        let start = r.start + pages * i / n * 4096;
        let end = if i + 1 == n {
            r.end
        } else {
            r.start + pages * (i + 1) / n * 4096
        };
        out.push(RegionReport { start, end, ..*r });
    }
}

impl Policy for TelescopeRule {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.pending = Some(snapshot.clone());
    }

    fn next_action(&self) -> Nanos {
        due_if(self.pending.is_some())
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        let Some(s) = self.pending.take() else {
            return;
        };
        let c = &self.config;
        let mut hot: Vec<_> = s
            .regions
            .iter()
            .filter(|r| r.nr_accesses > c.min_count && r.end - r.start < c.max_region.0)
            .copied()
            .collect();
        if c.split_large {
            // Each large hot region seen again with the same bounds is halved once more;
            // the pieces small enough join the candidates.
            let mut seen = HashMap::new();
            for r in s.regions.iter().filter(|r| {
                r.nr_accesses > c.min_count && r.end - r.start >= c.max_region.0
            }) {
                let k = self.halvings.get(&(r.start, r.end)).copied().unwrap_or(0) + 1;
                seen.insert((r.start, r.end), k);
                let before = hot.len();
                pieces(r, k, &mut hot);
                let small = |p: &RegionReport| p.end - p.start < c.max_region.0;
                let mut i = before;
                while i < hot.len() {
                    if small(&hot[i]) {
                        i += 1;
                    } else {
                        hot.swap_remove(i);
                    }
                }
            }
            self.halvings = seen;
        }
        hot.sort_by(|a, b| {
            b.nr_accesses
                .cmp(&a.nr_accesses)
                .then(a.start.cmp(&b.start))
        });
        let mut cold: Vec<_> = s
            .regions
            .iter()
            .filter(|r| r.nr_accesses <= c.min_count)
            .copied()
            .collect();
        cold.sort_by(|a, b| {
            a.nr_accesses
                .cmp(&b.nr_accesses)
                .then(b.age.cmp(&a.age))
                .then(a.start.cmp(&b.start))
        });
        promote_with_room(view, &hot, &cold, c.max_per_window.0, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::tiers::TierSpec;
    use tierscope_core::{AddrRange, Placement, RegionReport};

    fn tiers(fast: u64) -> Vec<TierSpec> {
        let t = |capacity| TierSpec {
            name: "t".into(),
            capacity,
            latency_ns: 1.0,
            bandwidth: 1.0,
            queueing: 0.0,
            curve: Vec::new(),
            background: 0.0,
        };
        vec![t(fast), t(u64::MAX)]
    }

    fn region(start: u64, mib: u64, nr_accesses: u32) -> RegionReport {
        RegionReport {
            start,
            end: start + (mib << 20),
            nr_accesses,
            age: 0,
        }
    }

    #[test]
    fn promotes_hot_small_regions_hottest_first_and_demotes_cold_for_room() {
        let base = 1u64 << 40;
        let heap = AddrRange::new(base, base + (64 << 20));
        // Fast tier of 16 MiB holding the first 16 MiB (cold).
        let mut placement = Placement::new(heap, 1, 2);
        placement.set(AddrRange::new(base, base + (16 << 20)), 0);
        let tiers = tiers(16 << 20);
        let view = View {
            now: 0,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[1.0, 1.0],
        };
        let mut rule = TelescopeRuleConfig {
            max_region: Size(32 << 20),
            split_large: false,
            ..Default::default()
        }
        .policy(&PolicyContext::for_tests());
        rule.observe(&Snapshot {
            start: 0,
            end: 1,
            regions: vec![
                region(base, 16, 0),
                region(base + (16 << 20), 8, 6),
                region(base + (24 << 20), 8, 20),
                region(base + (32 << 20), 32, 30), // too large: skipped
            ],
        });
        assert_eq!(rule.next_action(), 0);
        let mut out = vec![];
        rule.act(&view, &mut out);
        assert_eq!(rule.next_action(), Nanos::MAX);
        let mib = |m: u64| base + (m << 20);
        assert_eq!(
            out,
            vec![
                Move {
                    range: AddrRange::new(mib(0), mib(16)),
                    to: 1
                },
                Move {
                    range: AddrRange::new(mib(24), mib(32)),
                    to: 0
                },
                Move {
                    range: AddrRange::new(mib(16), mib(24)),
                    to: 0
                },
            ]
        );
    }

    #[test]
    fn a_large_hot_region_is_halved_each_window_until_its_pieces_move() {
        let base = 1u64 << 40;
        let heap = AddrRange::new(base, base + (64 << 20));
        let placement = Placement::new(heap, 1, 2);
        let tiers = tiers(64 << 20);
        let view = View {
            now: 0,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[1.0, 1.0],
        };
        let config = TelescopeRuleConfig {
            max_region: Size(10 << 20),
            ..Default::default()
        };
        let mut rule = config.policy(&PolicyContext::for_tests());
        let window = |rule: &mut Box<dyn Policy>, regions: Vec<RegionReport>| {
            rule.observe(&Snapshot {
                start: 0,
                end: 1,
                regions,
            });
            let mut out = vec![];
            rule.act(&view, &mut out);
            out
        };
        // A uniformly hot 32 MiB region: halves of 16 MiB are too large, quarters of 8 MiB
        // are not: nothing moves in the first window, the quarters in the second.
        let hot = || vec![region(base, 32, 9), region(base + (32 << 20), 32, 0)];
        assert!(window(&mut rule, hot()).is_empty());
        let out = window(&mut rule, hot());
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out.iter().all(|m| m.to == 0 && m.range.len() == 8 << 20));
        // Reported with other bounds, the count starts again.
        assert!(window(&mut rule, vec![region(base, 24, 9), region(base + (24 << 20), 40, 0)])
            .is_empty());
        // Without split_large it is never moved.
        let mut skip = TelescopeRuleConfig {
            split_large: false,
            ..config
        }
        .policy(&PolicyContext::for_tests());
        for _ in 0..5 {
            assert!(window(&mut skip, hot()).is_empty());
        }
    }
}
