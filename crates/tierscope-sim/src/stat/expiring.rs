//! A set of entry keys that forgets a key once a given number of later insertions were
//! made, without being told: each key is stored with the number of its insertion, and
//! a lookup compares that number with the newest. Expired keys stay in place until the
//! table is rebuilt, when it fills (one sequential pass and the live keys written
//! again), so that no insertion pays a removal at a random place of a large table.
//!
//! Open addressing with probes of a fixed step, keys and numbers in two arrays (12 bytes a
//! slot). A key's home slot is its 64-entry block's random place plus its position in
//! the block, so that the consecutive keys of a scan sit in consecutive slots, in order.

use tierscope_core::rng::{mix64, GOLDEN};

/// An empty slot's key (no entry key has every bit set: levels use 3 of bits 58-62).
const EMPTY: u64 = u64::MAX;
/// The probe's step: one block's length and one (odd: every slot is reached). A key
/// whose slot another block holds moves to the next block's place, so that a scan's
/// keys displaced by a colliding block stay consecutive there instead of walking the
/// whole of the other block (with a step of one, collisions of 64-key runs made probes
/// hundreds of slots long: 41 % of a linear scan's time).
const STEP: usize = 65;
/// Fewest slots.
const MIN_SLOTS: usize = 1 << 16;
/// Insertions after which the table is rebuilt even if it did not fill, so that no
/// expired key outlives 2^32 insertion numbers (they are stored modulo 2^32).
const MAX_BETWEEN_REBUILDS: u64 = 1 << 30;

#[derive(Debug)]
pub struct ExpiringKeys {
    keys: Vec<u64>,
    numbers: Vec<u32>,
    /// Slots not empty (live and expired keys).
    occupied: usize,
    /// A key is held while its number is one of the last `window` (the newest included).
    window: u32,
    /// Insertions since the last rebuild.
    since_rebuild: u64,
}

impl ExpiringKeys {
    pub fn new(window: u32) -> Self {
        Self {
            keys: Vec::new(),
            numbers: Vec::new(),
            occupied: 0,
            window,
            since_rebuild: 0,
        }
    }

    fn home(key: u64, mask: usize) -> usize {
        ((mix64((key >> 6).wrapping_add(GOLDEN)) << 6) | (key & 63)) as usize & mask
    }

    fn live(&self, number: u32, newest: u64) -> bool {
        (newest as u32).wrapping_sub(number) < self.window
    }

    /// Whether `key` was inserted with one of the last `window` numbers up to `newest`.
    pub fn holds(&self, key: u64, newest: u64) -> bool {
        if self.keys.is_empty() {
            return false;
        }
        let mask = self.keys.len() - 1;
        let mut i = Self::home(key, mask);
        loop {
            let k = self.keys[i];
            if k == key {
                return self.live(self.numbers[i], newest);
            }
            if k == EMPTY {
                return false;
            }
            i = (i + STEP) & mask;
        }
    }

    /// Stores `key` with `number` (`newest` or earlier), replacing an expired copy.
    pub fn insert(&mut self, key: u64, number: u64, newest: u64) {
        debug_assert!(key != EMPTY);
        self.since_rebuild += 1;
        if (self.occupied + 1) * 8 > self.keys.len() * 5
            || self.since_rebuild > MAX_BETWEEN_REBUILDS
        {
            self.rebuild(newest);
        }
        self.place(key, number as u32);
    }

    fn place(&mut self, key: u64, number: u32) {
        let mask = self.keys.len() - 1;
        let mut i = Self::home(key, mask);
        loop {
            let k = self.keys[i];
            if k == key {
                self.numbers[i] = number;
                return;
            }
            if k == EMPTY {
                self.keys[i] = key;
                self.numbers[i] = number;
                self.occupied += 1;
                return;
            }
            i = (i + STEP) & mask;
        }
    }

    /// Drops the expired keys, sized for twice the live ones.
    fn rebuild(&mut self, newest: u64) {
        let live = (0..self.keys.len())
            .filter(|&i| self.keys[i] != EMPTY && self.live(self.numbers[i], newest))
            .count();
        let slots = ((live + 1) * 2).next_power_of_two().max(MIN_SLOTS);
        let keys = std::mem::replace(&mut self.keys, vec![EMPTY; slots]);
        let numbers = std::mem::replace(&mut self.numbers, vec![0; slots]);
        self.occupied = 0;
        self.since_rebuild = 0;
        for (k, n) in keys.into_iter().zip(numbers) {
            if k != EMPTY && self.live(n, newest) {
                self.place(k, n);
            }
        }
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.keys.capacity() * 8 + self.numbers.capacity() * 4
    }

    /// Keys stored, expired ones included.
    #[cfg(test)]
    pub fn stored(&self) -> usize {
        self.occupied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tierscope_core::rng::Rng;

    #[test]
    fn holds_exactly_the_keys_of_the_last_window_insertions() {
        // Against a map of each key's last insertion number: random keys from a range
        // small enough that keys come back, before and after they expire, with runs of
        // consecutive keys (a scan) among them, across many rebuilds.
        let window = 5_000u32;
        let mut table = ExpiringKeys::new(window);
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut rng = Rng::new(3);
        let mut number = 0u64;
        let mut scan = 0u64;
        for i in 0..200_000u64 {
            let key = if i % 3 == 0 {
                scan = (scan + 1) % 20_000;
                scan
            } else {
                (rng.next_u64() % 30_000) | (1 << 40)
            };
            let held = |n: &u64| n + window as u64 > number;
            assert_eq!(table.holds(key, number), last.get(&key).is_some_and(held));
            if !last.get(&key).is_some_and(held) {
                number += 1;
                table.insert(key, number, number);
                last.insert(key, number);
            }
        }
        for key in (0..30_000u64).chain((0..30_000).map(|k| k | 1 << 40)) {
            let held = last.get(&key).is_some_and(|n| n + window as u64 > number);
            assert_eq!(table.holds(key, number), held, "{key}");
        }
        // Rebuilds dropped the expired keys (the smallest table fills at 40,960).
        assert!(
            number > 100_000 && table.stored() <= 40_960,
            "{}",
            table.stored()
        );
    }
}
