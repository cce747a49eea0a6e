//! Whether the page walker loaded a cleared entry: the probability that no access since
//! the clear made a walk that loads it.
//!
//! An access inside the entry's span loads the entry when it misses the TLB and every
//! paging-structure cache at or below the entry's level (mmu.rs: the walk starts below the
//! deepest cached level). For a random pattern each access lands in the span with
//! probability `share` = the density's mass of `span ∩ region` (`|span ∩ region| /
//! |region|` for a uniform one) and then loads the entry with
//! probability `q` from [`RegionCaches::load_probability`]; accesses are independent, so
//! `n` of them leave the entry alone with probability `(1 - share * q)^n`.
//!
//! What invalidates the caches for the span makes the next walk into it load the entry:
//! - a full flush empties every cache;
//! - INVLPG drops every paging-structure-cache entry (and the flushed pages' TLB entries);
//! - a thread switching to a pattern over the span after running one elsewhere whose
//!   footprint fills a cache has pushed the span's keys out of that cache.
//!
//! Those caches are "fresh" for the span until a walk into it, and while the entry is
//! unloaded no such walk happened, so the state persists until the entry is loaded.
//! Flush freshness is stored with the entry; switch freshness is re-derived from the
//! segments of each evaluation window (a cleared entry is normally read once, one sampling
//! interval after its clear).
//!
//! A sequential sweep loads the entry when it enters the span while the caches are fresh,
//! or, in the steady state, when it enters the span and one lap over the region
//! overflows every cache involved (LRU under a cyclic sweep larger than the cache misses
//! on every new key; a smaller one hits forever).

use super::caches::RegionCaches;
use super::density::{sweep_hits, Lookups, Pattern, Schedule, Workload};
use super::entries::FastMap;
use tierscope_core::workload::PatternKind;
use tierscope_core::{AddrRange, Level};

/// What a flush invalidated.
#[derive(Debug, Clone, Copy)]
pub enum FlushKind {
    All,
    /// INVLPG of every 4 KiB page in the range.
    Pages {
        start: u64,
        end: u64,
    },
}

/// A flush, at the access index from which it applies.
#[derive(Debug, Clone, Copy)]
pub struct FlushEvent {
    pub seq: u64,
    pub at: u64,
    pub kind: FlushKind,
}

/// Every cache index fresh.
pub const ALL_FRESH: u8 = 0x1f;

/// The caches `kind` leaves holding nothing for the span of the entry at `level`.
pub fn flush_mask(kind: FlushKind, level: Level, leaf: Level, span: AddrRange) -> u8 {
    match kind {
        FlushKind::All => ALL_FRESH,
        FlushKind::Pages { start, end } => {
            let psc = ALL_FRESH & !1;
            let tlb = level == leaf && AddrRange::new(start, end).overlap(&span) > 0;
            psc | tlb as u8
        }
    }
}

/// A total log-probability of no load at or below which a load is certain in f64
/// (`-expm1(-40) == 1.0`).
const CERTAIN_LOAD: f64 = -40.0;

/// The entry being evaluated.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub level: Level,
    /// The page-table level of the leaf mapping the span.
    pub leaf: Level,
    pub span: AddrRange,
    /// Only stores count (the DIRTY bit).
    pub stores_only: bool,
}

/// Everything the evaluation reads.
pub struct World<'a> {
    pub workload: &'a Workload,
    pub caches: &'a [RegionCaches],
    pub schedules: &'a [Schedule],
}

fn needed_mask(c: &RegionCaches, level: Level) -> u8 {
    c.needed(level).fold(0u8, |m, i| m | 1 << i)
}

/// ln of the probability that no access in `[ia, ib)` loaded the entry, given the flush
/// freshness `fresh` at `ia` and the flushes (sorted, applying from their `at`) after it.
pub fn log_no_load(
    w: &World,
    t: Target,
    ia: u64,
    ib: u64,
    fresh: u8,
    flushes: &[FlushEvent],
) -> f64 {
    log_no_load_in(w, None, t, ia, ib, fresh, flushes, None)
}

/// Whether a walk loaded the entry, for the uniform draw `u`: `u < -expm1(ln)` of
/// [`log_no_load`]'s `ln`, the same answer, with the schedules' searches remembered in
/// `lookups` across calls (the engine's reads, which repeat them), with what the engine
/// knows of the span ([`SpanFacts`]: `worst` may be any value at or above the facts',
/// `mass` NaN when not known), and without evaluating the interval where [`load_bound`]
/// of `worst` already says no: most reads of a still-clear entry (a cold one re-picked,
/// a warm one read one sampling interval after its clear) draw above any probability the
/// interval could give.
#[allow(clippy::too_many_arguments)]
pub fn loaded_remembered(
    w: &World,
    lookups: &mut Lookups,
    t: Target,
    ia: u64,
    ib: u64,
    fresh: u8,
    flushes: &[FlushEvent],
    u: f64,
    span: SpanFacts,
) -> bool {
    let threads = w.schedules.len() as u64;
    if u >= load_bound(span.worst, (ib - ia) * threads) {
        return false;
    }
    let one_mass = (!span.mass.is_nan()).then_some(span.mass);
    u < -log_no_load_in(w, Some(lookups), t, ia, ib, fresh, flushes, one_mass).exp_m1()
}

/// What a read needs of its entry's span besides the interval: a function of the span
/// and the workload's patterns (every phase's), fixed for the whole run, so an engine
/// keeps the bound with the entry instead of computing masses (a gaussian's costs three
/// exponentials) at every read, and hands the first read's mass to its evaluation.
#[derive(Debug, Clone, Copy)]
pub struct SpanFacts {
    /// The largest `m / (1 - m)` over the masses `m` of the patterns over the span
    /// (infinite for a mass of 1), or infinity when a sequential sweep reaches the span:
    /// a sweep loads the entry for certain once it enters the span, so it has no bound.
    pub worst: f64,
    /// The span's mass when every pattern over it is random and of one class (they all
    /// give it that mass, the only one an evaluation asks for); NaN otherwise.
    pub mass: f64,
}

/// The [`SpanFacts`] of `span`.
pub fn span_facts(w: &Workload, span: AddrRange) -> SpanFacts {
    // Patterns of a class give the span the same mass: each class once, by its first
    // pattern (a key-value store's loads and stores are one class).
    let classes = || {
        w.patterns
            .iter()
            .enumerate()
            .filter(|&(id, p)| p.class == id as u32 && p.region.overlap(&span) > 0)
            .map(|(_, p)| p)
    };
    if classes().any(|p| p.kind == PatternKind::Sequential) {
        return SpanFacts {
            worst: f64::INFINITY,
            mass: f64::NAN,
        };
    }
    let (mut worst, mut count, mut mass) = (0.0f64, 0, f64::NAN);
    for p in classes() {
        let m = p.mass(span);
        worst = worst.max(if m >= 1.0 {
            f64::INFINITY
        } else {
            m / (1.0 - m)
        });
        (count, mass) = (count + 1, m);
    }
    SpanFacts {
        worst,
        mass: if count == 1 { mass } else { f64::NAN },
    }
}

/// An upper bound on [`span_facts`]'s `worst` of `span` from the patterns' small-mass
/// zones ([`Pattern::mass_bound`]) without computing a mass: None where a pattern over the
/// span sweeps it or has no zone holding it.
pub fn worst_bound(w: &Workload, span: AddrRange) -> Option<f64> {
    let mut worst = 0.0f64;
    for (id, p) in w.patterns.iter().enumerate() {
        if p.class != id as u32 || p.region.overlap(&span) == 0 {
            continue;
        }
        if p.kind == PatternKind::Sequential {
            return None;
        }
        // `m / (1 - m)` grows with `m`: a bound on the mass bounds it.
        let m = p.mass_bound(span)?;
        worst = worst.max(m / (1.0 - m));
    }
    Some(worst)
}

/// Whether the draw `u` is at or above [`load_bound`] of [`worst_bound`]: then no walk
/// loaded the entry over `accesses` accesses, as [`loaded_remembered`] would answer, told
/// without the span's masses (three exponentials each for a gaussian, on the first read
/// of every entry a scan clears in its tails).
pub fn unloaded_by_zones(w: &Workload, span: AddrRange, u: f64, accesses: u64) -> bool {
    worst_bound(w, span).is_some_and(|b| u >= load_bound(b, accesses))
}

/// An upper bound on the probability that `accesses` accesses (of every thread) load
/// the entry, from `worst`, [`SpanFacts::worst`] of its span (infinity: no bound): each
/// access of a random pattern lands in the span with probability `share * m <= m` and
/// loads it with `q <= 1`, so each term of [`log_no_load`] is at least `-n m / (1 - m)`
/// (`ln(1 - x) >= -x / (1 - x)`, and the renewal model's `-mu + tail >= -mu`), its total
/// at least `-accesses * worst`, and the probability of a load, `-expm1(total) <=
/// -total`, at most that. The relative and absolute slack cover the rounding of the
/// terms, far below the bound's own slack. An entry no pattern reaches has a total of 0
/// whatever the bound.
pub fn load_bound(worst: f64, accesses: u64) -> f64 {
    // With no accesses an infinite `worst` gives NaN, which no draw is at or above.
    worst * accesses as f64 * (1.0 + 1e-9) + 1e-12
}

/// [`log_no_load`], with the engine's remembered searches when given, and the span's
/// mass where every pattern over it gives it the same one (`one_mass`).
#[allow(clippy::too_many_arguments)]
fn log_no_load_in(
    w: &World,
    mut lookups: Option<&mut Lookups>,
    t: Target,
    ia: u64,
    ib: u64,
    fresh: u8,
    flushes: &[FlushEvent],
    one_mass: Option<f64>,
) -> f64 {
    let key = t.span.start >> t.level.span_shift();
    let inside_of = |p: &Pattern| {
        AddrRange::new(
            t.span.start.max(p.region.start),
            t.span.end.min(p.region.end),
        )
    };
    // The mass of the span under a pattern is the same in every segment of the pattern:
    // remember the last few (a gaussian's costs three exponentials).
    let mut memo = [(u32::MAX, 0.0f64); 4];
    // Keyed by the pattern's class: patterns of a class give a span the same mass.
    let mut mass_of = |p: &Pattern, inside: AddrRange| {
        if let Some(m) = one_mass {
            return m;
        }
        if let Some(&(_, m)) = memo.iter().find(|e| e.0 == p.class) {
            return m;
        }
        let m = p.mass(inside);
        memo.rotate_right(1);
        memo[0] = (p.class, m);
        m
    };
    // The probability that an access of pattern `p` inside the span loads the entry,
    // given the caches fresh in `f`: the same for every pattern of a class (their cache
    // models are built from the same region and density), so remembered per (class, f)
    // with the leaf model's first-access factor (walks of one read see a few of each).
    let mut qmemo = [(u32::MAX, 0u8, Q::default()); 4];
    let mut q_of = |p: &Pattern, c: &RegionCaches, inside: AddrRange, f: u8| {
        if let Some(&(_, _, q)) = qmemo.iter().find(|e| e.0 == p.class && e.1 == f) {
            return q;
        }
        let q = Q::new(c.load_probability(t.level, key, inside, f));
        qmemo.rotate_right(1);
        qmemo[0] = (p.class, f, q);
        q
    };
    // An entry no pattern can reach (random patterns whose density has no mass on its
    // span, a gaussian's far tail) is never loaded, however long the interval: every term
    // below would be zero. Answering that up front keeps reads of long-unread cold
    // entries from walking every segment and flush since (their number grows with the
    // run).
    //
    // Only asked for DIRTY bits: an ACCESSED bit tracked as cleared is never dead (the
    // engine keeps dead entries apart), and a span some pattern ever touches is one a
    // pattern reaches here (the same masses), so the answer is known to be yes.
    let reachable = !t.stores_only
        || w.workload.patterns.iter().any(|p| {
            p.region.overlap(&t.span) > 0
                && (p.kind == PatternKind::Sequential
                    || (!(t.stores_only && p.store_share() == 0.0)
                        && mass_of(p, inside_of(p)) > 0.0))
        });
    if !reachable {
        return 0.0;
    }
    // Once every cache is fresh for the span nothing can change that (freshness only
    // grows), and each access of a random pattern then loads the entry with its share of
    // the pattern's mass alone: the rest of the interval is linear in each pattern's
    // access count, which the schedule counts without walking its segments and the
    // flushes between them (a read long after the clear would otherwise walk hundreds).
    // Sequential sweeps depend on where each segment starts, so they keep the walk.
    let sweeps_reach = w
        .workload
        .patterns
        .iter()
        .any(|p| p.kind == PatternKind::Sequential && p.region.overlap(&t.span) > 0);
    let mut total = 0.0f64;
    for (sn, sched) in w.schedules.iter().enumerate() {
        let segs = &sched.segments;
        let mut si = match lookups.as_deref_mut() {
            Some(l) => l.find(sn, sched, ia),
            None => sched.find(ia),
        };
        let mut fi = 0usize;
        let mut f = fresh;
        let mut x = ia;
        while x < ib && si < segs.len() {
            let seg = segs[si];
            let p = &w.workload.patterns[seg.pattern as usize];
            let overlap = p.region.overlap(&t.span);
            if seg.first >= ia && seg.first == x && overlap > 0 {
                // The thread switched to this pattern: caches filled by the previous one
                // hold nothing of this span.
                let prev_touches = seg.prev != u32::MAX
                    && w.workload.patterns[seg.prev as usize]
                        .region
                        .overlap(&t.span)
                        > 0;
                if !prev_touches {
                    f |= if seg.prev == u32::MAX {
                        ALL_FRESH
                    } else {
                        w.caches[seg.prev as usize].evict_mask()
                    };
                }
            }
            // Once every cache is fresh (and no sweep needs the flushes to cut segments)
            // the rest of the interval is linear below and the flushes left change
            // nothing: NUMA hinting's read of a scan's batch follows the scan's own full
            // flush and then thousands of page flushes of the promotions issued at the
            // same access index, which each read would otherwise apply one by one.
            while fi < flushes.len() && flushes[fi].at <= x && (f != ALL_FRESH || sweeps_reach) {
                f |= flush_mask(flushes[fi].kind, t.level, t.leaf, t.span);
                fi += 1;
            }
            if f == ALL_FRESH && !sweeps_reach {
                for (id, p) in w.workload.patterns.iter().enumerate() {
                    let share = if t.stores_only { p.store_share() } else { 1.0 };
                    if p.region.overlap(&t.span) == 0 || share == 0.0 {
                        continue;
                    }
                    let mut before = |i| match lookups.as_deref_mut() {
                        Some(l) => l.pattern_accesses_before(sn, sched, id as u32, i),
                        None => sched.pattern_accesses_before(id as u32, i),
                    };
                    let n = before(ib) - before(x);
                    if n > 0 {
                        let (inside, c) = (inside_of(p), &w.caches[id]);
                        let mass = mass_of(p, inside);
                        let q = q_of(p, c, inside, f);
                        total += random_term(t, p, c, (share, mass), n, q);
                    }
                }
                if total <= CERTAIN_LOAD {
                    return total;
                }
                break;
            }
            let mut y = seg.end().min(ib);
            if fi < flushes.len() && flushes[fi].at < y {
                y = flushes[fi].at;
            }
            let n = y - x;
            if n > 0 && overlap > 0 {
                let share = if t.stores_only { p.store_share() } else { 1.0 };
                let c = &w.caches[seg.pattern as usize];
                if share > 0.0 {
                    match p.kind {
                        PatternKind::Random => {
                            let inside = inside_of(p);
                            let mass = mass_of(p, inside);
                            let q = q_of(p, c, inside, f);
                            total += random_term(t, p, c, (share, mass), n, q);
                            if total == f64::NEG_INFINITY {
                                return total;
                            }
                        }
                        PatternKind::Sequential => {
                            let size = p.region.len();
                            let off = ((seg.offset as u128
                                + (x - seg.first) as u128 * p.stride as u128)
                                % size as u128) as u64;
                            let lo = t.span.start.max(p.region.start) - p.region.start;
                            let hi = t.span.end.min(p.region.end) - p.region.start;
                            let need = needed_mask(c, t.level);
                            let loaded = if f & need != 0 {
                                sweep_hits(off, p.stride, size, n, lo, hi)
                            } else {
                                c.evict_mask() & need == need
                                    && sweep_hits(
                                        off,
                                        p.stride,
                                        size,
                                        n,
                                        lo,
                                        lo + p.stride.min(hi - lo),
                                    )
                            };
                            if loaded {
                                return f64::NEG_INFINITY;
                            }
                        }
                    }
                }
            }
            // Terms only lower the total; below this the caller's probability of a load,
            // `-expm1(total)`, is exactly 1.0 in f64, so the rest cannot change the answer.
            if total <= CERTAIN_LOAD {
                return total;
            }
            x = y;
            if x >= seg.end() {
                si += 1;
            }
        }
    }
    total
}

/// A load probability `q` with what [`leaf_log_no_load`] derives from it alone.
#[derive(Debug, Clone, Copy, Default)]
struct Q {
    q: f64,
    /// `1 - q`.
    h: f64,
    /// The first access's hit probability over the others', `(1 - q (1 - ln q)) / h`
    /// (when `h > 0`).
    a: f64,
}

impl Q {
    fn new(q: f64) -> Self {
        let h = 1.0 - q;
        let a = if h <= 0.0 {
            0.0
        } else {
            (1.0 - q * (1.0 - q.ln())) / h
        };
        Q { q, h, a }
    }
}

/// ln of the probability that `n` accesses of the random pattern `p` leave the entry
/// unloaded: each lands in the span with probability `share` (1, or the pattern's store
/// share when only stores count) times the span's `mass`, and then loads the entry with
/// the probability `q` the caches `c` give; `-inf` for a certain load.
fn random_term(
    t: Target,
    p: &Pattern,
    c: &RegionCaches,
    (share, mass): (f64, f64),
    n: u64,
    q: Q,
) -> f64 {
    // `share` is 1 or 1/2: scaling the mass by it rounds exactly as scaling the overlap
    // did before densities existed.
    let s = share * mass;
    // The renewal model follows one TLB key; a guest huge page splintered into 512 keys
    // keeps independent misses (its accesses spread over the keys).
    if t.level == t.leaf && share == 1.0 && !p.density.is_uniform() && c.leaf_is_one_key(t.leaf) {
        return leaf_log_no_load(n as f64 * s, q);
    }
    let sq = (s * q.q).min(1.0);
    if sq >= 1.0 {
        return f64::NEG_INFINITY;
    }
    n as f64 * (-sq).ln_1p()
}

/// ln of the probability that `mu` expected accesses to one leaf page (one TLB key), which
/// misses the TLB with probability `q`, leave its entry unloaded, under LRU rather than
/// independent misses. Che's model says the key stays cached for `T` accesses after each
/// reference, `q = exp(-r T)`. Its references are a Poisson stream, so each later access
/// hits when the gap since the previous one is below `T` (probability `h = 1 - q`), but
/// the first access after an arbitrary moment (the clear) closes the gap that straddles
/// that moment, which is size-biased: it hits with probability
/// `h1 = 1 - q (1 - ln q)`. With `k ~ Poisson(mu)` accesses, none loads with probability
/// `e^-mu (1 + h1 / h (e^(mu h) - 1))`. Independent misses would say `e^(-mu q)`, up to
/// 0.1 too likely for a page the TLB mostly holds (hotspot and zipf heads); uniform
/// densities keep that approximation, where `q` is close to 1 for any region much larger
/// than the TLB's reach and the two agree.
fn leaf_log_no_load(mu: f64, q: Q) -> f64 {
    let h = q.h;
    if h <= 0.0 || mu <= 0.0 {
        return -mu;
    }
    let a = q.a;
    let x = mu * h;
    let tail = if a <= 0.0 {
        0.0
    } else if x < 30.0 {
        (a * x.exp_m1()).ln_1p()
    } else {
        // ln(1 + a (e^x - 1)) without overflow.
        x + a.ln() + ((1.0 - a) * (-x).exp() / a).ln_1p()
    };
    -mu + tail
}

/// The flush freshness after applying `flushes` to `fresh` (one by one: the reference
/// for [`FlushLog::fresh_after`]).
pub fn fresh_after(fresh: u8, t: Target, flushes: &[FlushEvent]) -> u8 {
    flushes.iter().fold(fresh, |f, e| {
        f | flush_mask(e.kind, t.level, t.leaf, t.span)
    })
}

/// The flushes issued so far, in order, with what [`FlushLog::fresh_after`] needs to
/// answer for any suffix of them in O(1): the last full flush, the last page flush, and
/// per 4 KiB page and per 2 MiB block the last page flush that covered it. A page flush
/// covers at most [`tierscope_core::machine::FLUSH_CEILING_PAGES`] pages (a longer range
/// is a full flush), so recording one costs a bounded number of map updates.
#[derive(Debug, Default)]
pub struct FlushLog {
    pub events: Vec<FlushEvent>,
    last_all: Option<usize>,
    last_pages: Option<usize>,
    /// 4 KiB page number -> index of the last page flush covering it.
    by_page: FastMap<u64, u32>,
    /// 2 MiB block number -> index of the last page flush overlapping it.
    by_block: FastMap<u64, u32>,
}

impl FlushLog {
    /// Appends flush `e`, numbered one past the last (`seq` 1, 2, ...: what makes
    /// [`Self::first_after`] O(1)).
    pub fn push(&mut self, e: FlushEvent) {
        let i = self.events.len();
        assert_eq!(
            e.seq,
            i as u64 + 1,
            "flushes are numbered 1, 2, ... in order"
        );
        match e.kind {
            FlushKind::All => self.last_all = Some(i),
            FlushKind::Pages { start, end } => {
                self.last_pages = Some(i);
                // `end > start` (empty ranges flush nothing and are not recorded).
                let last = end - 1;
                for page in start >> 12..=last >> 12 {
                    self.by_page.insert(page, i as u32);
                }
                for block in start >> 21..=last >> 21 {
                    self.by_block.insert(block, i as u32);
                }
            }
        }
        self.events.push(e);
    }

    /// Index of the first flush ordered after operation `seq`: flush `i` is numbered
    /// `i + 1`, so the flushes numbered up to `seq` are the first `seq` (a bisection of
    /// every flush of the run, a chain of cache misses, was most of a Telescope read).
    pub fn first_after(&self, seq: u64) -> usize {
        let i = (seq as usize).min(self.events.len());
        debug_assert_eq!(i, self.events.partition_point(|f| f.seq <= seq));
        i
    }

    /// [`fresh_after`] of the flushes from index `first` on, without visiting them: a
    /// full flush leaves every cache fresh, a page flush every paging-structure cache,
    /// and the TLB's bit for a leaf entry when it covered a page of the entry's span.
    pub fn fresh_after(&self, fresh: u8, t: Target, first: usize) -> u8 {
        let since = |last: Option<usize>| last.is_some_and(|i| i >= first);
        if since(self.last_all) {
            return fresh | ALL_FRESH;
        }
        if !since(self.last_pages) {
            return fresh;
        }
        let mut f = fresh | (ALL_FRESH & !1);
        if t.level == t.leaf && f & 1 == 0 {
            let map = match t.level {
                Level::Pte => &self.by_page,
                _ => &self.by_block,
            };
            debug_assert!(t.level <= Level::Pmd, "leaves are 4 KiB or 2 MiB");
            let covered = map
                .get(&(t.span.start >> t.level.span_shift()))
                .is_some_and(|&i| i as usize >= first);
            f |= covered as u8;
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TlbConfig;
    use tierscope_core::rng::Rng;
    use tierscope_core::workload::parse_masim;
    use tierscope_core::{PageSize, Paging};

    /// A random read of the entry over `va` at `level` (4 KiB leaves): its target, and
    /// the access indices of its clear and its read within the first 30 M accesses.
    fn random_read(rng: &mut Rng, level: Level, va: u64) -> (Target, u64, u64) {
        let start = level.align_down(va);
        let t = Target {
            level,
            leaf: Level::Pte,
            span: AddrRange::new(start, start + level.span()),
            stores_only: rng.below(4) == 0,
        };
        let ia = rng.below(29_000_000);
        let longest = 1 << rng.below(25);
        let ib = ia + 1 + rng.below((30_000_000 - ia).min(longest));
        (t, ia, ib)
    }

    /// Each pattern's caches on a 4 KiB-page, 4-level machine with the default TLBs.
    fn base_page_caches(workload: &Workload) -> Vec<RegionCaches> {
        let tlb = TlbConfig::default();
        workload
            .patterns
            .iter()
            .map(|p| {
                RegionCaches::new(
                    p.region,
                    &p.density,
                    PageSize::Base4K,
                    Paging::FourLevel,
                    &tlb,
                )
            })
            .collect()
    }

    #[test]
    fn long_reads_after_a_full_flush_are_linear_in_each_patterns_count() {
        // Two uniform patterns alternating by batch; the entry is a PTE in `b`. After a
        // full flush every access to `b` walks, so the entry stays unloaded with
        // probability (1 - 4096 / |b|)^(accesses to b), whatever the segments between.
        let spec =
            parse_masim("a, 1GiB\nb, 64MiB\n\np\n1000\na, 1, 4096, 1\nb, 1, 4096, 1\n").unwrap();
        let starts = [0, 1 << 30];
        let workload = Workload::new(&spec, &starts, 10_000_000);
        let caches = base_page_caches(&workload);
        let mut sched = Schedule::new(&workload, Rng::new(7));
        sched.run(&workload, 40_000_000);
        assert!(
            sched.segments.len() > 100,
            "many segments between clear and read"
        );
        let b = workload
            .patterns
            .iter()
            .position(|p| p.region.start == 1 << 30)
            .unwrap();
        let world = World {
            workload: &workload,
            caches: &caches,
            schedules: std::slice::from_ref(&sched),
        };
        let span = AddrRange::new((1 << 30) + (5 << 12), (1 << 30) + (6 << 12));
        let t = Target {
            level: Level::Pte,
            leaf: Level::Pte,
            span,
            stores_only: false,
        };
        let (ia, ib) = (1_000_000, 39_000_000);
        let flush = [FlushEvent {
            seq: 1,
            at: 2_000_000,
            kind: FlushKind::All,
        }];
        let n_b = |x: u64, y: u64| -> u64 {
            sched
                .segments
                .iter()
                .filter(|g| g.pattern as usize == b && g.first < y && g.end() > x)
                .map(|g| g.end().min(y) - g.first.max(x))
                .sum()
        };
        let got = log_no_load(&world, t, ia, ib, 0, &flush);
        // Remembering the searches changes nothing, asked once or again.
        let lk = &mut Lookups::default();
        for _ in 0..2 {
            let again = log_no_load_in(&world, Some(&mut *lk), t, ia, ib, 0, &flush, None);
            assert_eq!(again.to_bits(), got.to_bits());
        }
        // Before the flush the caches are warm (the TLB mostly misses on 16 K pages, the
        // PDE cache hits): only the flushed part is linear with q = 1.
        let before = log_no_load(&world, t, ia, 2_000_000, 0, &[]);
        let after = n_b(2_000_000, ib) as f64 * (-(4096.0 / (64 << 20) as f64)).ln_1p();
        assert!(
            ((got - (before + after)) / got).abs() < 1e-12,
            "{got} vs {before} + {after}"
        );
        // Fresh from the start: linear over the whole interval.
        let all = log_no_load(&world, t, ia, ib, ALL_FRESH, &[]);
        let by_hand = n_b(ia, ib) as f64 * (-(4096.0 / (64 << 20) as f64)).ln_1p();
        assert!(((all - by_hand) / all).abs() < 1e-12, "{all} vs {by_hand}");
    }

    #[test]
    fn the_load_bound_never_changes_an_answer() {
        // A gaussian over 4 GiB (hot centre, far tails of mass 0 and tails of tiny mass)
        // beside a uniform 64 MiB region, stores and loads, entries at every level: for
        // random intervals, freshness, flushes and draws, the probability of a load is
        // below the bound, and the answer with the bound and the span's one mass is the
        // evaluation's. A uniform pattern over the first GiB gives spans there two
        // classes (no one mass).
        let mut spec = parse_masim(
            "g, 4GiB\nb, 64MiB\nu, 1GiB\n\np\n1000\ng, 1, 4096, 3, rw\nb, 1, 4096, 1, rw\nu, 1, 4096, 1\n",
        )
        .unwrap();
        spec.phases[0].patterns[0].density = tierscope_core::workload::Density::Gaussian {
            mean: 0.5,
            sigma: 0.01,
        };
        let starts = [0, 4 << 30, 0];
        let workload = Workload::new(&spec, &starts, 10_000_000);
        let caches = base_page_caches(&workload);
        let scheds: Vec<Schedule> = (0..2)
            .map(|i| {
                let mut s = Schedule::new(&workload, Rng::new(20 + i));
                s.run(&workload, 30_000_000);
                s
            })
            .collect();
        let world = World {
            workload: &workload,
            caches: &caches,
            schedules: &scheds,
        };
        let mut rng = Rng::new(21);
        let lk = &mut Lookups::default();
        let (mut skipped, mut loaded, mut kept) = (0, 0, 0);
        for _ in 0..20_000 {
            let level = [Level::Pte, Level::Pte, Level::Pmd, Level::Pud][rng.below(4) as usize];
            // Around the centre, in the tails, or in the uniform region.
            let va = match rng.below(3) {
                0 => (2 << 30) + rng.below(256 << 20) - (128 << 20),
                1 => rng.below(4 << 30),
                _ => (4 << 30) + rng.below(64 << 20),
            };
            let (t, ia, ib) = random_read(&mut rng, level, va);
            let fresh = [0, ALL_FRESH, 1][rng.below(3) as usize];
            let mut flushes: Vec<FlushEvent> = (0..rng.below(4))
                .map(|i| FlushEvent {
                    seq: i + 1,
                    at: ia + rng.below(ib - ia),
                    kind: FlushKind::All,
                })
                .collect();
            flushes.sort_by_key(|f| f.at);
            let u = rng.unit();
            let ln = log_no_load(&world, t, ia, ib, fresh, &flushes);
            let p_load = -ln.exp_m1();
            let facts = span_facts(&workload, t.span);
            let bound = load_bound(facts.worst, (ib - ia) * 2);
            assert!(p_load <= bound, "{p_load} > {bound} at {t:?} {ia}..{ib}");
            let got = loaded_remembered(&world, lk, t, ia, ib, fresh, &flushes, u, facts);
            assert_eq!(got, u < p_load, "{t:?} {ia}..{ib} u {u} p {p_load}");
            if u >= bound {
                skipped += 1;
            } else if got {
                loaded += 1;
            } else {
                kept += 1;
            }
        }
        // Each way of answering happened often.
        assert!(
            skipped > 2000 && loaded > 2000 && kept > 500,
            "{skipped} {loaded} {kept}"
        );
    }

    #[test]
    fn the_zones_bound_never_changes_an_answer() {
        // A narrow gaussian over 64 GiB with a uniform pattern over its first GiB (spans
        // there have two classes): PTE and PMD entries around the centre, in the tails at
        // every zone's edges and beyond. Where the zones' bound tells an entry unloaded the
        // evaluation agrees, and the bound is never below the exact facts' `worst`; draws
        // at the bound itself included.
        let mut spec =
            parse_masim("g, 64GiB\nu, 1GiB\n\np\n1000\ng, 1, 4096, 3, rw\nu, 1, 4096, 1\n")
                .unwrap();
        spec.phases[0].patterns[0].density = tierscope_core::workload::Density::Gaussian {
            mean: 0.5,
            sigma: 0.002,
        };
        let workload = Workload::new(&spec, &[0, 0], 10_000_000);
        let caches = base_page_caches(&workload);
        let mut sched = Schedule::new(&workload, Rng::new(30));
        sched.run(&workload, 30_000_000);
        let world = World {
            workload: &workload,
            caches: &caches,
            schedules: std::slice::from_ref(&sched),
        };
        let mut rng = Rng::new(31);
        let (mut told, mut evaluated) = (0, 0);
        for i in 0..20_000 {
            let level = [Level::Pte, Level::Pte, Level::Pmd][rng.below(3) as usize];
            // Scores from the centre to past the far tails, on either side.
            let reach = [8.0, 45.0][rng.below(2) as usize];
            let z = rng.unit() * reach * if rng.below(2) == 0 { 1.0 } else { -1.0 };
            let va = ((32 << 30) as f64 + z * 0.002 * (64u64 << 30) as f64) as u64;
            let va = va
                .min((64 << 30) - 1)
                .max(if i % 8 == 0 { 0 } else { 1 << 30 });
            let (t, ia, ib) = random_read(&mut rng, level, va);
            let fresh = [0, ALL_FRESH][rng.below(2) as usize];
            let facts = span_facts(&workload, t.span);
            let bound = worst_bound(&workload, t.span);
            if let Some(b) = bound {
                assert!(b >= facts.worst, "{t:?}: {b} < {}", facts.worst);
            }
            // A draw anywhere, or exactly at the bound.
            let u = match (bound, rng.below(4)) {
                (Some(b), 0) => load_bound(b, ib - ia).min(0.999),
                _ => rng.unit(),
            };
            let p_load = -log_no_load(&world, t, ia, ib, fresh, &[]).exp_m1();
            if unloaded_by_zones(&workload, t.span, u, ib - ia) {
                assert!(u >= p_load, "{t:?} {ia}..{ib} u {u} p {p_load}");
                told += 1;
            } else {
                evaluated += 1;
            }
        }
        assert!(told > 5_000 && evaluated > 1_000, "{told} {evaluated}");
    }

    #[test]
    fn flushes_after_every_cache_is_fresh_change_nothing() {
        // A read right after a full flush, with thousands of page flushes at the same
        // access index and later (NUMA hinting's promotions after its scan): the same total
        // as the interval evaluated fresh with no flushes at all, bit for bit.
        let spec =
            parse_masim("a, 1GiB\nb, 64MiB\n\np\n1000\na, 1, 4096, 1\nb, 1, 4096, 1\n").unwrap();
        let workload = Workload::new(&spec, &[0, 1 << 30], 10_000_000);
        let caches = base_page_caches(&workload);
        let mut sched = Schedule::new(&workload, Rng::new(5));
        sched.run(&workload, 20_000_000);
        let world = World {
            workload: &workload,
            caches: &caches,
            schedules: std::slice::from_ref(&sched),
        };
        let (ia, ib) = (3_000_000, 13_000_000);
        let mut flushes = vec![FlushEvent {
            seq: 1,
            at: ia,
            kind: FlushKind::All,
        }];
        let mut rng = Rng::new(6);
        for i in 0..3000u64 {
            let page = (1 << 30) + (rng.below(1 << 14) << 12);
            flushes.push(FlushEvent {
                seq: i + 2,
                at: if i < 2000 { ia } else { ia + i * 1000 },
                kind: FlushKind::Pages {
                    start: page,
                    end: page + 4096,
                },
            });
        }
        for va in [(1 << 30) + (5 << 12), 4096, (1 << 30) + (40 << 20)] {
            for level in [Level::Pte, Level::Pmd] {
                let start = level.align_down(va);
                let t = Target {
                    level,
                    leaf: Level::Pte,
                    span: AddrRange::new(start, start + level.span()),
                    stores_only: false,
                };
                let got = log_no_load(&world, t, ia, ib, 0, &flushes);
                let fresh = log_no_load(&world, t, ia, ib, ALL_FRESH, &[]);
                assert_eq!(got.to_bits(), fresh.to_bits(), "{t:?}");
                assert!(got < 0.0);
            }
        }
    }

    #[test]
    fn flush_log_answers_as_the_flushes_one_by_one() {
        // Random full, page and range flushes over a few 2 MiB blocks; every suffix of
        // them against entries at each level, leaf 4 KiB or 2 MiB: the log's O(1) answer
        // is the fold over the suffix.
        let mut rng = Rng::new(11);
        let base = 1u64 << 40;
        let mut log = FlushLog::default();
        for i in 0..400u64 {
            let kind = match rng.below(10) {
                0 => FlushKind::All,
                1..=6 => {
                    let start = base + (rng.below(4 << 9) << 12);
                    FlushKind::Pages {
                        start,
                        end: start + 4096,
                    }
                }
                _ => {
                    let start = base + (rng.below(4 << 9) << 12);
                    FlushKind::Pages {
                        start,
                        end: start + 1 + rng.below(33 << 12),
                    }
                }
            };
            log.push(FlushEvent {
                seq: i + 1,
                at: i,
                kind,
            });
        }
        for _ in 0..4000 {
            let va = base + rng.below(5 << 21);
            let level = Level::ALL[rng.below(3) as usize];
            let leaf = if level == Level::Pte || rng.below(2) == 0 {
                Level::Pte
            } else {
                Level::Pmd
            };
            let start = level.align_down(va);
            let t = Target {
                level,
                leaf,
                span: AddrRange::new(start, start + level.span()),
                stores_only: false,
            };
            let first = rng.below(log.events.len() as u64 + 1) as usize;
            let fresh = rng.below(32) as u8;
            assert_eq!(
                log.fresh_after(fresh, t, first),
                fresh_after(fresh, t, &log.events[first..]),
                "{t:?} {first} {fresh}"
            );
            assert_eq!(log.first_after(first as u64), first);
        }
    }

    #[test]
    fn a_sweep_over_the_span_leaves_no_bound() {
        // A sweep loads its span for certain once it enters it: whatever the draw, the
        // interval is evaluated.
        let spec =
            parse_masim("s, 64MiB\nr, 64MiB\n\np\n1000\ns, 0, 4096, 1\nr, 1, 4096, 1\n").unwrap();
        let workload = Workload::new(&spec, &[0, 64 << 20], 10_000_000);
        let sweep = AddrRange::new(1 << 20, (1 << 20) + 4096);
        let random = AddrRange::new((64 << 20) + 4096, (64 << 20) + 8192);
        assert_eq!(span_facts(&workload, sweep).worst, f64::INFINITY);
        assert!(span_facts(&workload, sweep).mass.is_nan());
        let facts = span_facts(&workload, random);
        let m = 4096.0 / (64 << 20) as f64;
        assert_eq!((facts.worst, facts.mass), (m / (1.0 - m), m));
        for n in [0, 1, 1 << 40] {
            let bound = load_bound(f64::INFINITY, n);
            assert!(bound.is_nan() || bound > 1.0, "{n}: {bound}");
        }
    }

    #[test]
    fn leaf_renewal_matches_lru_by_hand() {
        // Always missing: a load unless no access at all.
        assert_eq!(leaf_log_no_load(2.5, Q::new(1.0)), -2.5);
        // The sparse-hot TLB (q = 0.415) over 1 ms (3.8 accesses per hot page):
        // e^-3.8 (1 + 0.22 / 0.585 (e^(3.8 * 0.585) - 1)) = 0.091, where independent
        // misses would give e^(-3.8 * 0.415) = 0.206.
        let p = leaf_log_no_load(3.8, Q::new(0.415)).exp();
        assert!((p - 0.091).abs() < 0.002, "{p}");
        // Long windows stay finite and decrease.
        let (a, b) = (
            leaf_log_no_load(1e4, Q::new(0.4)),
            leaf_log_no_load(2e4, Q::new(0.4)),
        );
        assert!(a.is_finite() && b < a, "{a} {b}");
    }
}
