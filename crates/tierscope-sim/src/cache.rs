//! A set-associative cache with LRU replacement, the building block of the TLBs and the
//! paging-structure caches. Keys are page or entry numbers; the set comes from the low bits.

use crate::config::CacheGeometry;

const INVALID: u64 = u64::MAX;

#[derive(Debug, Clone)]
pub struct SetAssoc {
    ways: usize,
    set_mask: u64,
    tags: Vec<u64>,
    values: Vec<u64>,
    stamps: Vec<u64>,
    clock: u64,
}

impl SetAssoc {
    pub fn new(g: CacheGeometry) -> Self {
        let n = g.entries as usize;
        SetAssoc {
            ways: g.ways as usize,
            set_mask: (g.entries / g.ways) as u64 - 1,
            tags: vec![INVALID; n],
            values: vec![0; n],
            stamps: vec![0; n],
            clock: 0,
        }
    }

    #[inline(always)]
    fn set_base(&self, set_key: u64) -> usize {
        ((set_key & self.set_mask) as usize) * self.ways
    }

    /// Looks up `tag` in the set chosen by `set_key`; on a hit marks it most recently used
    /// and returns its slot.
    #[inline(always)]
    pub fn lookup(&mut self, set_key: u64, tag: u64) -> Option<usize> {
        let base = self.set_base(set_key);
        let way = self.tags[base..base + self.ways]
            .iter()
            .position(|&t| t == tag)?;
        self.clock += 1;
        self.stamps[base + way] = self.clock;
        Some(base + way)
    }

    #[inline(always)]
    pub fn value(&self, slot: usize) -> u64 {
        self.values[slot]
    }

    #[inline(always)]
    pub fn set_value(&mut self, slot: usize, value: u64) {
        self.values[slot] = value;
    }

    /// Inserts `tag` (known to be absent), evicting the least recently used way. Empty ways
    /// have stamp 0, so they go first without a separate check.
    #[inline(always)]
    pub fn insert(&mut self, set_key: u64, tag: u64, value: u64) {
        let base = self.set_base(set_key);
        let stamps = &self.stamps[base..base + self.ways];
        let mut victim = 0;
        let mut oldest = stamps[0];
        for (way, &s) in stamps.iter().enumerate().skip(1) {
            if s < oldest {
                oldest = s;
                victim = way;
            }
        }
        self.clock += 1;
        self.tags[base + victim] = tag;
        self.values[base + victim] = value;
        self.stamps[base + victim] = self.clock;
    }

    /// Drops `tag` if cached.
    pub fn invalidate(&mut self, set_key: u64, tag: u64) {
        let base = self.set_base(set_key);
        for slot in base..base + self.ways {
            if self.tags[slot] == tag {
                self.tags[slot] = INVALID;
                self.stamps[slot] = 0;
            }
        }
    }

    pub fn invalidate_all(&mut self) {
        self.tags.fill(INVALID);
        self.stamps.fill(0);
    }

    /// Number of valid entries (for tests and statistics).
    pub fn occupancy(&self) -> usize {
        self.tags.iter().filter(|&&t| t != INVALID).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A naive LRU oracle: per set, a list of tags, most recent last.
    struct Oracle {
        sets: HashMap<u64, Vec<u64>>,
        ways: usize,
        mask: u64,
    }

    impl Oracle {
        fn access(&mut self, key: u64) -> bool {
            let set = self.sets.entry(key & self.mask).or_default();
            if let Some(p) = set.iter().position(|&t| t == key) {
                let t = set.remove(p);
                set.push(t);
                true
            } else {
                if set.len() == self.ways {
                    set.remove(0);
                }
                set.push(key);
                false
            }
        }
    }

    proptest! {
        #[test]
        fn behaves_like_lru_per_set(keys in proptest::collection::vec(0u64..64, 1..400),
                                    ways_log in 0u32..3, sets_log in 0u32..3) {
            let ways = 1u32 << ways_log;
            let sets = 1u32 << sets_log;
            let mut c = SetAssoc::new(CacheGeometry::new(ways * sets, ways));
            let mut o = Oracle { sets: HashMap::new(), ways: ways as usize, mask: sets as u64 - 1 };
            for k in keys {
                let hit = c.lookup(k, k).is_some();
                if !hit {
                    c.insert(k, k, k * 10);
                }
                prop_assert_eq!(hit, o.access(k));
            }
        }
    }

    #[test]
    fn invalidate_drops_entries() {
        let mut c = SetAssoc::new(CacheGeometry::new(8, 2));
        c.insert(3, 3, 30);
        c.insert(5, 5, 50);
        assert_eq!(c.lookup(3, 3).map(|s| c.value(s)), Some(30));
        c.invalidate(3, 3);
        assert!(c.lookup(3, 3).is_none());
        assert_eq!(c.occupancy(), 1);
        c.invalidate_all();
        assert_eq!(c.occupancy(), 0);
    }
}
