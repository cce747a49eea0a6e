//! The last-level cache in front of the memory controllers (NEMO paper §3: the engine
//! sees the requests that reach memory, i.e. the LLC's misses). A physically indexed,
//! set-associative cache of 64 B lines with LRU replacement: a hit never reaches a
//! controller, a miss fills the line. Loads and stores are alike (a store miss is a
//! read-for-ownership; write-backs of dirty lines are not modelled, so NEMO sees no
//! eviction traffic).

use serde::{Deserialize, Serialize};
use tierscope_core::units::Size;
use tierscope_core::FieldError;

const LINE_SHIFT: u32 = 6;
const EMPTY: u64 = u64::MAX;

/// `[machine] llc = { size = "32MiB", ways = 16 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlcConfig {
    pub size: Size,
    pub ways: u32,
}

impl LlcConfig {
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(1..=64).contains(&self.ways) {
            return Err(FieldError::new(
                "ways",
                format!("must be 1 to 64, got {}", self.ways),
            ));
        }
        let lines = self.size.0 >> LINE_SHIFT;
        let sets = lines / self.ways as u64;
        if !self.size.0.is_multiple_of(64)
            || sets == 0
            || !sets.is_power_of_two()
            || sets * self.ways as u64 != lines
        {
            return Err(FieldError::new(
                "size",
                format!(
                    "must be ways x a power of two of 64 B lines, got {} B with {} ways",
                    self.size.0, self.ways
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Llc {
    ways: usize,
    set_mask: u64,
    /// `ways` line numbers per set, most recently used first; `EMPTY` where unused.
    tags: Vec<u64>,
    pub hits: u64,
    pub misses: u64,
}

impl Llc {
    /// A cold cache of a validated shape.
    pub fn new(config: &LlcConfig) -> Self {
        let ways = config.ways as usize;
        let sets = (config.size.0 >> LINE_SHIFT) / ways as u64;
        Llc {
            ways,
            set_mask: sets - 1,
            tags: vec![EMPTY; sets as usize * ways],
            hits: 0,
            misses: 0,
        }
    }

    /// Looks up the line holding `addr`; true on a hit. Either way the line becomes the
    /// set's most recently used (a miss evicts the least recently used).
    #[inline]
    pub fn access(&mut self, addr: u64) -> bool {
        let line = addr >> LINE_SHIFT;
        let set = (line & self.set_mask) as usize * self.ways;
        let tags = &mut self.tags[set..set + self.ways];
        let found = tags.iter().position(|&t| t == line);
        let hit = found.is_some();
        // Move to the front: shift the more recent ones down one.
        let from = found.unwrap_or(self.ways - 1);
        tags.copy_within(0..from, 1);
        tags[0] = line;
        self.hits += hit as u64;
        self.misses += !hit as u64;
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use tierscope_core::rng::Rng;

    #[test]
    fn matches_a_naive_lru_per_set() {
        for (size, ways) in [(4096u64, 4u32), (64 << 10, 16), (1024, 1), (8192, 8)] {
            let config = LlcConfig {
                size: Size(size),
                ways,
            };
            config.validate().unwrap();
            let mut llc = Llc::new(&config);
            let sets = size / 64 / ways as u64;
            let mut naive: Vec<VecDeque<u64>> = vec![VecDeque::new(); sets as usize];
            let mut rng = Rng::new(size ^ ways as u64);
            for _ in 0..200_000 {
                // Addresses over 4x the cache, half of them in a hot eighth.
                let span = if rng.below(2) == 0 {
                    size / 8
                } else {
                    size * 4
                };
                let addr = rng.below(span);
                let line = addr / 64;
                let q = &mut naive[(line % sets) as usize];
                let hit = if let Some(i) = q.iter().position(|&l| l == line) {
                    q.remove(i);
                    true
                } else {
                    if q.len() == ways as usize {
                        q.pop_back();
                    }
                    false
                };
                q.push_front(line);
                assert_eq!(
                    llc.access(addr),
                    hit,
                    "{size} B {ways} ways, addr {addr:#x}"
                );
            }
            assert_eq!(llc.hits + llc.misses, 200_000);
            assert!(llc.hits > 0 && llc.misses > 0);
        }
    }

    #[test]
    fn bad_shapes_name_their_field() {
        let field = |size, ways| {
            LlcConfig {
                size: Size(size),
                ways,
            }
            .validate()
            .unwrap_err()
            .field
        };
        assert_eq!(field(32 << 20, 0), "ways");
        assert_eq!(field(3 << 20, 16), "size");
        assert_eq!(field(100, 1), "size");
        assert!(LlcConfig {
            size: Size(30 << 20),
            ways: 15
        }
        .validate()
        .is_ok());
    }
}
