//! Telescope's samples of a whole aggregation window at once ([`WindowEntry::Highest`]):
//! DAMON's window sampling ([`super::windows`]) for entries above the leaf, whose clears
//! are followed by flushes (docs/models/FIDELITY.md, "Telescope's window sampling").
//!
//! Per sample, each pass picks per region a uniformly random address and the highest
//! entry over it that qualifies, test-and-clears it, and then flushes what
//! [`WindowFlush`] says: the spans of the cleared entries (those above the leaf for
//! `Upper`), page by page up to [`FLUSH_CEILING_PAGES`] pages in all, else everything.
//! The read one interval later finds the entry set with a probability that depends on the
//! entry, the interval and the caches' freshness at its start alone (a still-clear entry is
//! evaluated from its last read on), so a window's count is a sum of independent Bernoulli
//! draws, one per interval, as for DAMON.
//!
//! Here every pass's picks are drawn (a hashed address per region and interval, its level
//! from the region's runs of one level), to count each pass's flushes as per sample and to
//! charge each pick's test-and-clear and read at its level. A region's count is then, where
//! a few points stand for it, Binomial(`S`, the stratified mean of points spread over its
//! runs), each point evaluated at its own entry with the freshness of its interval's pass:
//! what the other regions' picks of that pass flush, and what the point's own entry flushes
//! (its region's drawn pick of that pass is left out, the point standing for it).
//! Elsewhere each interval's drawn pick is evaluated on its own (the per-sample
//! distribution). Regions inside one huge page share one count.

use super::windows::{accesses_per_interval, intervals_alike, NEGLIGIBLE_COUNT, SALT};
use super::{unit, StatEngine, BITS_CLEARED_UNSURE};
use crate::stat::walks::ALL_FRESH;
use tierscope_core::machine::{highest_entry, WindowFlush, WindowSampling, FLUSH_CEILING_PAGES};
use tierscope_core::rng::mix64;
use tierscope_core::workload::{PatternKind, Spread};
use tierscope_core::{AddrRange, Level, Machine};

/// One sample's pick in a region: its entry and what clearing it flushes.
#[derive(Debug, Clone, Copy)]
struct Pick {
    va: u64,
    level: Level,
    /// The leaf under the entry (for the walk model).
    leaf: Level,
    /// Steps of the walk to the entry; 0 when it does not exist (nothing cleared or read).
    steps: u64,
    /// Pages of the span flushed after the pass (0: not flushed).
    flush_pages: u64,
}

/// A region's runs of addresses whose picks are at one level, over one leaf (`None`:
/// the leaf changes within the region, every pick is worked out on its own).
#[derive(Debug)]
struct Shape {
    leaf: Option<Level>,
    runs: Vec<(u64, u64, Level)>,
}

/// What a pass flushes: its flushed pages and how many spans.
#[derive(Debug, Clone, Copy, Default)]
struct PassFlush {
    pages: u64,
    spans: u32,
}

impl PassFlush {
    fn with(self, p: &Pick) -> PassFlush {
        PassFlush {
            pages: self.pages.saturating_add(p.flush_pages),
            spans: self.spans + u32::from(p.flush_pages > 0),
        }
    }

    fn without(self, p: &Pick) -> PassFlush {
        PassFlush {
            pages: self.pages - p.flush_pages,
            spans: self.spans - u32::from(p.flush_pages > 0),
        }
    }

    /// 0 nothing, 1 page flushes, 2 a full flush.
    fn kind(self) -> u8 {
        if self.pages > FLUSH_CEILING_PAGES {
            2
        } else {
            u8::from(self.spans > 0)
        }
    }

    /// The caches empty for `own`'s span after this pass (which includes `own`'s flush):
    /// a full flush empties every one; page flushes every paging-structure cache, and the
    /// TLB where they covered the (leaf) entry's own page.
    fn fresh_for(self, own: &Pick) -> u8 {
        match self.kind() {
            2 => ALL_FRESH,
            1 => (ALL_FRESH & !1) | u8::from(own.flush_pages > 0 && own.level == own.leaf),
            _ => 0,
        }
    }
}

impl StatEngine {
    /// The region's runs of one level ([`Shape`]): the level of an address changes only
    /// at the end of the first entry of a level over the region and at the start of its
    /// last one.
    fn shape(&self, r: AddrRange, overshoot: &[f64; 5]) -> Shape {
        let root = self.paging.root();
        let uniform = self.mapping_of(r.start).and_then(|m| {
            let leaf = self.leaf_in(m, r.start);
            let split = leaf == Level::Pmd && !self.split.is_empty();
            (m.range.end >= r.end && !split).then_some(leaf)
        });
        let Some(leaf) = uniform else {
            return Shape {
                leaf: None,
                runs: vec![],
            };
        };
        let mut cuts = vec![r.start, r.end];
        let mut l = root;
        while l > leaf {
            let first_end = l.align_down(r.start).saturating_add(l.span());
            let last_start = l.align_down(r.end - 1);
            cuts.extend(
                [first_end, last_start]
                    .into_iter()
                    .filter(|&c| r.start < c && c < r.end),
            );
            l = l.down().expect("above the leaf");
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut runs: Vec<(u64, u64, Level)> = vec![];
        for c in cuts.windows(2) {
            let level = highest_entry(r, c[0], leaf, root, overshoot);
            match runs.last_mut() {
                Some(last) if last.2 == level => last.1 = c[1],
                _ => runs.push((c[0], c[1], level)),
            }
        }
        Shape {
            leaf: Some(leaf),
            runs,
        }
    }

    /// The entry picked at `va` in `r`, and what clearing it flushes under `flush`.
    fn pick(
        &self,
        r: AddrRange,
        shape: &Shape,
        va: u64,
        overshoot: &[f64; 5],
        flush: WindowFlush,
    ) -> Pick {
        let root = self.paging.root();
        let (level, leaf_of_va) = match shape.leaf {
            Some(leaf) => {
                // Inside one mapping of `leaf` pages: the entry exists, under that leaf
                // (what `locate` answers, without its search).
                let i = shape.runs.partition_point(|run| run.1 <= va);
                let level = shape.runs[i].2;
                let flushed = match flush {
                    WindowFlush::None => false,
                    WindowFlush::Upper => level != leaf,
                    WindowFlush::All => true,
                };
                return Pick {
                    va,
                    level,
                    leaf,
                    steps: (root.index() - level.index() + 1) as u64,
                    flush_pages: if flushed { level.span() >> 12 } else { 0 },
                };
            }
            None => {
                let leaf = self.leaf_of(va);
                let l = highest_entry(r, va, leaf.unwrap_or(Level::Pte), root, overshoot);
                (l, leaf)
            }
        };
        let Some((leaf, steps)) = self.locate(level, va) else {
            return Pick {
                va,
                level,
                leaf: level,
                steps: 0,
                flush_pages: 0,
            };
        };
        let flushed = match flush {
            WindowFlush::None => false,
            WindowFlush::Upper => leaf_of_va != Some(level),
            WindowFlush::All => true,
        };
        Pick {
            va,
            level,
            leaf,
            steps: u64::from(steps),
            flush_pages: if flushed { level.span() >> 12 } else { 0 },
        }
    }

    /// The probability that `p`'s entry, cleared at the start of `[t0, t1)` with the
    /// caches in `fresh` empty for it, is found set at its end.
    fn p_set_pick(&self, p: &Pick, t0: u64, t1: u64, fresh: u8, first_flush: usize) -> f64 {
        if p.steps == 0 || self.is_dead(p.level, p.va) {
            return 0.0;
        }
        self.p_set_entry((p.level, p.leaf), p.va, (t0, t1), fresh, first_flush)
    }

    /// The window's counts under [`tierscope_core::machine::WindowEntry::Highest`].
    pub(super) fn sample_window_highest(
        &mut self,
        w: WindowSampling,
        overshoot: &[f64; 5],
        regions: &[AddrRange],
        out: &mut Vec<u32>,
    ) {
        let samples = w.samples as usize;
        let window_start = self.workload.count_at(w.start);
        let first_flush = self.flushes.events.partition_point(|f| f.at < window_start);
        let per_interval = accesses_per_interval(self, w);
        // Every pass's picks, and what each pass flushes.
        let shapes: Vec<Shape> = regions.iter().map(|&r| self.shape(r, overshoot)).collect();
        let hashes: Vec<u64> = regions.iter().map(|r| self.region_hash(w, *r)).collect();
        let mut picks = Vec::with_capacity(regions.len() * samples);
        let mut passes = vec![PassFlush::default(); samples];
        for (i, &r) in regions.iter().enumerate() {
            for (k, pass) in passes.iter_mut().enumerate() {
                let h = mix64(hashes[i] ^ mix64(k as u64));
                let va = r.start + h % r.len().max(1);
                let p = self.pick(r, &shapes[i], va, overshoot, w.flush);
                *pass = pass.with(&p);
                picks.push(p);
            }
        }
        {
            let cost = self.cost_mut();
            for pass in &passes {
                match pass.kind() {
                    2 => cost.flushes_full += 1,
                    1 => cost.flushes_page += u64::from(pass.spans),
                    _ => {}
                }
            }
        }
        out.clear();
        let mut shared: Option<(u64, u32)> = None;
        for (i, &r) in regions.iter().enumerate() {
            let mine = &picks[i * samples..(i + 1) * samples];
            let page = self.huge_page_holding(r);
            if let (Some((start, _)), Some((last, count))) = (page, shared) {
                if start == last {
                    // Per sample the region clears the entry the one before cleared (no
                    // flip) and reads it, finding what that one found.
                    let cost = self.cost_mut();
                    for p in mine.iter().filter(|p| p.steps > 0) {
                        cost.charge_test_and_clear(p.steps, false);
                        cost.charge_read(p.steps);
                    }
                    out.push(count);
                    continue;
                }
            }
            let flips_before = self.cost().bits_cleared;
            {
                let cost = self.cost_mut();
                for p in mine.iter().filter(|p| p.steps > 0) {
                    cost.charge_test_and_clear(p.steps, true);
                    cost.charge_read(p.steps);
                }
            }
            // What the other regions' picks flush in each pass.
            let others: Vec<PassFlush> =
                passes.iter().zip(mine).map(|(s, p)| s.without(p)).collect();
            let count = self.highest_count(
                w,
                r,
                &shapes[i],
                hashes[i],
                mine,
                &others,
                overshoot,
                (first_flush, &per_interval),
            );
            let cost = self.cost_mut();
            let unsure = (cost.bits_cleared - flips_before).saturating_sub(u64::from(count));
            cost.charge(&BITS_CLEARED_UNSURE, unsure);
            shared = page.map(|(start, _)| (start, count));
            out.push(count);
        }
    }

    /// One region's count: from points where they stand for it, else each drawn pick on
    /// its own.
    #[allow(clippy::too_many_arguments)]
    fn highest_count(
        &self,
        w: WindowSampling,
        r: AddrRange,
        shape: &Shape,
        h_region: u64,
        mine: &[Pick],
        others: &[PassFlush],
        overshoot: &[f64; 5],
        (first_flush, per_interval): (usize, &[Vec<u64>]),
    ) -> u32 {
        let interval = |k: usize| {
            let t0 = w.start + k as u64 * w.sample;
            (t0, t0 + w.sample)
        };
        let alloc = self.point_allocation(w, r, shape);
        let stand = !alloc.is_empty()
            && others.iter().all(|o| o.kind() == others[0].kind())
            && self.highest_points_stand_for(
                w,
                r,
                shape,
                &alloc,
                others[0],
                overshoot,
                (first_flush, per_interval),
            );
        if !stand {
            let mut count = 0;
            for (k, p) in mine.iter().enumerate() {
                if p.steps == 0 {
                    continue;
                }
                let fresh = others[k].with(p).fresh_for(p);
                let (t0, t1) = interval(k);
                let prob = self.p_set_pick(p, t0, t1, fresh, first_flush);
                let h = mix64(h_region ^ mix64(k as u64));
                count += u32::from(unit(mix64(h ^ SALT)) < prob);
            }
            return count;
        }
        let samples = u64::from(w.samples);
        let total: u64 = alloc.iter().sum();
        let mut p_hat = 0.0;
        let mut g = 0u64;
        for (run, &n) in shape.runs.iter().zip(&alloc) {
            let len = (run.1 - run.0) as u128;
            for j in 0..n {
                let h = mix64(h_region ^ mix64(g ^ SALT.rotate_left(17)));
                let lo = run.0 + (len * j as u128 / n as u128) as u64;
                let hi = run.0 + (len * (j + 1) as u128 / n as u128) as u64;
                let va = lo + h % (hi - lo).max(1);
                let (k0, k1) = (g * samples / total, (g + 1) * samples / total);
                let k = (k0 + mix64(h) % (k1 - k0).max(1)).min(samples - 1) as usize;
                let p = self.pick(r, shape, va, overshoot, w.flush);
                let fresh = others[k].with(&p).fresh_for(&p);
                let (t0, t1) = interval(k);
                p_hat += self.p_set_pick(&p, t0, t1, fresh, first_flush) * (hi - lo) as f64
                    / r.len() as f64;
                g += 1;
            }
        }
        (0..samples)
            .filter(|&k| unit(mix64(h_region ^ mix64(k ^ SALT))) < p_hat)
            .count() as u32
    }

    /// Points per run of the region: in proportion to its bytes, at least one; none when
    /// the region has no runs (its leaf changes within it).
    fn point_allocation(&self, w: WindowSampling, r: AddrRange, shape: &Shape) -> Vec<u64> {
        let points = u64::from(w.points.clamp(1, w.samples));
        shape
            .runs
            .iter()
            .map(|run| {
                let share = (run.1 - run.0) as f64 / r.len() as f64;
                ((points as f64 * share).round() as u64).max(1)
            })
            .collect()
    }

    /// DAMON's conditions ([`StatEngine::points_stand_for`]) on the extent of the
    /// region's entries, with each run's density spread measured at the larger of its
    /// strata and its entries' span.
    #[allow(clippy::too_many_arguments)]
    fn highest_points_stand_for(
        &self,
        w: WindowSampling,
        r: AddrRange,
        shape: &Shape,
        alloc: &[u64],
        others: PassFlush,
        overshoot: &[f64; 5],
        (first_flush, per_interval): (usize, &[Vec<u64>]),
    ) -> bool {
        let extent_of = |run: &(u64, u64, Level)| {
            let l = run.2;
            AddrRange::new(
                l.align_down(run.0),
                l.align_down(run.1 - 1).saturating_add(l.span()),
            )
        };
        let extent = shape.runs.iter().map(extent_of).fold(r, |a, b| {
            AddrRange::new(a.start.min(b.start), a.end.max(b.end))
        });
        if !intervals_alike(&self.workload.patterns, extent, per_interval) {
            return false;
        }
        let t0 = w.start + u64::from(w.samples / 2) * w.sample;
        self.workload.patterns.iter().all(|p| {
            let overlap = p.region.overlap(&extent);
            if overlap == 0 {
                return true;
            }
            if p.kind != PatternKind::Random || overlap < extent.len() {
                return false;
            }
            shape.runs.iter().zip(alloc).all(|(run, &n)| {
                let e = extent_of(run);
                let scale = ((run.1 - run.0) / n).max(run.2.span());
                let (lo, hi) = (e.start - p.region.start, e.end - p.region.start);
                match p.density.spread(lo, hi, scale) {
                    Spread::Gentle => true,
                    Spread::Peaked(densest) => {
                        let va = (p.region.start + densest).clamp(run.0, run.1 - 1);
                        let pick = self.pick(r, shape, va, overshoot, w.flush);
                        let fresh = others.with(&pick).fresh_for(&pick);
                        let q = self.p_set_pick(&pick, t0, t0 + w.sample, fresh, first_flush);
                        q * f64::from(w.samples) < NEGLIGIBLE_COUNT
                    }
                    Spread::Rough => false,
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::windows::tests::engine;
    use super::*;
    use tierscope_core::rng::Rng;
    use tierscope_core::workload::parse_masim;

    #[test]
    fn a_regions_runs_give_every_address_its_pick() {
        // Regions of every size and alignment in a 3 TiB mapping: the run holding an
        // address has the level Telescope's rule gives it, bounded and flex.
        let spec = parse_masim("cold, 1GiB\nhot, 3TiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let e = engine(&spec, 1);
        let hot = e.layout.region_starts[1];
        let root = e.paging.root();
        let mut rng = Rng::new(7);
        let flex = [0.25, 0.25, 0.15, 0.15, 0.15];
        let mut levels = [0u32; 5];
        for i in 0..2000 {
            let bits = 13 + rng.below(29);
            let len = 4096 + rng.below(1u64 << bits);
            let start = hot + rng.below((3u64 << 40) - len);
            let r = AddrRange::new(start, start + len);
            let overshoot = if i % 2 == 0 { [0.0; 5] } else { flex };
            let shape = e.shape(r, &overshoot);
            assert_eq!(shape.leaf, Some(Level::Pte));
            assert_eq!(shape.runs.first().map(|x| x.0), Some(r.start));
            assert_eq!(shape.runs.last().map(|x| x.1), Some(r.end));
            assert!(shape
                .runs
                .windows(2)
                .all(|w| w[0].1 == w[1].0 && w[0].2 != w[1].2));
            for _ in 0..20 {
                let va = rng.range(r.start, r.end);
                let want = highest_entry(r, va, Level::Pte, root, &overshoot);
                let got = e.pick(r, &shape, va, &overshoot, WindowFlush::Upper);
                assert_eq!(got.level, want, "{r:?} {va:#x} {shape:?}");
                assert_eq!(got.flush_pages > 0, want != Level::Pte);
                levels[want.index()] += 1;
            }
        }
        assert!(levels[..4].iter().all(|&n| n > 100), "{levels:?}");
    }
}
