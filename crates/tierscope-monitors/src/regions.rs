//! DAMON's adaptive region management (mm/damon/core.c and vaddr.c): the three-region
//! initial layout, even splitting to `min_nr_regions`, merging of similar neighbours with
//! ageing, random splitting, and refreshing the monitored ranges. Telescope reuses it as is.

use crate::shared::RegionAttrs;
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, CostCounters, Mapping, RegionReport};

/// DAMON_MIN_REGION: one page.
pub const MIN_REGION: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub nr_accesses: u32,
    pub last_nr_accesses: u32,
    pub age: u32,
    /// The address (or entry) the current sample probes.
    pub sampling_addr: u64,
}

impl Region {
    fn new(start: u64, end: u64) -> Self {
        Region {
            start,
            end,
            nr_accesses: 0,
            last_nr_accesses: 0,
            age: 0,
            sampling_addr: start,
        }
    }

    pub fn size(&self) -> u64 {
        self.end - self.start
    }
}

const fn align_down(x: u64, a: u64) -> u64 {
    x & !(a - 1)
}
const fn align_up(x: u64, a: u64) -> u64 {
    (x + a - 1) & !(a - 1)
}

/// The three ranges DAMON monitors in a virtual address space: everything mapped, minus
/// the two largest gaps between mappings. `None` with fewer than two gaps (the kernel's
/// -EINVAL).
pub fn three_regions(mappings: &[Mapping]) -> Option<[AddrRange; 3]> {
    let mut first_gap = AddrRange::new(0, 0);
    let mut second_gap = AddrRange::new(0, 0);
    for w in mappings.windows(2) {
        let gap = AddrRange::new(w[0].range.end, w[1].range.start);
        if gap.len() > first_gap.len() {
            second_gap = first_gap;
            first_gap = gap;
        } else if gap.len() > second_gap.len() {
            second_gap = gap;
        }
    }
    if first_gap.is_empty() || second_gap.is_empty() {
        return None;
    }
    let (lo, hi) = if first_gap.start < second_gap.start {
        (first_gap, second_gap)
    } else {
        (second_gap, first_gap)
    };
    let start = mappings.first()?.range.start;
    let end = mappings.last()?.range.end;
    let a = |x| align_down(x, MIN_REGION);
    let b = |x| align_up(x, MIN_REGION);
    Some([
        AddrRange::new(a(start), b(lo.start)),
        AddrRange::new(a(lo.end), b(hi.start)),
        AddrRange::new(a(hi.end), b(end)),
    ])
}

/// A target's regions, sorted and disjoint, and the state of DAMON's split heuristic.
#[derive(Debug, Clone)]
pub struct Regions {
    pub list: Vec<Region>,
    attrs: RegionAttrs,
    last_nr_regions: usize,
    scratch: Vec<Region>,
}

impl Regions {
    /// The initial regions: the ranges, each split evenly into pieces of
    /// `total / min_nr_regions` bytes (`damon_va_init` with the evenly split).
    pub fn new(ranges: &[AddrRange], attrs: RegionAttrs) -> Self {
        let total: u64 = ranges.iter().map(|r| r.len()).sum();
        let sz = (total / attrs.min_nr_regions as u64).max(MIN_REGION);
        let mut list = vec![];
        for r in ranges.iter().filter(|r| !r.is_empty()) {
            let pieces = (r.len() / sz).max(1);
            evenly_split(&mut list, r.start, r.end, pieces);
        }
        Regions {
            list,
            attrs,
            last_nr_regions: 0,
            scratch: vec![],
        }
    }

    /// The most bytes a region may have so there are at least `min_nr_regions`.
    pub fn sz_limit(&self) -> u64 {
        let total: u64 = self.list.iter().map(Region::size).sum();
        (total / self.attrs.min_nr_regions as u64).max(MIN_REGION)
    }

    /// The snapshot DAMON reports for this window (taken after merging).
    pub fn report(&self) -> Vec<RegionReport> {
        self.list
            .iter()
            .map(|r| RegionReport {
                start: r.start,
                end: r.end,
                nr_accesses: r.nr_accesses,
                age: r.age,
            })
            .collect()
    }

    /// kdamond_merge_regions: age every region, merge similar neighbours, and retry with a
    /// doubled threshold while there are too many regions.
    pub fn merge(&mut self, threshold: u32, sz_limit: u64, cost: &mut CostCounters) {
        let max_threshold = self.attrs.aggr / self.attrs.sample;
        let mut threshold = threshold;
        let mut first_pass = true;
        loop {
            self.merge_pass(threshold, sz_limit, first_pass, cost);
            first_pass = false;
            if self.list.len() <= self.attrs.max_nr_regions as usize
                || (threshold / 2) as u64 >= max_threshold
            {
                break;
            }
            threshold = (threshold * 2).max(1);
        }
    }

    fn merge_pass(&mut self, thres: u32, sz_limit: u64, age: bool, cost: &mut CostCounters) {
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        for mut r in self.list.drain(..) {
            if age {
                let changed = r.nr_accesses.abs_diff(r.last_nr_accesses) > thres
                    || (r.nr_accesses == 0) != (r.last_nr_accesses == 0);
                r.age = if changed { 0 } else { r.age + 1 };
            }
            match out.last_mut() {
                Some(prev)
                    if prev.end == r.start
                        && prev.nr_accesses.abs_diff(r.nr_accesses) <= thres
                        && prev.size() + r.size() <= sz_limit =>
                {
                    let (sl, sr) = (prev.size() as u128, r.size() as u128);
                    let w = |a: u32, b: u32| ((a as u128 * sl + b as u128 * sr) / (sl + sr)) as u32;
                    prev.nr_accesses = w(prev.nr_accesses, r.nr_accesses);
                    prev.age = w(prev.age, r.age);
                    prev.end = r.end;
                    cost.regions_merged += 1;
                }
                _ => out.push(r),
            }
        }
        self.scratch = std::mem::replace(&mut self.list, out);
    }

    /// kdamond_reset_aggregated.
    pub fn reset_aggregated(&mut self) {
        for r in &mut self.list {
            r.last_nr_accesses = r.nr_accesses;
            r.nr_accesses = 0;
        }
    }

    /// kdamond_split_regions: 2 pieces per region, 3 when the count did not change since
    /// the last split and is below a third of the maximum; nothing above half the maximum.
    pub fn split(&mut self, rng: &mut Rng, cost: &mut CostCounters) {
        let nr = self.list.len();
        let max = self.attrs.max_nr_regions as usize;
        if nr > max / 2 {
            return;
        }
        let subs = if self.last_nr_regions == nr && nr < max / 3 {
            3
        } else {
            2
        };
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        for r in self.list.drain(..) {
            // Cut the left piece off repeatedly; pieces inherit the region's state.
            let mut pieces: [Region; 3] = [r; 3];
            let mut n = 1;
            let mut sz_region = r.size();
            for _ in 0..subs - 1 {
                if sz_region <= 2 * MIN_REGION {
                    break;
                }
                cost.random_draws += 1;
                let sz_sub = align_down(rng.range(1, 10) * sz_region / 10, MIN_REGION);
                if sz_sub == 0 || sz_sub >= sz_region {
                    continue;
                }
                let left = &mut pieces[0];
                let mut right = *left;
                right.start = left.start + sz_sub;
                left.end = right.start;
                // Keep order: the new right piece goes after the left one.
                pieces.copy_within(1..n, 2);
                pieces[1] = right;
                n += 1;
                sz_region = sz_sub;
                cost.regions_split += 1;
            }
            out.extend_from_slice(&pieces[..n]);
        }
        self.scratch = std::mem::replace(&mut self.list, out);
        self.last_nr_regions = nr;
    }

    /// damon_set_regions: drop regions outside `ranges`, stretch the first and last region
    /// intersecting each range to its bounds, fill holes, add a region for a range nothing
    /// intersects.
    pub fn set_ranges(&mut self, ranges: &[AddrRange]) {
        let intersects = |r: &Region, a: &AddrRange| r.start < a.end && a.start < r.end;
        self.list
            .retain(|r| ranges.iter().any(|a| intersects(r, a)));
        let mut out: Vec<Region> = vec![];
        let mut i = 0;
        for range in ranges {
            let start = align_down(range.start, MIN_REGION);
            let end = align_up(range.end, MIN_REGION);
            while i < self.list.len() && self.list[i].end <= range.start {
                out.push(self.list[i]);
                i += 1;
            }
            let first = out.len();
            while i < self.list.len() && intersects(&self.list[i], range) {
                out.push(self.list[i]);
                i += 1;
            }
            if out.len() == first {
                out.push(Region::new(start, end));
                continue;
            }
            out[first].start = start;
            let last = out.len() - 1;
            out[last].end = end;
            // Fill holes between consecutive intersecting regions.
            let mut k = first;
            while k < out.len() - 1 {
                if out[k].end < out[k + 1].start {
                    let hole = Region {
                        start: out[k].end,
                        end: out[k + 1].start,
                        ..out[k]
                    };
                    out.insert(k + 1, hole);
                }
                k += 1;
            }
        }
        out.extend_from_slice(&self.list[i..]);
        self.list = out;
    }

    /// The largest `nr_accesses` of the window (what check_accesses returns).
    pub fn max_nr_accesses(&self) -> u32 {
        self.list.iter().map(|r| r.nr_accesses).max().unwrap_or(0)
    }
}

/// damon_va_evenly_split_region: `pieces` regions of equal page-aligned size, the last
/// taking the rounding remainder.
fn evenly_split(list: &mut Vec<Region>, start: u64, end: u64, pieces: u64) {
    let sz = align_down((end - start) / pieces, MIN_REGION);
    if pieces <= 1 || sz == 0 {
        list.push(Region::new(start, end));
        return;
    }
    let mut s = start;
    for _ in 0..pieces - 1 {
        list.push(Region::new(s, s + sz));
        s += sz;
    }
    list.push(Region::new(s, end));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    // Explicit, so proptest's prelude `Rng` does not shadow ours.
    use tierscope_core::rng::Rng;
    use tierscope_core::PageSize;

    fn attrs() -> RegionAttrs {
        RegionAttrs {
            sample: 5_000_000,
            aggr: 200_000_000,
            ops_update: 1_000_000_000,
            min_nr_regions: 10,
            max_nr_regions: 1000,
        }
    }

    fn mapping(start: u64, end: u64) -> Mapping {
        Mapping {
            range: AddrRange::new(start, end),
            page_size: PageSize::Base4K,
            name: String::new(),
        }
    }

    #[test]
    fn three_regions_skip_the_two_biggest_gaps() {
        let maps = [
            mapping(0x1000, 0x5000),
            mapping(0x10_0000_0000, 0x10_1000_0000),
            mapping(0x10_1000_0000, 0x10_2000_0000),
            mapping(0x7000_0000_0000, 0x7000_0010_0000),
        ];
        let r = three_regions(&maps).unwrap();
        assert_eq!(r[0], AddrRange::new(0x1000, 0x5000));
        assert_eq!(r[1], AddrRange::new(0x10_0000_0000, 0x10_2000_0000));
        assert_eq!(r[2], AddrRange::new(0x7000_0000_0000, 0x7000_0010_0000));
        assert!(three_regions(&maps[..2]).is_none());
    }

    #[test]
    fn initial_regions_split_evenly() {
        let ranges = [
            AddrRange::new(0, 4096),
            AddrRange::new(1 << 30, 2 << 30),
            AddrRange::new(4 << 30, (4 << 30) + 8192),
        ];
        let r = Regions::new(&ranges, attrs());
        // As in the kernel, the piece size is the total (tiny ranges included) over
        // min_nr_regions, so the 1 GiB range gets 9 pieces, the tiny ones stay whole.
        assert_eq!(r.list.len(), 11);
        assert_eq!(r.list[1].start, 1 << 30);
        assert_eq!(r.list[9].end, 2 << 30);
        // ... of equal page-aligned size, the last one taking the remainder.
        let sz = ((1u64 << 30) / 9) & !(MIN_REGION - 1);
        assert!(r.list[1..9].iter().all(|x| x.size() == sz));
    }

    fn check_invariants(r: &Regions, ranges: &[AddrRange]) -> Result<(), TestCaseError> {
        for w in r.list.windows(2) {
            prop_assert!(w[0].end <= w[1].start, "sorted and disjoint");
        }
        for x in &r.list {
            prop_assert!(x.start < x.end);
            prop_assert!(x.start % MIN_REGION == 0 && x.end % MIN_REGION == 0);
            prop_assert!(ranges.iter().any(|a| a.start <= x.start && x.end <= a.end));
            prop_assert!(x.nr_accesses <= 40 && x.last_nr_accesses <= 40);
        }
        // Coverage: every range is exactly covered.
        for a in ranges {
            let covered: u64 = r
                .list
                .iter()
                .map(|x| x.end.min(a.end).saturating_sub(x.start.max(a.start)))
                .sum();
            prop_assert_eq!(covered, a.len());
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn split_merge_keep_regions_valid(seed in any::<u64>(), rounds in 1usize..30,
                                          hot in proptest::collection::vec(0u32..=40, 64)) {
            let ranges = [
                AddrRange::new(0x1000, 0x9000),
                AddrRange::new(1 << 30, (1 << 30) + (64 << 20)),
                AddrRange::new(8 << 30, (8 << 30) + (1 << 20)),
            ];
            let mut r = Regions::new(&ranges, attrs());
            let mut rng = Rng::new(seed);
            let mut cost = CostCounters::default();
            for round in 0..rounds {
                for (i, x) in r.list.iter_mut().enumerate() {
                    x.nr_accesses = hot[(i + round) % hot.len()];
                }
                let limit = r.sz_limit();
                let thres = r.max_nr_accesses() / 10;
                r.merge(thres, limit, &mut cost);
                check_invariants(&r, &ranges)?;
                r.reset_aggregated();
                r.split(&mut rng, &mut cost);
                check_invariants(&r, &ranges)?;
                prop_assert!(r.list.len() <= 1000);
            }
        }

        #[test]
        fn set_ranges_covers_exactly_the_new_ranges(cuts in proptest::collection::vec(1u64..64, 3)) {
            let old = [AddrRange::new(0, 64 << 12), AddrRange::new(128 << 12, 256 << 12), AddrRange::new(512 << 12, 520 << 12)];
            let mut r = Regions::new(&old, attrs());
            let new = [
                AddrRange::new(cuts[0] << 12, 100 << 12),
                AddrRange::new(140 << 12, (200 + cuts[1]) << 12),
                AddrRange::new((300 + cuts[2]) << 12, 600 << 12),
            ];
            r.set_ranges(&new);
            check_invariants(&r, &new)?;
        }
    }
}
