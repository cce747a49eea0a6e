//! A compact x86-64 radix page table: per table, 512 entries' worth of four bits (present,
//! huge leaf, ACCESSED, DIRTY) and, for non-leaf tables, 512 child indices. The bits are
//! interleaved per 64 entries ([present, huge, accessed, dirty] words side by side) so one
//! walk step touches one cache line. The words are atomics so that the walkers of several
//! simulated cores can set bits from several host threads at once (`mark`: a relaxed
//! load, and a `fetch_or` only when the bit is clear, so the common already-set case
//! writes nothing); everything else changes them through `&mut self` without atomic
//! instructions. A 1 TiB heap of 4 KiB pages needs 2^19 page tables
//! at 256 bytes of bits each: about 130 MiB.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tierscope_core::{AddrRange, Level, PageSize, Paging};

/// Where one entry lives: its table and its index in that table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryRef {
    pub table: u32,
    pub index: u16,
}

/// Which bit of an entry.
#[derive(Clone, Copy)]
#[repr(usize)]
enum Bit {
    Present = 0,
    Huge = 1,
    Accessed = 2,
    Dirty = 3,
}

/// 64 entries' bits: [present, huge, accessed, dirty].
#[derive(Debug, Default)]
struct Word([AtomicU64; 4]);

impl Word {
    /// The four bit words, through exclusive access (plain loads and stores).
    fn bits(&mut self) -> [&mut u64; 4] {
        self.0.each_mut().map(AtomicU64::get_mut)
    }
}

impl Clone for Word {
    fn clone(&self) -> Self {
        Word(self.0.each_ref().map(|w| AtomicU64::new(w.load(Relaxed))))
    }
}

const NO_CHILDREN: u32 = u32::MAX;

/// The page table of one process. Table 0 is the root.
#[derive(Debug, Clone)]
pub struct PageTable {
    paging: Paging,
    level_of: Vec<Level>,
    /// Eight words per table.
    words: Vec<Word>,
    /// Per table: start of its 512 child slots in `children`, or NO_CHILDREN for page tables.
    child_base: Vec<u32>,
    children: Vec<u32>,
    /// Where [`PageTable::leaf_hint`] finds the leaf table of each 2 MiB from
    /// `leaf_hint_first` (a 2 MiB block number) on: `table << 1 | 1` when the block is one
    /// huge leaf of page directory `table`, `table << 1` for its page table, NO_CHILDREN
    /// when unmapped (see [`PageTable::set_hint_span`]). The walker reads page-table ids
    /// from them (`pmd_child`), so they must always equal the child arrays: every change
    /// of a directory entry's child updates them.
    leaf_hint_first: u64,
    leaf_hints: Vec<u32>,
}

/// Index of `va` in a table at `level`.
#[inline(always)]
pub fn index_at(level: Level, va: u64) -> usize {
    ((va >> level.span_shift()) & 511) as usize
}

impl PageTable {
    pub fn new(paging: Paging) -> Self {
        let mut pt = PageTable {
            paging,
            level_of: vec![],
            words: vec![],
            child_base: vec![],
            children: vec![],
            leaf_hint_first: 0,
            leaf_hints: vec![],
        };
        pt.new_table(paging.root());
        pt
    }

    pub fn paging(&self) -> Paging {
        self.paging
    }

    pub fn table_count(&self) -> usize {
        self.level_of.len()
    }

    /// Bytes used by the table arrays.
    pub fn memory_bytes(&self) -> usize {
        self.level_of.len() * (8 * 32 + 4 + 1) + (self.children.len() + self.leaf_hints.len()) * 4
    }

    fn new_table(&mut self, level: Level) -> u32 {
        let id = self.level_of.len() as u32;
        self.level_of.push(level);
        self.words.extend((0..8).map(|_| Word::default()));
        if level == Level::Pte {
            self.child_base.push(NO_CHILDREN);
        } else {
            self.child_base.push(self.children.len() as u32);
            self.children.extend(std::iter::repeat_n(NO_CHILDREN, 512));
        }
        id
    }

    #[inline(always)]
    fn get(&self, table: u32, i: usize, bit: Bit) -> bool {
        self.words[table as usize * 8 + (i >> 6)].0[bit as usize].load(Relaxed) >> (i & 63) & 1 != 0
    }
    #[inline(always)]
    fn set(&mut self, table: u32, i: usize, bit: Bit) {
        *self.words[table as usize * 8 + (i >> 6)].0[bit as usize].get_mut() |= 1 << (i & 63);
    }
    #[inline(always)]
    fn clear(&mut self, table: u32, i: usize, bit: Bit) {
        *self.words[table as usize * 8 + (i >> 6)].0[bit as usize].get_mut() &= !(1 << (i & 63));
    }
    /// Sets a bit through shared access (the walkers): ORs are commutative, so the result
    /// does not depend on which core sets it first.
    #[inline(always)]
    fn mark(&self, table: u32, i: usize, bit: Bit) {
        let w = &self.words[table as usize * 8 + (i >> 6)].0[bit as usize];
        let m = 1 << (i & 63);
        if w.load(Relaxed) & m == 0 {
            w.fetch_or(m, Relaxed);
        }
    }

    /// Hints the CPU to load the cache line holding `e`'s bits (the exact engine issues
    /// this a few accesses ahead: the walk is memory-bound).
    #[inline(always)]
    pub fn prefetch(&self, e: EntryRef) {
        if let Some(w) = self
            .words
            .get(e.table as usize * 8 + (e.index as usize >> 6))
        {
            crate::prefetch::line(w);
        }
    }

    #[inline(always)]
    pub fn child(&self, table: u32, index: usize) -> u32 {
        self.children[self.child_base[table as usize] as usize + index]
    }

    /// Reserves room for the tables that mapping `ranges` (each with its page size) may
    /// need (per range and level, at most its span's tables plus two partial ones), so
    /// the bit words are one allocation, advised to huge pages before it is written. The
    /// walker reads them at random, a line per access: over a 64 GiB heap of 4 KiB pages
    /// they are 8 MiB, whose 4 KiB pages outnumber the host CPU's TLB entries, so most
    /// accesses would also pay a host page walk (a nested one in a VM).
    pub fn reserve_for(&mut self, ranges: impl Iterator<Item = (AddrRange, PageSize)>) {
        let root = self.paging.root().index();
        let tables: usize = ranges
            .map(|(range, page)| {
                (page.leaf_level().index()..root)
                    .map(|l| (range.len() >> (21 + 9 * l as u32)) as usize + 2)
                    .sum::<usize>()
            })
            .sum();
        self.words.reserve(tables * 8);
        crate::prefetch::advise_huge(&self.words);
    }

    /// Maps `range` (aligned to `page`) with leaves of size `page`, creating tables on the
    /// way. Remapping a mapped page is a bug.
    pub fn map(&mut self, range: AddrRange, page: PageSize) {
        let step = page.bytes();
        assert!(
            range.start.is_multiple_of(step) && range.end.is_multiple_of(step),
            "unaligned map {range}"
        );
        let leaf = page.leaf_level();
        let mut va = range.start;
        while va < range.end {
            let mut table = 0u32;
            let mut level = self.paging.root();
            while level > leaf {
                let i = index_at(level, va);
                assert!(
                    !self.get(table, i, Bit::Huge),
                    "map over a huge page at {va:#x}"
                );
                let mut child = self.child(table, i);
                if child == NO_CHILDREN {
                    child = self.new_table(level.down().expect("above leaf"));
                    let base = self.child_base[table as usize] as usize;
                    self.children[base + i] = child;
                    self.set(table, i, Bit::Present);
                }
                table = child;
                level = level.down().expect("above leaf");
            }
            let i = index_at(leaf, va);
            assert!(!self.get(table, i, Bit::Present), "double map at {va:#x}");
            self.set(table, i, Bit::Present);
            if leaf != Level::Pte {
                self.set(table, i, Bit::Huge);
            }
            va += step;
        }
        if !self.leaf_hints.is_empty() {
            for block in range.start >> 21..range.end.div_ceil(1 << 21) {
                self.update_leaf_hint(block << 21);
            }
        }
    }

    /// Where the leaf bits for `va` are, for prefetching: one load for addresses in the
    /// hint span, else found through the child arrays alone (no bit checks, no counting).
    #[inline(always)]
    pub fn leaf_hint(&self, va: u64) -> EntryRef {
        match self.leaf_hints.get(self.hint_block(va)) {
            Some(&h) if h != NO_CHILDREN => EntryRef {
                table: h >> 1,
                index: (va >> (12 + 9 * (h & 1)) & 511) as u16,
            },
            _ => self.leaf_by_children(va),
        }
    }

    /// The page table under the page-directory entry `(table, index)` that maps `va`
    /// (a present entry that is not a huge leaf): the walker's step from the directory.
    /// For `va` in the hint span it is read from the leaf hints, which hold the same id
    /// (every change of a directory entry's child, `map`, `split_huge` and
    /// `collapse_huge`, updates them) and which the prefetch stage has just read for the
    /// same address, where the child array would be one more load from memory.
    #[inline(always)]
    pub fn pmd_child(&self, table: u32, index: usize, va: u64) -> u32 {
        match self.leaf_hints.get(self.hint_block(va)) {
            Some(&h) => {
                debug_assert_eq!(h, self.child(table, index) << 1, "stale hint at {va:#x}");
                h >> 1
            }
            None => self.child(table, index),
        }
    }

    /// Hints the CPU to load the line of `va`'s leaf hint, for [`PageTable::leaf_hint`]
    /// some accesses later (see `exec::HINT_LOOKAHEAD`).
    #[inline(always)]
    pub fn prefetch_hint(&self, va: u64) {
        if let Some(h) = self.leaf_hints.get(self.hint_block(va)) {
            crate::prefetch::line(h);
        }
    }

    /// The leaf entry for `va` through the child arrays from the root: where the walk
    /// would end, or the entry where the path ends.
    fn leaf_by_children(&self, va: u64) -> EntryRef {
        let (mut table, mut shift) = (0, self.paging.root().span_shift());
        while shift > 12 {
            let base = self.child_base[table as usize];
            let child = self.children[base as usize + (va >> shift & 511) as usize];
            if child == NO_CHILDREN {
                break;
            }
            table = child;
            shift -= 9;
        }
        EntryRef {
            table,
            index: (va >> shift & 511) as u16,
        }
    }

    /// Lets [`PageTable::leaf_hint`] find the leaf table of addresses in `span` (the heap:
    /// every access prefetches its leaf) with one load from a table of one `u32` per
    /// 2 MiB, instead of following the child arrays (a chain of dependent loads and bounds
    /// checks). Later maps, splits and collapses keep the hints exact, as the walker
    /// relies on them (`pmd_child`).
    pub fn set_hint_span(&mut self, span: AddrRange) {
        if span.is_empty() {
            return;
        }
        self.leaf_hint_first = span.start >> 21;
        self.leaf_hints = (span.start >> 21..=(span.end - 1) >> 21)
            .map(|b| self.leaf_hint_of(b << 21))
            .collect();
    }

    /// The index in `leaf_hints` of the 2 MiB block holding `va` (past the end, wrapped
    /// or not, when `va` is outside the span).
    #[inline(always)]
    fn hint_block(&self, va: u64) -> usize {
        (va >> 21).wrapping_sub(self.leaf_hint_first) as usize
    }

    /// The hint of the 2 MiB block holding `va` (see `leaf_hints`).
    fn leaf_hint_of(&self, va: u64) -> u32 {
        match self.leaf(va) {
            Some((Level::Pmd, e, _)) => e.table << 1 | 1,
            Some((Level::Pte, e, _)) => e.table << 1,
            _ => NO_CHILDREN,
        }
    }

    /// Brings the hint of the 2 MiB block holding `va` up to date, if it has one.
    fn update_leaf_hint(&mut self, va: u64) {
        let block = self.hint_block(va);
        if block < self.leaf_hints.len() {
            self.leaf_hints[block] = self.leaf_hint_of(va);
        }
    }

    /// Follows the path to `va` down to `level`, as a software walk does. Returns the entry
    /// and the number of tables read, or `None` when the path ends earlier (an entry is not
    /// present, or a huge leaf sits above `level`).
    pub fn locate(&self, level: Level, va: u64) -> Option<(EntryRef, u32)> {
        let mut table = 0u32;
        let mut l = self.paging.root();
        let mut steps = 1;
        if level > l {
            return None;
        }
        while l > level {
            let i = index_at(l, va);
            if !self.get(table, i, Bit::Present) || self.get(table, i, Bit::Huge) {
                return None;
            }
            table = self.child(table, i);
            l = l.down().expect("above target level");
            steps += 1;
        }
        let i = index_at(level, va);
        self.get(table, i, Bit::Present).then_some((
            EntryRef {
                table,
                index: i as u16,
            },
            steps,
        ))
    }

    /// The leaf entry mapping `va` and its level.
    pub fn leaf(&self, va: u64) -> Option<(Level, EntryRef, u32)> {
        let mut table = 0u32;
        let mut l = self.paging.root();
        let mut steps = 1;
        loop {
            let i = index_at(l, va);
            if !self.get(table, i, Bit::Present) {
                return None;
            }
            let e = EntryRef {
                table,
                index: i as u16,
            };
            if l == Level::Pte || self.get(table, i, Bit::Huge) {
                return Some((l, e, steps));
            }
            table = self.child(table, i);
            l = l.down().expect("non-leaf above pte");
            steps += 1;
        }
    }

    #[inline(always)]
    pub fn is_present(&self, e: EntryRef) -> bool {
        self.get(e.table, e.index as usize, Bit::Present)
    }
    #[inline(always)]
    pub fn level(&self, table: u32) -> Level {
        self.level_of[table as usize]
    }
    #[inline(always)]
    pub fn accessed(&self, e: EntryRef) -> bool {
        self.get(e.table, e.index as usize, Bit::Accessed)
    }
    #[inline(always)]
    pub fn set_accessed(&mut self, e: EntryRef) {
        self.set(e.table, e.index as usize, Bit::Accessed)
    }
    /// The walker's load of `e`: sets its ACCESSED bit and returns whether it is a huge
    /// leaf (one address computation for both; they share a word group).
    #[inline(always)]
    pub fn walk_load(&self, e: EntryRef) -> bool {
        let w = &self.words[e.table as usize * 8 + (e.index as usize >> 6)].0;
        let m = 1 << (e.index & 63);
        let a = &w[Bit::Accessed as usize];
        if a.load(Relaxed) & m == 0 {
            a.fetch_or(m, Relaxed);
        }
        w[Bit::Huge as usize].load(Relaxed) & m != 0
    }

    /// The walker at the leaf `e`: sets DIRTY for a store and returns DIRTY.
    #[inline(always)]
    pub fn walk_leaf_dirty(&self, e: EntryRef, write: bool) -> bool {
        let d = &self.words[e.table as usize * 8 + (e.index as usize >> 6)].0[Bit::Dirty as usize];
        let m = 1 << (e.index & 63);
        let old = d.load(Relaxed);
        if write && old & m == 0 {
            d.fetch_or(m, Relaxed);
            return true;
        }
        old & m != 0
    }

    /// Sets DIRTY through shared access (the walker, and stores through a clean cached
    /// translation).
    #[inline(always)]
    pub fn mark_dirty(&self, e: EntryRef) {
        self.mark(e.table, e.index as usize, Bit::Dirty)
    }
    #[inline(always)]
    pub fn clear_accessed(&mut self, e: EntryRef) {
        self.clear(e.table, e.index as usize, Bit::Accessed)
    }
    #[inline(always)]
    pub fn dirty(&self, e: EntryRef) -> bool {
        self.get(e.table, e.index as usize, Bit::Dirty)
    }
    #[inline(always)]
    pub fn set_dirty(&mut self, e: EntryRef) {
        self.set(e.table, e.index as usize, Bit::Dirty)
    }
    #[inline(always)]
    pub fn clear_dirty(&mut self, e: EntryRef) {
        self.clear(e.table, e.index as usize, Bit::Dirty)
    }

    /// Splits the huge leaf mapping `va` into a page table of 512 base pages, each
    /// inheriting the huge entry's ACCESSED and DIRTY bits (Linux's `__split_huge_pmd`
    /// copies young and dirty). Returns false when `va` is not under a 2 MiB leaf. The
    /// caller flushes the translations.
    pub fn split_huge(&mut self, va: u64) -> bool {
        let Some((Level::Pmd, e, _)) = self.leaf(va) else {
            return false;
        };
        let (accessed, dirty) = (self.accessed(e), self.dirty(e));
        let table = self.new_table(Level::Pte);
        for w in &mut self.words[table as usize * 8..table as usize * 8 + 8] {
            let [present, _, a, d] = w.bits();
            *present = u64::MAX;
            *a = if accessed { u64::MAX } else { 0 };
            *d = if dirty { u64::MAX } else { 0 };
        }
        let i = e.index as usize;
        self.clear(e.table, i, Bit::Huge);
        let base = self.child_base[e.table as usize] as usize;
        self.children[base + i] = table;
        self.update_leaf_hint(va);
        true
    }

    /// Collapses the page table under the PMD entry covering `va` into one huge leaf when
    /// all 512 base pages are present (khugepaged); the leaf is ACCESSED (DIRTY) when any
    /// base page was. Returns false otherwise. The old table stays allocated (unreachable);
    /// the caller flushes the translations.
    pub fn collapse_huge(&mut self, va: u64) -> bool {
        let Some((pmd, _)) = self.locate(Level::Pmd, va) else {
            return false;
        };
        let i = pmd.index as usize;
        if self.get(pmd.table, i, Bit::Huge) {
            return false;
        }
        let table = self.child(pmd.table, i);
        if table == NO_CHILDREN {
            return false;
        }
        let words = &self.words[table as usize * 8..table as usize * 8 + 8];
        let any =
            |bit: Bit, f: fn(u64) -> bool| words.iter().any(|w| f(w.0[bit as usize].load(Relaxed)));
        if any(Bit::Present, |w| w != u64::MAX) {
            return false;
        }
        let accessed = any(Bit::Accessed, |w| w != 0);
        let dirty = any(Bit::Dirty, |w| w != 0);
        self.set(pmd.table, i, Bit::Huge);
        let base = self.child_base[pmd.table as usize] as usize;
        self.children[base + i] = NO_CHILDREN;
        for (bit, on) in [(Bit::Accessed, accessed), (Bit::Dirty, dirty)] {
            if on {
                self.set(pmd.table, i, bit);
            } else {
                self.clear(pmd.table, i, bit);
            }
        }
        self.update_leaf_hint(va);
        true
    }

    /// The state after the workload initialised its memory with a write to every page:
    /// ACCESSED set on every present entry at every level, DIRTY on every leaf.
    pub fn touch_everything(&mut self) {
        for (t, level) in self.level_of.iter().enumerate() {
            for w in &mut self.words[t * 8..t * 8 + 8] {
                let [present, huge, a, d] = w.bits();
                *a = *present;
                *d = if *level == Level::Pte {
                    *present
                } else {
                    *huge
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_and_locate() {
        let mut pt = PageTable::new(Paging::FourLevel);
        let base = 0x7f00_0000_0000u64;
        pt.map(AddrRange::new(base, base + (4 << 20)), PageSize::Base4K);
        pt.map(
            AddrRange::new(base + (4 << 20), base + (8 << 20)),
            PageSize::Huge2M,
        );
        // 1 PML4 + 1 PDPT + 1 PD + 2 PTs.
        assert_eq!(pt.table_count(), 5);
        let (lvl, _, steps) = pt.leaf(base + 4096).unwrap();
        assert_eq!((lvl, steps), (Level::Pte, 4));
        let (lvl, _, steps) = pt.leaf(base + (5 << 20)).unwrap();
        assert_eq!((lvl, steps), (Level::Pmd, 3));
        assert!(pt.locate(Level::Pte, base + (5 << 20)).is_none());
        assert!(pt.locate(Level::Pmd, base + (5 << 20)).is_some());
        assert!(pt.leaf(base + (9 << 20)).is_none());
        assert!(pt.locate(Level::Pml5, base).is_none());
        let (root, steps) = pt.locate(Level::Pml4, base).unwrap();
        assert_eq!((root.table, steps), (0, 1));
    }

    #[test]
    fn split_and_collapse_keep_the_bits() {
        let mut pt = PageTable::new(Paging::FourLevel);
        let base = 0x7f00_0000_0000u64;
        pt.map(AddrRange::new(base, base + (4 << 20)), PageSize::Huge2M);
        pt.touch_everything();
        let (huge, _) = pt.locate(Level::Pmd, base).unwrap();
        pt.clear_dirty(huge);
        assert!(
            !pt.collapse_huge(base),
            "nothing to collapse under a huge leaf"
        );
        assert!(pt.split_huge(base + 12345));
        assert!(!pt.split_huge(base + 4096), "already split");
        // 512 base pages, ACCESSED and clean as the huge page was; the other huge page
        // is untouched.
        for k in [0u64, 1, 511] {
            let (lvl, e, steps) = pt.leaf(base + k * 4096).unwrap();
            assert_eq!((lvl, steps), (Level::Pte, 4));
            assert!(pt.accessed(e) && !pt.dirty(e));
        }
        assert_eq!(pt.leaf(base + (3 << 20)).unwrap().0, Level::Pmd);
        // Clear every base page but one: the collapsed leaf is ACCESSED, one write DIRTY.
        for k in 0..512u64 {
            let (e, _) = pt.locate(Level::Pte, base + k * 4096).unwrap();
            pt.clear_accessed(e);
        }
        let (e, _) = pt.locate(Level::Pte, base + 7 * 4096).unwrap();
        pt.set_accessed(e);
        pt.set_dirty(e);
        assert!(pt.collapse_huge(base));
        let (lvl, e, _) = pt.leaf(base + 4096).unwrap();
        assert_eq!(lvl, Level::Pmd);
        assert!(pt.accessed(e) && pt.dirty(e));
        assert!(pt.locate(Level::Pte, base).is_none());
        assert_eq!(
            pt.leaf_hint(base).table,
            e.table,
            "the hint stops at the huge leaf"
        );
        // The same from the page directory (as the engine sets it after mapping).
        pt.set_hint_span(AddrRange::new(base, base + (4 << 20)));
        assert_eq!(pt.leaf_hint(base).table, e.table);
        // Split again: every page inherits the collapsed leaf's bits.
        assert!(pt.split_huge(base));
        let (_, e, _) = pt.leaf(base + 100 * 4096).unwrap();
        assert!(pt.accessed(e) && pt.dirty(e));
        assert_eq!(
            pt.leaf_hint(base + 100 * 4096),
            e,
            "the hint follows the split"
        );
        assert!(pt.collapse_huge(base));
        let (_, e, _) = pt.leaf(base + 100 * 4096).unwrap();
        assert_eq!(pt.leaf_hint(base + 100 * 4096), e, "and the collapse");
        let (_, e, _) = pt.leaf(base + (3 << 20) + 4096).unwrap();
        assert_eq!(
            pt.leaf_hint(base + (3 << 20) + 4096),
            e,
            "the other huge page"
        );
    }

    proptest::proptest! {
        /// The walker takes a directory entry's child from the leaf hints in their span
        /// (`pmd_child`): after any maps, splits and collapses they must equal the child
        /// arrays, and `leaf_hint` must name the leaf that `leaf` finds.
        #[test]
        fn leaf_hints_follow_every_change(ops in proptest::collection::vec((0u8..3, 0u64..16), 1..60)) {
            let base = 0x7f00_0000_0000u64;
            let mut pt = PageTable::new(Paging::FourLevel);
            // 8 MiB of 4 KiB pages and 8 MiB of 2 MiB pages (8 blocks of 2 MiB); the span
            // also covers 16 MiB mapped only later, a block at a time, of either size.
            pt.map(AddrRange::new(base, base + (8 << 20)), PageSize::Base4K);
            pt.map(AddrRange::new(base + (8 << 20), base + (16 << 20)), PageSize::Huge2M);
            pt.set_hint_span(AddrRange::new(base, base + (32 << 20)));
            let mut mapped = 8u64;
            for (op, block) in ops {
                let va = base + (block << 21) + 4096 * block;
                match op {
                    0 => { pt.split_huge(va); }
                    1 => { pt.collapse_huge(va); }
                    _ if mapped < 16 => {
                        let start = base + (mapped << 21);
                        let page = if block % 2 == 0 { PageSize::Base4K } else { PageSize::Huge2M };
                        pt.map(AddrRange::new(start, start + (2 << 20)), page);
                        mapped += 1;
                    }
                    _ => {}
                }
                for b in 0..mapped {
                    let va = base + (b << 21) + 4096 * (b % 7);
                    let (level, leaf, _) = pt.leaf(va).unwrap();
                    proptest::prop_assert_eq!(pt.leaf_hint(va), leaf);
                    if level == Level::Pte {
                        let (pmd, _) = pt.locate(Level::Pmd, va).unwrap();
                        proptest::prop_assert_eq!(
                            pt.pmd_child(pmd.table, pmd.index as usize, va),
                            pt.child(pmd.table, pmd.index as usize)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn touch_everything_sets_present_bits_only() {
        let mut pt = PageTable::new(Paging::FiveLevel);
        let base = 0x00f0_0000_0000_0000u64;
        pt.map(AddrRange::new(base, base + (2 << 20)), PageSize::Huge2M);
        pt.touch_everything();
        let (e, _) = pt.locate(Level::Pmd, base).unwrap();
        assert!(pt.accessed(e) && pt.dirty(e));
        let (root, _) = pt.locate(Level::Pml5, base).unwrap();
        assert!(pt.accessed(root) && !pt.dirty(root));
        let mut other = root;
        other.index += 1;
        assert!(!pt.accessed(other));
    }
}
