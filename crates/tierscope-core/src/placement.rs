//! Which memory tier every 4 KiB page of the workload heap is on.
//!
//! The simulator asks for the tier of every access, and migration policies move ranges
//! from a page to terabytes at a time, so [`Placement`] is shaped like a page table: a
//! radix tree of 1 GiB, 2 MiB and 4 KiB granules in which a node whose whole span is on
//! one tier is stored as just that tier. A heap that is mostly on one tier then costs a
//! few bytes per GiB, and a lookup is at most three dependent loads.

use crate::addr::{AddrRange, Level};
use std::ops::Range;

const PAGE_SHIFT: u32 = Level::Pte.span_shift();
const MIB_SHIFT: u32 = Level::Pmd.span_shift();
const GIB_SHIFT: u32 = Level::Pud.span_shift();
const PAGE: u64 = Level::Pte.span();
const MIB: u64 = Level::Pmd.span();
const GIB: u64 = Level::Pud.span();
/// Children of a 1 GiB or 2 MiB node.
const FANOUT: usize = 512;
/// Set in a top or 2 MiB-node entry holding the arena index of a child node rather than a
/// tier; this is why tiers must stay below 128.
const CHILD: u32 = 1 << 31;
const MAX_TIERS: usize = 128;

/// The tier of every 4 KiB page of one address range, stored as a 3-level radix tree.
///
/// Top entries (one per 1 GiB granule, counted from the range start aligned down to
/// 1 GiB) and 2 MiB-node entries hold either a tier or, with the high bit set, the index of
/// a child in the next arena. Nodes are split only where a [`Placement::set`] covers part
/// of a granule and collapse back to a tier as soon as all their children agree.
///
/// Pages of the first and last granules that lie outside the range always carry the tier
/// of the range's first and last page respectively (`set` extends to them), so a node
/// whose in-range pages agree collapses like any other.
#[derive(Debug, Clone)]
pub struct Placement {
    range: AddrRange,
    /// `range.start` aligned down to 1 GiB: offsets from here index the tree.
    base: u64,
    top: Vec<u32>,
    mids: Vec<[u32; FANOUT]>,
    free_mids: Vec<usize>,
    leaves: Vec<[u8; FANOUT]>,
    free_leaves: Vec<usize>,
    bytes_on: Vec<u64>,
}

impl Placement {
    /// A placement of `range` with every page on `tier`, counting bytes for `tiers` tiers.
    ///
    /// Panics if `range` is empty or either end is not 4 KiB aligned (pages are the unit
    /// of placement), or if `tier` is not below `tiers` or `tiers` exceeds 128.
    pub fn new(range: AddrRange, tier: u8, tiers: usize) -> Placement {
        assert!(!range.is_empty(), "placement range {range} is empty");
        assert!(
            page_aligned(range.start) && page_aligned(range.end),
            "placement range {range} is not 4 KiB aligned"
        );
        assert!(
            tiers <= MAX_TIERS,
            "{tiers} tiers, at most {MAX_TIERS} are supported"
        );
        assert!(
            usize::from(tier) < tiers,
            "tier {tier} out of {tiers} tiers"
        );
        let base = Level::Pud.align_down(range.start);
        let granules = usize::try_from((range.end - base).div_ceil(GIB))
            .expect("placement range too large for this host");
        let mut bytes_on = vec![0; tiers];
        bytes_on[usize::from(tier)] = range.len();
        Placement {
            range,
            base,
            top: vec![u32::from(tier); granules],
            mids: Vec::new(),
            free_mids: Vec::new(),
            leaves: Vec::new(),
            free_leaves: Vec::new(),
            bytes_on,
        }
    }

    /// The address range this placement covers.
    pub fn range(&self) -> AddrRange {
        self.range
    }

    /// The number of tiers, so callers can iterate [`Placement::bytes_on`].
    pub fn tiers(&self) -> usize {
        self.bytes_on.len()
    }

    /// The tier of the page holding `va`.
    ///
    /// Called once per simulated memory access, so it only walks the tree: at most three
    /// dependent loads and no allocation. `va` must lie in the range (checked in debug
    /// builds only; release builds return a neighbouring page's tier or panic on an index).
    #[inline]
    pub fn tier_of(&self, va: u64) -> u8 {
        debug_assert!(
            self.range.contains(va),
            "{va:#x} is outside the placement range {}",
            self.range
        );
        let off = va.wrapping_sub(self.base);
        let top = self.top[(off >> GIB_SHIFT) as usize];
        if top & CHILD == 0 {
            return top as u8;
        }
        let mid = self.mids[(top & !CHILD) as usize][(off >> MIB_SHIFT) as usize % FANOUT];
        if mid & CHILD == 0 {
            return mid as u8;
        }
        self.leaves[(mid & !CHILD) as usize][(off >> PAGE_SHIFT) as usize % FANOUT]
    }

    /// Puts every page of `r` (clipped to the range) on `tier` and returns the bytes that
    /// changed tier, which is what a migration costs.
    ///
    /// Whole granules are replaced in O(1) (plus freeing any nodes below them), so the
    /// work grows with the number of granules `r` touches, not its pages. Panics if `r`
    /// is not 4 KiB aligned or `tier` is not below [`Placement::tiers`].
    pub fn set(&mut self, r: AddrRange, tier: u8) -> u64 {
        assert!(
            usize::from(tier) < self.tiers(),
            "tier {tier} out of {} tiers",
            self.tiers()
        );
        assert!(
            page_aligned(r.start) && page_aligned(r.end),
            "range {r} is not 4 KiB aligned"
        );
        let start = r.start.max(self.range.start);
        let end = r.end.min(self.range.end);
        if start >= end {
            return 0;
        }
        // Out-of-range pages of the edge granules follow the range's edge pages (see the
        // type's documentation), so reaching an edge extends to the end of its granule.
        let lo = if start == self.range.start {
            0
        } else {
            start - self.base
        };
        let hi = if end == self.range.end {
            self.span()
        } else {
            end - self.base
        };
        let mut changed = 0;
        for g in (lo >> GIB_SHIFT)..=((hi - 1) >> GIB_SHIFT) {
            changed += self.set_gib(g as usize, lo, hi, tier);
        }
        changed
    }

    /// Bytes of the range currently on `tier`, kept up to date by [`Placement::set`] so
    /// reports cost nothing. Panics if `tier` is not below [`Placement::tiers`].
    pub fn bytes_on(&self, tier: u8) -> u64 {
        self.bytes_on[usize::from(tier)]
    }

    /// Calls `f` with the maximal same-tier runs covering `r` ∩ range, in address order.
    ///
    /// Uniform 1 GiB and 2 MiB nodes are one step each, so the cost follows the tree's
    /// size rather than the number of pages.
    pub fn runs(&self, r: AddrRange, f: impl FnMut(AddrRange, u8)) {
        let start = r.start.max(self.range.start);
        let end = r.end.min(self.range.end);
        if start >= end {
            return;
        }
        let (lo, hi) = (start - self.base, end - self.base);
        let mut out = Runs {
            base: self.base,
            lo,
            hi,
            run: None,
            f,
        };
        for g in (lo >> GIB_SHIFT)..=((hi - 1) >> GIB_SHIFT) {
            let g_off = g << GIB_SHIFT;
            let entry = self.top[g as usize];
            if entry & CHILD == 0 {
                out.push(g_off, GIB, entry as u8);
                continue;
            }
            let mid = &self.mids[(entry & !CHILD) as usize];
            for c in children(lo, hi, g_off, MIB_SHIFT) {
                let c_off = g_off + ((c as u64) << MIB_SHIFT);
                if mid[c] & CHILD == 0 {
                    out.push(c_off, MIB, mid[c] as u8);
                    continue;
                }
                let leaf = &self.leaves[(mid[c] & !CHILD) as usize];
                for p in children(lo, hi, c_off, PAGE_SHIFT) {
                    out.push(c_off + ((p as u64) << PAGE_SHIFT), PAGE, leaf[p]);
                }
            }
        }
        out.finish();
    }

    /// Bytes of heap the tree holds (allocated capacity, free slots included), for
    /// reporting what tracking the placement costs.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        self.top.capacity() * size_of::<u32>()
            + self.mids.capacity() * size_of::<[u32; FANOUT]>()
            + self.leaves.capacity() * size_of::<[u8; FANOUT]>()
            + (self.free_mids.capacity() + self.free_leaves.capacity()) * size_of::<usize>()
            + self.bytes_on.capacity() * size_of::<u64>()
    }

    /// Offset from `base` of the end of the last granule.
    fn span(&self) -> u64 {
        (self.top.len() as u64) << GIB_SHIFT
    }

    /// Sets the pages of offsets `[lo, hi)` inside top granule `g` to `tier`.
    fn set_gib(&mut self, g: usize, lo: u64, hi: u64, tier: u8) -> u64 {
        let g_off = (g as u64) << GIB_SHIFT;
        let (lo, hi) = (lo.max(g_off), hi.min(g_off + GIB));
        let entry = self.top[g];
        if lo == g_off && hi == g_off + GIB {
            self.top[g] = u32::from(tier);
            return self.release_gib(entry, g_off, tier);
        }
        let m = if entry & CHILD != 0 {
            (entry & !CHILD) as usize
        } else if entry == u32::from(tier) {
            return 0;
        } else {
            self.alloc_mid(entry)
        };
        self.top[g] = CHILD | m as u32;
        let mut changed = 0;
        for c in children(lo, hi, g_off, MIB_SHIFT) {
            changed += self.set_mib(m, c, g_off + ((c as u64) << MIB_SHIFT), lo, hi, tier);
        }
        // Equal entries cannot be children (each child has one parent), so a uniform
        // node holds one tier.
        if let Some(t) = uniform(&self.mids[m]) {
            self.free_mid(m);
            self.top[g] = t;
        }
        changed
    }

    /// Sets the pages of offsets `[lo, hi)` inside child `c` (at offset `c_off`) of
    /// 2 MiB node `m` to `tier`.
    fn set_mib(&mut self, m: usize, c: usize, c_off: u64, lo: u64, hi: u64, tier: u8) -> u64 {
        let (lo, hi) = (lo.max(c_off), hi.min(c_off + MIB));
        let entry = self.mids[m][c];
        if lo == c_off && hi == c_off + MIB {
            self.mids[m][c] = u32::from(tier);
            return self.release_mib(entry, c_off, tier);
        }
        let l = if entry & CHILD != 0 {
            (entry & !CHILD) as usize
        } else if entry == u32::from(tier) {
            return 0;
        } else {
            self.alloc_leaf(entry as u8)
        };
        self.mids[m][c] = CHILD | l as u32;
        let mut changed = 0;
        for p in children(lo, hi, c_off, PAGE_SHIFT) {
            let old = std::mem::replace(&mut self.leaves[l][p], tier);
            changed += self.move_bytes(old, tier, c_off + ((p as u64) << PAGE_SHIFT), PAGE);
        }
        if let Some(t) = uniform(&self.leaves[l]) {
            self.free_leaf(l);
            self.mids[m][c] = u32::from(t);
        }
        changed
    }

    /// Accounts a top entry that was `entry` as now wholly on `tier` and frees its
    /// subtree.
    fn release_gib(&mut self, entry: u32, g_off: u64, tier: u8) -> u64 {
        if entry & CHILD == 0 {
            return self.move_bytes(entry as u8, tier, g_off, GIB);
        }
        let m = (entry & !CHILD) as usize;
        let mut changed = 0;
        for c in 0..FANOUT {
            let child = self.mids[m][c];
            changed += self.release_mib(child, g_off + ((c as u64) << MIB_SHIFT), tier);
        }
        self.free_mid(m);
        changed
    }

    /// Accounts a 2 MiB-node entry that was `entry` as now wholly on `tier` and frees its
    /// leaf.
    fn release_mib(&mut self, entry: u32, c_off: u64, tier: u8) -> u64 {
        if entry & CHILD == 0 {
            return self.move_bytes(entry as u8, tier, c_off, MIB);
        }
        let l = (entry & !CHILD) as usize;
        let mut changed = 0;
        for p in 0..FANOUT {
            let old = self.leaves[l][p];
            changed += self.move_bytes(old, tier, c_off + ((p as u64) << PAGE_SHIFT), PAGE);
        }
        self.free_leaf(l);
        changed
    }

    /// Moves the in-range bytes of offsets `[off, off + len)` from tier `old` to `new`
    /// and returns how many there were.
    fn move_bytes(&mut self, old: u8, new: u8, off: u64, len: u64) -> u64 {
        if old == new {
            return 0;
        }
        let bytes = AddrRange::new(off, off + len).overlap(&AddrRange::new(
            self.range.start - self.base,
            self.range.end - self.base,
        ));
        self.bytes_on[usize::from(old)] -= bytes;
        self.bytes_on[usize::from(new)] += bytes;
        bytes
    }

    fn alloc_mid(&mut self, tier: u32) -> usize {
        alloc(&mut self.mids, &mut self.free_mids, [tier; FANOUT])
    }

    fn alloc_leaf(&mut self, tier: u8) -> usize {
        alloc(&mut self.leaves, &mut self.free_leaves, [tier; FANOUT])
    }

    fn free_mid(&mut self, m: usize) {
        free(&mut self.mids, &mut self.free_mids, m);
    }

    fn free_leaf(&mut self, l: usize) {
        free(&mut self.leaves, &mut self.free_leaves, l);
    }
}

fn page_aligned(va: u64) -> bool {
    va & (PAGE - 1) == 0
}

/// Indices of the children of the node at offset `node_off` (children of `1 << shift`
/// bytes) that overlap `[lo, hi)`, which must overlap the node.
fn children(lo: u64, hi: u64, node_off: u64, shift: u32) -> Range<usize> {
    let node_end = node_off + ((FANOUT as u64) << shift);
    let first = (lo.max(node_off) - node_off) >> shift;
    let last = (hi.min(node_end) - 1 - node_off) >> shift;
    first as usize..last as usize + 1
}

/// The value all entries of `node` share, if they do.
fn uniform<T: Copy + PartialEq>(node: &[T; FANOUT]) -> Option<T> {
    let first = node[0];
    node.iter().all(|&e| e == first).then_some(first)
}

/// Stores `node` in a free slot of `arena`, or a new one, and returns its index.
fn alloc<T>(arena: &mut Vec<T>, free: &mut Vec<usize>, node: T) -> usize {
    if let Some(i) = free.pop() {
        arena[i] = node;
        return i;
    }
    // Indices share a u32 with the CHILD flag.
    assert!(arena.len() < CHILD as usize, "placement arena is full");
    arena.push(node);
    arena.len() - 1
}

/// Returns slot `i` of `arena` to its free list; once every slot is free the arena's
/// memory goes back to the allocator, so a placement that becomes uniform again is as
/// small as a new one.
fn free<T>(arena: &mut Vec<T>, free: &mut Vec<usize>, i: usize) {
    free.push(i);
    if free.len() == arena.len() {
        *arena = Vec::new();
        *free = Vec::new();
    }
}

/// Merges the pieces [`Placement::runs`] visits (offsets from `base`, clipped to
/// `[lo, hi)`) into maximal runs for `f`.
struct Runs<F: FnMut(AddrRange, u8)> {
    base: u64,
    lo: u64,
    hi: u64,
    run: Option<(AddrRange, u8)>,
    f: F,
}

impl<F: FnMut(AddrRange, u8)> Runs<F> {
    /// Adds the piece `[off, off + len)` on `tier`; pieces arrive adjacent and in order.
    fn push(&mut self, off: u64, len: u64, tier: u8) {
        let start = self.base + off.max(self.lo);
        let end = self.base + (off + len).min(self.hi);
        if let Some((run, t)) = &mut self.run {
            if *t == tier {
                run.end = end;
                return;
            }
        }
        if let Some((run, t)) = self.run.replace((AddrRange::new(start, end), tier)) {
            (self.f)(run, t);
        }
    }

    fn finish(mut self) {
        if let Some((run, t)) = self.run.take() {
            (self.f)(run, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::{Duration, Instant};

    const START: u64 = 0x7f00_0012_3000;
    const PAGES: u64 = (2 * GIB + 3 * PAGE) / PAGE;
    const END: u64 = START + PAGES * PAGE;
    const BASE: u64 = START & !(GIB - 1);
    const TIERS: u8 = 4;

    /// One tier per page: obviously right, and too big for real heaps.
    struct Model {
        pages: Vec<u8>,
    }

    impl Model {
        fn page_range(r: AddrRange) -> Range<usize> {
            let s = r.start.clamp(START, END);
            let e = r.end.clamp(s, END);
            ((s - START) / PAGE) as usize..((e - START) / PAGE) as usize
        }

        fn set(&mut self, r: AddrRange, tier: u8) -> u64 {
            let mut changed = 0;
            for p in &mut self.pages[Model::page_range(r)] {
                if *p != tier {
                    *p = tier;
                    changed += PAGE;
                }
            }
            changed
        }

        fn bytes_on(&self, tier: u8) -> u64 {
            self.pages.iter().filter(|&&t| t == tier).count() as u64 * PAGE
        }

        fn runs(&self, r: AddrRange) -> Vec<(AddrRange, u8)> {
            let mut runs: Vec<(AddrRange, u8)> = Vec::new();
            for p in Model::page_range(r) {
                let va = START + p as u64 * PAGE;
                match runs.last_mut() {
                    Some((run, t)) if *t == self.pages[p] => run.end = va + PAGE,
                    _ => runs.push((AddrRange::new(va, va + PAGE), self.pages[p])),
                }
            }
            runs
        }
    }

    fn collect_runs(p: &Placement, r: AddrRange) -> Vec<(AddrRange, u8)> {
        let mut runs = Vec::new();
        p.runs(r, |run, t| runs.push((run, t)));
        runs
    }

    fn offset(base: u64, pages: i64) -> u64 {
        base.wrapping_add_signed(pages * PAGE as i64)
    }

    /// Page-aligned addresses in and just around the range, biased to granule edges.
    fn addr() -> impl Strategy<Value = u64> {
        prop_oneof![
            (0..PAGES + 8).prop_map(|p| START - 4 * PAGE + p * PAGE),
            (0u64..=3, -3i64..=3).prop_map(|(g, d)| offset(BASE + g * GIB, d)),
            (0u64..3 * 512, -3i64..=3).prop_map(|(m, d)| offset(BASE + m * MIB, d)),
            (any::<bool>(), -3i64..=3).prop_map(|(e, d)| offset(if e { END } else { START }, d)),
        ]
    }

    fn op() -> impl Strategy<Value = (AddrRange, u8)> {
        (addr(), addr(), 0..TIERS).prop_map(|(a, b, t)| (AddrRange::new(a.min(b), a.max(b)), t))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn matches_page_model(
            ops in proptest::collection::vec(op(), 1..16),
            window in (addr(), addr()),
        ) {
            let range = AddrRange::new(START, END);
            let mut p = Placement::new(range, 0, usize::from(TIERS));
            let fresh = p.memory_bytes();
            let mut model = Model { pages: vec![0; PAGES as usize] };
            for &(r, t) in &ops {
                prop_assert_eq!(p.set(r, t), model.set(r, t), "set({}, {})", r, t);
            }
            for (i, &t) in model.pages.iter().enumerate() {
                prop_assert_eq!(p.tier_of(START + i as u64 * PAGE), t, "page {}", i);
            }
            for t in 0..TIERS {
                prop_assert_eq!(p.bytes_on(t), model.bytes_on(t), "tier {}", t);
            }
            let window = AddrRange::new(window.0.min(window.1), window.0.max(window.1));
            for r in [range, AddrRange::new(0, u64::MAX), window] {
                let runs = collect_runs(&p, r);
                for pair in runs.windows(2) {
                    prop_assert_eq!(pair[0].0.end, pair[1].0.start);
                    prop_assert_ne!(pair[0].1, pair[1].1);
                }
                prop_assert_eq!(runs, model.runs(r), "runs over {}", r);
            }
            // Everything back on one tier: every node has collapsed.
            p.set(range, 1);
            prop_assert_eq!(p.memory_bytes(), fresh);
            prop_assert_eq!(collect_runs(&p, range), vec![(range, 1)]);
        }
    }

    #[test]
    fn pages_set_one_by_one_collapse() {
        let range = AddrRange::new(START, END);
        let mut p = Placement::new(range, 0, 2);
        let fresh = p.memory_bytes();
        let granule = BASE + GIB + 7 * MIB;
        for va in (granule..granule + MIB).step_by(PAGE as usize) {
            assert_eq!(p.set(AddrRange::new(va, va + PAGE), 1), PAGE);
            assert!(p.memory_bytes() > fresh);
        }
        // The leaf collapsed into its 2 MiB entry; only the 1 GiB node remains.
        let mut whole = Placement::new(range, 0, 2);
        whole.set(AddrRange::new(granule, granule + MIB), 1);
        assert_eq!(p.memory_bytes(), whole.memory_bytes());
        assert_eq!(p.bytes_on(1), MIB);
        for va in (granule..granule + MIB).step_by(PAGE as usize) {
            assert_eq!(p.set(AddrRange::new(va, va + PAGE), 0), PAGE);
        }
        assert_eq!(p.memory_bytes(), fresh);
        assert_eq!(p.bytes_on(0), range.len());

        // The first granule is only partly in the range: its pages below START follow
        // the first page, so covering the range in two pieces still collapses.
        assert_eq!(p.set(AddrRange::new(START, START + PAGE), 1), PAGE);
        assert!(p.memory_bytes() > fresh);
        assert_eq!(
            p.set(AddrRange::new(START + PAGE, END), 1),
            range.len() - PAGE
        );
        assert_eq!(p.memory_bytes(), fresh);
        assert_eq!(p.bytes_on(1), range.len());
    }

    #[test]
    fn petabyte_range_is_cheap() {
        let range = AddrRange::new(0x1000, 0x1000 + (1 << 50));
        let started = Instant::now();
        let mut p = Placement::new(range, 0, 2);
        let hot = AddrRange::new(5 * GIB + 3 * PAGE, 15 * GIB + 3 * PAGE);
        assert_eq!(p.set(hot, 1), 10 * GIB);
        let runs = collect_runs(&p, AddrRange::new(0, u64::MAX));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            runs,
            vec![
                (AddrRange::new(range.start, hot.start), 0),
                (hot, 1),
                (AddrRange::new(hot.end, range.end), 0),
            ]
        );
        assert_eq!(p.bytes_on(1), 10 * GIB);
        assert_eq!(p.bytes_on(0), range.len() - 10 * GIB);
        assert_eq!(p.tier_of(hot.start - PAGE), 0);
        assert_eq!(p.tier_of(hot.start), 1);
        assert_eq!(p.tier_of(hot.end - PAGE), 1);
        assert_eq!(p.tier_of(hot.end), 0);
        assert_eq!(p.tier_of(range.end - PAGE), 0);
    }

    #[test]
    fn set_returns_changed_bytes() {
        let range = AddrRange::new(START, END);
        let mut p = Placement::new(range, 0, 3);
        let r = AddrRange::new(START + MIB, START + 3 * GIB / 2);
        assert_eq!(p.set(r, 2), r.len());
        assert_eq!(p.set(r, 2), 0);
        // Only the part not already on tier 2 changes.
        let wider = AddrRange::new(START, r.end + PAGE);
        assert_eq!(p.set(wider, 2), MIB + PAGE);
        // Clipped to the range.
        assert_eq!(p.set(AddrRange::new(0, !(PAGE - 1)), 1), range.len());
        assert_eq!(p.set(AddrRange::new(END, END + GIB), 0), 0);
        assert_eq!(p.bytes_on(1), range.len());
        assert_eq!(p.bytes_on(0) + p.bytes_on(2), 0);
        assert_eq!(p.range(), range);
        assert_eq!(p.tiers(), 3);
    }

    #[test]
    #[should_panic(expected = "not 4 KiB aligned")]
    fn unaligned_range_panics() {
        Placement::new(AddrRange::new(START, END + 1), 0, 1);
    }

    #[test]
    #[should_panic(expected = "is empty")]
    fn empty_range_panics() {
        Placement::new(AddrRange::new(START, START), 0, 1);
    }
}
