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

use std::collections::VecDeque;

use super::entries::{FastMap, FastSet};
use super::filter::KeyFilter;
use tierscope_core::Level;

/// Dead PTE/PMD entries kept exactly (16 MiB of keys and set).
pub const RECENT_DEAD: usize = 1 << 20;

/// log2 of the chunk the older dead entries are counted in.
const CHUNK_SHIFT: u32 = 30;

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
    /// Per (bit, level, 1 GiB chunk): dead entries forgotten from the exact set.
    counts: FastMap<u64, u32>,
}

impl DeadEntries {
    /// Whether `key` is in the exact set.
    fn holds(&self, key: u64) -> bool {
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
        self.counts
            .get(&c)
            .is_some_and(|&count| u < count as f64 / n as f64)
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
            *self.counts.entry(chunk(old).0).or_default() += 1;
        }
    }

    /// Approximate bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.set.capacity() * 9
            + self.order.capacity() * 8
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
        assert_eq!(fast.counts.len(), slow.counts.len());
        assert!(slow.counts.iter().all(|(c, n)| fast.counts[c] == *n));
    }
}
