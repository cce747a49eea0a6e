//! Cleared entries that no access can ever set again ("dead": no pattern of any phase
//! touches their span).
//!
//! DAMON clears millions of them in a terabyte heap, one random page per region per
//! sampling interval, and reads each one interval later. The most recent [`RECENT_DEAD`]
//! PTE and PMD ones are kept exactly; older ones are folded into a count per (bit, level,
//! 1 GiB chunk), and a later read of an untracked dead entry of that chunk finds it
//! cleared with probability count / entries-per-chunk (a fixed hash of the entry against
//! a growing fraction, so the answer never flips back). Monitors pick addresses
//! uniformly within regions, which is what makes the fraction the right probability.
//! Upper-level dead entries are few and stay exact for the whole run.
//!
//! The set is the layout this engine always had (a hash set beside the keys in clear
//! order, the oldest key removed when a newer one comes in); a test-and-clear looks the key
//! up once. Tried and not kept (docs/results/PERFORMANCE.md, "The dead-entry set"): keys
//! stored with their clear numbers and expired without a removal, which took a DAMON-AGG
//! run to 0.84 of its CPU time but made a scan over fresh dead memory (NUMA hinting's)
//! 1.24-1.64 times slower.

use std::cell::Cell;
use std::collections::VecDeque;

use super::entries::{FastMap, FastSet};
use super::filter::KeyFilter;
use tierscope_core::Level;

/// Dead PTE/PMD entries kept exactly (16 MiB of keys and set).
pub const RECENT_DEAD: usize = 1 << 20;

/// log2 of the chunk the older dead entries are counted in.
const CHUNK_SHIFT: u32 = 30;

/// A chunk key no entry has (level bits 7).
const NO_CHUNK: (u64, u32) = (u64::MAX, 0);

fn level_of(key: u64) -> usize {
    ((key >> 58) & 7) as usize
}

fn is_upper(key: u64) -> bool {
    level_of(key) >= Level::Pud.index()
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

#[derive(Debug, Default)]
pub struct DeadEntries {
    /// The exact set.
    set: FastSet<u64>,
    /// Guards `set`.
    filter: KeyFilter,
    /// The PTE/PMD keys of `set`, oldest first.
    order: VecDeque<u64>,
    /// Per (bit, level, 1 GiB chunk): dead entries forgotten from the exact set, but for
    /// the chunk of `evicting`, whose count may be behind (`evicting` holds it).
    counts: FastMap<u64, u32>,
    /// The chunk keys are being forgotten from and its whole count. Keys leave in clear
    /// order, and a scan clears a chunk's keys in a row (262,144 PTE keys per 1 GiB), so
    /// its count is raised here and written to `counts` once, when another chunk's key
    /// leaves: one hash-table update per chunk instead of one per key.
    evicting: (u64, u32),
    /// The chunk [`Self::count`] found last in `counts`, with its count there: a scan
    /// reads a chunk's keys in a row. Forgotten ([`NO_CHUNK`]) when `counts` changes.
    last_read: Cell<(u64, u32)>,
    /// Keys forgotten from the exact set so far: keys leave it only so, so a table whose
    /// every key was held when this read `n` holds them all while it still reads `n`.
    forgotten: u64,
    /// Per page table (its first entry's key), the value of `forgotten` when all its
    /// keys were last seen held ([`Self::note_table_held`]).
    held_tables: FastMap<u64, u64>,
}

impl DeadEntries {
    /// Keys forgotten from the exact set so far.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Whether every key of the page table whose first entry's key is `first` is in the
    /// exact set: noted so ([`Self::note_table_held`]) with nothing forgotten since.
    pub fn table_held(&self, first: u64) -> bool {
        self.held_tables.get(&first) == Some(&self.forgotten)
    }

    /// Notes that every key of the table whose first entry's key is `first` is in the
    /// exact set now.
    pub fn note_table_held(&mut self, first: u64) {
        self.held_tables.insert(first, self.forgotten);
    }

    /// Whether `key` is in the exact set.
    pub fn holds(&self, key: u64) -> bool {
        self.filter.may_contain(key) && self.set.contains(&key)
    }

    /// Whether the dead entry `key` is clear; `u` is a fixed uniform draw for the entry.
    pub fn is_clear(&self, key: u64, u: f64) -> bool {
        self.holds(key) || self.counted_clear(key, u)
    }

    /// Whether `key`, not in the exact set, is clear by its chunk's count.
    fn counted_clear(&self, key: u64, u: f64) -> bool {
        if is_upper(key) {
            return false;
        }
        let (c, n) = chunk(key);
        let count = self.count(c);
        count > 0 && u < count as f64 / n as f64
    }

    /// Dead entries of chunk `c` forgotten from the exact set.
    fn count(&self, c: u64) -> u32 {
        if c == self.evicting.0 {
            return self.evicting.1;
        }
        let (last, n) = self.last_read.get();
        if c == last {
            return n;
        }
        let n = self.counts.get(&c).copied().unwrap_or(0);
        self.last_read.set((c, n));
        n
    }

    /// Counts one more forgotten dead entry of chunk `c`.
    fn count_forgotten(&mut self, c: u64) {
        if c == self.evicting.0 {
            self.evicting.1 += 1;
            return;
        }
        let done = self.evicting;
        if done.1 > 0 {
            self.counts.insert(done.0, done.1);
            self.last_read.set(NO_CHUNK);
        }
        self.evicting = (c, self.counts.get(&c).copied().unwrap_or(0) + 1);
    }

    /// [`Self::is_clear`], then [`Self::clear`], looking the key up once.
    pub fn test_and_clear(&mut self, key: u64, u: f64) -> bool {
        if self.holds(key) {
            return true;
        }
        let was = self.counted_clear(key, u);
        self.insert(key);
        was
    }

    /// Records that the dead entry `key` is now clear.
    pub fn clear(&mut self, key: u64) {
        if !self.holds(key) {
            self.insert(key);
        }
    }

    /// Adds `key`, not in the exact set, to it.
    fn insert(&mut self, key: u64) {
        self.set.insert(key);
        if self.filter.add(key) {
            self.filter
                .rebuild(self.set.len(), self.set.iter().copied());
        }
        if is_upper(key) {
            return;
        }
        self.order.push_back(key);
        if self.order.len() > RECENT_DEAD {
            let old = self.order.pop_front().expect("non-empty");
            self.set.remove(&old);
            self.forgotten += 1;
            self.count_forgotten(chunk(old).0);
        }
    }

    /// Every chunk's count of forgotten dead entries (those with none left out).
    #[cfg(test)]
    fn chunk_counts(&self) -> std::collections::HashMap<u64, u32> {
        let mut all: std::collections::HashMap<u64, u32> =
            self.counts.iter().map(|(&c, &n)| (c, n)).collect();
        if self.evicting.1 > 0 {
            all.insert(self.evicting.0, self.evicting.1);
        }
        all
    }

    /// Approximate bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.set.capacity() * 9
            + self.order.capacity() * 8
            + self.held_tables.capacity() * 17
            + self.counts.capacity() * 13
            + self.filter.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::entries::{key, Bit};
    use std::collections::HashSet;
    use tierscope_core::rng::Rng;

    /// What the store must answer like, with no filter and with the read and the clear
    /// of a test-and-clear done apart: a set of the last RECENT_DEAD PTE/PMD keys (upper
    /// levels forever) with the same chunk counts.
    #[derive(Default)]
    struct Reference {
        set: HashSet<u64>,
        order: VecDeque<u64>,
        counts: std::collections::HashMap<u64, u32>,
    }

    impl Reference {
        fn clear(&mut self, key: u64) {
            if !self.set.insert(key) || is_upper(key) {
                return;
            }
            self.order.push_back(key);
            if self.order.len() > RECENT_DEAD {
                let old = self.order.pop_front().unwrap();
                self.set.remove(&old);
                *self.counts.entry(chunk(old).0).or_default() += 1;
            }
        }
        fn is_clear(&self, key: u64, u: f64) -> bool {
            if self.set.contains(&key) {
                return true;
            }
            if is_upper(key) {
                return false;
            }
            let (c, n) = chunk(key);
            self.counts
                .get(&c)
                .is_some_and(|&count| u < count as f64 / n as f64)
        }
    }

    #[test]
    fn answers_as_one_set_of_the_last_clears() {
        // Keys from a few chunks, so that evicted keys come back (cleared again after
        // leaving the exact set), with upper-level keys among them, over several filter
        // rebuilds; every answer is compared along the way.
        let mut rng = Rng::new(7);
        let (mut fast, mut slow) = (DeadEntries::default(), Reference::default());
        let pick = |rng: &mut Rng| {
            let va = (rng.next_u64() % (3 << 30)) & !0xfff;
            match rng.next_u64() % 100 {
                0 => key(Bit::Accessed, Level::Pud, va << 9),
                1..=4 => key(Bit::Accessed, Level::Pmd, va),
                5..=9 => key(Bit::Dirty, Level::Pte, va),
                _ => key(Bit::Accessed, Level::Pte, va),
            }
        };
        let ops = 3 * RECENT_DEAD + RECENT_DEAD / 3;
        for i in 0..ops {
            let k = pick(&mut rng);
            if i % 2 == 0 {
                fast.clear(k);
                slow.clear(k);
            } else {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let was = slow.is_clear(k, u);
                slow.clear(k);
                assert_eq!(fast.test_and_clear(k, u), was, "op {i}");
            }
            if i % 4 == 0 {
                let q = pick(&mut rng);
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                assert_eq!(fast.is_clear(q, u), slow.is_clear(q, u), "op {i}");
            }
        }
        // The filter never hides a key of the set (a hidden key would read as not held).
        assert!(fast.set.iter().all(|&k| fast.filter.may_contain(k)));
        assert_eq!(fast.set.len(), slow.set.len());
        assert_eq!(fast.chunk_counts(), slow.counts);
    }

    #[test]
    fn a_chunk_read_before_its_keys_left_reads_their_count_after() {
        let mut d = DeadEntries::default();
        let (a, b) = (chunk(key(Bit::Accessed, Level::Pte, 0)).0, 1 << 40);
        d.count_forgotten(a);
        d.count_forgotten(a);
        assert_eq!(d.count(b), 0);
        // b's count moves from `evicting` to the map while b is the chunk read last.
        d.count_forgotten(b);
        d.count_forgotten(a);
        assert_eq!((d.count(b), d.count(a)), (1, 3));
        assert_eq!(d.chunk_counts(), [(a, 3), (b, 1)].into());
    }

    #[test]
    fn a_scan_counts_its_chunks_as_one_set_of_the_last_clears() {
        // A lap and a half of a linear scan over more dead PTEs than the exact set holds, in
        // runs of a few chunks with random reads of the chunks behind: the keys leave
        // chunk after chunk, their counts gathered in one place before the map.
        let mut rng = Rng::new(8);
        let (mut fast, mut slow) = (DeadEntries::default(), Reference::default());
        let pages = RECENT_DEAD as u64 + (3 << 18) + 12_345;
        let draw = |rng: &mut Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        for i in 0..pages + (1 << 19) {
            let k = key(Bit::Accessed, Level::Pte, (i % pages) << 12);
            let u = draw(&mut rng);
            let was = slow.is_clear(k, u);
            slow.clear(k);
            assert_eq!(fast.test_and_clear(k, u), was, "op {i}");
            if i % 7 == 0 {
                let q = key(Bit::Accessed, Level::Pte, rng.below(pages) << 12);
                let u = draw(&mut rng);
                assert_eq!(fast.is_clear(q, u), slow.is_clear(q, u), "op {i}");
            }
        }
        assert!(slow.counts.len() >= 5, "{:?}", slow.counts);
        assert_eq!(fast.chunk_counts(), slow.counts);
    }
}
