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

use super::{due_if, Policy, Promotions, View};
use std::collections::HashMap;
use crate::migration::Move;
use tierscope_core::units::Size;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::{AddrRange, FeedKind, FieldError, Nanos, PolicyInput, RegionReport, Snapshot};

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
            pending: false,
            regions: Vec::new(),
            halvings: HashMap::new(),
            seen: HashMap::new(),
            hot: Vec::new(),
            cold: Vec::new(),
            off_fast: Vec::new(),
            promotions: Promotions::default(),
        })
    }
}

/// The rule keeps its buffers from one window to the next: a split region's promotions
/// can number millions of pieces, and a buffer that size dropped and allocated again
/// every window went back to the kernel each time, to fault its pages in again.
pub struct TelescopeRule {
    config: TelescopeRuleConfig,
    /// A snapshot arrived that the rule has not acted on: its regions are `regions`.
    pending: bool,
    regions: Vec<RegionReport>,
    /// Large hot regions by their bounds: the windows in a row they were hot (the halvings
    /// so far). A region the monitor reports with other bounds starts again.
    halvings: HashMap<(u64, u64), u32>,
    /// This window's `halvings`, built beside the last one's.
    seen: HashMap<(u64, u64), u32>,
    hot: Vec<Candidate>,
    cold: Vec<RegionReport>,
    /// The runs of one split region off the fast tier.
    off_fast: Vec<AddrRange>,
    promotions: Promotions,
}

/// A hot region that can be promoted: whole, or cut into `pieces` pieces of which those
/// below `max_region` are the candidates (see [`piece`]).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    region: RegionReport,
    pieces: Option<u64>,
}

/// How many pieces a region of `pages` pages is cut into after `halvings` halvings:
/// 2^`halvings`, fewer when it is small.
fn piece_count(pages: u64, halvings: u32) -> u64 {
    (1u64 << halvings.min(40)).min(pages.max(1))
}

/// Piece `i` of `r` cut into `n` pieces of `pages` pages on 4 KiB boundaries (the last
/// piece takes what is left past the last whole page).
fn piece(r: &RegionReport, pages: u64, n: u64, i: u64) -> AddrRange {
    let start = r.start + pages * i / n * 4096;
    let end = if i + 1 == n {
        r.end
    } else {
        r.start + pages * (i + 1) / n * 4096
    };
    AddrRange::new(start, end)
}

/// The piece of `r` (cut as [`piece`]) holding address `a` (in `r`): the last piece
/// starting at or before it.
fn piece_at(r: &RegionReport, pages: u64, n: u64, a: u64) -> u64 {
    // Piece i starts at page floor(pages * i / n), at or before page q when
    // pages * i < (q + 1) * n.
    let q = ((a - r.start) / 4096) as u128;
    let (pages_w, n_w) = (pages.max(1) as u128, n as u128);
    let mut i = (((q + 1) * n_w).div_ceil(pages_w) as u64).clamp(1, n) - 1;
    // Guards against rounding at the ends (a past the last whole page).
    while i + 1 < n && piece(r, pages, n, i + 1).start <= a {
        i += 1;
    }
    while i > 0 && piece(r, pages, n, i).start > a {
        i -= 1;
    }
    i
}

/// Offers `promotions` the pieces of `r` cut in `n` below `max_region`, in address order,
/// as if each were listed: only the pieces overlapping a run of `r` off the fast tier are
/// looked at, since a piece wholly on it is one the offer would pass over.
fn offer_pieces(
    view: &View,
    r: &RegionReport,
    n: u64,
    max_region: u64,
    off_fast: &mut Vec<AddrRange>,
    promotions: &mut Promotions,
) {
    off_fast.clear();
    view.placement
        .runs(AddrRange::new(r.start, r.end), |run, tier| {
            if tier != 0 {
                off_fast.push(run);
            }
        });
    let pages = (r.end - r.start) / 4096;
    let mut i = 0;
    for run in off_fast.iter() {
        i = i.max(piece_at(r, pages, n, run.start));
        while i < n {
            if promotions.full() {
                return;
            }
            let p = piece(r, pages, n, i);
            if p.start >= run.end {
                break;
            }
            i += 1;
            if p.end - p.start < max_region {
                promotions.offer(view, p);
            }
        }
    }
}

impl Policy for TelescopeRule {
    fn observe(&mut self, snapshot: &Snapshot) {
        self.regions.clone_from(&snapshot.regions);
        self.pending = true;
    }

    fn next_action(&self) -> Nanos {
        due_if(self.pending)
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        let c = &self.config;
        let hot_enough = |r: &&RegionReport| r.nr_accesses > c.min_count;
        self.hot.clear();
        self.seen.clear();
        for r in self.regions.iter().filter(hot_enough) {
            if r.end - r.start < c.max_region.0 {
                self.hot.push(Candidate {
                    region: *r,
                    pieces: None,
                });
            } else if c.split_large {
                // Each large hot region seen again with the same bounds is halved once
                // more; its pieces small enough are candidates.
                let k = self.halvings.get(&(r.start, r.end)).copied().unwrap_or(0) + 1;
                self.seen.insert((r.start, r.end), k);
                let pages = (r.end - r.start) / 4096;
                self.hot.push(Candidate {
                    region: *r,
                    pieces: Some(piece_count(pages, k)),
                });
            }
        }
        if c.split_large {
            std::mem::swap(&mut self.halvings, &mut self.seen);
        }
        // Hottest first, then by address. Regions are disjoint, so a split region's
        // pieces (one count, consecutive addresses) sort together at its start.
        self.hot.sort_by(|a, b| {
            b.region
                .nr_accesses
                .cmp(&a.region.nr_accesses)
                .then(a.region.start.cmp(&b.region.start))
        });
        self.cold.clear();
        self.cold.extend(
            self.regions
                .iter()
                .filter(|r| r.nr_accesses <= c.min_count)
                .copied(),
        );
        self.cold.sort_by(|a, b| {
            a.nr_accesses
                .cmp(&b.nr_accesses)
                .then(b.age.cmp(&a.age))
                .then(a.start.cmp(&b.start))
        });
        self.promotions.reset(c.max_per_window.0);
        for h in &self.hot {
            if self.promotions.full() {
                break;
            }
            let r = &h.region;
            match h.pieces {
                None => self.promotions.offer(view, AddrRange::new(r.start, r.end)),
                Some(n) => offer_pieces(
                    view,
                    r,
                    n,
                    c.max_region.0,
                    &mut self.off_fast,
                    &mut self.promotions,
                ),
            }
        }
        self.promotions.finish(view, &self.cold, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::tiers::TierSpec;
    use crate::policy::promote_with_room;
    use tierscope_core::{AddrRange, Placement, RegionReport};

    fn tiers(fast: u64) -> Vec<TierSpec> {
        let t = crate::test_support::tier;
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

    #[test]
    fn piece_at_finds_the_piece_holding_an_address() {
        for (pages, extra) in [(1u64, 0u64), (7, 0), (7, 100), (100, 4095), (1000, 0)] {
            let r = region(1 << 30, 0, 1);
            let r = RegionReport {
                end: r.start + pages * 4096 + extra,
                ..r
            };
            for k in 0..12 {
                let n = piece_count(pages, k);
                let all: Vec<_> = (0..n).map(|i| piece(&r, pages, n, i)).collect();
                assert_eq!(all[0].start, r.start);
                assert_eq!(all[n as usize - 1].end, r.end);
                for a in (r.start..r.end).step_by(997) {
                    let i = piece_at(&r, pages, n, a) as usize;
                    assert!(all[i].start <= a && a < all[i].end, "{pages} {n} {a}");
                }
            }
        }
    }

    /// The rule as first written: every piece of a split region listed, then sorted.
    fn listed(config: &TelescopeRuleConfig, halvings: u32, regions: &[RegionReport]) -> Vec<RegionReport> {
        let mut hot: Vec<_> = regions
            .iter()
            .filter(|r| r.nr_accesses > config.min_count && r.end - r.start < config.max_region.0)
            .copied()
            .collect();
        for r in regions
            .iter()
            .filter(|r| r.nr_accesses > config.min_count && r.end - r.start >= config.max_region.0)
        {
            let pages = (r.end - r.start) / 4096;
            let n = piece_count(pages, halvings);
            for i in 0..n {
                let p = piece(r, pages, n, i);
                if p.end - p.start < config.max_region.0 {
                    hot.push(RegionReport {
                        start: p.start,
                        end: p.end,
                        ..*r
                    });
                }
            }
        }
        hot.sort_by(|a, b| {
            b.nr_accesses
                .cmp(&a.nr_accesses)
                .then(a.start.cmp(&b.start))
        });
        hot
    }

    proptest::proptest! {
        /// Offering a split region's pieces lazily moves exactly what listing them all
        /// did, window after window, whatever the placement and the budget.
        #[test]
        fn split_pieces_offered_lazily_move_what_listing_them_did(
            sizes in proptest::collection::vec((1u64..700, 0u32..12), 1..8),
            fast in proptest::collection::vec((0u64..3000, 1u64..300), 0..12),
            budget_pages in 1u64..2000,
            fast_pages in 0u64..3000,
        ) {
            let base = 1u64 << 40;
            let mut regions = vec![];
            let mut at = base;
            for (pages, count) in sizes {
                regions.push(RegionReport { start: at, end: at + pages * 4096, nr_accesses: count, age: 0 });
                at += pages * 4096;
            }
            let heap = AddrRange::new(base, at);
            let mut placement = Placement::new(heap, 1, 2);
            for (page, len) in fast {
                let start = (base + page * 4096).min(at);
                placement.set(AddrRange::new(start, (start + len * 4096).min(at)), 0);
            }
            let tiers = tiers(fast_pages * 4096);
            let view = View { now: 0, tiers: &tiers, placement: &placement, latency_ns: &[1.0, 1.0] };
            let config = TelescopeRuleConfig {
                max_region: Size(64 * 4096),
                max_per_window: Size(budget_pages * 4096),
                ..Default::default()
            };
            let mut rule = config.policy(&PolicyContext::for_tests());
            let cold: Vec<_> = regions.iter().filter(|r| r.nr_accesses <= config.min_count).copied().collect();
            let mut cold_sorted = cold.clone();
            cold_sorted.sort_by(|a, b| a.nr_accesses.cmp(&b.nr_accesses).then(b.age.cmp(&a.age)).then(a.start.cmp(&b.start)));
            for window in 1..14 {
                rule.observe(&Snapshot { start: 0, end: 1, regions: regions.clone() });
                let mut got = vec![];
                rule.act(&view, &mut got);
                let mut want = vec![];
                promote_with_room(&view, &listed(&config, window, &regions), &cold_sorted, config.max_per_window.0, &mut want);
                proptest::prop_assert_eq!(got, want, "window {}", window);
            }
        }
    }
}
