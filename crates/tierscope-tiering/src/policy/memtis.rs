//! MEMTIS (SOSP'23): PEBS samples counted per page; every 500 ms the hot threshold is
//! re-chosen from a log2 histogram of the counts (16 bins, filled from the hottest down
//! until the fast tier's capacity is reached); pages at or above it are promoted, fast
//! pages below it demoted, at most 100 MB/s; counts are halved every 2,000,000 samples.
//!
//! Huge pages and their split by skewness (MEMTIS's `htmm_core.c`): samples are kept per
//! 4 KiB bin (the `pebs-memtis` preset bins at 4 KiB) and a 2 MiB block counts as one
//! page, its count the sum, until MEMTIS decides to split it; a split block's base pages
//! then count on their own, scaled by 512 as MEMTIS scales base-page counts (a count is
//! samples per 2 MiB's worth of memory either way). A block's skewness is the sum of its
//! base pages' squared scaled counts over 11 and over the square of its hot base pages
//! (`hot_utils`: those at or above the base-page threshold, the threshold the same
//! histogram gives when every base page counts alone), 0 without hot base pages or when
//! the block's own count is in bin 13 or above; it is bucketed like `get_skew_idx`. MEMTIS
//! splits when the estimated hit ratio (samples on the hot base pages, x 0.95) exceeds the
//! real one (samples on pages on the fast tier); it derives how many base pages to split
//! from the gap, the sample rate and the tiers' latency gap. Our reading: the most skewed
//! blocks are split (ties by address) until their hot base pages' samples cover the gap.
//! The split itself is the migration engine's (`split_huge`): promoting a split block's
//! base pages cuts its huge page.
//!
//! Fed by a `pebs` monitor (the `pebs-memtis` preset: period 199, 4 KiB bins), or by NEMO
//! (MEMTIS-NEMO, NEMO paper §5.2: the `nemo-memtis` preset, `FeedKind::HugeAndBaseCounts`).
//! On NEMO the huge-page counters, scaled to period 199, are MEMTIS's samples (added up and
//! cooled as PEBS samples are); the skewness reads each huge page's base-page counts from
//! the last window NEMO tracked it at 4 KiB, a shape that replaces the previous one. Our
//! reading of how the two combine: a page's samples are dealt to its base pages in
//! proportion to that shape (rounded), so the counts MEMTIS scores keep the scale of its
//! constants (cooling, bin 13) and the shape is NEMO's exact one; a page not yet swept has
//! no base pages, as an unsampled one has none on PEBS.

use super::counts::PageCounts;
use super::{coldest_first, promote_with_room, Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use std::collections::{BTreeMap, BTreeSet};
use tierscope_core::units::{Duration, Size};
use tierscope_core::{AddrRange, FeedKind, FieldError, Nanos, PolicyInput, RegionReport, Snapshot};

/// Bins of the count histogram.
const BINS: usize = 16;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemtisConfig {
    pub period: Duration,
    /// Samples between two coolings.
    pub cooling_samples: u64,
    /// Migration bytes per second at most.
    pub max_rate: Size,
    /// The huge page MEMTIS counts as one until it splits it.
    pub page: Size,
    /// Split skewed huge pages when the fast tier's hit ratio falls short.
    pub split: bool,
}

impl Default for MemtisConfig {
    fn default() -> Self {
        MemtisConfig {
            period: Duration(500_000_000),
            cooling_samples: 2_000_000,
            max_rate: Size(100_000_000),
            page: Size(2 << 20),
            split: true,
        }
    }
}

impl PolicyTechnique for MemtisConfig {
    const HELP: &'static str =
        "MEMTIS: log2 histogram threshold sized to the fast tier, 500 ms periods, 100 MB/s";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Monitor(&[FeedKind::Samples, FeedKind::HugeAndBaseCounts])
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.period.0 == 0 {
            return Err(FieldError::new("period", "must be positive"));
        }
        if self.cooling_samples == 0 {
            return Err(FieldError::new("cooling_samples", "must be positive"));
        }
        if self.page.0 < 4096 || !self.page.0.is_power_of_two() {
            return Err(FieldError::new(
                "page",
                "must be a power of two of at least 4KiB",
            ));
        }
        Ok(())
    }

    fn policy(&self, ctx: &PolicyContext) -> Box<dyn Policy> {
        let mut m = self.memtis();
        m.nemo = ctx.feed == Some(FeedKind::HugeAndBaseCounts);
        Box::new(m)
    }
}

impl MemtisConfig {
    /// The policy itself (its tests look inside).
    fn memtis(&self) -> Memtis {
        Memtis {
            config: self.clone(),
            counts: PageCounts::default(),
            next: self.period.0,
            split: BTreeSet::new(),
            nemo: false,
            shapes: BTreeMap::new(),
        }
    }
}

pub struct Memtis {
    config: MemtisConfig,
    counts: PageCounts,
    next: Nanos,
    /// Blocks (start addresses) MEMTIS split: their base pages count on their own.
    split: BTreeSet<u64>,
    /// Fed by NEMO (`HugeAndBaseCounts`): `counts` holds the huge pages' samples and
    /// `shapes` their base-page counts of the last window each was tracked in.
    nemo: bool,
    shapes: BTreeMap<u64, Vec<u64>>,
}

fn bin(count: u64) -> usize {
    ((64 - count.leading_zeros()) as usize).min(BINS - 1)
}

/// MEMTIS's `get_skew_idx`: 0, 1-3, 4-15, ... doubling up to 1023, then one bucket per
/// 1024 up to bucket 20.
fn skew_idx(skew: u64) -> usize {
    if skew >= 1024 {
        let mut t = skew;
        let mut n = 0;
        while t > 1024 && n < 9 {
            t -= 1024;
            n += 1;
        }
        n + 11
    } else {
        (64 - skew.leading_zeros()) as usize
    }
}

/// A page as MEMTIS counts it: a whole block, or a base page of a split one.
struct Unit {
    range: AddrRange,
    samples: u64,
    /// Samples scaled to a block's worth of memory (base pages x 512).
    count: u64,
}

/// The counting units: blocks with samples, and the sampled base pages of split blocks
/// (or of every block, `all_base`).
fn units_of(counts: &PageCounts, page: u64, split: &BTreeSet<u64>, all_base: bool) -> Vec<Unit> {
    let mut out: Vec<Unit> = vec![];
    for (&s, &(e, c)) in &counts.pages {
        let block = s / page * page;
        if all_base || split.contains(&block) || e - s >= page {
            let scale = (page / (e - s)).max(1);
            out.push(Unit {
                range: AddrRange::new(s, e),
                samples: c,
                count: c * scale,
            });
            continue;
        }
        match out.last_mut() {
            Some(u) if u.range.start == block && u.range.len() == page => {
                u.samples += c;
                u.count += c;
            }
            _ => out.push(Unit {
                range: AddrRange::new(block, block + page),
                samples: c,
                count: c,
            }),
        }
    }
    out
}

/// (skew index, block, samples on its hot base pages) of every unsplit block of `units`
/// whose base pages `base` has, as MEMTIS scores them against the base-page threshold.
fn block_skews(
    units: &[Unit],
    base: &[Unit],
    bp_threshold: u64,
    page: u64,
) -> Vec<(usize, u64, u64)> {
    // `base` is in address order (`units_of`): a block's base pages are found by bisection
    // and the units starting inside it, not by filtering every base page per block (at a
    // terabyte, blocks x base pages was most of `repro nemo`).
    debug_assert!(base
        .windows(2)
        .all(|w| w[0].range.start <= w[1].range.start));
    let mut out = vec![];
    for u in units
        .iter()
        .filter(|u| u.range.len() == page && bin(u.count) < 13)
    {
        let (mut squares, mut hot, mut hot_samples) = (0u64, 0u64, 0u64);
        let first = base.partition_point(|b| b.range.start < u.range.start);
        let mut inside = base[first..]
            .iter()
            .take_while(|b| b.range.start < u.range.end)
            .filter(|b| b.range.end <= u.range.end)
            .peekable();
        // Samples binned by whole blocks say nothing about the base pages.
        if inside.peek().is_none_or(|b| b.range.len() >= page) {
            continue;
        }
        for b in inside {
            squares = squares.saturating_add(b.count.saturating_mul(b.count));
            if b.count >= bp_threshold {
                hot += 1;
                hot_samples += b.samples;
            }
        }
        if let Some(skew) = (squares / 11).checked_div(hot * hot) {
            out.push((skew_idx(skew), u.range.start, hot_samples));
        }
    }
    out
}

/// MEMTIS's skewness bucket (`get_skew_idx`, 0 = not skewed) of every `page`-sized block
/// with base-page counts in `counts` (4 KiB bins of samples), no block split, the
/// base-page hot threshold chosen for a fast tier of `capacity` bytes as MEMTIS chooses
/// it. For measuring how soon a telemetry finds split candidates (docs/techniques/NEMO.md).
pub fn skew_buckets(counts: &PageCounts, page: u64, capacity: u64) -> Vec<(u64, usize)> {
    let none = BTreeSet::new();
    let base = units_of(counts, page, &none, true);
    let bp_threshold = Memtis::threshold_of(&base, capacity);
    if bp_threshold == u64::MAX {
        return vec![];
    }
    let units = units_of(counts, page, &none, false);
    let skews = block_skews(&units, &base, bp_threshold, page);
    skews
        .into_iter()
        .map(|(idx, block, _)| (block, idx))
        .collect()
}

impl Memtis {
    fn units(&self, counts: &PageCounts, all_base: bool) -> Vec<Unit> {
        units_of(counts, self.config.page.0, &self.split, all_base)
    }

    /// On NEMO, each huge page's samples dealt to its base pages in proportion to its
    /// last shape (the module docs); `None` on PEBS, whose counts are used as they are.
    fn dealt(&self) -> Option<PageCounts> {
        if !self.nemo {
            return None;
        }
        let mut out = PageCounts {
            since_cooling: self.counts.since_cooling,
            ..PageCounts::default()
        };
        for (&s, &(e, c)) in &self.counts.pages {
            let shape = self.shapes.get(&s).filter(|_| e - s == self.config.page.0);
            let total: u64 = shape.map_or(0, |v| v.iter().sum());
            match shape {
                Some(v) if total > 0 => {
                    for (j, &n) in v.iter().enumerate() {
                        let dealt = (c as u128 * n as u128 + total as u128 / 2) / total as u128;
                        if dealt > 0 {
                            let b = s + j as u64 * 4096;
                            out.pages.insert(b, (b + 4096, dealt as u64));
                        }
                    }
                }
                _ => {
                    out.pages.insert(s, (e, c));
                }
            }
        }
        Some(out)
    }

    /// NEMO's snapshot: huge pages' samples added up as PEBS samples are, base pages'
    /// window counts replacing their huge page's shape.
    fn observe_nemo(&mut self, snapshot: &Snapshot) {
        let page = self.config.page.0;
        let mut last_block = None;
        for r in snapshot.regions.iter().filter(|r| r.nr_accesses > 0) {
            let n = u64::from(r.nr_accesses);
            if r.end - r.start >= page {
                let e = self.counts.pages.entry(r.start).or_insert((r.end, 0));
                e.1 += n;
                self.counts.since_cooling += n;
                continue;
            }
            let block = r.start / page * page;
            let shape = self
                .shapes
                .entry(block)
                .or_insert_with(|| vec![0; (page / 4096) as usize]);
            if last_block != Some(block) {
                shape.fill(0);
                last_block = Some(block);
            }
            shape[((r.start - block) / 4096) as usize] = n;
        }
    }

    /// The fast tier's contents as units (never-sampled ones count 0) below
    /// `threshold`, coldest first, then by address.
    fn cold(&self, view: &View, units: &[Unit], threshold: u64) -> Vec<RegionReport> {
        let page = self.config.page.0;
        let by_start: BTreeMap<u64, &Unit> = units.iter().map(|u| (u.range.start, u)).collect();
        // The count of the unit holding `at` (0 when none does).
        let count_of = |at: u64| {
            by_start
                .range(..=at)
                .next_back()
                .filter(|(_, u)| u.range.contains(at))
                .map_or(0, |(_, u)| u.count)
        };
        let mut out = vec![];
        for r in view.runs_on(0) {
            let mut at = r.start;
            while at < r.end {
                let block = at / page * page;
                let step = if self.split.contains(&block) {
                    4096
                } else {
                    page
                };
                let end = ((at / step + 1) * step).min(r.end);
                let count = count_of(at);
                if count < threshold {
                    out.push(RegionReport {
                        start: at,
                        end,
                        nr_accesses: count.min(u64::from(u32::MAX)) as u32,
                        age: 0,
                    });
                }
                at = end;
            }
        }
        coldest_first(&mut out);
        out
    }

    /// The lowest count whose bin and every hotter one fit in `capacity` bytes.
    fn threshold_of(units: &[Unit], capacity: u64) -> u64 {
        let mut bytes = [0u64; BINS];
        for u in units {
            bytes[bin(u.count)] += u.range.len();
        }
        let mut total = 0u64;
        let mut lowest = BINS;
        for b in (1..BINS).rev() {
            if bytes[b] == 0 {
                // An empty bin must not lower the threshold past the pages it would admit.
                continue;
            }
            if total + bytes[b] > capacity {
                break;
            }
            total += bytes[b];
            lowest = b;
        }
        if lowest == BINS {
            u64::MAX
        } else {
            // Bin b holds counts in [2^(b-1), 2^b).
            1u64 << (lowest - 1)
        }
    }
}

impl Memtis {
    /// Splits the most skewed blocks while the fast tier's hit ratio falls short of the
    /// estimated one (module docs).
    fn choose_splits(&self, counts: &PageCounts, view: &View, capacity: u64) -> Vec<u64> {
        let page = self.config.page.0;
        let base = self.units(counts, true);
        let bp_threshold = Self::threshold_of(&base, capacity);
        if bp_threshold == u64::MAX {
            return vec![];
        }
        let on_fast = |r: AddrRange| view.bytes_off(r, 0) == 0;
        let units = self.units(counts, false);
        let real: u64 = units
            .iter()
            .filter(|u| on_fast(u.range))
            .map(|u| u.samples)
            .sum();
        let estimated: u64 = base
            .iter()
            .filter(|u| u.count >= bp_threshold)
            .map(|u| u.samples)
            .sum();
        let gap = (estimated * 95 / 100).saturating_sub(real);
        let mut out = vec![];
        if gap == 0 {
            return out;
        }
        let mut candidates = block_skews(&units, &base, bp_threshold, page);
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut covered = 0u64;
        for (idx, block, hot_samples) in candidates {
            if covered >= gap || idx == 0 {
                break;
            }
            out.push(block);
            covered += hot_samples;
        }
        out
    }
}

impl Policy for Memtis {
    fn observe(&mut self, snapshot: &Snapshot) {
        if self.nemo {
            self.observe_nemo(snapshot);
        } else {
            self.counts.add(snapshot);
        }
        if self.counts.since_cooling >= self.config.cooling_samples {
            self.counts.cool();
        }
    }

    fn next_action(&self) -> Nanos {
        self.next
    }

    fn act(&mut self, view: &View, out: &mut Vec<Move>) {
        self.next = view.now + self.config.period.0;
        let capacity = view.tiers[0].capacity;
        let dealt = self.dealt();
        let counts = dealt.as_ref().unwrap_or(&self.counts);
        if self.config.split {
            let blocks = self.choose_splits(counts, view, capacity);
            self.split.extend(blocks);
        }
        let units = self.units(counts, false);
        let threshold = Self::threshold_of(&units, capacity);
        if threshold == u64::MAX {
            return;
        }
        let mut hot: Vec<RegionReport> = units
            .iter()
            .filter(|u| u.count >= threshold)
            .map(|u| RegionReport {
                start: u.range.start,
                end: u.range.end,
                nr_accesses: u.count.min(u64::from(u32::MAX)) as u32,
                age: 0,
            })
            .collect();
        hot.sort_by(|a, b| {
            b.nr_accesses
                .cmp(&a.nr_accesses)
                .then(a.start.cmp(&b.start))
        });
        let cold = self.cold(view, &units, threshold);
        let budget = (self.config.max_rate.0 as f64 * self.config.period.0 as f64 * 1e-9) as u64;
        promote_with_room(view, &hot, &cold, budget.max(self.config.page.0), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::RegionReport;

    #[test]
    fn block_skews_finds_each_blocks_base_pages_as_a_filter_over_all_would() {
        // Random 4 KiB bins over 64 blocks, some blocks binned whole: the bisection's
        // answer is the one of filtering every base unit for every block.
        let mib2 = 2u64 << 20;
        let mut counts = PageCounts::default();
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for block in 0..64u64 {
            if block % 9 == 0 {
                counts
                    .pages
                    .insert(block * mib2, ((block + 1) * mib2, next() % 50));
                continue;
            }
            for _ in 0..next() % 40 {
                let s = block * mib2 + (next() % 512) * 4096;
                counts.pages.insert(s, (s + 4096, 1 + next() % 30));
            }
        }
        let none = BTreeSet::new();
        let base = units_of(&counts, mib2, &none, true);
        let units = units_of(&counts, mib2, &none, false);
        let naive = |bp_threshold: u64| -> Vec<(usize, u64, u64)> {
            let mut out = vec![];
            for u in units
                .iter()
                .filter(|u| u.range.len() == mib2 && bin(u.count) < 13)
            {
                let inside: Vec<&Unit> = base
                    .iter()
                    .filter(|b| b.range.start >= u.range.start && b.range.end <= u.range.end)
                    .collect();
                if inside.first().is_none_or(|b| b.range.len() >= mib2) {
                    continue;
                }
                let squares: u64 = inside.iter().map(|b| b.count * b.count).sum();
                let hot: Vec<&&Unit> = inside.iter().filter(|b| b.count >= bp_threshold).collect();
                let n = hot.len() as u64;
                if let Some(skew) = (squares / 11).checked_div(n * n) {
                    out.push((
                        skew_idx(skew),
                        u.range.start,
                        hot.iter().map(|b| b.samples).sum(),
                    ));
                }
            }
            out
        };
        for t in [1, 512, 4096, 10_000] {
            let got = block_skews(&units, &base, t, mib2);
            assert!(!got.is_empty() || t > 4096);
            assert_eq!(got, naive(t), "threshold {t}");
        }
    }

    #[test]
    fn skewed_huge_pages_split_when_the_hit_ratio_falls_short() {
        use tierscope_core::Placement;
        let mib2 = 2u64 << 20;
        // Block A (0..2 MiB, slow): 50 samples on each of two base pages. Block B (2..4
        // MiB, already fast): one sample on each of 400 base pages. 3 MiB fast tier.
        let tiers = super::super::test_tiers(3 << 20);
        let mut placement = Placement::new(AddrRange::new(0, 8 * mib2), 1, 2);
        placement.set(AddrRange::new(mib2, 2 * mib2), 0);
        let base = |page: u64, n: u32| RegionReport {
            start: page * 4096,
            end: (page + 1) * 4096,
            nr_accesses: n,
            age: 0,
        };
        let mut regions = vec![base(3, 50), base(100, 50)];
        regions.extend((512..912).map(|p| base(p, 1)));
        let snapshot = Snapshot {
            start: 0,
            end: 1,
            regions,
        };
        let view = View {
            now: 500_000_000,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[100.0, 100.0],
        };
        for split in [true, false] {
            let mut m = MemtisConfig {
                split,
                ..MemtisConfig::default()
            }
            .memtis();
            m.observe(&snapshot);
            let mut out = vec![];
            m.act(&view, &mut out);
            let up: Vec<AddrRange> = out.iter().filter(|m| m.to == 0).map(|m| m.range).collect();
            if split {
                // Base pages: all 402 fit, 500 samples, x 0.95 = 475 estimated against
                // B's 400 real: a gap of 75. A's skewness (2 x (50 x 512)^2 / 11 / 2^2)
                // is in the top bucket, B's (400 x 512^2 / 11 / 400^2 = 59) in bucket
                // 6: A splits, and its 100 hot samples cover the gap.
                assert_eq!(m.split.iter().copied().collect::<Vec<_>>(), [0]);
                assert_eq!(
                    up,
                    [
                        AddrRange::new(3 * 4096, 4 * 4096),
                        AddrRange::new(100 * 4096, 101 * 4096)
                    ]
                );
            } else {
                // Whole, A counts 100 (bin 7) against B's 400 (bin 9): B's bin fills 2
                // MiB, A's would pass 3 MiB, so A stays slow.
                assert!(m.split.is_empty());
                assert!(up.is_empty(), "{up:?}");
            }
        }
    }

    #[test]
    fn on_nemo_shapes_deal_the_huge_pages_samples_and_split_as_on_pebs() {
        use tierscope_core::Placement;
        let mib2 = 2u64 << 20;
        // The previous test's machine and counts, as NEMO reports them: block A (slow)
        // 100 samples with a window's shape of 7 requests on base pages 3 and 100, block
        // B (fast) 400 samples with 1 request on each of 400 base pages. Dealt, A's base
        // pages get 50 each and B's 1 each: the PEBS test's counts, so the same split.
        let tiers = super::super::test_tiers(3 << 20);
        let mut placement = Placement::new(AddrRange::new(0, 8 * mib2), 1, 2);
        placement.set(AddrRange::new(mib2, 2 * mib2), 0);
        let region = |start: u64, len: u64, n: u32| RegionReport {
            start,
            end: start + len,
            nr_accesses: n,
            age: 0,
        };
        let view = View {
            now: 500_000_000,
            tiers: &tiers,
            placement: &placement,
            latency_ns: &[100.0, 100.0],
        };
        let mut m = MemtisConfig::default().memtis();
        m.nemo = true;
        let mut regions = vec![region(0, mib2, 100), region(mib2, mib2, 400)];
        // A stale shape of A, replaced by the one below within the same snapshot order.
        m.observe(&Snapshot {
            start: 0,
            end: 1,
            regions: vec![region(5 * 4096, 4096, 9)],
        });
        regions.extend([region(3 * 4096, 4096, 7), region(100 * 4096, 4096, 7)]);
        regions.extend((512..912).map(|p| region(p * 4096, 4096, 1)));
        regions.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
        m.observe(&Snapshot {
            start: 1,
            end: 2,
            regions,
        });
        assert_eq!(
            m.counts.since_cooling, 500,
            "only the huge pages count as samples"
        );
        let dealt = m.dealt().unwrap();
        assert_eq!(dealt.pages.get(&(3 * 4096)), Some(&(4 * 4096, 50)));
        assert_eq!(
            dealt.pages.get(&(5 * 4096)),
            None,
            "the stale shape is gone"
        );
        assert_eq!(dealt.pages.len(), 402);
        let mut out = vec![];
        m.act(&view, &mut out);
        assert_eq!(m.split.iter().copied().collect::<Vec<_>>(), [0]);
        let up: Vec<AddrRange> = out.iter().filter(|m| m.to == 0).map(|m| m.range).collect();
        assert_eq!(
            up,
            [
                AddrRange::new(3 * 4096, 4 * 4096),
                AddrRange::new(100 * 4096, 101 * 4096)
            ]
        );
        // Without shapes (no page swept yet) nothing splits: A stays slow.
        let mut m = MemtisConfig::default().memtis();
        m.nemo = true;
        m.observe(&Snapshot {
            start: 0,
            end: 1,
            regions: vec![region(0, mib2, 100), region(mib2, mib2, 400)],
        });
        let mut out = vec![];
        m.act(&view, &mut out);
        assert!(m.split.is_empty());
        assert!(out.iter().all(|m| m.to != 0), "{out:?}");
    }

    #[test]
    fn threshold_fills_the_fast_tier_from_the_hottest_bin_down() {
        let mut m = MemtisConfig::default().memtis();
        let mib2 = 2u64 << 20;
        let region = |i: u64, n: u32| RegionReport {
            start: i * mib2,
            end: (i + 1) * mib2,
            nr_accesses: n,
            age: 0,
        };
        // 2 pages at 40 samples (bin 6), 3 at 10 (bin 4), 10 at 1 (bin 1).
        let mut regions = vec![region(0, 40), region(1, 40)];
        regions.extend((2..5).map(|i| region(i, 10)));
        regions.extend((5..15).map(|i| region(i, 1)));
        m.observe(&Snapshot {
            start: 0,
            end: 1,
            regions,
        });
        let units = m.units(&m.counts, false);
        assert_eq!(
            Memtis::threshold_of(&units, 2 * mib2),
            32,
            "only bin 6 fits"
        );
        assert_eq!(Memtis::threshold_of(&units, 5 * mib2), 8, "bins 6 and 4");
        assert_eq!(Memtis::threshold_of(&units, 15 * mib2), 1, "everything");
        assert_eq!(
            Memtis::threshold_of(&units, mib2),
            u64::MAX,
            "not even the hottest bin"
        );
    }
}
