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
    /// samples, coldest first (never-sampled pieces count 0), then by address.
    pub fn cold_on_fast(&self, view: &View, granule: u64, threshold: u64) -> Vec<RegionReport> {
        let mut out = vec![];
        for r in view.runs_on(0) {
            let mut at = r.start;
            while at < r.end {
                let end = ((at / granule + 1) * granule).min(r.end);
                let count = self
                    .pages
                    .range(..end)
                    .next_back()
                    .filter(|(&s, &(e, _))| {
                        AddrRange::new(s, e).overlap(&AddrRange::new(at, end)) > 0
                    })
                    .map_or(0, |(_, v)| v.1);
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
