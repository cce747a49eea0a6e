//! The only per-entry state of the statistical engine: entries a monitor has cleared.
//!
//! Every present entry starts ACCESSED (and leaves DIRTY), as in the exact engine, whose
//! workload initialised all its memory. An entry not in [`EntryStore`] therefore reads as
//! set. A cleared entry is tracked until a read finds it set again, then forgotten; what
//! stays tracked is bounded by the memory the workload touches.
//!
//! Entries whose span no pattern of any phase ever touches ("dead") can never be set
//! again, and DAMON clears millions of them in a terabyte heap, one random page per
//! region per sampling interval, each read once one interval later. The most recent
//! [`RECENT_DEAD`] of them are kept exactly; older PTE and PMD ones are folded into a
//! count per 1 GiB chunk, and a later read of an untracked dead entry of that chunk finds
//! it cleared with probability count / entries-per-chunk (a fixed hash of the entry
//! against a growing fraction, so the answer never flips back). Monitors pick addresses
//! uniformly within regions, which is what makes the fraction the right probability.
//! Upper-level dead entries are few and stay exact.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use tierscope_core::rng::{mix64, GOLDEN};
use tierscope_core::{Level, Nanos};

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

/// A cleared entry: evaluated up to `since` (nothing loaded it before that), with the
/// caches in `fresh` (bit mask, [`super::caches::RegionCaches`] indices) holding nothing
/// for its span because of a flush since it was cleared.
#[derive(Debug, Clone, Copy)]
pub struct Cleared {
    pub since: Nanos,
    /// The engine's operation number at `since`: flushes numbered above it came later.
    pub seq: u64,
    pub fresh: u8,
}

/// Dead PTE/PMD entries kept exactly (16 MiB of keys and set).
pub const RECENT_DEAD: usize = 1 << 20;

/// log2 of the chunk the older dead entries are counted in.
const CHUNK_SHIFT: u32 = 30;

/// Most bits of a [`KeyFilter`] (2 MiB of them: they stay in the host's L2 or L3 cache
/// where the tables they guard, tens of MiB read at random, miss it).
const FILTER_BITS: usize = 1 << 24;
/// Fewest bits (8 KiB).
const FILTER_MIN_BITS: usize = 1 << 16;

/// A one-sided filter in front of a hash table of keys: a clear bit means the key is not
/// in the table, so the probe, a cache miss in a large table, is skipped. Every key added
/// to the table sets its bit; removals leave it set, so the bits are rebuilt from the
/// table's keys (16 bits per key, from 8 KiB to 2 MiB) once as many keys were added as an
/// eighth of the bits (a cost linear in the table, paid once per that many additions).
/// A monitor that picks a random new entry every time, as DAMON does, then asks the
/// table only about entries it holds.
#[derive(Debug, Default)]
pub struct KeyFilter {
    words: Vec<u64>,
    /// log2 of the number of bits.
    log_bits: u32,
    /// Keys added since the last rebuild.
    added: usize,
}

impl KeyFilter {
    /// A key's bit: its 64-entry block picks a word at random, its position in the block
    /// the bit, so that a scan of consecutive entries (Telescope's and the pruned walk's
    /// reads of a table's 512 entries) reads one word per 64 entries, as the table's
    /// hasher keeps them in consecutive buckets.
    fn bit(&self, key: u64) -> usize {
        let word = mix64((key >> 6) ^ 0x6a09_e667_f3bc_c908) >> (64 - (self.log_bits - 6));
        (word << 6 | key & 63) as usize
    }

    /// False when `key` was never added since the last rebuild and is not in the table.
    pub fn may_contain(&self, key: u64) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let b = self.bit(key);
        self.words[b >> 6] >> (b & 63) & 1 != 0
    }

    fn set(&mut self, key: u64) {
        let b = self.bit(key);
        self.words[b >> 6] |= 1 << (b & 63);
    }

    /// Records a key added to the table; true when the table should rebuild the filter.
    fn add(&mut self, key: u64) -> bool {
        if self.words.is_empty() {
            self.resize(FILTER_MIN_BITS);
        }
        self.set(key);
        self.added += 1;
        self.added >= self.words.len() * 64 / 8
    }

    fn resize(&mut self, bits: usize) {
        self.words.clear();
        self.words.resize(bits / 64, 0);
        self.log_bits = bits.trailing_zeros();
    }

    /// The filter of exactly `keys`, `len` of them.
    fn rebuild(&mut self, len: usize, keys: impl Iterator<Item = u64>) {
        let bits = (len * 16)
            .next_power_of_two()
            .clamp(FILTER_MIN_BITS, FILTER_BITS);
        self.resize(bits);
        self.added = 0;
        for k in keys {
            self.set(k);
        }
    }
}

#[derive(Debug, Default)]
pub struct EntryStore {
    pub cleared: FastMap<u64, Cleared>,
    /// Guards `cleared`: [`EntryStore::maybe_cleared`].
    cleared_filter: KeyFilter,
    dead_filter: KeyFilter,
    /// Cleared entries no access can ever set, kept exactly.
    dead: FastSet<u64>,
    /// The PTE/PMD keys of `dead`, oldest first.
    dead_order: VecDeque<u64>,
    /// Per (bit, level, 1 GiB chunk): dead entries forgotten from `dead`.
    dead_counts: FastMap<u64, u32>,
}

fn level_of(key: u64) -> usize {
    ((key >> 58) & 7) as usize
}

/// The chunk counter's key and the number of entries in a chunk.
fn chunk(key: u64) -> (u64, u64) {
    let level = Level::from_index(level_of(key));
    let per_chunk_shift = CHUNK_SHIFT - level.span_shift();
    let number = key & ((1 << 58) - 1);
    (
        key & !((1 << 58) - 1) | number >> per_chunk_shift,
        1 << per_chunk_shift,
    )
}

impl EntryStore {
    /// Whether the dead entry `key` is clear; `u` is a fixed uniform draw for the entry.
    pub fn dead_is_clear(&self, key: u64, u: f64) -> bool {
        if self.dead_filter.may_contain(key) && self.dead.contains(&key) {
            return true;
        }
        if level_of(key) >= Level::Pud.index() {
            return false;
        }
        let (c, n) = chunk(key);
        self.dead_counts
            .get(&c)
            .is_some_and(|&count| u < count as f64 / n as f64)
    }

    /// Records that the dead entry `key` is now clear (it was not).
    pub fn clear_dead(&mut self, key: u64) {
        if !self.dead.insert(key) {
            return;
        }
        if self.dead_filter.add(key) {
            self.dead_filter
                .rebuild(self.dead.len(), self.dead.iter().copied());
        }
        if level_of(key) >= Level::Pud.index() {
            return;
        }
        self.dead_order.push_back(key);
        if self.dead_order.len() > RECENT_DEAD {
            let old = self.dead_order.pop_front().expect("non-empty");
            self.dead.remove(&old);
            *self.dead_counts.entry(chunk(old).0).or_default() += 1;
        }
    }

    /// Whether `key` may be in `cleared` (false: it is not).
    pub fn maybe_cleared(&self, key: u64) -> bool {
        self.cleared_filter.may_contain(key)
    }

    /// Records that `key` was just inserted into `cleared`.
    pub fn note_cleared(&mut self, key: u64) {
        if self.cleared_filter.add(key) {
            self.cleared_filter
                .rebuild(self.cleared.len(), self.cleared.keys().copied());
        }
    }

    /// Approximate bytes held (for memory reports).
    pub fn memory_bytes(&self) -> usize {
        self.cleared.capacity() * (8 + std::mem::size_of::<Cleared>() + 1)
            + self.dead.capacity() * 9
            + self.dead_order.capacity() * 8
            + self.dead_counts.capacity() * 13
            + (self.cleared_filter.words.len() + self.dead_filter.words.len()) * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::rng::Rng;

    #[test]
    fn filters_never_hide_a_key_of_their_table() {
        // Enough additions for several rebuilds, with removals between: every key in
        // `cleared` and `dead` passes its filter, and most keys never added do not.
        let mut store = EntryStore::default();
        let mut rng = Rng::new(5);
        let c = Cleared {
            since: 0,
            seq: 0,
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
                store.cleared.remove(&gone);
            }
            if i % 64 == 0 {
                store.clear_dead(key(Bit::Accessed, Level::Pte, k << 12));
            }
        }
        assert!(store.cleared.keys().all(|&k| store.maybe_cleared(k)));
        assert!(store.dead.iter().all(|&k| store.dead_filter.may_contain(k)));
        let strangers = (0..10_000)
            .filter(|_| store.maybe_cleared(rng.next_u64() | 1 << 63))
            .count();
        // About a sixteenth of the bits are set after a rebuild, a few times more by the
        // additions since.
        assert!(strangers < 4000, "{strangers}");
        assert!(store.memory_bytes() < 512 << 20);
    }
}
