//! The hardware side of address translation: per-core TLBs and paging-structure caches in
//! front of a page walker that sets ACCESSED on every entry it loads and DIRTY on the leaf
//! for writes, as the Intel SDM (vol. 3A, 4.8-4.10) describes.
//!
//! What makes telemetry interesting: a cleared ACCESSED bit is only set again when the
//! walker loads that entry from memory, and it does not while a TLB entry (for the leaf) or
//! a paging-structure-cache entry (for the levels above the deepest cached one) still holds
//! the translation. Only eviction or a flush ends that.

use crate::cache::SetAssoc;
use crate::config::{HostPages, TlbConfig};
use crate::page_table::{EntryRef, PageTable};
use crate::pml::{NoPml, Pml, PmlHook};
use tierscope_core::machine::FLUSH_CEILING_PAGES;
use tierscope_core::{Flush, Level, MachineStats};

/// TLB values pack the leaf entry's location and whether the cached copy has DIRTY set.
#[inline(always)]
fn pack(e: EntryRef, dirty: bool) -> u64 {
    (e.table as u64) << 16 | (e.index as u64) << 1 | dirty as u64
}
#[inline(always)]
fn unpack(v: u64) -> (EntryRef, bool) {
    (
        EntryRef {
            table: (v >> 16) as u32,
            index: ((v >> 1) & 0x7fff) as u16,
        },
        v & 1 != 0,
    )
}

/// L2 TLB tags carry the page size in bit 0 so 4 KiB and 2 MiB entries share the array.
#[inline(always)]
fn l2_tag(page_number: u64, huge: bool) -> u64 {
    page_number << 1 | huge as u64
}

/// One core's translation caches, and what it counted. Everything an access changes
/// besides the page table's bits lives here, so cores can run on different host threads
/// (the page table is shared: `PageTable::mark_*`). Aligned so that two cores' counters
/// never share a cache line (false sharing between host threads).
#[derive(Debug, Clone)]
#[repr(align(128))]
pub struct Core {
    l1_4k: SetAssoc,
    l1_2m: SetAssoc,
    l2: SetAssoc,
    /// Paging-structure caches, indexed by the level of the cached entry minus one:
    /// PDE (pmd), PDPTE (pud), PML4E, PML5E. A hit yields the next table's id.
    psc: [SetAssoc; 4],
    /// How many of the paging-structure caches a walk probes (the levels below the root:
    /// 2 with 4-level paging, 3 with 5-level).
    probes: usize,
    root: Level,
    /// Whether any 2 MiB TLB entry can exist; saves the 2 MiB TLB probes when not.
    has_huge: bool,
    /// Whether a 2 MiB guest page is cached as 4 KiB TLB entries (a virtual machine whose
    /// host backs guest memory with 4 KiB pages: the combined mapping is 4 KiB).
    splinter: bool,
    /// Host (EPT) entries each guest-physical translation of a walk loads (0 on bare
    /// metal): a nested walk of `g` guest entries loads `g + (g + 1) * ept_loads`.
    ept_loads: u64,
    pub stats: MachineStats,
}

impl Core {
    fn new(c: &TlbConfig, root: Level, has_huge: bool) -> Self {
        Core {
            l1_4k: SetAssoc::new(c.l1_4k),
            l1_2m: SetAssoc::new(c.l1_2m),
            l2: SetAssoc::new(c.l2),
            psc: [
                SetAssoc::new(c.pde_cache),
                SetAssoc::new(c.pdpte_cache),
                SetAssoc::new(c.pml4_cache),
                SetAssoc::new(c.pml5_cache),
            ],
            // A cached level at or above the root is never probed.
            probes: [Level::Pmd, Level::Pud, Level::Pml4, Level::Pml5]
                .iter()
                .take_while(|&&l| l < root)
                .count(),
            root,
            has_huge,
            splinter: false,
            ept_loads: 0,
            stats: MachineStats::default(),
        }
    }

    /// Runs the core in a virtual machine over `host` pages (or on bare metal).
    fn set_host(&mut self, host: HostPages, has_huge: bool) {
        self.splinter = has_huge && host.splinters(tierscope_core::PageSize::Huge2M);
        self.has_huge = has_huge && !self.splinter;
        self.ept_loads = host.ept_loads();
    }

    /// Counts a walk that loaded `guest` guest entries: each one's guest-physical address
    /// and the data's are translated through the host's tables too (no host-side caching:
    /// the 2D walk's architectural count, 24 loads for 4-level guest and host tables).
    #[inline(always)]
    fn count_walk_loads(&mut self, guest: u64) {
        self.stats.walk_loads += guest + (guest + 1) * self.ept_loads;
    }

    fn flush_all(&mut self) {
        self.l1_4k.invalidate_all();
        self.l1_2m.invalidate_all();
        self.l2.invalidate_all();
        for p in &mut self.psc {
            p.invalidate_all();
        }
    }

    /// INVLPG of an address in a 2 MiB guest page cached as 4 KiB entries: all of them
    /// (SDM vol. 3A, 4.10.4.1: every TLB entry of a page larger than 4 KiB), and every
    /// paging-structure-cache entry.
    fn invlpg_splintered(&mut self, va: u64) {
        let first = va >> 21 << 9;
        for p4 in first..first + 512 {
            self.l1_4k.invalidate(p4, p4);
            self.l2.invalidate(p4, l2_tag(p4, false));
        }
        self.invlpg(va);
    }

    /// INVLPG: the page's TLB entries (either size) and every paging-structure-cache entry.
    fn invlpg(&mut self, va: u64) {
        let (p4, p2) = (va >> 12, va >> 21);
        self.l1_4k.invalidate(p4, p4);
        self.l1_2m.invalidate(p2, p2);
        self.l2.invalidate(p4, l2_tag(p4, false));
        self.l2.invalidate(p2, l2_tag(p2, true));
        for p in &mut self.psc {
            p.invalidate_all();
        }
    }

    /// Hints the CPU to load what an access to `va` will probably touch in memory: the
    /// line of its leaf entry's bits and its L2 TLB set (both beyond L1 when the heap is
    /// large). Issued some accesses ahead; no effect on results.
    #[inline(always)]
    pub fn prefetch(&self, pt: &PageTable, va: u64) {
        pt.prefetch(pt.leaf_hint(va));
        self.l2.prefetch(va >> 12);
    }

    /// One load or store at `va`, which must be mapped. With PML on, a store sets its
    /// page's EPT dirty bit after the translation (whose walk, if any, dirtied the page
    /// tables first).
    #[inline(always)]
    pub fn access<P: PmlHook>(&mut self, pt: &PageTable, pml: &mut P, va: u64, write: bool) {
        self.translate(pt, pml, va, write);
        if write {
            pml.data_write(va);
        }
    }

    #[inline(always)]
    fn translate<P: PmlHook>(&mut self, pt: &PageTable, pml: &mut P, va: u64, write: bool) {
        self.stats.accesses += 1;
        let (p4, p2) = (va >> 12, va >> 21);
        if let Some(slot) = self.l1_4k.lookup(p4, p4) {
            self.stats.tlb_l1_hits += 1;
            if write {
                Self::write_hit(pt, &mut self.l1_4k, slot);
            }
            return;
        }
        if self.has_huge {
            if let Some(slot) = self.l1_2m.lookup(p2, p2) {
                self.stats.tlb_l1_hits += 1;
                if write {
                    Self::write_hit(pt, &mut self.l1_2m, slot);
                }
                return;
            }
        }
        if let Some(slot) = self.l2.lookup(p4, l2_tag(p4, false)) {
            self.stats.tlb_l2_hits += 1;
            if write {
                Self::write_hit(pt, &mut self.l2, slot);
            }
            let v = self.l2.value(slot);
            self.l1_4k.insert(p4, p4, v);
            return;
        }
        if self.has_huge {
            if let Some(slot) = self.l2.lookup(p2, l2_tag(p2, true)) {
                self.stats.tlb_l2_hits += 1;
                if write {
                    Self::write_hit(pt, &mut self.l2, slot);
                }
                let v = self.l2.value(slot);
                self.l1_2m.insert(p2, p2, v);
                return;
            }
        }
        self.walk(pt, pml, va, write);
    }

    /// A store through a cached translation whose copy has DIRTY clear sets DIRTY in the
    /// leaf entry in memory (SDM 4.8) and in the cached copy.
    #[inline(always)]
    fn write_hit(pt: &PageTable, tlb: &mut SetAssoc, slot: usize) {
        let (e, dirty) = unpack(tlb.value(slot));
        if !dirty {
            pt.mark_dirty(e);
            tlb.set_value(slot, pack(e, true));
        }
    }

    /// A page walk from the deepest paging-structure-cache hit (or CR3), loading and marking
    /// ACCESSED each entry on the way, caching the non-leaf ones, filling the TLBs. Each
    /// table the walker loads from is reported to `pml` first (EPT A/D: the walker's
    /// access to a table counts as a write). Levels are unrolled (0 = PTE ... 4 = PML5, as
    /// `Level::index`): each level's span shift and cache index are constants. Huge leaves
    /// exist only at the page directory (2 MiB pages), so the levels above it always
    /// continue down.
    #[inline(always)]
    fn walk<P: PmlHook>(&mut self, pt: &PageTable, pml: &mut P, va: u64, write: bool) {
        self.stats.walks += 1;
        // Deepest cached level first: PDE, PDPTE, PML4E (5-level paging only). Cache `k`
        // holds entries of level `k + 1`; a hit continues the walk at level `k`.
        let (mut table, start) = 'probe: {
            for k in 0..self.probes {
                let key = va >> (21 + 9 * k);
                if let Some(slot) = self.psc[k].lookup(key, key) {
                    break 'probe (self.psc[k].value(slot) as u32, k);
                }
            }
            (0, self.root.index())
        };
        if start >= 4 {
            table = self.walk_above_pd::<4, P>(pt, pml, table, va);
        }
        if start >= 3 {
            table = self.walk_above_pd::<3, P>(pt, pml, table, va);
        }
        if start >= 2 {
            table = self.walk_above_pd::<2, P>(pt, pml, table, va);
        }
        if start >= 1 {
            // The page directory: a 2 MiB leaf, or the page table's id.
            let e = EntryRef {
                table,
                index: (va >> 21 & 511) as u16,
            };
            debug_assert!(pt.is_present(e), "access to unmapped {va:#x}");
            pml.table_load(table, Level::Pmd, va);
            if pt.walk_load(e) {
                let v = pack(e, pt.walk_leaf_dirty(e, write));
                if self.splinter {
                    // The host maps the guest page with 4 KiB pages: the TLB caches the
                    // 4 KiB around `va`, and the rest of the guest page walks again.
                    let p4 = va >> 12;
                    self.l2.insert(p4, l2_tag(p4, false), v);
                    self.l1_4k.insert(p4, p4, v);
                } else {
                    let p2 = va >> 21;
                    self.l2.insert(p2, l2_tag(p2, true), v);
                    self.l1_2m.insert(p2, p2, v);
                }
                self.count_walk_loads(start as u64);
                return;
            }
            let child = pt.pmd_child(table, e.index as usize, va);
            let key = va >> 21;
            self.psc[0].insert(key, key, child as u64);
            table = child;
        }
        let e = EntryRef {
            table,
            index: (va >> 12 & 511) as u16,
        };
        debug_assert!(pt.is_present(e), "access to unmapped {va:#x}");
        pml.table_load(table, Level::Pte, va);
        pt.walk_load(e);
        let v = pack(e, pt.walk_leaf_dirty(e, write));
        let p4 = va >> 12;
        self.l2.insert(p4, l2_tag(p4, false), v);
        self.l1_4k.insert(p4, p4, v);
        self.count_walk_loads(start as u64 + 1);
    }

    /// One walk step at level `LV` above the page directory: marks the entry ACCESSED,
    /// caches it (unless its cache is the root level's, which no walk probes, so it is
    /// not filled) and returns the next table's id.
    #[inline(always)]
    fn walk_above_pd<const LV: usize, P: PmlHook>(
        &mut self,
        pt: &PageTable,
        pml: &mut P,
        table: u32,
        va: u64,
    ) -> u32 {
        let shift = 12 + 9 * LV as u32;
        let e = EntryRef {
            table,
            index: (va >> shift & 511) as u16,
        };
        debug_assert!(pt.is_present(e), "access to unmapped {va:#x}");
        pml.table_load(table, Level::from_index(LV), va);
        let huge = pt.walk_load(e);
        debug_assert!(!huge, "huge leaves exist only at the page directory");
        let child = pt.child(table, e.index as usize);
        if LV - 1 < self.probes {
            let key = va >> shift;
            self.psc[LV - 1].insert(key, key, child as u64);
        }
        child
    }
}

/// The page table plus the cores that translate through it.
#[derive(Debug, Clone)]
pub struct Mmu {
    pub pt: PageTable,
    pub cores: Vec<Core>,
    /// Whether any 2 MiB mapping exists.
    has_huge: bool,
    /// Whether 2 MiB guest pages are cached as 4 KiB TLB entries (`Core::splinter`).
    splinter: bool,
    /// Simulated PML, once a monitor asked for the write log (`None`: no cost but one
    /// check per store and per walk step).
    pub pml: Option<Box<Pml>>,
}

impl Mmu {
    pub fn new(pt: PageTable, cores: usize, tlb: &TlbConfig, has_huge: bool) -> Self {
        let root = pt.paging().root();
        Mmu {
            pt,
            cores: (0..cores).map(|_| Core::new(tlb, root, has_huge)).collect(),
            has_huge,
            splinter: false,
            pml: None,
        }
    }

    /// Runs the machine in a virtual machine whose host maps guest memory with `host`
    /// pages (or on bare metal, the default).
    pub fn set_host(&mut self, host: HostPages) {
        let has_huge = self.has_huge;
        self.splinter = has_huge && host.splinters(tierscope_core::PageSize::Huge2M);
        self.cores
            .iter_mut()
            .for_each(|c| c.set_host(host, has_huge));
    }

    /// INVLPG of `va` on every core: with splintered guest huge pages, of every 4 KiB
    /// entry of the 2 MiB guest page holding `va`.
    fn invlpg(&mut self, va: u64) {
        let huge = self.splinter && self.pt.leaf(va).is_some_and(|(l, _, _)| l == Level::Pmd);
        for c in &mut self.cores {
            if huge {
                c.invlpg_splintered(va);
            } else {
                c.invlpg(va);
            }
        }
    }

    /// Whether any 2 MiB mapping exists.
    pub fn has_huge(&self) -> bool {
        self.has_huge
    }

    /// One load or store by `core` at `va` (see [`Core::access`]).
    #[inline(always)]
    pub fn access(&mut self, core: usize, va: u64, write: bool) {
        match self.pml.as_deref_mut() {
            Some(p) => self.cores[core].access(&self.pt, p, va, write),
            None => self.cores[core].access(&self.pt, &mut NoPml, va, write),
        }
    }

    /// The counts of all cores.
    pub fn stats(&self) -> MachineStats {
        self.cores.iter().fold(MachineStats::default(), |a, c| {
            let s = c.stats;
            MachineStats {
                accesses: a.accesses + s.accesses,
                tlb_l1_hits: a.tlb_l1_hits + s.tlb_l1_hits,
                tlb_l2_hits: a.tlb_l2_hits + s.tlb_l2_hits,
                walks: a.walks + s.walks,
                walk_loads: a.walk_loads + s.walk_loads,
            }
        })
    }

    /// Drops cached translations on every core; returns true when it was a full flush.
    pub fn flush(&mut self, what: Flush) -> bool {
        match what {
            Flush::All => {
                self.cores.iter_mut().for_each(Core::flush_all);
                true
            }
            Flush::Page(va) => {
                self.invlpg(va);
                false
            }
            Flush::Range { start, end } => {
                let first = start >> 12;
                let last = end.saturating_sub(1) >> 12;
                if end <= start {
                    return false;
                }
                if last - first + 1 > FLUSH_CEILING_PAGES {
                    self.cores.iter_mut().for_each(Core::flush_all);
                    return true;
                }
                for p in first..=last {
                    self.invlpg(p << 12);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CacheGeometry;
    use proptest::prelude::*;
    use std::collections::HashMap;
    use tierscope_core::{AddrRange, PageSize, Paging};

    const BASE: u64 = 0x7f00_0000_0000;

    /// Test page `page` (0..4096): pages 0..2048 are 4 KiB pages, 2 MiB of them at the
    /// start of each of four GiB (so walks go through several PDPTEs, more than a small
    /// PDPTE cache holds); pages 2048.. are the 8 MiB of 2 MiB pages at the fifth GiB.
    fn page_va(page: u64) -> u64 {
        if page < 2048 {
            BASE + ((page / 512) << 30) + (page % 512) * 4096
        } else {
            BASE + (4 << 30) + (page - 2048) * 4096
        }
    }

    fn mmu(tlb: TlbConfig) -> Mmu {
        mmu_with(tlb, Paging::FourLevel)
    }

    fn mmu_with(tlb: TlbConfig, paging: Paging) -> Mmu {
        let mut pt = PageTable::new(paging);
        // The pages of `page_va`: 4 x 2 MiB of 4 KiB pages, then 8 MiB of 2 MiB pages.
        for g in 0..4u64 {
            let start = BASE + (g << 30);
            pt.map(AddrRange::new(start, start + (2 << 20)), PageSize::Base4K);
        }
        pt.map(
            AddrRange::new(BASE + (4 << 30), BASE + (4 << 30) + (8 << 20)),
            PageSize::Huge2M,
        );
        // Leaf hints (which the walker reads its page-table ids from) over the first two
        // GiB only: walks elsewhere take them from the child arrays.
        pt.set_hint_span(AddrRange::new(BASE, BASE + (2 << 30)));
        Mmu::new(pt, 1, &tlb, true)
    }

    /// Every entry on the path to `va`, root first.
    fn path(pt: &PageTable, va: u64) -> Vec<EntryRef> {
        let (leaf, _, _) = pt.leaf(va).unwrap();
        let mut out = vec![];
        let mut l = pt.paging().root();
        loop {
            out.push(pt.locate(l, va).unwrap().0);
            if l == leaf {
                return out;
            }
            l = l.down().unwrap();
        }
    }

    #[test]
    fn first_walk_sets_every_level_and_dirty_on_write() {
        let mut m = mmu(TlbConfig::default());
        m.access(0, BASE + 4096, true);
        for e in path(&m.pt, BASE + 4096) {
            assert!(m.pt.accessed(e));
        }
        let (_, leaf, _) = m.pt.leaf(BASE + 4096).unwrap();
        assert!(m.pt.dirty(leaf));
        m.access(0, BASE + 2 * 4096, false);
        let (_, leaf, _) = m.pt.leaf(BASE + 2 * 4096).unwrap();
        assert!(m.pt.accessed(leaf) && !m.pt.dirty(leaf));
        // A later store through the cached clean translation sets DIRTY without a walk.
        let walks = m.stats().walks;
        m.access(0, BASE + 2 * 4096 + 8, true);
        assert_eq!(m.stats().walks, walks);
        assert!(m.pt.dirty(leaf));
    }

    /// The 4 KiB pieces of the test's 8 MiB of 2 MiB pages (`page_va` 2048..4096).
    fn huge_pieces() -> impl Iterator<Item = u64> {
        (2048..4096).map(page_va)
    }

    fn mmu_on(host: HostPages) -> Mmu {
        let mut m = mmu(TlbConfig::default());
        m.set_host(host);
        m
    }

    #[test]
    fn guest_huge_page_over_4k_host_pages_takes_512_tlb_entries() {
        // One 2 MiB guest page: bare metal walks once for all of it; over 4 KiB host pages
        // each 4 KiB piece is its own TLB entry, and 512 of them fit the 1536-entry STLB.
        for (host, walks) in [(HostPages::BareMetal, 1), (HostPages::Base4K, 512)] {
            let mut m = mmu_on(host);
            huge_pieces()
                .take(512)
                .for_each(|va| m.access(0, va, false));
            assert_eq!(m.stats().walks, walks, "{host}");
            huge_pieces()
                .take(512)
                .for_each(|va| m.access(0, va, false));
            assert_eq!(m.stats().walks, walks, "{host}: the second pass hits");
        }
        // Four guest huge pages are 2048 entries: more than the STLB's 12 ways per set
        // (16 keys a set), so a cyclic pass misses every time; bare metal holds 4.
        for (host, walks) in [(HostPages::BareMetal, 4), (HostPages::Base4K, 2 * 2048)] {
            let mut m = mmu_on(host);
            for _ in 0..2 {
                huge_pieces().for_each(|va| m.access(0, va, false));
            }
            assert_eq!(m.stats().walks, walks, "{host}");
        }
        // 2 MiB and 1 GiB host pages cover the guest page: bare metal's TLB behaviour.
        for host in [HostPages::Huge2M, HostPages::Huge1G] {
            let mut m = mmu_on(host);
            huge_pieces().for_each(|va| m.access(0, va, false));
            assert_eq!(m.stats().walks, 4, "{host}");
        }
    }

    #[test]
    fn cleared_huge_pmd_is_set_again_by_a_splintered_miss() {
        // After a clear without a flush, an access to another 4 KiB of the same guest huge
        // page hits the TLB on bare metal (the bit stays clear) and misses over 4 KiB host
        // pages, whose walk loads the PMD and sets ACCESSED again.
        let va = page_va(2048);
        for (host, set_again) in [(HostPages::BareMetal, false), (HostPages::Base4K, true)] {
            let mut m = mmu_on(host);
            m.access(0, va, false);
            let (level, pmd, _) = m.pt.leaf(va).unwrap();
            assert_eq!(level, Level::Pmd);
            m.pt.clear_accessed(pmd);
            m.access(0, va + 4096, false);
            assert_eq!(m.pt.accessed(pmd), set_again, "{host}");
            // The same 4 KiB again hits in both.
            m.pt.clear_accessed(pmd);
            m.access(0, va + 4096 + 64, false);
            assert!(!m.pt.accessed(pmd), "{host}");
        }
    }

    #[test]
    fn nested_walk_loads_the_host_tables_too() {
        // A walk from the root of a 4 KiB guest page loads 4 guest entries; in a VM each of
        // them and the data's guest-physical address need a host walk of 4 (4 KiB host
        // pages), 3 (2 MiB) or 2 (1 GiB) entries: 24, 19, 14 loads (Bhargava et al.,
        // ASPLOS'08: 24 for 4-level guest and host tables).
        for (host, loads) in [
            (HostPages::BareMetal, 4),
            (HostPages::Base4K, 24),
            (HostPages::Huge2M, 19),
            (HostPages::Huge1G, 14),
        ] {
            let mut m = mmu_on(host);
            m.access(0, BASE, false);
            assert_eq!(m.stats().walk_loads, loads, "{host}");
        }
        // A 2 MiB guest page's walk has 3 guest entries: 3 + 4 x 4 = 19 over 4 KiB pages.
        let mut m = mmu_on(HostPages::Base4K);
        m.access(0, page_va(2048), false);
        assert_eq!(m.stats().walk_loads, 19);
    }

    #[test]
    fn invlpg_drops_every_splinter_of_a_guest_huge_page() {
        let mut m = mmu_on(HostPages::Base4K);
        let (a, b) = (page_va(2048), page_va(2048 + 300));
        m.access(0, a, false);
        m.access(0, b, false);
        let walks = m.stats().walks;
        m.flush(Flush::Page(a));
        m.access(0, b, false);
        assert_eq!(m.stats().walks, walks + 1, "the other piece walks again");
    }

    #[test]
    fn cleared_upper_bit_stays_clear_until_flush() {
        let mut m = mmu(TlbConfig::default());
        m.access(0, BASE, false);
        let (pud, _) = m.pt.locate(Level::Pud, BASE).unwrap();
        m.pt.clear_accessed(pud);
        // A TLB miss on another page under the same PUD hits the PDE cache: no PUD load.
        m.access(0, BASE + (1 << 20), false);
        assert!(!m.pt.accessed(pud));
        m.flush(Flush::All);
        m.access(0, BASE + (1 << 20), false);
        assert!(m.pt.accessed(pud));
    }

    #[test]
    fn range_flush_above_ceiling_is_full() {
        let mut m = mmu(TlbConfig::default());
        assert!(!m.flush(Flush::Range {
            start: BASE,
            end: BASE + 33 * 4096
        }));
        assert!(m.flush(Flush::Range {
            start: BASE,
            end: BASE + 34 * 4096
        }));
    }

    /// A naive model of the same hardware: ACCESSED/DIRTY bits in flat maps keyed by
    /// (level, va >> span_shift), caches as per-set LRU lists of tags. Walking it and the
    /// real MMU side by side checks the compact tables, the packing and the walk order.
    struct Naive {
        a: HashMap<(Level, u64), bool>,
        d: HashMap<(Level, u64), bool>,
        l1_4k: Lru,
        l1_2m: Lru,
        l2: Lru,
        psc: [Lru; 4],
        /// The root level (PML4 with 4-level paging, PML5 with 5-level).
        root: Level,
        /// The host's pages: 2 MiB guest pages over smaller ones are cached as 4 KiB
        /// entries, and every walk's guest loads are followed by host ones.
        host: HostPages,
        stats: MachineStats,
    }

    struct Lru {
        sets: HashMap<u64, Vec<(u64, bool)>>,
        ways: usize,
        mask: u64,
    }

    impl Lru {
        fn new(g: CacheGeometry) -> Self {
            Lru {
                sets: HashMap::new(),
                ways: g.ways as usize,
                mask: (g.entries / g.ways) as u64 - 1,
            }
        }
        /// Returns the cached dirty flag on a hit (and makes it most recent).
        fn hit(&mut self, set: u64, tag: u64) -> Option<bool> {
            let s = self.sets.entry(set & self.mask).or_default();
            let p = s.iter().position(|e| e.0 == tag)?;
            let e = s.remove(p);
            s.push(e);
            Some(e.1)
        }
        fn mark_dirty(&mut self, set: u64, tag: u64) {
            let s = self.sets.get_mut(&(set & self.mask)).unwrap();
            s.last_mut().filter(|e| e.0 == tag).unwrap().1 = true;
        }
        fn insert(&mut self, set: u64, tag: u64, dirty: bool) {
            let s = self.sets.entry(set & self.mask).or_default();
            if s.len() == self.ways {
                s.remove(0);
            }
            s.push((tag, dirty));
        }
        fn clear(&mut self) {
            self.sets.clear();
        }
        fn drop_tag(&mut self, set: u64, tag: u64) {
            if let Some(s) = self.sets.get_mut(&(set & self.mask)) {
                s.retain(|e| e.0 != tag);
            }
        }
    }

    fn leaf_level(va: u64) -> Level {
        if va < BASE + (4 << 30) {
            Level::Pte
        } else {
            Level::Pmd
        }
    }

    impl Naive {
        fn new(t: &TlbConfig, root: Level, host: HostPages) -> Self {
            let mut n = Naive {
                a: HashMap::new(),
                d: HashMap::new(),
                l1_4k: Lru::new(t.l1_4k),
                l1_2m: Lru::new(t.l1_2m),
                l2: Lru::new(t.l2),
                psc: [
                    Lru::new(t.pde_cache),
                    Lru::new(t.pdpte_cache),
                    Lru::new(t.pml4_cache),
                    Lru::new(t.pml5_cache),
                ],
                root,
                host,
                stats: MachineStats::default(),
            };
            for page in 0..4096u64 {
                let va = page_va(page);
                let leaf = leaf_level(va);
                let mut l = root;
                loop {
                    n.a.insert((l, va >> l.span_shift()), false);
                    if l == leaf {
                        break;
                    }
                    l = l.down().unwrap();
                }
                n.d.insert((leaf, va >> leaf.span_shift()), false);
            }
            n
        }

        fn access(&mut self, va: u64, write: bool) {
            let leaf = leaf_level(va);
            let key = (leaf, va >> leaf.span_shift());
            let (p4, p2) = (va >> 12, va >> 21);
            // The size of the TLB entry: the smaller of the guest's and the host's page.
            let small = leaf == Level::Pte || self.host.splinters(PageSize::Huge2M);
            let hit = if small {
                match self.l1_4k.hit(p4, p4) {
                    Some(d) => Some((d, 0)),
                    None => self.l2.hit(p4, l2_tag(p4, false)).map(|d| (d, 2)),
                }
            } else {
                match self.l1_2m.hit(p2, p2) {
                    Some(d) => Some((d, 1)),
                    None => self.l2.hit(p2, l2_tag(p2, true)).map(|d| (d, 3)),
                }
            };
            self.stats.accesses += 1;
            if let Some((cached_dirty, which)) = hit {
                if which < 2 {
                    self.stats.tlb_l1_hits += 1;
                } else {
                    self.stats.tlb_l2_hits += 1;
                }
                if write && !cached_dirty {
                    self.d.insert(key, true);
                    match which {
                        0 => self.l1_4k.mark_dirty(p4, p4),
                        1 => self.l1_2m.mark_dirty(p2, p2),
                        2 => self.l2.mark_dirty(p4, l2_tag(p4, false)),
                        _ => self.l2.mark_dirty(p2, l2_tag(p2, true)),
                    }
                }
                // An L2 hit refills L1 with the L2 copy's state.
                let dirty = cached_dirty || write;
                match which {
                    2 => self.l1_4k.insert(p4, p4, dirty),
                    3 => self.l1_2m.insert(p2, p2, dirty),
                    _ => {}
                }
                return;
            }
            // The caches of the levels below the root, deepest first (the root level's
            // is never probed).
            let mut level = self.root;
            for cached in [Level::Pmd, Level::Pud, Level::Pml4] {
                let k = va >> cached.span_shift();
                if cached > leaf
                    && cached < self.root
                    && self.psc[cached.index() - 1].hit(k, k).is_some()
                {
                    level = cached.down().unwrap();
                    break;
                }
            }
            self.stats.walks += 1;
            let loads = self.stats.walk_loads;
            loop {
                self.stats.walk_loads += 1;
                self.a.insert((level, va >> level.span_shift()), true);
                if level == leaf {
                    break;
                }
                let k = va >> level.span_shift();
                self.psc[level.index() - 1].insert(k, k, false);
                level = level.down().unwrap();
            }
            // Each guest entry's address and the data's go through the host's tables.
            let guest = self.stats.walk_loads - loads;
            self.stats.walk_loads += (guest + 1) * self.host.ept_loads();
            if write {
                self.d.insert(key, true);
            }
            let dirty = self.d[&key];
            if small {
                self.l2.insert(p4, l2_tag(p4, false), dirty);
                self.l1_4k.insert(p4, p4, dirty);
            } else {
                self.l2.insert(p2, l2_tag(p2, true), dirty);
                self.l1_2m.insert(p2, p2, dirty);
            }
        }

        fn invlpg(&mut self, va: u64) {
            let (p4, p2) = (va >> 12, va >> 21);
            if leaf_level(va) == Level::Pmd && self.host.splinters(PageSize::Huge2M) {
                for p in p2 << 9..(p2 + 1) << 9 {
                    self.l1_4k.drop_tag(p, p);
                    self.l2.drop_tag(p, l2_tag(p, false));
                }
            }
            self.l1_4k.drop_tag(p4, p4);
            self.l1_2m.drop_tag(p2, p2);
            self.l2.drop_tag(p4, l2_tag(p4, false));
            self.l2.drop_tag(p2, l2_tag(p2, true));
            self.psc.iter_mut().for_each(Lru::clear);
        }
    }

    fn compare(m: &Mmu, n: &Naive) -> Result<(), TestCaseError> {
        for (&(level, key), &bit) in &n.a {
            let (e, _) = m.pt.locate(level, key << level.span_shift()).unwrap();
            prop_assert_eq!(m.pt.accessed(e), bit, "ACCESSED of {} {:#x}", level, key);
        }
        for (&(level, key), &bit) in &n.d {
            let (e, _) = m.pt.locate(level, key << level.span_shift()).unwrap();
            prop_assert_eq!(m.pt.dirty(e), bit, "DIRTY of {} {:#x}", level, key);
        }
        prop_assert_eq!(m.stats(), n.stats, "hits, walks and loads");
        Ok(())
    }

    fn check_against_oracle(
        tlb: TlbConfig,
        paging: Paging,
        ops: Vec<(u16, bool, u8)>,
    ) -> Result<(), TestCaseError> {
        check_against_oracle_on(tlb, paging, HostPages::BareMetal, ops)
    }

    fn check_against_oracle_on(
        tlb: TlbConfig,
        paging: Paging,
        host: HostPages,
        ops: Vec<(u16, bool, u8)>,
    ) -> Result<(), TestCaseError> {
        let mut m = mmu_with(tlb, paging);
        m.set_host(host);
        let mut n = Naive::new(&tlb, paging.root(), host);
        for (page, write, op) in ops {
            let va = page_va(page as u64 % 4096);
            match op % 8 {
                0 => {
                    // A monitor clears one entry on the path.
                    let p = path(&m.pt, va);
                    let e = p[(page as usize) % p.len()];
                    m.pt.clear_accessed(e);
                    let level = m.pt.level(e.table);
                    n.a.insert((level, va >> level.span_shift()), false);
                }
                1 => {
                    m.flush(Flush::Page(va));
                    n.invlpg(va);
                }
                2 if page % 16 == 0 => {
                    m.flush(Flush::All);
                    n.l1_4k.clear();
                    n.l1_2m.clear();
                    n.l2.clear();
                    n.psc.iter_mut().for_each(Lru::clear);
                }
                _ => {
                    m.access(0, va, write);
                    n.access(va, write);
                }
            }
            compare(&m, &n)?;
        }
        Ok(())
    }

    proptest! {
        // A quarter of the default cases: the bare-metal oracle tests cover the shared
        // walk; these add the host's page size.
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn walker_matches_naive_oracle_in_a_vm(ops in proptest::collection::vec((0u16..4096, any::<bool>(), 0u8..8), 1..300), host in 0usize..3) {
            // Guest 2 MiB pages over 4 KiB host pages are cached as 4 KiB entries; over
            // 2 MiB or 1 GiB ones as on bare metal, but every walk loads host entries too.
            let host = [HostPages::Base4K, HostPages::Huge2M, HostPages::Huge1G][host];
            check_against_oracle_on(TlbConfig::default(), Paging::FourLevel, host, ops)?;
        }
    }

    proptest! {
        #[test]
        fn walker_matches_naive_oracle(ops in proptest::collection::vec((0u16..4096, any::<bool>(), 0u8..8), 1..300)) {
            check_against_oracle(TlbConfig::default(), Paging::FourLevel, ops)?;
        }

        #[test]
        fn walker_matches_naive_oracle_five_level(ops in proptest::collection::vec((0u16..4096, any::<bool>(), 0u8..8), 1..300)) {
            // The walk from PML5, and the PML4E cache probed and filled.
            check_against_oracle(TlbConfig::default(), Paging::FiveLevel, ops)?;
        }

        #[test]
        fn walker_matches_naive_oracle_small_caches(ops in proptest::collection::vec((0u16..4096, any::<bool>(), 0u8..8), 1..300)) {
            let tlb = TlbConfig {
                l1_4k: CacheGeometry::new(4, 2), l1_2m: CacheGeometry::new(2, 1), l2: CacheGeometry::new(8, 2),
                pml5_cache: CacheGeometry::new(1, 1), pml4_cache: CacheGeometry::new(1, 1),
                pdpte_cache: CacheGeometry::new(2, 1), pde_cache: CacheGeometry::new(2, 2),
            };
            check_against_oracle(tlb, Paging::FourLevel, ops)?;
        }

        #[test]
        fn tiny_caches_walk_every_time(ops in proptest::collection::vec((0u16..64, any::<bool>(), 2u8..8), 1..200)) {
            // With one-entry caches and distinct consecutive pages, every access walks in
            // full and must set every entry on its path, like a machine without caches.
            let one = CacheGeometry::new(1, 1);
            let tlb = TlbConfig { l1_4k: one, l1_2m: one, l2: one, pml5_cache: one, pml4_cache: one, pdpte_cache: one, pde_cache: one };
            let mut m = mmu(tlb);
            let mut last = u64::MAX;
            for (page, write, _) in ops {
                let va = BASE + (page as u64) * 4096 * 3 % (16 << 20);
                if va >> 21 == last >> 21 { continue; }
                last = va;
                for e in path(&m.pt, va) { m.pt.clear_accessed(e); }
                m.access(0, va, write);
                let p = path(&m.pt, va);
                let leaf = *p.last().unwrap();
                prop_assert!(m.pt.accessed(leaf));
                prop_assert_eq!(m.pt.dirty(leaf) || !write, true);
            }
        }
    }
}
