//! Cleared entries of page tables a monitor reads whole ([`Machine::scan_table_accessed`]:
//! split-hint's page mode reads a leaf table's 512 entries every window), kept per table
//! in entry order instead of one hash-table slot each.
//!
//! In the per-entry table ([`super::cleared`]) a table's 512 keys fall in eight 64-key
//! runs of buckets at random places, with their control bytes and filter words
//! elsewhere: on this VM (4 KiB host pages) reading a table touched some two dozen pages,
//! each a TLB miss with a nested walk, and the scan read them again a window later, out
//! of the caches. Here a table is one 12 KiB array read front to back (and its spans'
//! masses, 4 KiB, read where an evaluation needs them).
//!
//! An entry is in at most one place: once a table is here, all its entries are (the
//! per-entry table's were moved in when it came), and every read or clear of one of them
//! looks here first.
//!
//! [`Machine::scan_table_accessed`]: tierscope_core::Machine::scan_table_accessed

use tierscope_core::machine::TABLE_ENTRIES;

use super::entries::{Cleared, FastMap};

const ENTRIES: usize = TABLE_ENTRIES as usize;

/// The key of the table holding the entry of key `k` ([`super::entries::key`]): the
/// entry's number without its position in its table.
pub fn table_key(k: u64) -> u64 {
    k >> 9
}

/// The position of the entry of key `k` in its table.
pub fn position(k: u64) -> usize {
    (k & (TABLE_ENTRIES - 1)) as usize
}

/// One table's cleared entries.
#[derive(Debug, Clone)]
pub struct TableEntries {
    /// Bit `e % 64` of word `e / 64`: entry `e` is tracked (cleared, `entries[e]`).
    tracked: [u64; 8],
    entries: Box<[Cleared]>,
    /// Each entry's [`super::walks::SpanFacts::mass`] once a read computed it (NaN
    /// before, or when the span has no single mass): a function of the span alone, so it
    /// stays valid for the run whatever the entry's state, and spares the evaluations of
    /// a gaussian's entries three exponentials each.
    mass: Box<[f64]>,
}

impl Default for TableEntries {
    fn default() -> Self {
        TableEntries {
            tracked: [0; 8],
            entries: vec![Cleared::new(0, 0); ENTRIES].into_boxed_slice(),
            mass: vec![f64::NAN; ENTRIES].into_boxed_slice(),
        }
    }
}

impl TableEntries {
    /// Entry `e`'s state when it is tracked.
    #[inline]
    pub fn get(&self, e: usize) -> Option<Cleared> {
        (self.tracked[e / 64] >> (e % 64) & 1 != 0).then(|| self.entries[e])
    }

    /// Tracks entry `e` as `c`.
    #[inline]
    pub fn set(&mut self, e: usize, c: Cleared) {
        self.tracked[e / 64] |= 1 << (e % 64);
        self.entries[e] = c;
    }

    /// Forgets entry `e` (it reads set again); returns what it held.
    #[inline]
    pub fn remove(&mut self, e: usize) -> Option<Cleared> {
        let c = self.get(e);
        self.tracked[e / 64] &= !(1 << (e % 64));
        c
    }

    /// Where entry `e`'s span's mass is kept.
    #[inline]
    pub fn mass_mut(&mut self, e: usize) -> &mut f64 {
        &mut self.mass[e]
    }

    /// How many entries are tracked.
    pub fn len(&self) -> usize {
        self.tracked.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.tracked == [0; 8]
    }

    /// The tracked entries, by position.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &Cleared)> + '_ {
        (0..ENTRIES).filter_map(|e| self.get(e).map(|_| (e, &self.entries[e])))
    }
}

/// The tables read whole so far, found by [`table_key`].
#[derive(Debug, Default)]
pub struct ScannedTables {
    index: FastMap<u64, u32>,
    tables: Vec<TableEntries>,
}

impl ScannedTables {
    /// True until a first table is added (then every entry read asks [`Self::find`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The index of the table of key `table` ([`table_key`]), when it is kept here.
    #[inline]
    pub fn find(&self, table: u64) -> Option<usize> {
        if self.tables.is_empty() {
            return None;
        }
        self.index.get(&table).map(|&i| i as usize)
    }

    /// Keeps `entries` as the table of key `table` (not kept yet); returns its index.
    pub fn add(&mut self, table: u64, entries: TableEntries) -> usize {
        let i = self.tables.len();
        let old = self.index.insert(table, i as u32);
        debug_assert!(old.is_none(), "table {table:#x} added twice");
        self.tables.push(entries);
        i
    }

    #[inline]
    pub fn table(&self, i: usize) -> &TableEntries {
        &self.tables[i]
    }

    #[inline]
    pub fn table_mut(&mut self, i: usize) -> &mut TableEntries {
        &mut self.tables[i]
    }

    /// Every tracked entry, by key.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Cleared)> + '_ {
        self.index.iter().flat_map(move |(&table, &i)| {
            self.tables[i as usize]
                .iter()
                .map(move |(e, c)| (table << 9 | e as u64, c))
        })
    }

    /// How many entries are tracked.
    pub fn len(&self) -> usize {
        self.tables.iter().map(TableEntries::len).sum()
    }

    /// Approximate bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.tables.capacity() * std::mem::size_of::<TableEntries>()
            + self.tables.len() * ENTRIES * (std::mem::size_of::<Cleared>() + 8)
            + self.index.capacity() * 13
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::rng::Rng;

    #[test]
    fn a_table_of_entries_answers_as_a_map_would() {
        let mut t = TableEntries::default();
        let mut m = std::collections::BTreeMap::new();
        let mut rng = Rng::new(3);
        for i in 0..20_000u64 {
            let e = rng.below(ENTRIES as u64) as usize;
            match rng.below(3) {
                0 => {
                    t.set(e, Cleared::new(i, i + 1));
                    m.insert(e, i);
                }
                1 => assert_eq!(t.remove(e).map(|c| c.since), m.remove(&e)),
                _ => assert_eq!(t.get(e).map(|c| c.seq), m.get(&e).map(|i| i + 1)),
            }
            assert_eq!(t.len(), m.len());
        }
        let got: Vec<(usize, u64)> = t.iter().map(|(e, c)| (e, c.since)).collect();
        assert_eq!(got, m.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn keys_split_into_table_and_position_and_back() {
        let mut s = ScannedTables::default();
        assert_eq!(s.find(5), None);
        let mut rng = Rng::new(8);
        let keys: Vec<u64> = (0..2_000).map(|_| rng.next_u64() >> 8).collect();
        for &k in &keys {
            let i = match s.find(table_key(k)) {
                Some(i) => i,
                None => s.add(table_key(k), TableEntries::default()),
            };
            s.table_mut(i).set(position(k), Cleared::new(k, 0));
        }
        let mut got: Vec<(u64, u64)> = s.iter().map(|(k, c)| (k, c.since)).collect();
        got.sort_unstable();
        let mut want: Vec<(u64, u64)> = keys.iter().map(|&k| (k, k)).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
        assert_eq!(s.len(), want.len());
    }
}
