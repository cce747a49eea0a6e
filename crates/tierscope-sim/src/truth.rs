//! Ground truth measured from the accesses an engine executes: per window, how often each
//! block of the heap was accessed; blocks at or above a threshold are hot.

use tierscope_core::{AddrRange, BlockIntervals};

#[derive(Debug, Clone)]
pub struct TruthRecorder {
    heap_start: u64,
    shift: u32,
    first_block: u64,
    threshold: u32,
    counts: Vec<u32>,
    /// Blocks whose count left zero in this window, so closing a window costs only them.
    touched: Vec<u32>,
    /// Count stores only (the truth of a write log).
    writes_only: bool,
}

impl TruthRecorder {
    pub fn new(heap: AddrRange, block_size: u64, threshold: u32) -> Self {
        let shift = block_size.trailing_zeros();
        let first_block = heap.start >> shift;
        let last_block = (heap.end - 1) >> shift;
        TruthRecorder {
            heap_start: heap.start,
            shift,
            first_block,
            threshold,
            counts: vec![0; (last_block - first_block + 1) as usize],
            touched: vec![],
            writes_only: false,
        }
    }

    /// Blocks of the heap it counts (4 bytes of memory each).
    pub fn block_count(&self) -> usize {
        self.counts.len()
    }

    /// From now on, count stores only, and a block with one store is hot (the truth of
    /// a write log: blocks with at least one page written).
    pub fn set_writes_only(&mut self) {
        self.writes_only = true;
        self.threshold = 1;
    }

    /// A recorder with the same blocks and rules and nothing counted (a host thread's
    /// share of a window, added with [`TruthRecorder::merge`]).
    pub fn empty_like(&self) -> Self {
        TruthRecorder {
            heap_start: self.heap_start,
            shift: self.shift,
            first_block: self.first_block,
            threshold: self.threshold,
            counts: vec![0; self.counts.len()],
            touched: vec![],
            writes_only: self.writes_only,
        }
    }

    /// Adds the counts of `other` (made by [`TruthRecorder::empty_like`]) and empties it.
    /// Saturating sums of counts equal the saturated count of all the accesses, so the
    /// result does not depend on how the accesses were split.
    pub fn merge(&mut self, other: &mut TruthRecorder) {
        for &i in &other.touched {
            let add = std::mem::take(&mut other.counts[i as usize]);
            let c = &mut self.counts[i as usize];
            if *c == 0 {
                self.touched.push(i);
            }
            *c = c.saturating_add(add);
        }
        other.touched.clear();
    }

    /// Counts an access to `va` (a store when `write`).
    #[inline(always)]
    pub fn record(&mut self, va: u64, write: bool) {
        if self.writes_only & !write {
            return;
        }
        debug_assert!(va >= self.heap_start);
        let i = ((va >> self.shift) - self.first_block) as usize;
        let c = &mut self.counts[i];
        if *c == 0 {
            self.touched.push(i as u32);
        }
        *c = c.saturating_add(1);
    }

    /// Accesses per byte of every block touched since the last call (adjacent blocks with
    /// equal counts merged), sorted; resets, as [`TruthRecorder::take`] does.
    pub fn take_heat(&mut self) -> Vec<(AddrRange, f64)> {
        self.touched.sort_unstable();
        let bs = 1u64 << self.shift;
        let mut out: Vec<(AddrRange, f64)> = vec![];
        for &i in &self.touched {
            let c = std::mem::take(&mut self.counts[i as usize]);
            let start = (self.first_block + i as u64) << self.shift;
            let per_byte = f64::from(c) / bs as f64;
            match out.last_mut() {
                Some((r, d)) if r.end == start && *d == per_byte => r.end += bs,
                _ => out.push((AddrRange::new(start, start + bs), per_byte)),
            }
        }
        self.touched.clear();
        out
    }

    /// The hot blocks since the last call, as intervals of global block numbers; resets.
    pub fn take(&mut self) -> BlockIntervals {
        self.touched.sort_unstable();
        let mut out: BlockIntervals = vec![];
        for &i in &self.touched {
            let c = std::mem::take(&mut self.counts[i as usize]);
            if c < self.threshold {
                continue;
            }
            let b = self.first_block + i as u64;
            match out.last_mut() {
                Some(last) if last.1 == b => last.1 += 1,
                _ => out.push((b, b + 1)),
            }
        }
        self.touched.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_reset_and_threshold_applies() {
        let base = 0x7f00_0000_0000u64;
        let mut t = TruthRecorder::new(AddrRange::new(base, base + (16 << 20)), 2 << 20, 2);
        for va in [
            base,
            base + 8,
            base + (2 << 20),
            base + (4 << 20),
            base + (4 << 20) + 1,
        ] {
            t.record(va, false);
        }
        let b0 = base >> 21;
        assert_eq!(t.take(), vec![(b0, b0 + 1), (b0 + 2, b0 + 3)]);
        assert_eq!(t.take(), vec![]);
    }

    #[test]
    fn writes_only_counts_one_store_and_no_load() {
        let base = 0x7f00_0000_0000u64;
        let mut t = TruthRecorder::new(AddrRange::new(base, base + (16 << 20)), 2 << 20, 5);
        t.set_writes_only();
        t.record(base, false);
        t.record(base, false);
        t.record(base + (2 << 20), true);
        let b0 = base >> 21;
        assert_eq!(t.take(), vec![(b0 + 1, b0 + 2)]);
    }
}
