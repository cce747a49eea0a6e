//! A one-sided filter in front of a large hash table of entry keys (the cleared entries
//! and the dead ones): most probes of keys the table does not hold skip the table's
//! cache miss.

use tierscope_core::rng::mix64;

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
    pub fn add(&mut self, key: u64) -> bool {
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
    pub fn rebuild(&mut self, len: usize, keys: impl Iterator<Item = u64>) {
        let bits = (len * 16)
            .next_power_of_two()
            .clamp(FILTER_MIN_BITS, FILTER_BITS);
        self.resize(bits);
        self.added = 0;
        for k in keys {
            self.set(k);
        }
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }
}
