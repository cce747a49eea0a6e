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

use crate::config::{CacheGeometry, TlbConfig};
use tierscope_core::{AddrRange, Level, PageSize, Paging};

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
    let target = ways as f64;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while f(hi) < target {
        lo = hi;
        hi *= 2.0;
        if hi > 1e12 {
            return None;
        }
    }
    for _ in 0..80 {
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
    fn new(region: AddrRange, shift: u32, g: CacheGeometry) -> Self {
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
        };
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

    /// Whether running this region pushes everything else out of the cache.
    pub fn evicts_all(&self) -> bool {
        self.footprint() >= self.entries
    }

    /// Miss probability of one key (0 outside the region: it is never referenced).
    pub fn miss_key(&self, k: u64) -> f64 {
        if k < self.k0 || k >= self.k1 {
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

/// The caches' steady state while one region is accessed uniformly at random.
#[derive(Debug, Clone)]
pub struct RegionCaches {
    /// The region's leaf level (Pte, or Pmd for 2 MiB pages).
    pub leaf: Level,
    /// Index 0: the TLB (keys are leaf pages); index `l` for `l >= 1`: the
    /// paging-structure cache of level `l`, when the walker uses it for this region.
    pub levels: [Option<LevelModel>; 5],
}

impl RegionCaches {
    pub fn new(region: AddrRange, page: PageSize, paging: Paging, tlb: &TlbConfig) -> Self {
        let leaf = page.leaf_level();
        let mut levels: [Option<LevelModel>; 5] = Default::default();
        levels[0] = Some(LevelModel::new(region, leaf.span_shift(), tlb.l2));
        let root = paging.root();
        for (l, g) in [
            (Level::Pmd, tlb.pde_cache),
            (Level::Pud, tlb.pdpte_cache),
            (Level::Pml4, tlb.pml4_cache),
            (Level::Pml5, tlb.pml5_cache),
        ] {
            // The walker caches non-leaf entries below the root only (mmu.rs).
            if l > leaf && l < root {
                levels[l.index()] = Some(LevelModel::new(region, l.span_shift(), g));
            }
        }
        RegionCaches { leaf, levels }
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

    /// Mean TLB miss probability over the whole region (for the engine's statistics).
    pub fn tlb_miss(&self, region: AddrRange) -> f64 {
        self.levels[0].as_ref().map_or(1.0, |m| m.miss_mean(region))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_sums_match_a_loop() {
        let region = AddrRange::new(3 << 12, 5000 << 12);
        let m = LevelModel::new(region, 12, CacheGeometry::new(64, 4));
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
        let c = RegionCaches::new(
            AddrRange::new(base, base + (4 << 30)),
            PageSize::Base4K,
            Paging::FourLevel,
            &tlb,
        );
        let pud = c.levels[Level::Pud.index()].as_ref().unwrap();
        assert_eq!(pud.footprint(), 4);
        assert_eq!(pud.miss_key(base >> 30), 0.0);
        // Misaligned by 2 MiB: five keys in four entries, so some misses.
        let c = RegionCaches::new(
            AddrRange::new(base + (2 << 20), base + (4 << 30) + (2 << 20)),
            PageSize::Base4K,
            Paging::FourLevel,
            &tlb,
        );
        let pud = c.levels[Level::Pud.index()].as_ref().unwrap();
        assert_eq!(pud.footprint(), 5);
        assert!(pud.miss_key((base >> 30) + 1) > 0.0);
        // 1M pages in 1536 TLB entries: hit about 1536 / 1M.
        let tlb_miss = c.tlb_miss(AddrRange::new(base, base + (4 << 30)));
        assert!((tlb_miss - (1.0 - 1536.0 / (1 << 20) as f64)).abs() < 1e-4);
        // The root is never cached in 4-level paging.
        assert!(c.levels[Level::Pml4.index()].is_none());
    }
}
