//! A set-associative cache with LRU replacement, the building block of the TLBs and the
//! paging-structure caches. Keys are page or entry numbers; the set comes from the low bits.

use crate::config::CacheGeometry;

const INVALID: u64 = u64::MAX;

/// Most ways a cache may have (sets are fixed-size arrays: no allocation, no bounds checks
/// beyond one on the way count).
pub const MAX_WAYS: usize = 16;

/// A byte repeated in every byte of a word.
const BYTES: u64 = 0x0101_0101_0101_0101;
/// A 4-bit field repeated in every nibble.
const NIBBLES: u64 = 0x1111_1111_1111_1111;

/// One set. `fp` holds one fingerprint byte per way (a hash of its tag): a probe compares
/// all of them at once (one SSE2 comparison) and checks the full tag only where a byte
/// matches, so a miss costs a few instructions whatever the associativity (the exact
/// engine's workloads miss the TLBs on almost every access). `order` lists the ways in
/// recency order (most recent first) as 4-bit way numbers packed in one word (position
/// `p` in bits `4p..4p+4`), so the LRU victim is the last position and moving a way to
/// the front is a few shifts and masks. Positions from `ways` up keep their initial way
/// numbers (all `>= ways`), so a search for a real way never finds them; ways from `ways`
/// up keep the INVALID tag, so a fingerprint match there never verifies. Aligned to a
/// cache line: the fingerprints and the order then always share the first line (the one
/// `prefetch` loads), and sets of caches of different cores never share a line.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
struct Set {
    fp: [u8; MAX_WAYS],
    order: u64,
    tags: [u64; MAX_WAYS],
    values: [u64; MAX_WAYS],
}

#[derive(Debug, Clone)]
pub struct SetAssoc {
    ways: usize,
    /// A bit per way (`ways` low bits).
    way_bits: u32,
    /// `4 * (ways - 1)`: where the LRU victim sits in `order`.
    last_shift: u32,
    /// The nibbles of positions `0..ways` in `order`.
    order_mask: u64,
    set_mask: u64,
    /// `set_mask + 1` sets; never resized (`set_mut` relies on it).
    sets: Box<[Set]>,
}

/// The fingerprint byte of a tag: its top byte after a multiplicative hash (tags in one
/// set share their low bits, the set index, so those bits would not tell them apart).
#[inline(always)]
fn fingerprint(tag: u64) -> u64 {
    tag.wrapping_mul(tierscope_core::rng::GOLDEN) >> 56
}

/// Flags (bit 7 of the byte) the bytes of `word` equal to `byte`. The lowest flag is
/// always a true match; higher ones may be false positives (a borrow out of a matching
/// byte), which the caller's full-tag check rejects.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn matching_bytes(word: u64, byte: u64) -> u64 {
    let x = word ^ byte.wrapping_mul(BYTES);
    x.wrapping_sub(BYTES) & !x & (BYTES << 7)
}

/// Mask of the nibbles at positions `0..=pos`.
#[inline(always)]
fn through(pos: usize) -> u64 {
    (((1u64 << (4 * pos)) - 1) << 4) | 0xf
}

impl Set {
    /// The fingerprints of ways `8 * half..8 * half + 8` as one word.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn fp_word(&self, half: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.fp[8 * half..8 * half + 8]);
        u64::from_le_bytes(b)
    }

    /// The ways among `ways` (a bit per way) whose fingerprint is `f`'s byte: one SSE2
    /// byte comparison of all sixteen (x86-64's baseline), else two words of byte
    /// arithmetic (whose flags past the lowest may be false positives, which the
    /// caller's full-tag check rejects).
    #[inline(always)]
    fn candidates(&self, f: u64, ways: u32) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi64x};
            // SAFETY: SSE2 is part of the x86-64 baseline; [u8; 16] and __m128i have the
            // same size and every bit pattern is valid for both.
            unsafe {
                let fp = std::mem::transmute::<[u8; 16], __m128i>(self.fp);
                let key = _mm_set1_epi64x(f.wrapping_mul(BYTES) as i64);
                _mm_movemask_epi8(_mm_cmpeq_epi8(fp, key)) as u32 & ways
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut m = 0u32;
            for half in 0..2 {
                let mut flags = matching_bytes(self.fp_word(half), f);
                while flags != 0 {
                    m |= 1 << (half * 8 + (flags.trailing_zeros() / 8) as usize);
                    flags &= flags - 1;
                }
            }
            m & ways
        }
    }

    /// The way holding `tag`, if any; `ways` has a bit per way of the cache.
    #[inline(always)]
    fn find(&self, tag: u64, ways: u32) -> Option<usize> {
        let mut m = self.candidates(fingerprint(tag), ways);
        while m != 0 {
            let way = m.trailing_zeros() as usize;
            if self.tags[way] == tag {
                return Some(way);
            }
            m &= m - 1;
        }
        None
    }

    /// Stores `tag` in `way` (with its fingerprint).
    #[inline(always)]
    fn put_tag(&mut self, way: usize, tag: u64) {
        self.tags[way] = tag;
        self.fp[way] = fingerprint(tag) as u8;
    }

    /// The recency position of `way` (which is in the order): the lowest nibble equal to
    /// it, found with the zero-nibble trick on `order ^ way * NIBBLES` (as for bytes in
    /// `matching_bytes`, the lowest flagged nibble is a true zero).
    #[inline(always)]
    fn position_of(&self, way: usize) -> usize {
        let x = self.order ^ (way as u64 * NIBBLES);
        let zero = x.wrapping_sub(NIBBLES) & !x & (NIBBLES << 3);
        debug_assert!(zero != 0, "every way is in the order");
        zero.trailing_zeros() as usize / 4
    }

    /// Moves the way at recency position `pos` to the front.
    #[inline(always)]
    fn promote(&mut self, pos: usize) {
        let way = self.order >> (4 * pos) & 0xf;
        let below = (1u64 << (4 * pos)) - 1;
        self.order = (self.order & !through(pos)) | (self.order & below) << 4 | way;
    }

    /// Moves the way at recency position `pos` to position `ways - 1` (next victim).
    fn demote(&mut self, pos: usize, ways: usize) {
        let way = self.order >> (4 * pos) & 0xf;
        let span = through(ways - 1) & !through(pos);
        let keep = self.order & !(span | 0xf << (4 * pos));
        self.order = keep | (self.order & span) >> 4 | way << (4 * (ways - 1));
    }
}

impl SetAssoc {
    pub fn new(g: CacheGeometry) -> Self {
        let ways = g.ways as usize;
        assert!(
            ways <= MAX_WAYS,
            "at most {MAX_WAYS} ways (validated in the config)"
        );
        // Position i holds way i: 0xfedc_ba98_7654_3210.
        let order = (0..MAX_WAYS as u64).fold(0, |o, i| o | i << (4 * i));
        let mut empty = Set {
            fp: [0; MAX_WAYS],
            order,
            tags: [INVALID; MAX_WAYS],
            values: [0; MAX_WAYS],
        };
        empty.clear();
        SetAssoc {
            ways,
            way_bits: (1u32 << ways) - 1,
            last_shift: 4 * (ways as u32 - 1),
            order_mask: through(ways - 1),
            set_mask: (g.entries / g.ways) as u64 - 1,
            sets: vec![empty; (g.entries / g.ways) as usize].into_boxed_slice(),
        }
    }

    #[inline(always)]
    fn set_index(&self, set_key: u64) -> usize {
        (set_key & self.set_mask) as usize
    }

    /// The set chosen by `set_key` (index `set_index(set_key)`), without a bounds check:
    /// every probe and insertion of every walk indexes a set, and the mask already
    /// bounds the index.
    #[inline(always)]
    fn set_mut(&mut self, set_key: u64) -> &mut Set {
        let si = self.set_index(set_key);
        debug_assert!(si < self.sets.len());
        // SAFETY: `sets` has `set_mask + 1` sets (a power of two) from `new` on and is
        // never resized, so `set_key & set_mask` is in bounds.
        unsafe { self.sets.get_unchecked_mut(si) }
    }

    /// Looks up `tag` in the set chosen by `set_key`; on a hit marks it most recently used
    /// and returns its slot.
    #[inline(always)]
    pub fn lookup(&mut self, set_key: u64, tag: u64) -> Option<usize> {
        let (si, way_bits) = (self.set_index(set_key), self.way_bits);
        let set = self.set_mut(set_key);
        let way = set.find(tag, way_bits)?;
        let pos = set.position_of(way);
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
        let (shift, mask) = (self.last_shift, self.order_mask);
        let set = self.set_mut(set_key);
        let victim = set.order >> shift & 0xf;
        set.put_tag(victim as usize, tag);
        set.values[victim as usize] = value;
        // promote(ways - 1) with the masks precomputed: every position moves back one.
        set.order = (set.order & !mask) | (set.order << 4 & mask) | victim;
    }

    /// Hints the CPU to load the line a probe of `set_key` reads first (fingerprints and
    /// recency order).
    #[inline(always)]
    pub fn prefetch(&self, set_key: u64) {
        crate::prefetch::line(&self.sets[self.set_index(set_key)]);
    }

    /// Drops `tag` if cached; its way becomes the next victim.
    pub fn invalidate(&mut self, set_key: u64, tag: u64) {
        let si = self.set_index(set_key);
        let (ways, way_bits) = (self.ways, self.way_bits);
        let set = &mut self.sets[si];
        if let Some(way) = set.find(tag, way_bits) {
            set.put_tag(way, INVALID);
            let pos = set.position_of(way);
            set.demote(pos, ways);
        }
    }

    pub fn invalidate_all(&mut self) {
        for set in &mut self.sets {
            set.clear();
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

impl Set {
    /// Every way empty (INVALID tags with their fingerprints); the order is kept.
    fn clear(&mut self) {
        self.tags.fill(INVALID);
        self.fp.fill(fingerprint(INVALID) as u8);
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
