//! The workload as access-rate densities: MASIM's phases and weighted patterns, with the
//! per-thread schedule of pattern batches simulated (one random pick per 131072 accesses,
//! the same rule as [`crate::stream`]) but no access executed.
//!
//! A thread's history is a list of [`Segment`]s: runs of accesses that all went to one
//! pattern. Within a segment a random pattern spreads its accesses over its region by its
//! density (uniform, hotspot, gaussian or zipf: [`RegionDensity::mass`] of any span is
//! O(1)) and a sequential one sweeps from a known offset, so any question about a span
//! of addresses (how many accesses landed there, did the sweep enter it) is arithmetic on
//! a handful of segments.

use crate::stream::MASIM_BATCH;
use tierscope_core::rng::{mix64, Rng, GOLDEN};
use tierscope_core::workload::{AccessMode, Density, PatternKind, RegionDensity, WorkloadSpec};
use tierscope_core::{AddrRange, Nanos};

/// One pattern of one phase, placed in the address space.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub region: AddrRange,
    pub kind: PatternKind,
    /// Where a random pattern's accesses land (uniform for sequential ones).
    pub density: RegionDensity,
    pub stride: u64,
    pub mode: AccessMode,
    /// The first pattern id with the same region, kind and density: patterns of one class
    /// give every span the same mass (a key-value store's load and store patterns over its
    /// items), so it is computed once per class.
    pub class: u32,
    /// `(max_len, below, from)`: every span of at most `max_len` bytes ending at or below
    /// address `below` or starting at or above `from` has no mass (a gaussian's far
    /// tails: [`RegionDensity::zero_mass_outside`]); None where no such zone is known.
    zero_outside: Option<(u64, u64, u64)>,
    /// Per span length of [`ZERO_SPANS`] where the density knows them (a gaussian's):
    /// where a span's mass is small, or surely above 0, without computing it.
    span_zones: Vec<SpanZones>,
}

/// A gaussian's zones for spans of one length inside its region, found once
/// ([`RegionDensity::small_mass_outside`]) so that a scan's many entries in its tails
/// skip the three exponentials of their masses.
#[derive(Debug, Clone)]
struct SpanZones {
    len: u64,
    /// `(bound, below, from)` at the levels of [`SMALL_MASSES`], nearest first: a span
    /// ending at or below `below` or starting at or above `from` has a mass of at most
    /// `bound`.
    small: Vec<(f64, u64, u64)>,
    /// `(below, from)` of [`LIVE_MASS`]: a span starting below `from` and ending above
    /// `below` has a mass above 0. On the mode's right a span short of `from` has a mass
    /// at least that of the span just before `from`, which the bisection found above
    /// [`LIVE_MASS`], less roundings of relative 1e-9; on its left likewise; a span over
    /// the mode has the most mass of all.
    live: (u64, u64),
}

/// The levels of [`SpanZones::small`]: from masses whose bound already rules out most
/// loads over a monitor's usual interval (a few milliseconds to seconds of 10 M accesses
/// per second) to the far tails, where it does for hours.
const SMALL_MASSES: [f64; 10] = [
    1e-8, 1e-10, 1e-12, 1e-14, 1e-17, 1e-20, 1e-30, 1e-50, 1e-100, 1e-200,
];

/// The level of [`SpanZones::live`]: far above the smallest f64 (1e-308), so that
/// roundings cannot take a mass above it to 0, and far below any mass an access could
/// come from.
const LIVE_MASS: f64 = 1e-290;

/// Widest spans [`Pattern::zero_outside`] is found for: a PMD entry's, then a PTE's
/// for gaussians too narrow for that.
const ZERO_SPANS: [u64; 2] = [2 << 20, 4 << 10];

impl Pattern {
    /// Whether `span` lies in the pattern's known zero zone (then [`Self::mass`] is 0).
    fn outside_mass(&self, span: AddrRange) -> bool {
        self.zero_outside.is_some_and(|(max_len, below, from)| {
            span.end - span.start <= max_len && (span.end <= below || span.start >= from)
        })
    }

    /// The zones for spans like `span`: of a length zones were found for, inside the
    /// region.
    fn zones(&self, span: AddrRange) -> Option<&SpanZones> {
        if span.start < self.region.start || span.end > self.region.end {
            return None;
        }
        let len = span.end - span.start;
        self.span_zones.iter().find(|z| z.len == len)
    }

    /// An upper bound on [`Self::mass`] of `span` without computing it, where the span lies
    /// in one of the pattern's small-mass zones (None elsewhere).
    pub fn mass_bound(&self, span: AddrRange) -> Option<f64> {
        // Zones nest outwards: the farthest that holds the span has the least bound.
        self.zones(span)?
            .small
            .iter()
            .rev()
            .find(|&&(_, below, from)| span.end <= below || span.start >= from)
            .map(|z| z.0)
    }

    /// Whether [`Self::mass`] of `span` is surely above 0, told without computing it (false:
    /// not known).
    fn surely_reached(&self, span: AddrRange) -> bool {
        self.zones(span)
            .is_some_and(|z| span.start < z.live.1 && span.end > z.live.0)
    }

    /// Fraction of its accesses that are stores.
    pub fn store_share(&self) -> f64 {
        match self.mode {
            AccessMode::Ro => 0.0,
            AccessMode::Wo => 1.0,
            AccessMode::Rw => 0.5,
        }
    }

    /// Share of a random pattern's accesses that land in `r` (clamped to the region).
    pub fn mass(&self, r: AddrRange) -> f64 {
        let (lo, hi) = (r.start.max(self.region.start), r.end.min(self.region.end));
        if hi <= lo {
            return 0.0;
        }
        self.density
            .mass(lo - self.region.start, hi - self.region.start)
    }
}

#[derive(Debug, Clone)]
struct Phase {
    /// Global pattern ids with their cumulative weights.
    patterns: Vec<(u32, u64)>,
    total_weight: u64,
    end_ns: Nanos,
}

/// The workload's static description.
#[derive(Debug, Clone)]
pub struct Workload {
    pub patterns: Vec<Pattern>,
    phases: Vec<Phase>,
    cycle_ns: Nanos,
    pub rate: u64,
    /// `rate / 1e9` in lowest terms, for [`Self::count_at`]: every read asks it twice, and
    /// in u64 it costs a division where the u128 product costs a call of the 128-bit one.
    per_ns: (u64, u64),
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Accesses `[first, first + count)` of a thread, all to `pattern`.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub first: u64,
    pub count: u64,
    pub pattern: u32,
    /// The pattern the thread ran just before (`u32::MAX` at the start).
    pub prev: u32,
    /// Sequential patterns: the offset of the first access in the region.
    pub offset: u64,
    /// Whether the first access is a store (for `rw` patterns, which alternate).
    pub first_store: bool,
}

impl Segment {
    pub fn end(&self) -> u64 {
        self.first + self.count
    }
}

impl Workload {
    pub fn new(spec: &WorkloadSpec, region_starts: &[u64], rate: u64) -> Self {
        let mut patterns = vec![];
        let mut phases = vec![];
        let mut end_ns = 0;
        let index = spec.region_indices();
        // (region, kind, density) of each class's first pattern.
        let mut classes: Vec<(usize, PatternKind, Density, u32)> = vec![];
        for p in &spec.phases {
            end_ns += p.duration.0;
            let mut cum = 0;
            let mut ids = vec![];
            for pat in &p.patterns {
                let r = index[pat.region.as_str()];
                cum += pat.weight as u64;
                ids.push((patterns.len() as u32, cum));
                let start = region_starts[r];
                let id = patterns.len() as u32;
                let class = match classes
                    .iter()
                    .find(|c| c.0 == r && c.1 == pat.kind && c.2 == pat.density)
                {
                    Some(c) => c.3,
                    None => {
                        classes.push((r, pat.kind, pat.density, id));
                        id
                    }
                };
                let density = RegionDensity::of_region(spec, pat, r);
                let zero_outside = ZERO_SPANS.iter().find_map(|&len| {
                    let (below, from) = density.zero_mass_outside(len)?;
                    Some((len, start + below, start + from))
                });
                let span_zones = ZERO_SPANS
                    .iter()
                    .filter_map(|&len| {
                        let at = |eps| {
                            let (below, from) = density.small_mass_outside(len, eps)?;
                            Some((start + below, start + from))
                        };
                        let small = SMALL_MASSES
                            .iter()
                            .map(|&eps| at(eps).map(|(b, f)| (eps * (1.0 + 1e-6), b, f)))
                            .collect::<Option<Vec<_>>>()?;
                        let live = at(LIVE_MASS)?;
                        Some(SpanZones { len, small, live })
                    })
                    .collect();
                patterns.push(Pattern {
                    region: AddrRange::new(start, start + spec.regions[r].size.0),
                    kind: pat.kind,
                    density,
                    stride: pat.stride.0,
                    mode: pat.mode,
                    class,
                    zero_outside,
                    span_zones,
                });
            }
            phases.push(Phase {
                patterns: ids,
                total_weight: cum,
                end_ns,
            });
        }
        let g = gcd(rate, 1_000_000_000).max(1);
        Workload {
            patterns,
            phases,
            cycle_ns: end_ns,
            rate,
            per_ns: (rate / g, 1_000_000_000 / g),
        }
    }

    /// Accesses a thread issued before time `t` (as [`crate::stream::AccessStream`]):
    /// `ceil(t * rate / 1e9)`, with the fraction reduced so that the product mostly fits
    /// in a u64 (at 10 M accesses per second, `ceil(t / 100)`), the same integer.
    pub fn count_at(&self, t: Nanos) -> u64 {
        let (num, den) = self.per_ns;
        match t.checked_mul(num) {
            Some(x) => x.div_ceil(den),
            None => ((t as u128 * self.rate as u128).div_ceil(1_000_000_000)) as u64,
        }
    }

    /// When access `i` of a thread happens.
    pub fn time_of(&self, i: u64) -> Nanos {
        (i as u128 * 1_000_000_000 / self.rate as u128) as u64
    }

    /// Whether any pattern of any phase touches `span` (a hotspot pattern only its hot
    /// pages: the entries of its cold pages are never set again once cleared).
    pub fn ever_touches(&self, span: AddrRange) -> bool {
        // A pattern of a class seen before gives the same answer as its first one, which
        // was false if the loop got here.
        self.patterns.iter().enumerate().any(|(id, p)| {
            p.class == id as u32
                && p.region.overlap(&span) > 0
                && (p.kind == PatternKind::Sequential
                    || p.density.is_uniform()
                    || !p.outside_mass(span) && (p.surely_reached(span) || p.mass(span) > 0.0))
        })
    }
}

/// One thread's batch schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    rng: Rng,
    pub segments: Vec<Segment>,
    issued: u64,
    phase: usize,
    cycle: u64,
    phase_end_count: u64,
    pattern: u32,
    batch_left: u64,
    /// Per global pattern id: the sequential offset where the next access goes.
    offsets: Vec<u64>,
    store_next: bool,
    /// Per global pattern id: its segments, each as (index, the pattern's accesses in
    /// the segments before it), for counting a pattern's accesses in an interval without
    /// walking the segments in between.
    by_pattern: Vec<Vec<(u32, u64)>>,
    /// Per global pattern id: its accesses among the `issued` ones.
    totals: Vec<u64>,
}

impl Schedule {
    pub fn new(w: &Workload, rng: Rng) -> Self {
        Schedule {
            rng,
            segments: vec![],
            issued: 0,
            phase: 0,
            cycle: 0,
            phase_end_count: w.count_at(w.phases[0].end_ns),
            pattern: u32::MAX,
            batch_left: 0,
            offsets: vec![0; w.patterns.len()],
            store_next: false,
            by_pattern: vec![vec![]; w.patterns.len()],
            totals: vec![0; w.patterns.len()],
        }
    }

    /// Extends the schedule until `until` accesses have been issued.
    pub fn run(&mut self, w: &Workload, until: u64) {
        while self.issued < until {
            while self.issued >= self.phase_end_count {
                self.phase += 1;
                if self.phase == w.phases.len() {
                    self.phase = 0;
                    self.cycle += 1;
                }
                let end = self.cycle * w.cycle_ns + w.phases[self.phase].end_ns;
                self.phase_end_count = w.count_at(end);
                self.batch_left = 0;
            }
            if self.batch_left == 0 {
                let ph = &w.phases[self.phase];
                let x = self.rng.below(ph.total_weight);
                let (id, _) = *ph
                    .patterns
                    .iter()
                    .find(|&&(_, cum)| x < cum)
                    .expect("x is below the total weight");
                let prev = self.pattern;
                self.pattern = id;
                self.batch_left = MASIM_BATCH;
                if prev != id {
                    let p = &w.patterns[id as usize];
                    // The pattern's previous segment is complete: another one follows it.
                    let list = &mut self.by_pattern[id as usize];
                    let before = list
                        .last()
                        .map_or(0, |&(i, c)| c + self.segments[i as usize].count);
                    list.push((self.segments.len() as u32, before));
                    self.segments.push(Segment {
                        first: self.issued,
                        count: 0,
                        pattern: id,
                        prev,
                        offset: self.offsets[id as usize],
                        first_store: match p.mode {
                            AccessMode::Ro => false,
                            AccessMode::Wo => true,
                            AccessMode::Rw => !self.store_next,
                        },
                    });
                }
            }
            let n = (until - self.issued)
                .min(self.phase_end_count - self.issued)
                .min(self.batch_left);
            self.batch_left -= n;
            self.issued += n;
            let seg = self.segments.last_mut().expect("a segment was opened");
            seg.count += n;
            self.totals[self.pattern as usize] += n;
            let p = &w.patterns[self.pattern as usize];
            if p.kind == PatternKind::Sequential {
                let size = p.region.len();
                let o = &mut self.offsets[self.pattern as usize];
                *o = ((*o as u128 + n as u128 * p.stride as u128) % size as u128) as u64;
            }
            if p.mode == AccessMode::Rw && n % 2 == 1 {
                self.store_next = !self.store_next;
            }
        }
    }

    /// The segments overlapping accesses `[ia, ib)`, each with the part of it inside:
    /// `(segment, first, end)`, `first < end`.
    pub fn overlapping(&self, ia: u64, ib: u64) -> impl Iterator<Item = (Segment, u64, u64)> + '_ {
        self.segments[self.find(ia)..]
            .iter()
            .take_while(move |s| s.first < ib)
            .map(move |&s| (s, s.first.max(ia), s.end().min(ib)))
            .filter(|&(_, x, y)| x < y)
    }

    /// Accesses of pattern `pattern` among the thread's accesses `[0, i)`.
    pub fn pattern_accesses_before(&self, pattern: u32, i: u64) -> u64 {
        if i >= self.issued {
            // Every read asks for the counts up to now, which the schedule keeps.
            return self.totals[pattern as usize];
        }
        let list = &self.by_pattern[pattern as usize];
        let k = partition_point_near(list, self.guess(list.len(), i), |&(j, _)| {
            self.segments[j as usize].first < i
        });
        if k == 0 {
            return 0;
        }
        let (j, before) = list[k - 1];
        let seg = &self.segments[j as usize];
        before + seg.count.min(i - seg.first)
    }

    /// Index of the first segment that ends after access `i`.
    pub fn find(&self, i: u64) -> usize {
        let guess = self.guess(self.segments.len(), i);
        partition_point_near(&self.segments, guess, |s| s.end() <= i)
    }

    /// Where access `i` falls in a list of `len` items spread over the accesses issued so
    /// far in proportion to time (segments, or one pattern's segments): a search's start.
    fn guess(&self, len: usize, i: u64) -> usize {
        if self.issued == 0 {
            return 0;
        }
        (len as f64 * (i.min(self.issued) as f64 / self.issued as f64)) as usize
    }
}

/// Remembered answers of [`Schedule::find`] and [`Schedule::pattern_accesses_before`]
/// for accesses already issued, which never change as the schedule grows (its last
/// segment only lengthens past them). The reads of one monitor pass ask the same
/// questions over and over: every entry it cleared together has the same start (a check
/// pass, a leaf table's 512 entries), and entries re-picked every few passes bring back
/// a few hundred starts. A direct-mapped table of them makes those searches, with
/// their cache misses in the segment lists, a hash and one compare.
#[derive(Debug, Clone)]
pub struct Lookups {
    /// (tag, access, answer); a tag of 0 is an empty slot.
    slots: Vec<(u64, u64, u64)>,
}

/// Slots of [`Lookups`] (48 KiB: a pass's starts and their patterns fit).
const LOOKUP_SLOTS: usize = 1 << 12;

impl Default for Lookups {
    fn default() -> Self {
        Lookups {
            slots: vec![(0, 0, 0); LOOKUP_SLOTS],
        }
    }
}

impl Lookups {
    /// The answer for (`tag`, `i`) from `compute`, remembered; `tag` is nonzero and names
    /// the schedule and the question, and the answer must not change once asked.
    fn get(&mut self, tag: u64, i: u64, compute: impl FnOnce() -> u64) -> u64 {
        let h = mix64(i ^ tag.wrapping_mul(GOLDEN)) as usize & (LOOKUP_SLOTS - 1);
        let slot = &mut self.slots[h];
        if slot.0 == tag && slot.1 == i {
            return slot.2;
        }
        let v = compute();
        *slot = (tag, i, v);
        v
    }

    /// [`Schedule::find`] of schedule number `sched`, `s`.
    pub fn find(&mut self, sched: usize, s: &Schedule, i: u64) -> usize {
        if i >= s.issued {
            return s.find(i);
        }
        self.get((sched as u64) << 32 | 1, i, || s.find(i) as u64) as usize
    }

    /// [`Schedule::pattern_accesses_before`] of schedule number `sched`, `s`.
    pub fn pattern_accesses_before(
        &mut self,
        sched: usize,
        s: &Schedule,
        pattern: u32,
        i: u64,
    ) -> u64 {
        if i >= s.issued {
            return s.pattern_accesses_before(pattern, i);
        }
        let tag = (sched as u64) << 32 | (pattern as u64 + 2);
        self.get(tag, i, || s.pattern_accesses_before(pattern, i))
    }
}

/// `slice.partition_point(pred)`, found by galloping out from `guess` and then bisecting
/// the bracket: O(log d) probes for an answer `d` items from the guess. A run's
/// segments grow with its length (hundreds of thousands of them over 40 minutes), and
/// bisecting all of them from the middle costs a chain of cache misses per read, where
/// the guess from the access's time is usually a few items off.
pub fn partition_point_near<T>(slice: &[T], guess: usize, pred: impl Fn(&T) -> bool) -> usize {
    let n = slice.len();
    let g = guess.min(n);
    // Invariant of the bracket [lo, hi): pred holds before lo and fails from hi on.
    let (mut lo, mut hi);
    if g < n && pred(&slice[g]) {
        (lo, hi) = (g + 1, n);
        let mut step = 1;
        while lo + step <= n {
            if !pred(&slice[lo + step - 1]) {
                hi = lo + step - 1;
                break;
            }
            lo += step;
            step *= 2;
        }
    } else {
        (lo, hi) = (0, g);
        let mut step = 1;
        while step <= hi {
            if pred(&slice[hi - step]) {
                lo = hi - step + 1;
                break;
            }
            hi -= step;
            step *= 2;
        }
    }
    lo + slice[lo..hi].partition_point(pred)
}

/// Accesses of a sequential sweep that start in `[lo, hi)` (offsets in the region), among
/// `n` accesses starting at `offset` with `stride` in a region of `size` bytes: whether
/// any does. Exact for up to four laps; longer sweeps pass every window of at least a
/// stride, and narrower windows are assumed to be hit too (a sweep whose stride skips a
/// span forever is not a MASIM pattern anyone runs).
pub fn sweep_hits(offset: u64, stride: u64, size: u64, n: u64, lo: u64, hi: u64) -> bool {
    if n == 0 || hi <= lo {
        return false;
    }
    let total = n as u128 * stride as u128;
    if total >= 4 * size as u128 {
        return true;
    }
    let last = offset as u128 + (n as u128 - 1) * stride as u128;
    // Unwrapped positions offset + k * stride, k in [0, n); the window repeats per lap.
    let mut lap = 0u128;
    while lap * size as u128 <= last {
        let (a, b) = (
            lap * size as u128 + lo as u128,
            lap * size as u128 + hi as u128,
        );
        if b > offset as u128 {
            // First k with position >= a.
            let k = if a <= offset as u128 {
                0
            } else {
                (a - offset as u128).div_ceil(stride as u128)
            };
            let pos = offset as u128 + k * stride as u128;
            if k < n as u128 && pos < b {
                return true;
            }
        }
        lap += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::parse_masim;
    use tierscope_core::Level;

    #[test]
    fn partition_point_near_answers_as_bisection_from_any_guess() {
        // Sorted lists with repeats, every threshold and every guess (past the end too).
        let mut rng = Rng::new(3);
        for n in [0usize, 1, 2, 3, 7, 64, 200] {
            let mut v: Vec<u64> = (0..n).map(|_| rng.below(50)).collect();
            v.sort_unstable();
            for x in 0..=51 {
                let want = v.partition_point(|&e| e < x);
                for guess in 0..=n + 2 {
                    assert_eq!(
                        partition_point_near(&v, guess, |&e| e < x),
                        want,
                        "{v:?} {x} {guess}"
                    );
                }
            }
        }
    }

    #[test]
    fn lookups_answer_as_the_searches_while_the_schedule_grows() {
        // Three patterns; questions about accesses issued so far, asked repeatedly (so
        // remembered and answered from the table) while the schedule keeps growing, and
        // about accesses not yet issued (never remembered).
        let spec = parse_masim(
            "a, 1GiB\nb, 1GiB\nc, 1GiB\n\np\n100\na, 1, 4096, 3\nb, 1, 4096, 1\nc, 1, 4096, 1\n",
        )
        .unwrap();
        let w = Workload::new(&spec, &[0, 1 << 30, 2 << 30], 10_000_000);
        let mut s = Schedule::new(&w, Rng::new(3));
        let mut lookups = Lookups::default();
        let mut rng = Rng::new(8);
        let mut asked: Vec<u64> = vec![];
        for round in 1..=20u64 {
            s.run(&w, round * 250_000);
            for _ in 0..300 {
                // Mostly earlier questions again, some new ones, some past the end.
                let i = match rng.below(4) {
                    0 | 1 if !asked.is_empty() => asked[rng.below(asked.len() as u64) as usize],
                    _ => rng.below(round * 250_000 + 100_000),
                };
                asked.push(i);
                assert_eq!(lookups.find(0, &s, i), s.find(i), "find({i})");
                for p in 0..3 {
                    assert_eq!(
                        lookups.pattern_accesses_before(0, &s, p, i),
                        s.pattern_accesses_before(p, i),
                        "pattern {p} before {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn ever_touches_answers_as_the_masses_in_the_tails_zone() {
        // Gaussians wide and narrow (the zone kept for PMD spans, or only PTE ones), over
        // a uniform pattern of another region and a second gaussian class: spans of
        // every level near the zones' edges and anywhere, against the masses.
        let spec = parse_masim(
            "a, 64GiB\nb, 1GiB\nc, 16GiB\n\np\n100\na, 1, 4096, 3\nb, 1, 4096, 1\nc, 1, 4096, 1\n",
        )
        .unwrap();
        let starts = [1 << 40, 1 << 41, 3 << 40];
        for sigma in [0.003, 1e-5] {
            let mut spec = spec.clone();
            for (i, mean) in [(0, 0.4), (2, 0.9)] {
                spec.phases[0].patterns[i].density = Density::Gaussian { mean, sigma };
            }
            let w = Workload::new(&spec, &starts, 10_000_000);
            let by_masses = |span: AddrRange| {
                w.patterns.iter().enumerate().any(|(id, p)| {
                    p.class == id as u32
                        && p.region.overlap(&span) > 0
                        && (p.density.is_uniform() || p.mass(span) > 0.0)
                })
            };
            let edges: Vec<u64> = w
                .patterns
                .iter()
                .filter_map(|p| p.zero_outside)
                .flat_map(|(_, below, from)| [below, from])
                .collect();
            assert_eq!(edges.len(), 4, "both gaussians have a zone");
            // And the edges of the zones where a span is surely reached.
            let live_edges: Vec<u64> = w
                .patterns
                .iter()
                .flat_map(|p| &p.span_zones)
                .flat_map(|z| [z.live.0, z.live.1])
                .collect();
            assert!(live_edges.len() >= 4, "{live_edges:?}");
            let mut rng = Rng::new(6);
            let mut live = [0; 2];
            for _ in 0..30_000 {
                let level = [Level::Pte, Level::Pmd, Level::Pud][rng.below(3) as usize];
                let near = match rng.below(4) {
                    0 => starts[rng.below(3) as usize] + rng.below(64 << 30),
                    1 => {
                        live_edges[rng.below(live_edges.len() as u64) as usize] + rng.below(8 << 20)
                            - (4 << 20)
                    }
                    _ => edges[rng.below(4) as usize] + rng.below(8 << 20) - (4 << 20),
                };
                let start = level.align_down(near);
                let span = AddrRange::new(start, start + level.span());
                let got = w.ever_touches(span);
                assert_eq!(got, by_masses(span), "{sigma} {span:?}");
                live[got as usize] += 1;
            }
            assert!(live.iter().all(|&n| n > 3_000), "{live:?}");
        }
    }

    #[test]
    fn span_zones_bound_the_masses_and_tell_reached_spans() {
        // Gaussians of several widths (zones for PMD and PTE spans, or PTE ones only),
        // one off the region's end: spans of every level at and around each zone's edges
        // and anywhere. A bound is never below the mass, a span told reached has mass, and
        // both are told often.
        let spec =
            parse_masim("a, 64GiB\nb, 1GiB\n\np\n100\na, 1, 4096, 3\nb, 1, 4096, 1\n").unwrap();
        let starts = [1 << 40, 1 << 41];
        for (mean, sigma) in [(0.5, 0.0005), (0.4, 0.003), (0.95, 1e-5)] {
            let mut spec = spec.clone();
            spec.phases[0].patterns[0].density = Density::Gaussian { mean, sigma };
            let w = Workload::new(&spec, &starts, 10_000_000);
            let g = &w.patterns[0];
            assert!(!g.span_zones.is_empty());
            assert!(w.patterns[1].span_zones.is_empty(), "a uniform has none");
            let edges: Vec<u64> = g
                .span_zones
                .iter()
                .flat_map(|z| {
                    z.small
                        .iter()
                        .flat_map(|&(_, b, f)| [b, f])
                        .chain([z.live.0, z.live.1])
                })
                .collect();
            let mut rng = Rng::new(14);
            let (mut bounded, mut reached, mut tight) = (0, 0, 0);
            for _ in 0..40_000 {
                let level = [Level::Pte, Level::Pte, Level::Pmd, Level::Pud][rng.below(4) as usize];
                let near = match rng.below(3) {
                    0 => starts[0] + rng.below(64 << 30),
                    _ => {
                        edges[rng.below(edges.len() as u64) as usize] + rng.below(8 << 20)
                            - (4 << 20)
                    }
                };
                let start = level.align_down(near);
                let span = AddrRange::new(start, start + level.span());
                let m = g.mass(span);
                if let Some(b) = g.mass_bound(span) {
                    assert!(m <= b, "{sigma} {span:?}: {m} > {b}");
                    bounded += 1;
                    // The bound is the zone's: within a hundred-fold of the mass for
                    // spans past the nearest levels.
                    tight += (m * 100.0 >= b) as u32;
                }
                if g.surely_reached(span) {
                    assert!(m > 0.0, "{sigma} {span:?}");
                    reached += 1;
                }
            }
            assert!(bounded > 5_000 && reached > 5_000, "{bounded} {reached}");
            assert!(tight > 1_000, "{tight}");
        }
    }

    #[test]
    fn schedule_follows_phases_and_batches() {
        let spec = parse_masim(
            "a, 1GiB\nb, 1GiB\n\np1\n100\na, 1, 4096, 1\nb, 1, 4096, 1\n\np2\n100\nb, 0, 4096, 1\n",
        )
        .unwrap();
        let w = Workload::new(&spec, &[0, 1 << 30], 10_000_000);
        let mut s = Schedule::new(&w, Rng::new(1));
        s.run(&w, 2_000_000);
        let segs = &s.segments;
        assert_eq!(segs.iter().map(|s| s.count).sum::<u64>(), 2_000_000);
        // Phase 1 ends at 1M accesses: batches are cut there.
        assert!(segs.iter().any(|s| s.end() == 1_000_000));
        assert!(segs
            .iter()
            .filter(|s| s.first >= 1_000_000)
            .all(|s| s.pattern == 2));
        // Segments are contiguous and alternate patterns.
        for p in segs.windows(2) {
            assert_eq!(p[0].end(), p[1].first);
            assert_ne!(p[0].pattern, p[1].pattern);
            assert_eq!(p[1].prev, p[0].pattern);
        }
    }

    #[test]
    fn pattern_counts_match_the_segments() {
        let spec = parse_masim(
            "a, 1GiB\nb, 1GiB\nc, 1GiB\n\np\n100\na, 1, 4096, 3\nb, 1, 4096, 1\nc, 1, 4096, 1\n",
        )
        .unwrap();
        let w = Workload::new(&spec, &[0, 1 << 30, 2 << 30], 10_000_000);
        let mut s = Schedule::new(&w, Rng::new(3));
        s.run(&w, 5_000_000);
        let mut rng = Rng::new(4);
        for _ in 0..200 {
            let i = rng.below(5_000_001);
            for p in 0..3 {
                let by_walk: u64 = s
                    .segments
                    .iter()
                    .filter(|g| g.pattern == p && g.first < i)
                    .map(|g| g.count.min(i - g.first))
                    .sum();
                assert_eq!(s.pattern_accesses_before(p, i), by_walk, "{p} {i}");
            }
        }
    }

    #[test]
    fn count_at_is_the_exact_quotient() {
        // Rates sharing every kind of factor with 1e9 (and none), times small, large and
        // past where the reduced product overflows: the same integer as the u128 formula.
        let spec = parse_masim("a, 1GiB\n\np\n100\na, 1, 4096, 1\n").unwrap();
        let mut rng = Rng::new(15);
        for rate in [
            10_000_000,
            1,
            7,
            1_000_000_000,
            3_000_000_007,
            123_456_789,
            1 << 40,
        ] {
            let w = Workload::new(&spec, &[0], rate);
            for i in 0..20_000 {
                let t = match i % 4 {
                    0 => rng.below(1 << 20),
                    1 => rng.next_u64() >> rng.below(64),
                    2 => u64::MAX - rng.below(1 << 20),
                    _ => rng.below(3_000_000_000_000),
                };
                let want = (t as u128 * rate as u128).div_ceil(1_000_000_000) as u64;
                assert_eq!(w.count_at(t), want, "{rate} {t}");
            }
        }
    }

    #[test]
    fn sweeps() {
        // 8 accesses of stride 10 from 0 in a 100-byte region: 0, 10, ..., 70.
        assert!(sweep_hits(0, 10, 100, 8, 65, 75));
        assert!(!sweep_hits(0, 10, 100, 8, 75, 100));
        assert!(!sweep_hits(0, 10, 100, 8, 71, 79));
        // Wrapping: from 90, positions 90, 0, 10.
        assert!(sweep_hits(90, 10, 100, 3, 5, 15));
        assert!(!sweep_hits(90, 10, 100, 3, 15, 85));
    }
}
