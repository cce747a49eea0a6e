//! Per-page sample counts kept across windows, as the PEBS-driven tiering systems (HeMem,
//! MEMTIS) keep them: a snapshot's regions are the sampler's bins with their sample counts.

use super::{coldest_first, View};
use std::collections::BTreeMap;
use tierscope_core::{AddrRange, RegionReport, Snapshot};

#[derive(Debug, Default, Clone)]
pub struct PageCounts {
    /// Bin start -> (bin end, samples).
    pub pages: BTreeMap<u64, (u64, u64)>,
    /// Samples added since the last [`PageCounts::cool`].
    pub since_cooling: u64,
}

impl PageCounts {
    pub fn add(&mut self, s: &Snapshot) {
        for r in s.regions.iter().filter(|r| r.nr_accesses > 0) {
            let e = self.pages.entry(r.start).or_insert((r.end, 0));
            e.1 += u64::from(r.nr_accesses);
            self.since_cooling += u64::from(r.nr_accesses);
        }
    }

    pub fn max(&self) -> u64 {
        self.pages.values().map(|v| v.1).max().unwrap_or(0)
    }

    /// Halves every count (pages that reach 0 are forgotten).
    pub fn cool(&mut self) {
        self.pages.retain(|_, v| {
            v.1 /= 2;
            v.1 > 0
        });
        self.since_cooling = 0;
    }

    fn report(start: u64, end: u64, count: u64) -> RegionReport {
        RegionReport {
            start,
            end,
            nr_accesses: count.min(u64::from(u32::MAX)) as u32,
            age: 0,
        }
    }

    /// Pages with at least `threshold` samples, hottest first (then by address).
    pub fn hot(&self, threshold: u64) -> Vec<RegionReport> {
        let mut v: Vec<RegionReport> = self
            .pages
            .iter()
            .filter(|(_, v)| v.1 >= threshold)
            .map(|(&s, &(e, c))| Self::report(s, e, c))
            .collect();
        v.sort_by(|a, b| {
            b.nr_accesses
                .cmp(&a.nr_accesses)
                .then(a.start.cmp(&b.start))
        });
        v
    }

    /// The fast tier's contents in pieces of `granule` bytes with fewer than `threshold`
    /// samples, coldest first (never-sampled pieces count 0), then by address. A piece's
    /// count is that of the last counted page starting before the piece's end, if it
    /// overlaps the piece.
    pub fn cold_on_fast(&self, view: &View, granule: u64, threshold: u64) -> Vec<RegionReport> {
        let mut out = vec![];
        // Pieces come in address order, so the last page starting before a piece's end only
        // moves forward: one walk of the pages (a lookup per piece made this the policies'
        // one cost growing faster than the run, with the fast tier's fill).
        let mut pages = self.pages.iter().peekable();
        let mut last: Option<(u64, u64, u64)> = None;
        for r in view.runs_on(0) {
            let mut at = r.start;
            while at < r.end {
                let end = ((at / granule + 1) * granule).min(r.end);
                while let Some((&s, &(e, c))) = pages.next_if(|(&s, _)| s < end) {
                    last = Some((s, e, c));
                }
                let count = last
                    .filter(|&(s, e, _)| AddrRange::new(s, e).overlap(&AddrRange::new(at, end)) > 0)
                    .map_or(0, |(_, _, c)| c);
                if count < threshold {
                    out.push(Self::report(at, end, count));
                }
                at = end;
            }
        }
        coldest_first(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::tier;
    use proptest::prelude::*;
    use tierscope_core::Placement;

    /// The rule written as a lookup per piece, as it was before the walk.
    fn cold_by_lookup(
        c: &PageCounts,
        view: &View,
        granule: u64,
        threshold: u64,
    ) -> Vec<RegionReport> {
        let mut out = vec![];
        for r in view.runs_on(0) {
            let mut at = r.start;
            while at < r.end {
                let end = ((at / granule + 1) * granule).min(r.end);
                let count = c
                    .pages
                    .range(..end)
                    .next_back()
                    .filter(|(&s, &(e, _))| {
                        AddrRange::new(s, e).overlap(&AddrRange::new(at, end)) > 0
                    })
                    .map_or(0, |(_, v)| v.1);
                if count < threshold {
                    out.push(PageCounts::report(at, end, count));
                }
                at = end;
            }
        }
        coldest_first(&mut out);
        out
    }

    proptest! {
        /// Random pages (of 4 KiB to 4 MiB, some straddling pieces), random runs on the fast
        /// tier and granules: the walk gives what a lookup per piece gives.
        #[test]
        fn the_walk_equals_a_lookup_per_piece(
            pages in prop::collection::vec((0u64..4096, 1u64..1024, 0u64..6), 0..60),
            runs in prop::collection::vec((0u64..4096, 1u64..512), 0..12),
            granule_pages in prop::sample::select(vec![1u64, 3, 512]),
            threshold in 0u64..4,
        ) {
            let page = 4096u64;
            let heap = AddrRange::new(0, 8192 * page);
            let mut counts = PageCounts::default();
            for (start, len, n) in pages {
                let (s, e) = (start * page, (start + len) * page);
                counts.pages.entry(s).or_insert((e, 0)).1 += n;
            }
            let mut placement = Placement::new(heap, 1, 2);
            for (start, len) in runs {
                placement.set(AddrRange::new(start * page, (start + len) * page), 0);
            }
            let tiers = vec![tier(u64::MAX), tier(u64::MAX)];
            let view = View {
                now: 0,
                tiers: &tiers,
                placement: &placement,
                latency_ns: &[1.0, 1.0],
            };
            let granule = granule_pages * page;
            prop_assert_eq!(
                counts.cold_on_fast(&view, granule, threshold),
                cold_by_lookup(&counts, &view, granule, threshold)
            );
        }
    }
}
