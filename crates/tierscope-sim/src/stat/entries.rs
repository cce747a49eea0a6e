//! The only per-entry state of the statistical engine: entries a monitor has cleared.
//!
//! Every present entry starts ACCESSED (and leaves DIRTY), as in the exact engine, whose
//! workload initialised all its memory. An entry not in [`EntryStore`] therefore reads as
//! set. A cleared entry is tracked until a read finds it set again, then forgotten; what
//! stays tracked is bounded by the memory the workload touches. Entries whose span no
//! pattern ever touches are kept apart ([`super::dead`]), and so are those of tables a
//! monitor reads whole ([`super::scanned`]).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use tierscope_core::rng::{mix64, GOLDEN};
use tierscope_core::{Level, Nanos};

use super::cleared::{ClearedTable, SlotMap};
use super::dead::DeadEntries;
use super::filter::KeyFilter;
use super::scanned::{position, table_key, ScannedTables, TableEntries};

/// A multiply-xorshift hasher for the u64 keys (the std SipHash is slower and its DoS
/// resistance buys nothing here).
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        // SplitMix64's finaliser of the key's 64-entry block, with the position in the
        // block added to the low bits (the bucket index) and the top seven (hashbrown's
        // tag): random keys spread like a full mix, while a linear scan's consecutive
        // entries land in consecutive buckets and stay cache-friendly.
        let z = mix64((self.0 ^ (x >> 6)).wrapping_add(GOLDEN));
        let low = x & 63;
        self.0 = z ^ low ^ (low << 57);
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;
pub type FastSet<K> = HashSet<K, BuildHasherDefault<KeyHasher>>;

/// Which bit of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bit {
    Accessed,
    Dirty,
}

/// Packs (bit, level, entry number) into one key. Entry numbers of 57-bit addresses
/// need at most 45 bits.
pub fn key(bit: Bit, level: Level, va: u64) -> u64 {
    ((bit == Bit::Dirty) as u64) << 63 | (level.index() as u64) << 58 | va >> level.span_shift()
}

/// The bits of an entry key that give its position in its page table.
const TABLE_MASK: u64 = tierscope_core::machine::TABLE_ENTRIES - 1;

/// A cleared entry: evaluated up to `since` (nothing loaded it before that), with the
/// caches in `fresh` (bit mask, [`super::caches::RegionCaches`] indices) holding nothing
/// for its span because of a flush since it was cleared.
#[derive(Debug, Clone, Copy)]
pub struct Cleared {
    pub since: Nanos,
    /// The engine's operation number at `since`: flushes numbered above it came later.
    pub seq: u64,
    /// [`super::walks::span_worst`] of the entry's span, rounded up to an f32 (any larger
    /// value bounds as well, and the entry stays 24 bytes), once a read computed it (NaN
    /// before): fixed for the run, and most reads need nothing else.
    pub worst: f32,
    pub fresh: u8,
}

impl Cleared {
    /// An entry cleared at `since`, operation `seq`: no cache fresh yet, its span's bound
    /// not yet computed.
    pub fn new(since: Nanos, seq: u64) -> Self {
        Cleared {
            since,
            seq,
            worst: f32::NAN,
            fresh: 0,
        }
    }
}

#[derive(Debug, Default)]
pub struct EntryStore {
    pub cleared: ClearedTable,
    /// Guards `cleared`: [`EntryStore::maybe_cleared`].
    cleared_filter: KeyFilter,
    dead: DeadEntries,
    /// The tables read whole: their entries are there, not in `cleared`.
    pub scanned: ScannedTables,
}

impl EntryStore {
    /// Whether the dead entry `key` is clear; `u` is a fixed uniform draw for the entry.
    pub fn dead_is_clear(&self, key: u64, u: f64) -> bool {
        self.dead.is_clear(key, u)
    }

    /// Records that the dead entry `key` is now clear.
    pub fn clear_dead(&mut self, key: u64) {
        self.dead.clear(key);
    }

    /// [`Self::dead_is_clear`], then [`Self::clear_dead`].
    pub fn dead_test_and_clear(&mut self, key: u64, u: f64) -> bool {
        self.dead.test_and_clear(key, u)
    }

    /// The dead entries' store, for a whole table's questions.
    pub fn dead(&self) -> &DeadEntries {
        &self.dead
    }

    /// The dead entries' store, to note a table all of whose entries it holds.
    pub fn dead_mut(&mut self) -> &mut DeadEntries {
        &mut self.dead
    }

    /// Whether `key` may be in `cleared` (false: it is not).
    pub fn maybe_cleared(&self, key: u64) -> bool {
        self.cleared_filter.may_contain(key)
    }

    /// Records that `key` was just inserted into `cleared`.
    pub fn note_cleared(&mut self, key: u64) {
        if self.cleared_filter.add(key) {
            self.cleared_filter
                .rebuild(self.cleared.len(), self.cleared.keys());
        }
    }

    /// Where the cleared table's slots lie, for [`Self::prefetch`] until the next insert.
    pub fn slot_map(&self) -> Option<SlotMap> {
        self.cleared.slot_map()
    }

    /// Starts loading `key`'s slots in the table (a cache miss when the key was last read
    /// long ago). Its filter word is not prefetched: that gained nothing measurable
    /// (docs/results/PERFORMANCE.md).
    pub fn prefetch(&self, map: SlotMap, key: u64) {
        ClearedTable::prefetch(map, key);
    }

    /// The index in `scanned` of the table of entry key `k`, when it is kept there.
    #[inline]
    pub fn scanned_table_of(&self, k: u64) -> Option<usize> {
        self.scanned.find(table_key(k))
    }

    /// Keeps the table of entry key `k` (not kept yet) in `scanned` from now on, with the
    /// entries `cleared` held of it; returns its index there.
    pub fn adopt_table(&mut self, k: u64) -> usize {
        let first = k & !(TABLE_MASK);
        let mut t = TableEntries::default();
        for e in 0..=TABLE_MASK {
            let k = first | e;
            if self.maybe_cleared(k) {
                if let Some(c) = self.cleared.remove(k) {
                    t.set(e as usize, c);
                }
            }
        }
        self.scanned.add(table_key(k), t)
    }

    /// Forgets the cleared entry `k`, wherever it is kept; returns what it held.
    pub fn remove(&mut self, k: u64) -> Option<Cleared> {
        match self.scanned_table_of(k) {
            Some(i) => self.scanned.table_mut(i).remove(position(k)),
            None => self.cleared.remove(k),
        }
    }

    /// Every tracked entry (dead ones aside), by key, in no order.
    pub fn tracked(&self) -> impl Iterator<Item = (u64, &Cleared)> + '_ {
        self.cleared.iter().chain(self.scanned.iter())
    }

    /// How many entries [`Self::tracked`] lists.
    pub fn tracked_len(&self) -> usize {
        self.cleared.len() + self.scanned.len()
    }

    /// Approximate bytes held (for memory reports).
    pub fn memory_bytes(&self) -> usize {
        self.cleared.capacity() * (8 + std::mem::size_of::<Cleared>() + 1)
            + self.cleared_filter.memory_bytes()
            + self.dead.memory_bytes()
            + self.scanned.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::rng::Rng;

    #[test]
    fn filters_never_hide_a_key_of_their_table() {
        // Enough additions for several rebuilds, with removals between: every key in
        // `cleared` passes the filter, and most keys never added do not.
        let mut store = EntryStore::default();
        let mut rng = Rng::new(5);
        let c = Cleared {
            since: 0,
            seq: 0,
            worst: f32::NAN,
            fresh: 0,
        };
        let additions = 300_000;
        for i in 0..additions as u64 {
            let k = rng.next_u64() >> 8;
            store.cleared.insert(k, c);
            store.note_cleared(k);
            if i % 3 == 0 {
                let gone = rng.next_u64() >> 8 | 1 << 55;
                store.cleared.insert(gone, c);
                store.note_cleared(gone);
                store.cleared.remove(gone);
            }
        }
        assert!(store.cleared.keys().all(|k| store.maybe_cleared(k)));
        let strangers = (0..10_000)
            .filter(|_| store.maybe_cleared(rng.next_u64() | 1 << 63))
            .count();
        // About a sixteenth of the bits are set after a rebuild, a few times more by the
        // additions since.
        assert!(strangers < 4000, "{strangers}");
        assert!(store.memory_bytes() < 512 << 20);
    }
}
