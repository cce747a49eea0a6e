//! A compact x86-64 radix page table: per table, four 512-bit arrays (present, huge leaf,
//! ACCESSED, DIRTY) and, for non-leaf tables, 512 child indices. A 1 TiB heap of 4 KiB pages
//! needs 2^19 page tables at 256 bytes of bits each: about 130 MiB.

use tierscope_core::{AddrRange, Level, PageSize, Paging};

/// Where one entry lives: its table and its index in that table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryRef {
    pub table: u32,
    pub index: u16,
}

type Bits = [u64; 8];

#[inline(always)]
fn get(bits: &Bits, i: usize) -> bool {
    bits[i >> 6] >> (i & 63) & 1 != 0
}
#[inline(always)]
fn set(bits: &mut Bits, i: usize) {
    bits[i >> 6] |= 1 << (i & 63);
}
#[inline(always)]
fn clear(bits: &mut Bits, i: usize) {
    bits[i >> 6] &= !(1 << (i & 63));
}

const NO_CHILDREN: u32 = u32::MAX;

/// The page table of one process. Table 0 is the root.
#[derive(Debug, Clone)]
pub struct PageTable {
    paging: Paging,
    level_of: Vec<Level>,
    present: Vec<Bits>,
    huge: Vec<Bits>,
    accessed: Vec<Bits>,
    dirty: Vec<Bits>,
    /// Per table: start of its 512 child slots in `children`, or NO_CHILDREN for page tables.
    child_base: Vec<u32>,
    children: Vec<u32>,
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
            present: vec![],
            huge: vec![],
            accessed: vec![],
            dirty: vec![],
            child_base: vec![],
            children: vec![],
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
        self.level_of.len() * (4 * 64 + 4 + 1) + self.children.len() * 4
    }

    fn new_table(&mut self, level: Level) -> u32 {
        let id = self.level_of.len() as u32;
        self.level_of.push(level);
        self.present.push([0; 8]);
        self.huge.push([0; 8]);
        self.accessed.push([0; 8]);
        self.dirty.push([0; 8]);
        if level == Level::Pte {
            self.child_base.push(NO_CHILDREN);
        } else {
            self.child_base.push(self.children.len() as u32);
            self.children.extend(std::iter::repeat_n(NO_CHILDREN, 512));
        }
        id
    }

    #[inline(always)]
    pub fn child(&self, table: u32, index: usize) -> u32 {
        self.children[self.child_base[table as usize] as usize + index]
    }

    /// Maps `range` (aligned to `page`) with leaves of size `page`, creating tables on the
    /// way. Remapping a mapped page is a bug.
    pub fn map(&mut self, range: AddrRange, page: PageSize) {
        let step = page.bytes();
        assert!(
            range.start % step == 0 && range.end % step == 0,
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
                    !get(&self.huge[table as usize], i),
                    "map over a huge page at {va:#x}"
                );
                let mut child = self.child(table, i);
                if child == NO_CHILDREN {
                    child = self.new_table(level.down().expect("above leaf"));
                    let base = self.child_base[table as usize] as usize;
                    self.children[base + i] = child;
                    set(&mut self.present[table as usize], i);
                }
                table = child;
                level = level.down().expect("above leaf");
            }
            let i = index_at(leaf, va);
            assert!(
                !get(&self.present[table as usize], i),
                "double map at {va:#x}"
            );
            set(&mut self.present[table as usize], i);
            if leaf != Level::Pte {
                set(&mut self.huge[table as usize], i);
            }
            va += step;
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
            let t = table as usize;
            if !get(&self.present[t], i) || get(&self.huge[t], i) {
                return None;
            }
            table = self.child(table, i);
            l = l.down().expect("above target level");
            steps += 1;
        }
        let i = index_at(level, va);
        get(&self.present[table as usize], i).then_some((
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
            let t = table as usize;
            if !get(&self.present[t], i) {
                return None;
            }
            let e = EntryRef {
                table,
                index: i as u16,
            };
            if l == Level::Pte || get(&self.huge[t], i) {
                return Some((l, e, steps));
            }
            table = self.child(table, i);
            l = l.down().expect("non-leaf above pte");
            steps += 1;
        }
    }

    #[inline(always)]
    pub fn is_present(&self, e: EntryRef) -> bool {
        get(&self.present[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn is_huge(&self, e: EntryRef) -> bool {
        get(&self.huge[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn level(&self, table: u32) -> Level {
        self.level_of[table as usize]
    }
    #[inline(always)]
    pub fn accessed(&self, e: EntryRef) -> bool {
        get(&self.accessed[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn set_accessed(&mut self, e: EntryRef) {
        set(&mut self.accessed[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn clear_accessed(&mut self, e: EntryRef) {
        clear(&mut self.accessed[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn dirty(&self, e: EntryRef) -> bool {
        get(&self.dirty[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn set_dirty(&mut self, e: EntryRef) {
        set(&mut self.dirty[e.table as usize], e.index as usize)
    }
    #[inline(always)]
    pub fn clear_dirty(&mut self, e: EntryRef) {
        clear(&mut self.dirty[e.table as usize], e.index as usize)
    }

    /// The state after the workload initialised its memory with a write to every page:
    /// ACCESSED set on every present entry at every level, DIRTY on every leaf.
    pub fn touch_everything(&mut self) {
        for t in 0..self.level_of.len() {
            self.accessed[t] = self.present[t];
            if self.level_of[t] == Level::Pte {
                self.dirty[t] = self.present[t];
            } else {
                self.dirty[t] = self.huge[t];
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
