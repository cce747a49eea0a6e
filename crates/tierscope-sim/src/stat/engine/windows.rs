//! DAMON's samples of a whole aggregation window at once ([`WindowSampler`]), for monitors
//! that ask for it (`sampling = "window"`).
//!
//! Per sampling interval DAMON clears the leaf entry under a uniformly random address of
//! each region and reads it one interval later; here each read is a draw against the
//! probability that a walk loaded the entry in that interval. The address is drawn anew
//! and independently every interval, so the draw of interval `k` is set with the mean of
//! that probability over the region's entries, `p_k`, and a window's count is a sum of
//! independent Bernoulli(`p_k`) draws. With the intervals alike (a stationary workload),
//! that is Binomial(`S`, `p`) for `S` intervals and the mean `p` over entries and
//! intervals.
//!
//! Where a few points stand for a region (`points_stand_for`: every
//! pattern reaching it random, covering it whole, with a density alike within an eighth
//! of it or peaked only where nothing is found, and its accesses alike from interval to
//! interval), this estimates `p` from a few (address, interval) points instead of
//! evaluating every sample: the region is cut into `points` equal strata of addresses and
//! the window into `points` runs of intervals; point `j` is a random address of stratum
//! `j` in a random interval of run `j`, evaluated exactly as a per-sample read would be
//! (cleared at the interval's start, flushes from then on). The stratified mean of the
//! points is an unbiased estimate of `p`; the count is then drawn from Binomial(`S`,
//! estimate). Its mean is the per-sample count's; its variance exceeds it by at most
//! `S (S - 1)` times the estimate's variance, which is zero for a region whose entries and
//! intervals are alike and small where the density changes little within a stratum.
//! Elsewhere every sample is evaluated at its own uniformly random address in its own
//! interval and drawn on its own, as per sample, which costs one evaluation per sample but
//! keeps no entry: hotspots, zipf, sequential sweeps (a few hot pages among cold ones,
//! which a few points miss or over-weight), a pattern's edge or a narrow gaussian inside
//! the region (a needle: all or nothing for the stratum holding it), and accesses that
//! come and go within the window (masim's hot regions taking turns: per sample each
//! interval's probability is near 0 or 1, so the count is nearly fixed and the same in
//! every region the turns reach, where a binomial of the mean would spread it and the
//! regions, no longer alike, would stop merging).
//!
//! Regions inside one huge page read the same leaf entry every interval, and DAMON
//! reuses the previous region's result there: they share one count, charged a
//! test-and-clear per sample that finds the bit clear and no read.
//!
//! What the per-sample path does and this does not (docs/models/FIDELITY.md):
//! - an entry a previous sample cleared and no walk loaded since keeps, per sample, the
//!   freshness a flush gave it; here every sampled entry starts fresh-less;
//! - a region that straddles a huge page's edge shares, per sample, the result of its
//!   neighbour when both addresses fall in that page; here it draws its own;
//! - a flush at the instant of a clear counts as after it (DAMON's policy migrates, and
//!   flushes, right after the prepares of the window's last wake-up); flushes within the
//!   window make its intervals unlike, which only the points' own intervals see;
//! - `bits_cleared` counts every sample's test-and-clear as a flip, an upper bound (per
//!   sample, an entry a previous sample cleared and nothing loaded since is no flip), and
//!   [`BITS_CLEARED_UNSURE`] how many of those the count does not vouch for: a sample's
//!   entry was last cleared one interval before or earlier (or never: set), so it is set
//!   at least as likely as an entry cleared at the start of that one interval, whose
//!   chance the count draws; the window's count is a lower bound on its flips (in
//!   expectation), `bits_cleared` minus the unsure ones.
//!
//! No entry is cleared, so the entry store does not grow with the samples.

use super::{unit, StatEngine};
use crate::stat::density::Pattern;
use crate::stat::walks::{log_no_load, Target, World};
use tierscope_core::machine::{WindowEntry, WindowSampler, WindowSampling};
use tierscope_core::rng::mix64;
use tierscope_core::workload::{PatternKind, Spread};
use tierscope_core::OpCounter;
use tierscope_core::{AddrRange, Level, Machine};

/// Salts the hashes of this module apart from the per-entry reads'.
pub(super) const SALT: u64 = 0x7769_6e64_6f77;

/// Test-and-clears window sampling counts in `bits_cleared` as flips without its count
/// vouching for them (the module's notes): `bits_cleared` minus these is a lower bound on
/// the flips, `bits_cleared` an upper one. A count, not an operation: no cycles.
pub static BITS_CLEARED_UNSURE: OpCounter = OpCounter {
    name: "bits_cleared_unsure",
    cycles: |_| 0.0,
    on_workload_core: false,
};

impl StatEngine {
    /// The probability that the leaf entry under `va`, cleared at the start of sampling
    /// interval `[t0, t1)`, is found set at its end, and the steps of the walk reaching
    /// it; `None` when `va` is unmapped.
    fn p_set_in(&self, va: u64, t0: u64, t1: u64, first_flush: usize) -> Option<(f64, u64)> {
        let leaf = self.leaf_of(va)?;
        let steps = (self.paging.root().index() - leaf.index() + 1) as u64;
        if self.is_dead(leaf, va) {
            return Some((0.0, steps));
        }
        Some((
            self.p_set_entry((leaf, leaf), va, (t0, t1), 0, first_flush),
            steps,
        ))
    }

    /// The probability that the entry of `level` over `va` (whose walk ends at `leaf`),
    /// cleared at `t0` with the caches in `fresh` empty for it, is found set at `t1`;
    /// the flushes from `first_flush` on count.
    pub(super) fn p_set_entry(
        &self,
        (level, leaf): (Level, Level),
        va: u64,
        (t0, t1): (u64, u64),
        fresh: u8,
        first_flush: usize,
    ) -> f64 {
        let span_start = level.align_down(va);
        let t = Target {
            level,
            leaf,
            span: AddrRange::new(span_start, span_start.saturating_add(level.span())),
            stores_only: false,
        };
        let (ia, ib) = (self.workload.count_at(t0), self.workload.count_at(t1));
        let events = &self.flushes.events[first_flush..];
        let from = first_flush + events.partition_point(|f| f.at < ia);
        let world = World {
            workload: &self.workload,
            caches: &self.caches,
            schedules: &self.schedules,
        };
        let ln = log_no_load(&world, t, ia, ib, fresh, &self.flushes.events[from..]);
        -ln.exp_m1()
    }

    /// The window's count for `r` with every sample evaluated: a uniformly random address
    /// per interval, drawn on its own (the per-sample reads' distribution).
    fn sample_each(
        &mut self,
        w: WindowSampling,
        r: AddrRange,
        h_region: u64,
        first_flush: usize,
    ) -> u32 {
        let mut count = 0;
        for k in 0..u64::from(w.samples) {
            let h = mix64(h_region ^ mix64(k));
            let va = r.start + h % r.len().max(1);
            let t0 = w.start + k * w.sample;
            if let Some((p, steps)) = self.p_set_in(va, t0, t0 + w.sample, first_flush) {
                let cost = self.cost_mut();
                cost.charge_test_and_clear(steps, true);
                cost.charge_read(steps);
                count += u32::from(unit(mix64(h ^ SALT)) < p);
            }
        }
        count
    }
}

/// A window's expected count at a region's densest page below which its samples there are
/// all clear in 99 windows of 100, however the estimate weighs that page.
pub(super) const NEGLIGIBLE_COUNT: f64 = 0.01;

impl StatEngine {
    /// Whether a few points stand for `r` (its count drawn from their estimate): every
    /// pattern reaching `r` is random and covers it whole (a pattern's edge inside `r` is
    /// a jump that a stratum's one point weighs all or nothing), with a density alike
    /// within a stratum, or peaked only where a window's samples find nothing anyway.
    /// Elsewhere a narrow hot part (a needle, the edge of a hot range, a gaussian's
    /// centre in a wide region) is missed by every point in most windows and weighed as
    /// a whole stratum in the others: the count's mean is kept but not its spread. And
    /// the intervals must be alike: where the accesses reaching `r` come and go within the
    /// window (masim's hot regions taking turns), every sample's probability is near 0 or
    /// 1 by its interval, and per sample the count is nearly fixed, the same in every
    /// region the turns reach, where a binomial of the mean would spread it.
    fn points_stand_for(
        &self,
        w: WindowSampling,
        r: AddrRange,
        first_flush: usize,
        per_interval: &[Vec<u64>],
    ) -> bool {
        let stratum = r.len() / u64::from(w.points.clamp(1, w.samples));
        if !intervals_alike(&self.workload.patterns, r, per_interval) {
            return false;
        }
        self.workload.patterns.iter().all(|p| {
            let overlap = p.region.overlap(&r);
            if overlap == 0 {
                return true;
            }
            if p.kind != PatternKind::Random || overlap < r.len() {
                return false;
            }
            let (lo, hi) = (r.start - p.region.start, r.end - p.region.start);
            match p.density.spread(lo, hi, stratum) {
                Spread::Gentle => true,
                Spread::Peaked(densest) => {
                    let t0 = w.start + u64::from(w.samples / 2) * w.sample;
                    let va = p.region.start + densest;
                    let peak = self.p_set_in(va, t0, t0 + w.sample, first_flush);
                    peak.map_or(0.0, |(q, _)| q) * f64::from(w.samples) < NEGLIGIBLE_COUNT
                }
                Spread::Rough => false,
            }
        })
    }
}

/// Per pattern, its accesses (over every thread) in each sampling interval of `w`.
pub(super) fn accesses_per_interval(e: &StatEngine, w: WindowSampling) -> Vec<Vec<u64>> {
    let bounds: Vec<u64> = (0..=u64::from(w.samples))
        .map(|k| e.workload.count_at(w.start + k * w.sample))
        .collect();
    (0..e.workload.patterns.len() as u32)
        .map(|p| {
            // The pattern's accesses before each bound, once per bound.
            let before: Vec<u64> = bounds
                .iter()
                .map(|&i| {
                    e.schedules
                        .iter()
                        .map(|s| s.pattern_accesses_before(p, i))
                        .sum()
                })
                .collect();
            before.windows(2).map(|b| b[1] - b[0]).collect()
        })
        .collect()
}

/// Whether the accesses of the patterns reaching `r` are alike in every interval (their
/// sum within a tenth of its largest, or none at all).
pub(super) fn intervals_alike(
    patterns: &[Pattern],
    r: AddrRange,
    per_interval: &[Vec<u64>],
) -> bool {
    let reaching = || {
        patterns
            .iter()
            .zip(per_interval)
            .filter(move |(p, _)| p.region.overlap(&r) > 0)
            .map(|(_, a)| a)
    };
    let Some(intervals) = reaching().next().map(Vec::len) else {
        return true;
    };
    let (mut lo, mut hi) = (u64::MAX, 0);
    for k in 0..intervals {
        let total: u64 = reaching().map(|a| a[k]).sum();
        (lo, hi) = (lo.min(total), hi.max(total));
    }
    hi == 0 || 10 * (hi - lo) <= hi
}

impl StatEngine {
    /// The window's count for `r`: every sample drawn on its own where a few points do
    /// not stand for it ([`Self::points_stand_for`]), else Binomial(`S`, the stratified
    /// estimate of `p`).
    fn region_count(
        &mut self,
        w: WindowSampling,
        r: AddrRange,
        first_flush: usize,
        per_interval: &[Vec<u64>],
    ) -> u32 {
        let samples = u64::from(w.samples);
        let len = r.len() as u128;
        let h_region = self.region_hash(w, r);
        if !self.points_stand_for(w, r, first_flush, per_interval) {
            return self.sample_each(w, r, h_region, first_flush);
        }
        let points = u64::from(w.points.clamp(1, w.samples));
        let mut p = 0.0;
        for j in 0..points {
            let h = mix64(h_region ^ mix64(j));
            // Stratum j of the addresses, run j of the intervals.
            let lo = r.start + (len * j as u128 / points as u128) as u64;
            let hi = r.start + (len * (j + 1) as u128 / points as u128) as u64;
            let va = lo + h % (hi - lo).max(1);
            let (k0, k1) = (j * samples / points, (j + 1) * samples / points);
            let k = k0 + mix64(h) % (k1 - k0).max(1);
            let t0 = w.start + k * w.sample;
            if let Some((p_j, steps)) = self.p_set_in(va, t0, t0 + w.sample, first_flush) {
                p += p_j * (hi - lo) as f64 / r.len() as f64;
                // The samples of run j, charged as this point's entry: a test-and-clear
                // at the interval's start, a read at its end.
                let cost = self.cost_mut();
                for _ in k0..k1 {
                    cost.charge_test_and_clear(steps, true);
                    cost.charge_read(steps);
                }
            }
        }
        (0..samples)
            .filter(|&k| unit(mix64(h_region ^ mix64(k ^ SALT))) < p)
            .count() as u32
    }

    /// The start of the huge page `r` lies inside and the steps of a walk to its leaf
    /// entry; `None` when `r` is unmapped, on 4 KiB pages or over more than one page.
    pub(super) fn huge_page_holding(&self, r: AddrRange) -> Option<(u64, u64)> {
        let leaf = self.leaf_of(r.start)?;
        let start = leaf.align_down(r.start);
        let inside = leaf.span() > 4096 && r.end <= start + leaf.span();
        let steps = (self.paging.root().index() - leaf.index() + 1) as u64;
        inside.then_some((start, steps))
    }
}

impl StatEngine {
    /// The hash a region's draws of window `w` start from.
    pub(super) fn region_hash(&self, w: WindowSampling, r: AddrRange) -> u64 {
        mix64(self.seed ^ mix64(r.start ^ mix64(r.end ^ mix64(w.start ^ SALT))))
    }
}

impl WindowSampler for StatEngine {
    fn sample_window(&mut self, w: WindowSampling, regions: &[AddrRange], out: &mut Vec<u32>) {
        out.clear();
        if w.samples == 0 {
            out.resize(regions.len(), 0);
            return;
        }
        if let WindowEntry::Highest { overshoot } = w.entry {
            return self.sample_window_highest(w, &overshoot, regions, out);
        }
        let window_start = self.workload.count_at(w.start);
        // Flushes before the window apply to no interval of it.
        let first_flush = self.flushes.events.partition_point(|f| f.at < window_start);
        // Regions inside one huge page sample the same leaf entry in every interval, and
        // DAMON reuses the previous region's result there: their counts are one count.
        let mut shared: Option<(u64, u32)> = None;
        let per_interval = accesses_per_interval(self, w);
        for r in regions {
            let page = self.huge_page_holding(*r);
            if let (Some((start, steps)), Some((last, count))) = (page, shared) {
                if start == last {
                    // Each sample's prepare clears the entry the region before cleared
                    // (no flip), and its check reuses that region's result (no read).
                    let cost = self.cost_mut();
                    for _ in 0..w.samples {
                        cost.charge_test_and_clear(steps, false);
                    }
                    out.push(count);
                    continue;
                }
            }
            let flips_before = self.cost().bits_cleared;
            let count = self.region_count(w, *r, first_flush, &per_interval);
            let cost = self.cost_mut();
            let unsure = (cost.bits_cleared - flips_before).saturating_sub(u64::from(count));
            cost.charge(&BITS_CLEARED_UNSURE, unsure);
            shared = page.map(|(start, _)| (start, count));
            out.push(count);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::SimMachine;
    use crate::WorkloadParams;
    use tierscope_core::machine::{highest_entry, WindowFlush, FLUSH_CEILING_PAGES};
    use tierscope_core::rng::Rng;
    use tierscope_core::workload::{parse_masim, Density, WorkloadSpec};
    use tierscope_core::{Engine, Flush, Level, Nanos};

    /// A statistical engine over `spec` at 10 M accesses/s on the default machine (the
    /// window tests' here and in upper_windows.rs).
    pub(in crate::stat::engine) fn engine(spec: &WorkloadSpec, seed: u64) -> StatEngine {
        engine_on(&SimMachine::default(), spec, seed)
    }

    /// The tests' window number `win`: 40 samples 5 ms apart (DAMON-MOD's), 8 points.
    fn window_no(win: u64, entry: WindowEntry, flush: WindowFlush) -> WindowSampling {
        WindowSampling {
            start: win * 40 * 5_000_000,
            sample: 5_000_000,
            samples: 40,
            points: 8,
            entry,
            flush,
        }
    }

    /// The end of window `w`.
    fn window_end(w: &WindowSampling) -> Nanos {
        w.start + u64::from(w.samples) * w.sample
    }

    fn engine_on(machine: &SimMachine, spec: &WorkloadSpec, seed: u64) -> StatEngine {
        let params = WorkloadParams {
            spec,
            rate: 10_000_000,
            threads: 1,
            seed,
            block_size: 2 << 20,
            truth_threshold: 1,
        };
        StatEngine::new(machine, &params).unwrap()
    }

    /// Per window and region, the count DAMON's per-sample reads give: a random page of
    /// each region cleared at every interval's start and read at its end.
    fn per_sample(
        e: &mut StatEngine,
        regions: &[AddrRange],
        w: WindowSampling,
        rng: &mut Rng,
    ) -> Vec<u32> {
        let mut counts = vec![0; regions.len()];
        let mut addrs: Vec<u64> = vec![0; regions.len()];
        for k in 0..=w.samples as u64 {
            e.advance_to(w.start + k * w.sample);
            // As kdamond: every region's check, then every region's prepare (regions
            // inside one huge page clear and read the same entry).
            let leaf = |e: &StatEngine, va| e.leaf_of(va).unwrap_or(Level::Pte);
            for i in 0..regions.len() {
                if k > 0 && e.accessed(leaf(e, addrs[i]), addrs[i]) == Some(true) {
                    counts[i] += 1;
                }
            }
            for (i, r) in regions.iter().enumerate() {
                if k < w.samples as u64 {
                    addrs[i] = rng.range(r.start, r.end);
                    e.test_and_clear_accessed(leaf(e, addrs[i]), addrs[i]);
                }
            }
        }
        counts
    }

    /// Per region, the count's total and sum of squares over 30 windows of 40 samples.
    #[derive(Debug, Clone, Default)]
    struct Moments {
        sum: Vec<u64>,
        squares: Vec<u64>,
    }

    impl Moments {
        fn add(&mut self, counts: &[u32]) {
            self.sum.resize(counts.len(), 0);
            self.squares.resize(counts.len(), 0);
            for (i, &c) in counts.iter().enumerate() {
                self.sum[i] += u64::from(c);
                self.squares[i] += u64::from(c * c);
            }
        }

        /// The per-window counts' variance of region `i`.
        fn variance(&self, i: usize) -> f64 {
            let mean = self.sum[i] as f64 / 30.0;
            self.squares[i] as f64 / 30.0 - mean * mean
        }
    }

    /// Per-sample reads (a seed of their own for the addresses) and window sampling over
    /// 30 windows of 40 samples, each on its own engine; and the window engine (to check
    /// its costs).
    fn totals(spec: &WorkloadSpec, regions: &[AddrRange]) -> (Moments, Moments, StatEngine) {
        let (exact, est, e, _) = totals_on(&SimMachine::default(), spec, regions);
        (exact, est, e)
    }

    /// One window's counts per region: per sample, and window sampling's.
    type WindowCounts = (Vec<u32>, Vec<u32>);

    /// [`totals`] on `machine`, with each window's counts of both ways.
    fn totals_on(
        machine: &SimMachine,
        spec: &WorkloadSpec,
        regions: &[AddrRange],
    ) -> (Moments, Moments, StatEngine, Vec<WindowCounts>) {
        let mut exact_engine = engine_on(machine, spec, 2);
        let mut window_engine = engine_on(machine, spec, 2);
        let mut per_window = vec![];
        let (mut exact, mut est) = (Moments::default(), Moments::default());
        let mut rng = Rng::new(3);
        let mut out = vec![];
        for win in 0..30 {
            let w = window_no(win, WindowEntry::Leaf, WindowFlush::None);
            let counts = per_sample(&mut exact_engine, regions, w, &mut rng);
            window_engine.advance_to(window_end(&w));
            window_engine.sample_window(w, regions, &mut out);
            exact.add(&counts);
            est.add(&out);
            per_window.push((counts, out.clone()));
        }
        (exact, est, window_engine, per_window)
    }

    /// Both totals within four binomial standard deviations (and a little slack), and
    /// the window counts' spread from window to window at most twice the per-sample one's.
    fn assert_close(exact: &Moments, est: &Moments) {
        let n = 1200.0;
        for i in 0..exact.sum.len() {
            let (a, b) = (exact.sum[i], est.sum[i]);
            let p = (a + b) as f64 / (2.0 * n);
            let tolerance = 4.0 * (2.0 * n * p * (1.0 - p)).sqrt() + 3.0;
            assert!(
                (a as f64 - b as f64).abs() <= tolerance,
                "region {i}: {exact:?} vs {est:?}"
            );
            assert!(
                est.variance(i) <= 2.0 * exact.variance(i) + 1.0,
                "region {i}: variance {} vs {}",
                est.variance(i),
                exact.variance(i)
            );
        }
    }

    /// A cold GiB, then a GiB read at random under a gaussian (sigma 20 MiB) around its
    /// middle.
    fn gaussian_hot_set() -> WorkloadSpec {
        let mut spec = parse_masim("cold, 1GiB\nhot, 1GiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        spec.phases[0].patterns[0].density = Density::Gaussian {
            mean: 0.5,
            sigma: 0.02,
        };
        spec
    }

    #[test]
    fn window_counts_match_per_sample_reads_on_average() {
        // A gaussian hot set (a few points per region): regions from its centre to its
        // tail, of several sizes, and one in memory no pattern touches.
        let mut spec = gaussian_hot_set();
        let starts = engine(&spec, 2).layout.region_starts.clone();
        let mb = 1i64 << 20;
        let centre = (starts[1] + (512 << 20)) as i64;
        let regions: Vec<AddrRange> = [
            (0, 4),
            (4, 20),
            (20, 40),
            (40, 100),
            (100, 300),
            (-300, -40),
        ]
        .iter()
        .map(|&(a, b)| AddrRange::new((centre + a * mb) as u64, (centre + b * mb) as u64))
        .chain([AddrRange::new(starts[0], starts[0] + (256 << 20))])
        .collect();
        let (exact, est, e) = totals(&spec, &regions);
        assert_close(&exact, &est);
        let (exact, est) = (&exact.sum, &est.sum);
        assert!(
            exact[0] > 1000 && exact[3] > 30 && exact[4] == 0,
            "{exact:?}"
        );
        assert_eq!(est[6], 0, "a dead region is never found accessed");
        // Every sample is charged as a test-and-clear and a read; no entry stays cleared.
        let c = e.cost();
        assert_eq!(c.clear_ops, 1200 * regions.len() as u64);
        assert_eq!(c.entries_read, 2 * c.clear_ops);
        assert_eq!(e.entries.cleared.len(), 0);

        // A hotspot (1 % of the pages hot, scattered): every sample evaluated on its own.
        // A few points per region would find no hot page most windows and a few hot
        // pages in some, so counts of 0 or about S / 8 instead of the per-sample spread.
        spec.phases[0].patterns[0].density = Density::Hotspot { hot_fraction: 0.01 };
        let regions: Vec<AddrRange> = [(0, 1), (0, 16), (0, 256), (256, 1024)]
            .iter()
            .map(|&(a, b)| AddrRange::new(starts[1] + a * (1 << 20), starts[1] + b * (1 << 20)))
            .collect();
        let (exact, est, _) = totals(&spec, &regions);
        assert_close(&exact, &est);
        assert!(exact.sum.iter().all(|&n| n > 0), "{exact:?}");
    }

    #[test]
    fn window_flips_bound_the_per_sample_ones() {
        // Small regions on a gaussian's flank (2, 3 and 5 sigmas out): 256 entries each,
        // re-picked about five times in 1,200 samples, so per sample many clears find the
        // bit still clear and counting every clear as a flip overshoots.
        let spec = gaussian_hot_set();
        let starts = engine(&spec, 2).layout.region_starts.clone();
        let centre = starts[1] + (512 << 20);
        let regions: Vec<AddrRange> = [40u64, 60, 100]
            .iter()
            .map(|&mb| AddrRange::new(centre + (mb << 20), centre + ((mb + 1) << 20)))
            .collect();
        let mut per_sample_engine = engine(&spec, 2);
        let mut window_engine = engine(&spec, 2);
        let (mut rng, mut out) = (Rng::new(3), vec![]);
        for win in 0..30u64 {
            let w = window_no(win, WindowEntry::Leaf, WindowFlush::None);
            per_sample(&mut per_sample_engine, &regions, w, &mut rng);
            window_engine.advance_to(window_end(&w));
            window_engine.sample_window(w, &regions, &mut out);
        }
        let flips = per_sample_engine.cost().bits_cleared;
        let c = window_engine.cost();
        let (upper, lower) = (c.bits_cleared, c.bits_cleared - c.get(&BITS_CLEARED_UNSURE));
        assert_eq!(upper, 3 * 1200, "every clear counted as a flip");
        assert!(
            flips * 4 < upper * 3,
            "per sample {flips} of {upper} clears flip"
        );
        assert!(
            lower <= flips && flips <= upper,
            "{lower} <= {flips} <= {upper}"
        );
        assert!(lower > 0, "the counts vouch for some flips");
    }

    #[test]
    fn window_counts_are_the_same_per_seed() {
        let spec = gaussian_hot_set();
        let run = || {
            let mut e = engine(&spec, 2);
            let hot = e.layout.region_starts[1];
            let regions: Vec<AddrRange> = (0..16)
                .map(|i| AddrRange::new(hot + (i << 26), hot + ((i + 1) << 26)))
                .collect();
            e.advance_to(400_000_000);
            let w = window_no(1, WindowEntry::Leaf, WindowFlush::None);
            let mut out = vec![];
            e.sample_window(w, &regions, &mut out);
            out
        };
        let counts = run();
        assert_eq!(counts, run());
        assert!(
            counts.iter().any(|&n| n > 0) && counts.contains(&0),
            "{counts:?}"
        );
    }

    #[test]
    fn a_narrow_hot_range_inside_a_region_is_counted_per_sample() {
        // 64 MiB of hot pages between two cold GiBs: a region around it holds the
        // pattern's edges, which 8 points would weigh all or nothing (a count of 0 or
        // about S / 8: a variance over 8 windows where per sample it is under 2).
        let spec = parse_masim("cold, 1GiB\nhot, 64MiB\ncold2, 1GiB\n\np\n1000\nhot, 1, 4096, 1\n")
            .unwrap();
        let starts = engine(&spec, 2).layout.region_starts.clone();
        let mb = 1 << 20;
        let regions = [
            AddrRange::new(starts[1] - 512 * mb, starts[1] + 64 * mb + 512 * mb),
            AddrRange::new(starts[1] + 4 * mb, starts[1] + 12 * mb),
        ];
        let (exact, est, _) = totals(&spec, &regions);
        assert_close(&exact, &est);
        assert!(exact.sum[0] > 0 && exact.sum[1] > 1000, "{exact:?}");
    }

    #[test]
    fn hot_ranges_taking_turns_give_every_region_the_same_count() {
        // masim's two hot regions take turns in batches: per sample an interval finds a
        // hot huge page walked or not by whose turn it is, so two regions of one hot
        // range count alike each window, where independent binomials of the mean would
        // differ by about 4.
        let spec = parse_masim(
            "cold, 4GiB\nhot, 10GiB\nhot2, 10GiB\n\np\n1000\nhot, 1, 4096, 1\nhot2, 1, 4096, 1\n",
        )
        .unwrap();
        let machine = SimMachine {
            page_size: tierscope_core::PageSize::Huge2M,
            ..SimMachine::default()
        };
        let starts = engine_on(&machine, &spec, 2).layout.region_starts.clone();
        let half = 5 << 30;
        let regions = [
            AddrRange::new(starts[1], starts[1] + half),
            AddrRange::new(starts[1] + half, starts[1] + 2 * half),
        ];
        let (exact, est, _, windows) = totals_on(&machine, &spec, &regions);
        assert_close(&exact, &est);
        let spread = |pick: fn(&WindowCounts) -> &Vec<u32>| {
            windows
                .iter()
                .map(|w| pick(w)[0].abs_diff(pick(w)[1]))
                .sum::<u32>() as f64
                / windows.len() as f64
        };
        let (per_sample, window) = (spread(|w| &w.0), spread(|w| &w.1));
        assert!(per_sample < 1.0 && window < 1.0, "{per_sample} {window}");
        assert!(
            exact.variance(0) > 10.0,
            "the turns move the count: {exact:?}"
        );
    }

    #[test]
    fn regions_inside_one_huge_page_share_one_count() {
        let spec = parse_masim("cold, 1GiB\nhot, 1GiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let machine = SimMachine {
            page_size: tierscope_core::PageSize::Huge2M,
            ..SimMachine::default()
        };
        let starts = engine_on(&machine, &spec, 2).layout.region_starts.clone();
        let page = starts[1] + (100 << 21);
        let regions: Vec<AddrRange> = [(0, 1), (1, 3), (3, 512), (512, 2048)]
            .iter()
            .map(|&(a, b)| AddrRange::new(page + a * 4096, page + b * 4096))
            .collect();
        let (exact, est, e, windows) = totals_on(&machine, &spec, &regions);
        assert_close(&exact, &est);
        for (per_sample, window) in &windows {
            assert!(
                per_sample[..3].iter().all(|&n| n == per_sample[0]),
                "{per_sample:?}"
            );
            assert!(window[..3].iter().all(|&n| n == window[0]), "{window:?}");
        }
        // Per sample every region's entry is cleared; the two after the first reuse its
        // result and read nothing.
        let c = e.cost();
        assert_eq!(c.clear_ops, 1200 * regions.len() as u64);
        assert_eq!(c.entries_read, c.clear_ops + 1200 * 2);
    }

    /// Telescope's per-sample passes, as its probe makes them: every region's pick read
    /// one interval after its clear; each pass picks an address per region and the highest
    /// entry over it that qualifies, test-and-clears them, then flushes the spans of those
    /// above the leaf (`flush = "upper"`) page by page up to 33 pages, else everything.
    fn per_sample_telescope(
        e: &mut StatEngine,
        regions: &[AddrRange],
        w: WindowSampling,
        rng: &mut Rng,
    ) -> Vec<u32> {
        let WindowEntry::Highest { overshoot } = w.entry else {
            panic!("Telescope's entries")
        };
        let root = e.paging.root();
        let mut counts = vec![0; regions.len()];
        let mut picks = vec![(Level::Pte, 0u64); regions.len()];
        for k in 0..=w.samples as u64 {
            e.advance_to(w.start + k * w.sample);
            for (i, &(level, va)) in picks.iter().enumerate() {
                if k > 0 && e.accessed(level, va) == Some(true) {
                    counts[i] += 1;
                }
            }
            if k == w.samples as u64 {
                break;
            }
            let mut pending = vec![];
            for (i, r) in regions.iter().enumerate() {
                let va = rng.range(r.start, r.end);
                let leaf = e.leaf_of(va).unwrap_or(Level::Pte);
                let level = highest_entry(*r, va, leaf, root, &overshoot);
                picks[i] = (level, va);
                let cleared = e.test_and_clear_accessed(level, va).is_some();
                let flush = match w.flush {
                    WindowFlush::None => false,
                    WindowFlush::Upper => e.leaf_of(va) != Some(level),
                    WindowFlush::All => true,
                };
                if cleared && flush {
                    pending.push((level.align_down(va), level.align_down(va) + level.span()));
                }
            }
            let pages: u64 = pending.iter().map(|(s, e)| (e - s) >> 12).sum();
            if pages > FLUSH_CEILING_PAGES {
                e.flush(Flush::All);
            } else {
                for &(start, end) in &pending {
                    e.flush(Flush::Range { start, end });
                }
            }
        }
        counts
    }

    /// Per region, per-sample Telescope and window sampling over `windows` windows of 40
    /// samples on twin engines of `spec`, with the entry rule `overshoot` and `flush`; and
    /// the two engines' costs (clears, reads, full flushes).
    fn telescope_totals(
        spec: &WorkloadSpec,
        regions: &[AddrRange],
        (overshoot, flush): ([f64; 5], WindowFlush),
        windows: u64,
    ) -> (Moments, Moments, [(u64, u64, u64); 2]) {
        let mut exact_engine = engine(spec, 2);
        let mut window_engine = engine(spec, 2);
        let (mut exact, mut est) = (Moments::default(), Moments::default());
        let (mut rng, mut out) = (Rng::new(3), vec![]);
        for win in 0..windows {
            let w = window_no(win, WindowEntry::Highest { overshoot }, flush);
            exact.add(&per_sample_telescope(
                &mut exact_engine,
                regions,
                w,
                &mut rng,
            ));
            window_engine.advance_to(window_end(&w));
            window_engine.sample_window(w, regions, &mut out);
            est.add(&out);
        }
        assert_eq!(window_engine.entries.cleared.len(), 0, "no entry kept");
        let costs = [&exact_engine, &window_engine].map(|e| {
            let c = e.cost();
            (c.clear_ops, c.entries_read, c.flushes_full)
        });
        (exact, est, costs)
    }

    #[test]
    fn telescope_window_counts_match_its_per_sample_reads() {
        // 3 GiB read uniformly at 10 M/s: per 5 ms interval a 1 GiB entry is walked into
        // thousands of times, a 2 MiB one about 32 times, a 4 KiB page 0.06 times, but
        // only an access missing the TLB and the paging-structure caches loads an entry:
        // the region's (at most four) 1 GiB entries never leave the 4-entry PDPTE cache
        // unless a flush empties it. Regions: one over an aligned GiB with 2 MiB and 4 KiB
        // entries at its edges (runs of three levels, which the points weigh by their
        // bytes), one of 2 MiB entries, one of 4 KiB pages only, and one in memory no
        // pattern touches. Bounded and flex with Telescope's flushes, and bounded without.
        let spec = parse_masim("cold, 1GiB\nhot, 3GiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let starts = engine(&spec, 2).layout.region_starts.clone();
        let (mb, gb) = (1u64 << 20, 1u64 << 30);
        let hot = starts[1];
        let g = (hot + 400 * mb + gb - 1) & !(gb - 1);
        let regions = [
            AddrRange::new(g - 300 * mb - 12 * 1024, g + gb + 300 * mb),
            AddrRange::new(hot + 2 * mb, hot + 66 * mb),
            AddrRange::new(hot + 80 * mb + 20 * 1024, hot + 81 * mb),
            AddrRange::new(starts[0], starts[0] + 256 * mb),
        ];
        assert!(regions[0].end <= hot + 3 * gb);
        let flex = [0.25, 0.25, 0.15, 0.15, 0.15];
        for (overshoot, flush) in [
            ([0.0; 5], WindowFlush::Upper),
            (flex, WindowFlush::Upper),
            ([0.0; 5], WindowFlush::None),
        ] {
            let (exact, est, [a, b]) = telescope_totals(&spec, &regions, (overshoot, flush), 30);
            assert_close(&exact, &est);
            assert_eq!(est.sum[3], 0, "a dead region is never found accessed");
            // Every sample clears and reads its entry; every pass flushes everything (it
            // clears an entry above the leaf) or nothing.
            assert_eq!(a, b);
            if flush == WindowFlush::Upper {
                assert_eq!(b.2, 1200);
                assert!(exact.sum[0] > 1100 && exact.sum[1] > 1100, "{exact:?}");
            } else {
                assert_eq!(b.2, 0);
                // The 1 GiB entry stays cached: a third of the region's bytes set it.
                assert!((300..700).contains(&exact.sum[0]), "{exact:?}");
            }
        }
        // The first region alone flushes: each pass's flush is its own entry's.
        let upper = ([0.0; 5], WindowFlush::Upper);
        let (exact, est, [a, b]) = telescope_totals(&spec, &[regions[0], regions[2]], upper, 30);
        assert_close(&exact, &est);
        assert_eq!(a, b);
        assert!(exact.sum[0] > 1100, "{exact:?}");

        // The flushes the other regions' entries cause: 4 MiB read in turns with the
        // 3 GiB, whose pages the TLB keeps while it runs alone. Per sample a page of it
        // is found set in most intervals where the pass before flushed everything (the
        // first region's entries), and in few where nothing flushed.
        let spec = parse_masim(
            "cold, 1GiB\nhot, 3GiB\nsmall, 4MiB\n\np\n1000\nhot, 1, 4096, 1\nsmall, 1, 4096, 1\n",
        )
        .unwrap();
        let small = engine(&spec, 2).layout.region_starts[2];
        let regions = [regions[0], AddrRange::new(small + 4096, small + mb)];
        let mut counts = vec![];
        for flush in [WindowFlush::Upper, WindowFlush::None] {
            let (exact, est, [a, b]) = telescope_totals(&spec, &regions, ([0.0; 5], flush), 30);
            assert_close(&exact, &est);
            assert_eq!(a, b);
            counts.push(exact.sum[1]);
        }
        assert!(counts[0] > 600 && counts[1] < 300, "{counts:?}");
    }

    #[test]
    fn telescope_window_counts_on_the_needle_match_per_sample() {
        // The paper's needle (50 MB read in 5 TB), on fixed regions: cold beside it, over
        // its start, inside, over its end (1 GiB entries, one of 40 holding it), cold
        // beyond. 300 windows: the totals within four binomial deviations, the counts'
        // window-to-window variance alike (per sample it is the binomial's).
        let spec = parse_masim(
            "cold_top, 2500GB\nneedle, 50MB\ncold_bottom, 2500GB\n\np\n1000\nneedle, 1, 4096, 1\n",
        )
        .unwrap();
        let n = engine(&spec, 2).layout.region_starts[1];
        let (kb, mb, gb) = (1u64 << 10, 1u64 << 20, 1u64 << 30);
        let regions = [
            AddrRange::new(n - 300 * gb, n - 256 * kb),
            AddrRange::new(n - 256 * kb, n + 20 * mb),
            AddrRange::new(n + 20 * mb, n + 30 * mb),
            AddrRange::new(n + 30 * mb, n + 40 * gb),
            AddrRange::new(n + 40 * gb, n + 700 * gb),
        ];
        let flex = [0.25, 0.25, 0.15, 0.15, 0.15];
        for overshoot in [[0.0; 5], flex] {
            let (exact, est, [a, b]) =
                telescope_totals(&spec, &regions, (overshoot, WindowFlush::Upper), 300);
            assert_eq!(a, b);
            let variance = |m: &Moments, i: usize| {
                let mean = m.sum[i] as f64 / 300.0;
                m.squares[i] as f64 / 300.0 - mean * mean
            };
            for i in 0..regions.len() {
                let (x, y) = (exact.sum[i], est.sum[i]);
                let p = (x + y) as f64 / 24_000.0;
                let tolerance = 4.0 * (24_000.0 * p * (1.0 - p)).sqrt() + 3.0;
                assert!(x.abs_diff(y) as f64 <= tolerance, "{exact:?} {est:?}");
                let (vx, vy) = (variance(&exact, i), variance(&est, i));
                assert!(
                    vy <= 1.5 * vx + 0.05 && vx <= 1.5 * vy + 0.05,
                    "{i}: {vx} {vy}"
                );
            }
            assert!(exact.sum[1] > 11_000 && exact.sum[2] == 12_000, "{exact:?}");
            assert!((1..100).contains(&exact.sum[3]), "{exact:?}");
            assert_eq!(exact.sum[0] + exact.sum[4] + est.sum[0] + est.sum[4], 0);
        }
    }
}
