//! A set-associative cache with LRU replacement, the building block of the TLBs and the
//! paging-structure caches. Keys are page or entry numbers; the set comes from the low bits.

use crate::config::CacheGeometry;

const INVALID: u64 = u64::MAX;

/// Most ways a cache may have (sets are fixed-size arrays: no allocation, no bounds checks
/// beyond one on the way count).
pub const MAX_WAYS: usize = 16;

/// One set: tags and values per way, and the ways in recency order (most recent first),
/// so the LRU victim is the last entry and no search is needed to find it.
#[derive(Debug, Clone)]
struct Set {
    tags: [u64; MAX_WAYS],
    values: [u64; MAX_WAYS],
    order: [u8; MAX_WAYS],
}

#[derive(Debug, Clone)]
pub struct SetAssoc {
    ways: usize,
    set_mask: u64,
    sets: Vec<Set>,
}

impl Set {
    /// The recency position of `way`.
    #[inline(always)]
    fn position_of(&self, way: usize, ways: usize) -> usize {
        self.order[..ways]
            .iter()
            .position(|&w| w as usize == way)
            .expect("every way is in the order")
    }

    /// Moves the way at recency position `pos` to the front.
    #[inline(always)]
    fn promote(&mut self, pos: usize) {
        let way = self.order[pos];
        self.order.copy_within(0..pos, 1);
        self.order[0] = way;
    }

    /// Moves the way at recency position `pos` to position `ways - 1` (next victim).
    fn demote(&mut self, pos: usize, ways: usize) {
        let way = self.order[pos];
        self.order.copy_within(pos + 1..ways, pos);
        self.order[ways - 1] = way;
    }
}

impl SetAssoc {
    pub fn new(g: CacheGeometry) -> Self {
        let ways = g.ways as usize;
        assert!(
            ways <= MAX_WAYS,
            "at most {MAX_WAYS} ways (validated in the config)"
        );
        let mut order = [0u8; MAX_WAYS];
        for (i, o) in order.iter_mut().enumerate() {
            *o = i as u8;
        }
        let empty = Set {
            tags: [INVALID; MAX_WAYS],
            values: [0; MAX_WAYS],
            order,
        };
        SetAssoc {
            ways,
            set_mask: (g.entries / g.ways) as u64 - 1,
            sets: vec![empty; (g.entries / g.ways) as usize],
        }
    }

    #[inline(always)]
    fn set_index(&self, set_key: u64) -> usize {
        (set_key & self.set_mask) as usize
    }

    /// Looks up `tag` in the set chosen by `set_key`; on a hit marks it most recently used
    /// and returns its slot.
    #[inline(always)]
    pub fn lookup(&mut self, set_key: u64, tag: u64) -> Option<usize> {
        let si = self.set_index(set_key);
        let ways = self.ways;
        let set = &mut self.sets[si];
        let way = set.tags[..ways].iter().position(|&t| t == tag)?;
        let pos = set.position_of(way, ways);
        set.promote(pos);
        Some(si * MAX_WAYS + way)
    }

    #[inline(always)]
    pub fn value(&self, slot: usize) -> u64 {
        self.sets[slot / MAX_WAYS].values[slot % MAX_WAYS]
    }

    #[inline(always)]
    pub fn set_value(&mut self, slot: usize, value: u64) {
        self.sets[slot / MAX_WAYS].values[slot % MAX_WAYS] = value;
    }

    /// Inserts `tag` (known to be absent) into the least recently used way, which empty
    /// ways always are.
    #[inline(always)]
    pub fn insert(&mut self, set_key: u64, tag: u64, value: u64) {
        let si = self.set_index(set_key);
        let last = self.ways - 1;
        let set = &mut self.sets[si];
        let victim = set.order[last] as usize;
        set.tags[victim] = tag;
        set.values[victim] = value;
        set.promote(last);
    }

    /// Drops `tag` if cached; its way becomes the next victim.
    pub fn invalidate(&mut self, set_key: u64, tag: u64) {
        let si = self.set_index(set_key);
        let ways = self.ways;
        let set = &mut self.sets[si];
        if let Some(way) = set.tags[..ways].iter().position(|&t| t == tag) {
            set.tags[way] = INVALID;
            let pos = set.position_of(way, ways);
            set.demote(pos, ways);
        }
    }

    pub fn invalidate_all(&mut self) {
        for set in &mut self.sets {
            set.tags.fill(INVALID);
        }
    }

    /// Number of valid entries (for tests and statistics).
    pub fn occupancy(&self) -> usize {
        self.sets
            .iter()
            .map(|s| s.tags.iter().filter(|&&t| t != INVALID).count())
            .sum()
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
