//! Miss probabilities of the TLB and the paging-structure caches while one access pattern
//! runs, from the exact engine's cache geometry.
//!
//! A core runs one MASIM pattern at a time (a batch of 131072 accesses, ~13 ms at 10 M/s),
//! and its translation caches turn over in microseconds, so during a batch they are in the
//! steady state of that pattern alone. For a uniformly random pattern that state follows
//! the independent-reference model, and LRU under it is what Che's approximation
//! (Che, Tung and Wang, 2002; Fricker et al., 2012) describes: in each set, find the
//! characteristic time `T` with `sum_i (1 - exp(-p_i T)) = ways`; key `i` then hits with
//! probability `1 - exp(-p_i T)`. With `n` equally popular keys in a set this gives the
//! exact LRU answer `min(1, ways / n)`, and `n <= ways` gives certain hits.
//!
//! Keys are the cache's tags: leaf page numbers for the TLB, `va >> span_shift` for the
//! paging-structure cache of a level. The set is the key's low bits, as in
//! [`crate::cache::SetAssoc`]. A region's keys are a contiguous run; the two end keys may
//! be partly covered and are referenced in proportion to the bytes they cover.
//!
//! Each cache only sees what the caches before it let through (the PDE cache is looked up
//! on TLB misses, the PDPTE cache on PDE misses, ...). Within one uniform pattern that
//! filter scales every key's rate by about the same factor, which leaves Che's hit
//! probabilities unchanged, so every level is solved on the raw access shares.
//!
//! The TLB is modelled by the shared L2 TLB alone: the L1 dTLB is much smaller and holds
//! (mostly) a subset of the L2's most recent entries, so a walk happens about when the
//! L2 misses.
//!
//! A non-uniform density (hotspot, gaussian, zipf) gives each key its own rate, the key's
//! share of the density (`Shaped`). Up to [`EXACT_KEYS`] keys are solved one by one,
//! per set. Beyond, the keys are cut into at most ~[`PIECES`] runs (equal runs plus
//! geometrically growing ones from the region start, where a zipf density concentrates),
//! each run's accessed keys taking the run's mean rate, and Che's equation is solved for
//! one average set holding `1 / sets` of every run (runs are long compared with the
//! number of sets, so each set gets an even share). A hotspot's accessed keys are its hot
//! pages when a key spans fewer pages than a run (the TLB: one key in `run` is
//! referenced, the others never are), every key otherwise. The filtering by earlier
//! caches is ignored here too, though under a skewed density it is no longer uniform
//! (the TLB keeps the most popular pages, so the paging-structure caches see a flatter
//! stream than modelled; and the L1 TLB keeps the hottest pages, whose hits the L2 then
//! never sees: docs/models/FIDELITY.md shows where that matters).
//!
//! A scrambled zipf's TLB (keys are its pages) beyond [`EXACT_KEYS`] is `Scatter`: its hot
//! pages are scattered over the region, so runs of consecutive keys would average them
//! with the cold ones. Its pages fall into rate classes instead (the head ranks in
//! [`SCATTER_CLASSES`] geometric runs of ranks, the flat tail one more), solved in one
//! average set holding `1 / sets` of every class (hundreds of head pages per set make the
//! per-set imbalance that `HotSets` follows for sparse hotspots small); each page then
//! misses with `exp(-m T)` for its own mass `m`. Its paging-structure caches keep the
//! runs.

use crate::config::{CacheGeometry, HostPages, TlbConfig};
use crate::stream::MASIM_BATCH;
use tierscope_core::workload::{RegionDensity, DENSITY_PAGE};
use tierscope_core::{AddrRange, Level, PageSize, Paging};

/// Keys of a region in one cache up to which a non-uniform density is solved key by key.
pub const EXACT_KEYS: u64 = 4096;
/// Runs of keys a non-uniform density is cut into beyond [`EXACT_KEYS`] (two families of
/// `PIECES / 2`).
pub const PIECES: u64 = 2048;

/// Keys of one region in one cache, and their miss probabilities.
#[derive(Debug, Clone)]
pub struct LevelModel {
    shift: u32,
    sets: u64,
    entries: u64,
    /// Keys `[k0, k1)` overlap the region.
    k0: u64,
    k1: u64,
    /// Miss probability of a fully covered key, per set.
    interior_miss: Vec<f64>,
    /// `prefix[j]`: sum of `interior_miss[..j]`, for O(1) means over key runs.
    prefix: Vec<f64>,
    first_miss: f64,
    last_miss: f64,
    /// Fraction of the first and last key's span inside the region.
    first_weight: f64,
    last_weight: f64,
    /// Under a non-uniform density, the model that replaces the uniform one above.
    shaped: Option<Box<Shaped>>,
}

/// A cache level's keys under a non-uniform density: run `j` holds keys
/// `[bounds[j], bounds[j + 1])` whose accessed ones share the miss probability `miss[j]`.
#[derive(Debug, Clone)]
struct Shaped {
    region: AddrRange,
    density: RegionDensity,
    bounds: Vec<u64>,
    miss: Vec<f64>,
    /// `miss_prefix[j]`: sum over runs `[0, j)` of the run's access mass times its miss
    /// probability, for O(log) access-weighted means over many runs.
    miss_prefix: Vec<f64>,
    /// Expected distinct keys one batch of accesses references.
    batch_keys: f64,
    /// A hotspot's hot pages in a TLB, counted set by set.
    hot_sets: Option<HotSets>,
    /// A scrambled zipf's TLB beyond [`EXACT_KEYS`] pages.
    scatter: Option<Scatter>,
}

/// Rate classes a scrambled zipf's head ranks are cut into for its TLB.
pub const SCATTER_CLASSES: u64 = 512;

/// A scrambled zipf's TLB: one Che time for an average set over rate classes, each page
/// missing by its own mass.
#[derive(Debug, Clone)]
struct Scatter {
    /// Che's characteristic time, `None` when every referenced page fits.
    t: Option<f64>,
    /// `miss_prefix[i]`: sum over the head pages `[..i]` (in page order) of mass times
    /// miss probability.
    miss_prefix: Vec<f64>,
    tail_mass: f64,
    tail_miss: f64,
    batch_keys: f64,
}

impl Scatter {
    fn new(g: CacheGeometry, density: &RegionDensity) -> Option<Self> {
        let sc = density.scattered()?;
        let sets = (g.entries / g.ways) as f64;
        let mut classes = sc.head_classes(SCATTER_CLASSES);
        classes.push((sc.tail_pages() as f64, sc.tail_mass()));
        let per_set: Vec<(f64, f64)> = classes.iter().map(|&(n, r)| (n / sets, r)).collect();
        let t = che_time_rates(&per_set, g.ways as u64);
        let miss = |m: f64| t.map_or(0.0, |t| (-m * t).exp());
        let mut miss_prefix = Vec::with_capacity(sc.head_pages().len() + 1);
        miss_prefix.push(0.0);
        for i in 0..sc.head_pages().len() {
            let m = sc.head_mass(i);
            miss_prefix.push(miss_prefix[i] + m * miss(m));
        }
        let batch_keys = classes
            .iter()
            .map(|&(n, r)| -n * (-r * MASIM_BATCH as f64).exp_m1())
            .sum();
        Some(Scatter {
            t,
            miss_prefix,
            tail_mass: sc.tail_mass(),
            tail_miss: miss(sc.tail_mass()),
            batch_keys,
        })
    }

    /// Miss probability of the region's page `page` (of mass `m` as a whole page).
    fn miss_page(&self, density: &RegionDensity, page: u64) -> f64 {
        let Some(t) = self.t else { return 0.0 };
        let m = density.mass(page * DENSITY_PAGE, (page + 1) * DENSITY_PAGE);
        (-m * t).exp()
    }

    /// Access-weighted mean miss probability over the offsets `[lo, hi)` of the region:
    /// page by page for short spans, else the head pages' running sums and the flat tail
    /// (end pages counted whole).
    fn miss_mean(&self, density: &RegionDensity, lo: u64, hi: u64) -> f64 {
        let (pa, pb) = (lo / DENSITY_PAGE, (hi - 1) / DENSITY_PAGE + 1);
        let (mut num, den);
        if pb - pa <= 64 {
            num = 0.0;
            let mut d = 0.0;
            for p in pa..pb {
                let w = density.mass(lo.max(p * DENSITY_PAGE), hi.min((p + 1) * DENSITY_PAGE));
                num += w * self.miss_page(density, p);
                d += w;
            }
            den = d;
        } else {
            let sc = density.scattered().expect("a scrambled zipf");
            let pages = sc.head_pages();
            let (i, j) = (
                pages.partition_point(|&p| p < pa),
                pages.partition_point(|&p| p < pb),
            );
            let tail = ((pb - pa) - (j - i) as u64) as f64 * self.tail_mass;
            num = self.miss_prefix[j] - self.miss_prefix[i] + tail * self.tail_miss;
            den = density.mass(pa * DENSITY_PAGE, pb * DENSITY_PAGE);
        }
        if den > 0.0 {
            num / den
        } else {
            0.0
        }
    }
}

/// Most hot pages whose TLB sets are counted one by one.
pub const MAX_HOT_PAGES: u64 = 1 << 22;

/// A sparse hotspot's TLB, per set: the hot pages land in the sets unevenly (a set with
/// no more hot pages than ways never misses), which an average set misses: probes that
/// wait several milliseconds see those never-reloaded pages.
#[derive(Debug, Clone)]
struct HotSets {
    sets: u64,
    /// Miss probability of a hot page, per set.
    miss: Vec<f64>,
    /// Mean over the hot pages.
    mean: f64,
    /// First page (TLB key) of the region.
    first_key: u64,
    run: u64,
    hot: u64,
}

impl HotSets {
    fn new(region: AddrRange, g: CacheGeometry, density: &RegionDensity) -> Option<Self> {
        let (run, hot) = density.hotspot_runs()?;
        if run < 2 || hot > MAX_HOT_PAGES {
            return None;
        }
        let sets = (g.entries / g.ways) as u64;
        let first_key = region.start / DENSITY_PAGE;
        let mut count = vec![0u64; sets as usize];
        for j in 0..hot {
            let page = density.hot_page(j).expect("a hotspot");
            count[((first_key + page) % sets) as usize] += 1;
        }
        let miss: Vec<f64> = count
            .iter()
            .map(|&n| che_time(n, &[], g.ways as u64).map_or(0.0, |t| (-t).exp()))
            .collect();
        let mean = count
            .iter()
            .zip(&miss)
            .map(|(&n, &m)| n as f64 * m)
            .sum::<f64>()
            / hot as f64;
        Some(HotSets {
            sets,
            miss,
            mean,
            first_key,
            run,
            hot,
        })
    }

    fn miss_key(&self, k: u64) -> f64 {
        self.miss[(k % self.sets) as usize]
    }

    /// Mean over the hot pages in `r` (offsets in the region), each weighted by the
    /// density's mass of it; the mean over all hot pages when `r` spans many runs.
    fn miss_mean(&self, density: &RegionDensity, lo: u64, hi: u64) -> f64 {
        let (j0, j1) = (
            lo / DENSITY_PAGE / self.run,
            (hi - 1) / DENSITY_PAGE / self.run,
        );
        if j1 - j0 > 64 {
            return self.mean;
        }
        let (mut num, mut den) = (0.0, 0.0);
        for j in j0..=j1.min(self.hot.saturating_sub(1)) {
            let page = density.hot_page(j).expect("a hotspot");
            let w = density.mass(
                lo.max(page * DENSITY_PAGE),
                hi.min((page + 1) * DENSITY_PAGE),
            );
            num += w * self.miss_key(self.first_key + page);
            den += w;
        }
        if den > 0.0 {
            num / den
        } else {
            0.0
        }
    }
}

/// Che's characteristic time for keys in classes of `(count, rate)` (fractional counts:
/// an average set), or `None` when every referenced key fits.
fn che_time_rates(classes: &[(f64, f64)], ways: u64) -> Option<f64> {
    let live = || classes.iter().filter(|c| c.0 > 0.0 && c.1 > 0.0);
    let count: f64 = live().map(|c| c.0).sum();
    let target = ways as f64;
    if count <= target {
        return None;
    }
    let f = |t: f64| live().map(|&(c, r)| -c * (-r * t).exp_m1()).sum::<f64>();
    let max_rate = live().map(|c| c.1).fold(0.0, f64::max);
    bisect_increasing(f, target, 1.0 / max_rate, 1e300, 100)
}

/// Per-key miss probabilities of keys `k0 + i` with rates `rates[i]`, set by set.
fn per_set_miss(rates: &[f64], g: CacheGeometry) -> Vec<f64> {
    let (sets, ways) = ((g.entries / g.ways) as usize, g.ways as u64);
    let mut miss = vec![0.0; rates.len()];
    for j in 0..sets.min(rates.len()) {
        let members: Vec<usize> = (j..rates.len()).step_by(sets).collect();
        let classes: Vec<(f64, f64)> = members.iter().map(|&i| (1.0, rates[i])).collect();
        if let Some(t) = che_time_rates(&classes, ways) {
            for &i in &members {
                miss[i] = (-rates[i] * t).exp();
            }
        }
    }
    miss
}

/// Miss probabilities of runs of `accessed[j]` keys at rate `rates[j]` each, in one
/// average set holding `1 / sets` of every run.
fn average_set_miss(accessed: &[f64], rates: &[f64], g: CacheGeometry) -> Vec<f64> {
    let sets = (g.entries / g.ways) as f64;
    let classes: Vec<(f64, f64)> = accessed
        .iter()
        .zip(rates)
        .map(|(&a, &r)| (a / sets, r))
        .collect();
    match che_time_rates(&classes, g.ways as u64) {
        Some(t) => rates.iter().map(|&r| (-r * t).exp()).collect(),
        None => vec![0.0; rates.len()],
    }
}

impl Shaped {
    fn new(region: AddrRange, shift: u32, g: CacheGeometry, density: &RegionDensity) -> Self {
        let k0 = region.start >> shift;
        let k1 = ((region.end - 1) >> shift) + 1;
        let key_range = |a: u64, b: u64| {
            AddrRange::new((a << shift).max(region.start), (b << shift).min(region.end))
        };
        let mass_of = |r: AddrRange| density.mass(r.start - region.start, r.end - region.start);
        let n = k1 - k0;
        let (bounds, miss, accessed, rates) = if n <= EXACT_KEYS {
            let bounds: Vec<u64> = (k0..=k1).collect();
            let rates: Vec<f64> = (k0..k1).map(|k| mass_of(key_range(k, k + 1))).collect();
            let miss = per_set_miss(&rates, g);
            let accessed = rates.iter().map(|&r| f64::from(r > 0.0)).collect();
            (bounds, miss, accessed, rates)
        } else {
            let half = PIECES / 2;
            let mut bounds: Vec<u64> = (0..=half)
                .map(|i| k0 + (n as u128 * i as u128 / half as u128) as u64)
                .collect();
            let ratio = (n as f64).powf(1.0 / half as f64);
            let mut x = 1.0f64;
            // Fine runs where the density concentrates: a latest density's end.
            let at_end = density.peaks_at_end();
            while (x as u64) < n {
                bounds.push(if at_end { k1 - x as u64 } else { k0 + x as u64 });
                x *= ratio;
            }
            bounds.sort_unstable();
            bounds.dedup();
            // A hotspot key narrower than a run holds at most about one hot page.
            let sparse = density
                .hotspot_runs()
                .filter(|&(run, _)| (1u64 << shift) / DENSITY_PAGE < run);
            let mut accessed = vec![];
            let mut rates = vec![];
            for w in bounds.windows(2) {
                let m = mass_of(key_range(w[0], w[1]));
                let keys = (w[1] - w[0]) as f64;
                let a = match sparse {
                    Some((_, hot)) => (m * hot as f64).round().min(keys),
                    None => keys,
                };
                accessed.push(a);
                rates.push(if a > 0.0 { m / a } else { 0.0 });
            }
            let miss = average_set_miss(&accessed, &rates, g);
            (bounds, miss, accessed, rates)
        };
        let mut miss_prefix = vec![0.0; miss.len() + 1];
        for (j, w) in bounds.windows(2).enumerate() {
            miss_prefix[j + 1] = miss_prefix[j] + mass_of(key_range(w[0], w[1])) * miss[j];
        }
        let scatter = (1u64 << shift == DENSITY_PAGE && n > EXACT_KEYS)
            .then(|| Scatter::new(g, density))
            .flatten();
        let batch_keys = scatter.as_ref().map_or_else(
            || {
                accessed
                    .iter()
                    .zip(&rates)
                    .map(|(&a, &r)| -a * (-r * MASIM_BATCH as f64).exp_m1())
                    .sum()
            },
            |s| s.batch_keys,
        );
        Shaped {
            region,
            density: density.clone(),
            bounds,
            miss,
            miss_prefix,
            batch_keys,
            hot_sets: (1u64 << shift == DENSITY_PAGE)
                .then(|| HotSets::new(region, g, density))
                .flatten(),
            scatter,
        }
    }

    fn mass(&self, r: AddrRange) -> f64 {
        self.density
            .mass(r.start - self.region.start, r.end - self.region.start)
    }

    /// The run holding key `k`.
    fn run_of(&self, k: u64) -> usize {
        self.bounds.partition_point(|&b| b <= k) - 1
    }

    fn miss_key(&self, k: u64) -> f64 {
        if k < self.bounds[0] || k >= *self.bounds.last().expect("at least one run") {
            0.0
        } else if let Some(h) = &self.hot_sets {
            h.miss_key(k)
        } else if let Some(s) = &self.scatter {
            s.miss_page(&self.density, k - self.region.start / DENSITY_PAGE)
        } else {
            self.miss[self.run_of(k)]
        }
    }

    /// Access-weighted mean miss probability over `r`, clamped to the region.
    fn miss_mean(&self, r: AddrRange, shift: u32) -> f64 {
        let r = AddrRange::new(r.start.max(self.region.start), r.end.min(self.region.end));
        if r.end <= r.start {
            return 0.0;
        }
        if let Some(h) = &self.hot_sets {
            return h.miss_mean(
                &self.density,
                r.start - self.region.start,
                r.end - self.region.start,
            );
        }
        if let Some(s) = &self.scatter {
            return s.miss_mean(
                &self.density,
                r.start - self.region.start,
                r.end - self.region.start,
            );
        }
        let (ja, jb) = (
            self.run_of(r.start >> shift),
            self.run_of((r.end - 1) >> shift),
        );
        if ja == jb {
            return self.miss[ja];
        }
        let total = self.mass(r);
        if total <= 0.0 {
            return 0.0;
        }
        let (first_end, last_start) = (self.bounds[ja + 1] << shift, self.bounds[jb] << shift);
        let num = self.mass(AddrRange::new(r.start, first_end)) * self.miss[ja]
            + (self.miss_prefix[jb] - self.miss_prefix[ja + 1])
            + self.mass(AddrRange::new(last_start, r.end)) * self.miss[jb];
        num / total
    }
}

/// Solves Che's equation for one set: `n` keys of weight 1 plus `extra` weighted keys.
/// Returns the characteristic time, or `None` when everything fits (no misses).
fn che_time(n: u64, extra: &[f64], ways: u64) -> Option<f64> {
    let count = n + extra.iter().filter(|&&w| w > 0.0).count() as u64;
    if count <= ways {
        return None;
    }
    let f =
        |t: f64| n as f64 * -(-t).exp_m1() + extra.iter().map(|&w| -(-w * t).exp_m1()).sum::<f64>();
    bisect_increasing(f, ways as f64, 1.0, 1e12, 80)
}

/// The `t >= 0` at which the increasing `f` reaches `target`: doubles from `hi` until it
/// brackets the root (`None` past `limit`), then bisects `iters` times.
fn bisect_increasing(
    f: impl Fn(f64) -> f64,
    target: f64,
    mut hi: f64,
    limit: f64,
    iters: u32,
) -> Option<f64> {
    let mut lo = 0.0f64;
    while f(hi) < target {
        lo = hi;
        hi *= 2.0;
        if hi > limit {
            return None;
        }
    }
    for _ in 0..iters {
        let mid = 0.5 * (lo + hi);
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(0.5 * (lo + hi))
}

/// Keys `k` in `[a, b)` with `k mod sets == j`.
fn count_in_set(a: u64, b: u64, sets: u64, j: u64) -> u64 {
    if b <= a {
        return 0;
    }
    // Keys congruent to j below x: ceil((x - j) / sets) for x > j.
    let below = |x: u64| if x > j { (x - j).div_ceil(sets) } else { 0 };
    below(b) - below(a)
}

impl LevelModel {
    fn new(region: AddrRange, shift: u32, g: CacheGeometry, density: &RegionDensity) -> Self {
        let sets = (g.entries / g.ways) as u64;
        let ways = g.ways as u64;
        let span = 1u64 << shift;
        let k0 = region.start >> shift;
        let k1 = ((region.end - 1) >> shift) + 1;
        let cover = |k: u64| {
            let s = AddrRange::new(k << shift, (k << shift).saturating_add(span));
            s.overlap(&region) as f64 / span as f64
        };
        let (first_weight, last_weight) = (cover(k0), cover(k1 - 1));
        let mut m = LevelModel {
            shift,
            sets,
            entries: g.entries as u64,
            k0,
            k1,
            interior_miss: vec![0.0; sets as usize],
            prefix: vec![0.0; sets as usize + 1],
            first_miss: 0.0,
            last_miss: 0.0,
            first_weight,
            last_weight,
            shaped: None,
        };
        if !density.is_uniform() {
            m.shaped = Some(Box::new(Shaped::new(region, shift, g, density)));
            return m;
        }
        if k1 - k0 == 1 {
            return m; // one key always fits
        }
        m.solve(ways);
        m
    }

    fn solve(&mut self, ways: u64) {
        let (k0, k1, sets) = (self.k0, self.k1, self.sets);
        let (first_weight, last_weight) = (self.first_weight, self.last_weight);
        let m = self;
        for j in 0..sets {
            let n = count_in_set(k0 + 1, k1 - 1, sets, j);
            let mut extra = vec![];
            let first_here = k0 % sets == j;
            let last_here = (k1 - 1) % sets == j;
            if first_here {
                extra.push(first_weight);
            }
            if last_here {
                extra.push(last_weight);
            }
            match che_time(n, &extra, ways) {
                None => {}
                Some(t) => {
                    m.interior_miss[j as usize] = (-t).exp();
                    if first_here {
                        m.first_miss = (-first_weight * t).exp();
                    }
                    if last_here {
                        m.last_miss = (-last_weight * t).exp();
                    }
                }
            }
        }
        for j in 0..sets as usize {
            m.prefix[j + 1] = m.prefix[j] + m.interior_miss[j];
        }
    }

    /// Sum of the interior miss probabilities of keys `[a, b)`: every set `(b - a) / sets`
    /// times, plus one more for the `(b - a) % sets` sets from `a`'s onwards (cyclically).
    fn interior_sum(&self, a: u64, b: u64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let n = b - a;
        let (laps, rem) = (n / self.sets, (n % self.sets) as usize);
        let total = self.prefix[self.sets as usize];
        let j = (a % self.sets) as usize;
        let sets = self.sets as usize;
        let extra = if j + rem <= sets {
            self.prefix[j + rem] - self.prefix[j]
        } else {
            (total - self.prefix[j]) + self.prefix[j + rem - sets]
        };
        laps as f64 * total + extra
    }

    /// Distinct keys the region references.
    pub fn footprint(&self) -> u64 {
        self.k1 - self.k0
    }

    /// Whether running this region pushes everything else out of the cache (under a
    /// non-uniform density: whether one batch references as many distinct keys as the
    /// cache holds).
    pub fn evicts_all(&self) -> bool {
        match &self.shaped {
            Some(s) => s.batch_keys >= self.entries as f64,
            None => self.footprint() >= self.entries,
        }
    }

    /// Miss probability of one key (0 outside the region: it is never referenced).
    pub fn miss_key(&self, k: u64) -> f64 {
        if let Some(s) = &self.shaped {
            s.miss_key(k)
        } else if k < self.k0 || k >= self.k1 {
            0.0
        } else if k == self.k0 {
            self.first_miss
        } else if k == self.k1 - 1 {
            self.last_miss
        } else {
            self.interior_miss[(k % self.sets) as usize]
        }
    }

    /// Access-weighted mean miss probability over the region's bytes inside `r`.
    pub fn miss_mean(&self, r: AddrRange) -> f64 {
        if r.is_empty() {
            return 0.0;
        }
        if let Some(s) = &self.shaped {
            return s.miss_mean(r, self.shift);
        }
        let a = r.start >> self.shift;
        let b = ((r.end - 1) >> self.shift) + 1;
        let (a, b) = (a.max(self.k0), b.min(self.k1));
        if b <= a {
            return 0.0;
        }
        let span = 1u64 << self.shift;
        if b - a <= 4 * self.sets {
            // Few keys: weigh each one by the bytes of `r` it covers.
            let (mut num, mut den) = (0.0, 0.0);
            for k in a..b {
                let w =
                    AddrRange::new(k << self.shift, (k << self.shift) + span).overlap(&r) as f64;
                num += w * self.miss_key(k);
                den += w;
            }
            return if den > 0.0 { num / den } else { 0.0 };
        }
        // Many keys: the interior ones by set count, the ends by themselves.
        let (ia, ib) = (a.max(self.k0 + 1), b.min(self.k1 - 1));
        let mut num = self.interior_sum(ia, ib);
        let mut den = ib.saturating_sub(ia) as f64;
        for k in [a, b - 1] {
            if k == self.k0 || k == self.k1 - 1 {
                let w = if k == self.k0 {
                    self.first_weight
                } else {
                    self.last_weight
                };
                num += w * self.miss_key(k);
                den += w;
            }
        }
        if den > 0.0 {
            num / den
        } else {
            0.0
        }
    }
}

/// The caches' steady state while one region is accessed at random by its density.
#[derive(Debug, Clone)]
pub struct RegionCaches {
    /// The region's leaf level (Pte, or Pmd for 2 MiB pages).
    pub leaf: Level,
    /// Whether the TLB caches the region's 2 MiB pages as 4 KiB entries (a virtual machine
    /// over 4 KiB host pages): its keys are then 4 KiB pages, 512 per leaf entry.
    pub splintered: bool,
    /// Index 0: the TLB (keys are leaf pages); index `l` for `l >= 1`: the
    /// paging-structure cache of level `l`, when the walker uses it for this region.
    pub levels: [Option<LevelModel>; 5],
}

impl RegionCaches {
    /// On bare metal.
    pub fn new(
        region: AddrRange,
        density: &RegionDensity,
        page: PageSize,
        paging: Paging,
        tlb: &TlbConfig,
    ) -> Self {
        Self::with_host(region, density, page, HostPages::BareMetal, paging, tlb)
    }

    /// On bare metal or in a virtual machine over `host` pages: the TLB's keys are pages
    /// of the smaller of the two sizes (the paging-structure caches hold guest entries,
    /// as on bare metal).
    pub fn with_host(
        region: AddrRange,
        density: &RegionDensity,
        page: PageSize,
        host: HostPages,
        paging: Paging,
        tlb: &TlbConfig,
    ) -> Self {
        let leaf = page.leaf_level();
        let splintered = host.splinters(page);
        let tlb_shift = if splintered {
            Level::Pte.span_shift()
        } else {
            leaf.span_shift()
        };
        let mut levels: [Option<LevelModel>; 5] = Default::default();
        levels[0] = Some(LevelModel::new(region, tlb_shift, tlb.l2, density));
        let root = paging.root();
        for (l, g) in [
            (Level::Pmd, tlb.pde_cache),
            (Level::Pud, tlb.pdpte_cache),
            (Level::Pml4, tlb.pml4_cache),
            (Level::Pml5, tlb.pml5_cache),
        ] {
            // The walker caches non-leaf entries below the root only (mmu.rs).
            if l > leaf && l < root {
                levels[l.index()] = Some(LevelModel::new(region, l.span_shift(), g, density));
            }
        }
        RegionCaches {
            leaf,
            splintered,
            levels,
        }
    }

    /// Cache indices (0 = TLB) that must miss for an access in the span of the entry at
    /// `level` containing `va` to make the walker load that entry: the TLB always, and
    /// every paging-structure cache at or below `level` (a hit there starts the walk
    /// below the entry).
    pub fn needed(&self, level: Level) -> impl Iterator<Item = usize> + '_ {
        (0..=level.index()).filter(move |&i| self.levels[i].is_some())
    }

    /// Bit mask of the caches this region's accesses flush out completely.
    pub fn evict_mask(&self) -> u8 {
        let mut m = 0;
        for (i, l) in self.levels.iter().enumerate() {
            if l.as_ref().is_some_and(LevelModel::evicts_all) {
                m |= 1 << i;
            }
        }
        m
    }

    /// Probability that an access to this region inside the span `s` of the entry at
    /// `level` (key `key` at that level) loads the entry, given that the caches in
    /// `fresh` (bit mask) hold nothing for the span.
    pub fn load_probability(&self, level: Level, key: u64, s: AddrRange, fresh: u8) -> f64 {
        let mut q = 1.0;
        for i in self.needed(level) {
            if fresh & (1 << i) != 0 {
                continue;
            }
            let m = self.levels[i].as_ref().expect("needed levels exist");
            q *= if i == level.index() && i > 0 {
                m.miss_key(key)
            } else {
                m.miss_mean(s)
            };
        }
        q
    }

    /// Whether the leaf entry at `leaf` spans exactly one TLB key (not so for a 2 MiB guest
    /// page cached as 4 KiB entries).
    pub fn leaf_is_one_key(&self, leaf: Level) -> bool {
        !(self.splintered && leaf == Level::Pmd)
    }

    /// Mean TLB miss probability over the whole region (for the engine's statistics).
    pub fn tlb_miss(&self, region: AddrRange) -> f64 {
        self.levels[0].as_ref().map_or(1.0, |m| m.miss_mean(region))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tierscope_core::workload::Density;

    fn uniform(r: AddrRange) -> RegionDensity {
        RegionDensity::new(Density::Uniform, r.len(), 0)
    }

    #[test]
    fn interior_sums_match_a_loop() {
        let region = AddrRange::new(3 << 12, 5000 << 12);
        let m = LevelModel::new(region, 12, CacheGeometry::new(64, 4), &uniform(region));
        for (a, b) in [(4, 10), (5, 4000), (17, 18), (100, 1700)] {
            let direct: f64 = (a..b).map(|k| m.interior_miss[(k % m.sets) as usize]).sum();
            assert!((m.interior_sum(a, b) - direct).abs() < 1e-9, "{a} {b}");
        }
    }

    #[test]
    fn uniform_keys_match_lru() {
        // n equally popular keys in one set of `ways`: hit = ways / n.
        let t = che_time(10, &[], 4).unwrap();
        assert!(((-t).exp() - 0.6).abs() < 1e-6);
        assert!(che_time(4, &[], 4).is_none());
    }

    #[test]
    fn pdpte_cache_holds_four_aligned_gib() {
        let base = 1u64 << 40;
        let tlb = TlbConfig::default();
        let r = AddrRange::new(base, base + (4 << 30));
        let c = RegionCaches::new(r, &uniform(r), PageSize::Base4K, Paging::FourLevel, &tlb);
        let pud = c.levels[Level::Pud.index()].as_ref().unwrap();
        assert_eq!(pud.footprint(), 4);
        assert_eq!(pud.miss_key(base >> 30), 0.0);
        // Misaligned by 2 MiB: five keys in four entries, so some misses.
        let r = AddrRange::new(base + (2 << 20), base + (4 << 30) + (2 << 20));
        let c = RegionCaches::new(r, &uniform(r), PageSize::Base4K, Paging::FourLevel, &tlb);
        let pud = c.levels[Level::Pud.index()].as_ref().unwrap();
        assert_eq!(pud.footprint(), 5);
        assert!(pud.miss_key((base >> 30) + 1) > 0.0);
        // 1M pages in 1536 TLB entries: hit about 1536 / 1M.
        let tlb_miss = c.tlb_miss(AddrRange::new(base, base + (4 << 30)));
        assert!((tlb_miss - (1.0 - 1536.0 / (1 << 20) as f64)).abs() < 1e-4);
        // The root is never cached in 4-level paging.
        assert!(c.levels[Level::Pml4.index()].is_none());
    }

    #[test]
    fn hotspot_tlb_holds_a_share_of_the_hot_pages() {
        let tlb = TlbConfig::default();
        let base = 1u64 << 40;
        let caches = |size: u64, f: f64| {
            let r = AddrRange::new(base, base + size);
            let d = RegionDensity::new(Density::Hotspot { hot_fraction: f }, size, 1);
            RegionCaches::new(r, &d, PageSize::Base4K, Paging::FourLevel, &tlb)
        };
        // 1 GiB at 1%: 2621 equally hot pages in 1536 entries, LRU's 1 - 1536/2621; the
        // cold pages do not count (the uniform model would say 1 - 1536/262144).
        let r = AddrRange::new(base, base + (1 << 30));
        let c = caches(1 << 30, 0.01);
        let miss = c.tlb_miss(r);
        assert!((miss - (1.0 - 1536.0 / 2621.0)).abs() < 0.01, "{miss}");
        assert!(c.evict_mask() & 1 == 1);
        // The PDE cache sees all 512 2 MiB keys (each holds about 5 hot pages).
        let pmd = c.levels[Level::Pmd.index()].as_ref().unwrap();
        let uniform_pmd = LevelModel::new(r, 21, tlb.pde_cache, &uniform(r));
        let k = (base >> 21) + 7;
        assert!((pmd.miss_key(k) - uniform_pmd.miss_key(k)).abs() < 0.02);
        // 64 MiB at 1%: 163 hot pages fit the TLB, and one batch does not fill it.
        let c = caches(64 << 20, 0.01);
        assert_eq!(c.tlb_miss(AddrRange::new(base, base + (64 << 20))), 0.0);
        assert_eq!(c.evict_mask() & 1, 0);
    }

    #[test]
    fn zipf_head_pages_hit_and_tail_pages_miss() {
        let tlb = TlbConfig::default();
        let base = 1u64 << 40;
        let r = AddrRange::new(base, base + (1 << 30));
        let d = RegionDensity::new(Density::Zipf { exponent: 1.0 }, 1 << 30, 0);
        let c = RegionCaches::new(r, &d, PageSize::Base4K, Paging::FourLevel, &tlb);
        let t = c.levels[0].as_ref().unwrap();
        assert!(t.miss_key(base >> 12) < 1e-6);
        assert!(t.miss_key((base >> 12) + 200_000) > 0.99);
        // Access-weighted over the region: the ranks beyond the ~1536 cached pages carry
        // ln(262144 / 1536) / H(262144) = 0.39 of the accesses, the transition more.
        let mean = c.tlb_miss(r);
        assert!(mean > 0.35 && mean < 0.6, "{mean}");
        let head = t.miss_mean(AddrRange::new(base, base + (64 << 12)));
        assert!(head < 0.01, "{head}");
    }

    #[test]
    fn scrambled_zipf_tlb_follows_each_pages_rate() {
        let tlb = TlbConfig::default();
        let base = 1u64 << 40;
        let size = 4u64 << 30;
        let r = AddrRange::new(base, base + size);
        let d = RegionDensity::new(Density::ScrambledZipf { exponent: 0.99 }, size, 0);
        let c = RegionCaches::new(r, &d, PageSize::Base4K, Paging::FourLevel, &tlb);
        let t = c.levels[0].as_ref().unwrap();
        let sc = d.scattered().unwrap();
        // The hottest ranks' pages, scattered over the region, hit; tail pages miss.
        let hottest = (0..sc.head_pages().len())
            .max_by(|&a, &b| sc.head_mass(a).total_cmp(&sc.head_mass(b)))
            .unwrap();
        let page = sc.head_pages()[hottest];
        assert!(t.miss_key((base >> 12) + page) < 1e-6);
        let tail = (0..)
            .find(|p| sc.head_pages().binary_search(p).is_err())
            .unwrap();
        assert!(t.miss_key((base >> 12) + tail) > 0.99);
        // The same mean as the unscrambled zipf's over the whole region (the same ranks
        // and one set's capacity), within the average-set models' difference.
        let z = RegionDensity::new(Density::Zipf { exponent: 0.99 }, size, 0);
        let cz = RegionCaches::new(r, &z, PageSize::Base4K, Paging::FourLevel, &tlb);
        let (ms, mz) = (c.tlb_miss(r), cz.tlb_miss(r));
        assert!((ms - mz).abs() < 0.05, "{ms} {mz}");
        // A span's mean by page equals the running sums' mean.
        let span = AddrRange::new(
            base + page * 4096 - 40 * 4096,
            base + page * 4096 + 24 * 4096,
        );
        let by_page = t.miss_mean(span);
        let wide = t.miss_mean(AddrRange::new(span.start, span.end + 4096));
        assert!((by_page - wide).abs() < 0.05, "{by_page} {wide}");
        assert!(c.evict_mask() & 1 == 1);
    }
}
