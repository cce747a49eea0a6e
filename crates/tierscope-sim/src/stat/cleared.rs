//! The table of cleared entries, with a way to start loading a key's slot before it is
//! read: a monitor's pass reads hundreds of entries picked at random from tens of MiB of
//! slots, and read one by one each read waits for its own cache miss.
//!
//! A `hashbrown` table keyed by the entry key (std's `HashMap` is the same table without
//! access to where a key's slots are). A key's probe starts at bucket `hash & mask`
//! (hashbrown's `h1`); the bucket's slot is found from the address of any occupied slot,
//! as slots are laid out one after another below the control bytes. A wrong guess of
//! hashbrown's layout would only make the prefetch useless, never a read wrong: the
//! prefetch instruction reads nothing back and cannot fault.

use hashbrown::hash_table::{Entry, HashTable, OccupiedEntry};
use std::hash::{BuildHasher, BuildHasherDefault};

use super::entries::{Cleared, KeyHasher};
use crate::prefetch;

type Slot = (u64, Cleared);

/// Cache lines of slots loaded per key: the probe's first 7 or 8 slots.
const PREFETCH_LINES: usize = 4;

/// Keys below which the table is not prefetched (4 MiB of slots): a smaller table mostly
/// stays in the host's caches, where the prefetches only cost (a multiphase-5t run with
/// Telescope-FLX, whose table stays small, took 1.13 times its CPU time with them).
pub const PREFETCH_MIN_KEYS: usize = 1 << 17;

#[derive(Debug, Default)]
pub struct ClearedTable {
    table: HashTable<Slot>,
}

fn hash(key: u64) -> u64 {
    BuildHasherDefault::<KeyHasher>::default().hash_one(key)
}

/// Where the slots of a table lie, for [`ClearedTable::prefetch`]; valid until the table
/// next grows.
#[derive(Debug, Clone, Copy)]
pub struct SlotMap {
    /// Address of bucket 0's slot; bucket `i`'s is `i` slots below it.
    bucket0: usize,
    mask: u64,
}

impl ClearedTable {
    #[inline]
    pub fn get(&self, key: u64) -> Option<&Cleared> {
        self.table.find(hash(key), |s| s.0 == key).map(|s| &s.1)
    }

    /// `key`'s slot, to read and then update or remove in place (no room is made for an
    /// insertion, as [`Self::entry`] does).
    #[inline]
    pub fn find(&mut self, key: u64) -> Option<OccupiedEntry<'_, Slot>> {
        self.table.find_entry(hash(key), |s| s.0 == key).ok()
    }

    #[inline]
    pub fn entry(&mut self, key: u64) -> Entry<'_, Slot> {
        self.table.entry(hash(key), |s| s.0 == key, |s| hash(s.0))
    }

    pub fn insert(&mut self, key: u64, c: Cleared) {
        match self.entry(key) {
            Entry::Occupied(mut o) => o.get_mut().1 = c,
            Entry::Vacant(v) => {
                v.insert((key, c));
            }
        }
    }

    pub fn remove(&mut self, key: u64) -> Option<Cleared> {
        match self.table.find_entry(hash(key), |s| s.0 == key) {
            Ok(o) => Some(o.remove().0 .1),
            Err(_) => None,
        }
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.table.iter().map(|s| s.0)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &Cleared)> + '_ {
        self.table.iter().map(|s| (s.0, &s.1))
    }

    /// The slots' addresses, or `None` for a table too small to be worth prefetching
    /// ([`PREFETCH_MIN_KEYS`]; an empty one has nothing to load).
    pub fn slot_map(&self) -> Option<SlotMap> {
        if self.table.len() < PREFETCH_MIN_KEYS {
            return None;
        }
        let i = self.table.iter_buckets().next()?;
        let slot = self.table.get_bucket(i)? as *const Slot as usize;
        Some(SlotMap {
            bucket0: slot + i * std::mem::size_of::<Slot>(),
            mask: self.table.num_buckets() as u64 - 1,
        })
    }

    /// The addresses of the slot and the control byte of `key`'s probe start (bucket
    /// `hash & mask`). Nothing is read: the address may hold no key, or another one.
    fn probe_start(map: SlotMap, key: u64) -> (usize, usize) {
        let b = (hash(key) & map.mask) as usize;
        let size = std::mem::size_of::<Slot>();
        // Control bytes start right above bucket 0's slot.
        (map.bucket0.wrapping_sub(b * size), map.bucket0 + size + b)
    }

    /// Starts loading the slots where `key`'s probe begins and the control bytes that
    /// tell whether it is there (a hint: nothing is read back).
    #[inline]
    pub fn prefetch(map: SlotMap, key: u64) {
        let (slot, ctrl) = Self::probe_start(map, key);
        // The key sits at the first slot that was free from there on when it came: at the
        // table's load (7/16 to 7/8) mostly within the next few, which lie below it.
        for line in 0..PREFETCH_LINES {
            prefetch::address(slot.wrapping_sub(line * 64));
        }
        prefetch::address(ctrl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::rng::Rng;

    fn cleared(since: u64) -> Cleared {
        Cleared {
            since,
            seq: since,
            worst: f32::NAN,
            fresh: 0,
        }
    }

    #[test]
    fn a_table_of_keys_answers_as_a_map_would() {
        let mut t = ClearedTable::default();
        let mut m = std::collections::HashMap::new();
        let mut rng = Rng::new(9);
        for i in 0..20_000u64 {
            let k = rng.below(5_000) << 3;
            match rng.below(3) {
                0 => {
                    t.insert(k, cleared(i));
                    m.insert(k, i);
                }
                1 => assert_eq!(t.remove(k).map(|c| c.since), m.remove(&k)),
                _ => assert_eq!(t.get(k).map(|c| c.since), m.get(&k).copied()),
            }
        }
        assert_eq!(t.len(), m.len());
        let mut keys: Vec<u64> = t.keys().collect();
        keys.sort_unstable();
        let mut want: Vec<u64> = m.keys().copied().collect();
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    #[test]
    fn the_slot_map_finds_every_keys_slot_near_its_probe_start() {
        // The prefetch's address guess matches hashbrown's layout: a key's slot is at its
        // probe start or a few slots past it (hashbrown places a key at the first free
        // slot of the 16-slot group from there) for nearly every key.
        let mut t = ClearedTable::default();
        let mut rng = Rng::new(4);
        let keys: Vec<u64> = (0..200_000).map(|_| rng.next_u64() >> 8).collect();
        for &k in &keys {
            t.insert(k, cleared(k));
        }
        let map = t.slot_map().unwrap();
        let size = std::mem::size_of::<Slot>();
        let (mut near, mut loaded) = (0, 0);
        for &k in &keys {
            let (guess, ctrl) = ClearedTable::probe_start(map, k);
            let at = t.table.find(hash(k), |s| s.0 == k).unwrap() as *const Slot as usize;
            // The control bytes lie above every slot, one per bucket.
            assert!(ctrl > map.bucket0 && ctrl <= map.bucket0 + size + map.mask as usize);
            if guess >= at && guess - at < 16 * size {
                near += 1;
                // Within the lines `prefetch` loads from the probe start down.
                if (guess | 63) - at < PREFETCH_LINES * 64 {
                    loaded += 1;
                }
            }
        }
        assert!(near * 10 >= keys.len() * 9, "{near} of {}", keys.len());
        assert!(loaded * 2 >= keys.len(), "{loaded} of {}", keys.len());
    }
}
