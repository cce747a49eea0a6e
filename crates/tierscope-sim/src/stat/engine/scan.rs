//! A whole page table's ACCESSED bits read at once ([`Machine::scan_table_accessed`]):
//! split-hint's page mode reads 512 leaf entries per table every window, one window after
//! the last, by then out of the host's caches. Read entry by entry, each entry was a
//! filter word and a hash-table probe at a random place, twice for those found set (the
//! read, then the test-and-clear); here the table's entries are one array
//! ([`super::super::scanned`]) read front to back, and the answers and counts are those
//! of [`scan_table_by_entry`].
//!
//! [`Machine::scan_table_accessed`]: tierscope_core::Machine::scan_table_accessed
//! [`scan_table_by_entry`]: tierscope_core::machine::scan_table_by_entry

use tierscope_core::machine::{for_each_selected, table_entries_by_entry, TABLE_ENTRIES};
use tierscope_core::Level;

use super::{dead_span, key, position, target, Bit, Cleared, StatEngine, Target};

/// The most entries of a dead table left out of a test-and-clear that are asked one by
/// one whether the dead set holds them, to note the whole table held.
const UNSELECTED_ASKED: u64 = 64;

impl StatEngine {
    /// [`tierscope_core::Machine::scan_table_accessed`] of a table of base pages that
    /// lies inside one mapping (every entry exists, under a 4 KiB leaf), from its entry
    /// block; `None`, having done nothing, for any other table.
    pub(super) fn scan_base_table(
        &mut self,
        level: Level,
        start: u64,
        accessed: &mut [u64; 8],
    ) -> Option<u32> {
        let (leaf, steps) = self.base_table(level, start)?;
        let first = key(Bit::Accessed, level, start);
        let i = match self.entries.scanned_table_of(first) {
            Some(i) => i,
            None => self.entries.adopt_table(first),
        };
        *accessed = [0; 8];
        let mut set = 0;
        for e in 0..TABLE_ENTRIES {
            let va = start + e * level.span();
            if self.scan_entry(i, first | e, target(Bit::Accessed, level, leaf, va)) {
                accessed[(e / 64) as usize] |= 1 << (e % 64);
                set += 1;
            }
        }
        // A read of every entry and a test-and-clear of each set one, all under one
        // descent of the walk (the first entry's, with its test-and-clear when set).
        let c = &mut self.cost;
        c.entries_read += TABLE_ENTRIES + set;
        c.walk_steps += steps as u64 * (1 + (accessed[0] & 1));
        c.clear_ops += set;
        c.bits_cleared += set;
        Some(set as u32)
    }

    /// [`tierscope_core::Machine::table_entries_accessed`] of a table of base pages inside
    /// one mapping that is kept whole, or that some access reaches (NUMA hinting's scan
    /// clears runs of pages and reads them a second later: a table no access reaches
    /// stays in the dead set, entry by entry: [`Self::dead_table_entries`]), from its
    /// entry block; `None`, having done nothing, for any other table.
    pub(super) fn base_table_entries(
        &mut self,
        level: Level,
        start: u64,
        (which, clear): (&[u64; 8], bool),
        old: &mut [u64; 8],
    ) -> Option<()> {
        let (leaf, steps) = self.base_table(level, start)?;
        let first = key(Bit::Accessed, level, start);
        let i = match self.entries.scanned_table_of(first) {
            Some(i) => i,
            None if dead_span(&self.workload, Level::Pmd, start) => {
                return self.dead_table_entries(level, start, (which, clear), old, steps);
            }
            None => self.entries.adopt_table(first),
        };
        *old = [0; 8];
        for_each_selected(which, |e| {
            let va = start + e * level.span();
            // As `accessed` or `test_and_clear_accessed` of the entry: a test-and-clear
            // leaves every entry of a kept table tracked or dead, so it clears in place.
            let set = self
                .read_scanned(i, first | e, target(Bit::Accessed, level, leaf, va), clear)
                .0;
            if clear {
                self.cost.charge_test_and_clear(steps as u64, set);
            } else {
                self.cost.charge_read(steps as u64);
            }
            old[(e / 64) as usize] |= (set as u64) << (e % 64);
        });
        Some(())
    }

    /// [`Self::base_table_entries`] of a table no access reaches, whose entries live in
    /// the dead set. A linear scan test-and-clears every entry of a cold region each pass:
    /// once a pass has left them all in the dead set's exact part and none has been
    /// forgotten since, each test-and-clear finds its entry clear and changes nothing, so
    /// the table answers at once; otherwise entry by entry, noting the table held when
    /// that leaves every entry in the set. `None` (read by entry) for plain reads.
    fn dead_table_entries(
        &mut self,
        level: Level,
        start: u64,
        (which, clear): (&[u64; 8], bool),
        old: &mut [u64; 8],
        steps: u32,
    ) -> Option<()> {
        if !clear {
            return None;
        }
        let first = key(Bit::Accessed, level, start);
        let dead = self.entries.dead();
        if dead.table_held(first) {
            *old = [0; 8];
            for_each_selected(which, |_| {
                self.cost.charge_test_and_clear(steps as u64, false);
            });
            return Some(());
        }
        let forgotten = dead.forgotten();
        table_entries_by_entry(self, level, start, (which, clear), old);
        // The selected entries are in the set now unless some key was forgotten on the
        // way; the few others are asked (a scan's batch may end inside the table).
        let dead = self.entries.dead();
        let unselected =
            TABLE_ENTRIES - which.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        if dead.forgotten() == forgotten
            && unselected <= UNSELECTED_ASKED
            && (0..TABLE_ENTRIES)
                .filter(|&e| which[(e / 64) as usize] & (1 << (e % 64)) == 0)
                .all(|e| dead.holds(first | e))
        {
            self.entries.dead_mut().note_table_held(first);
        }
        Some(())
    }

    /// The leaf level and the walk's steps of the entries of the table at `level` from
    /// `start`, when it is a table of base pages inside one mapping (all its entries
    /// exist, under 4 KiB leaves).
    fn base_table(&self, level: Level, start: u64) -> Option<(Level, u32)> {
        let span = level.span() * TABLE_ENTRIES;
        if level != Level::Pte || !start.is_multiple_of(span) {
            return None;
        }
        let m = self.mapping_of(start)?;
        if m.range.end - start < span || self.leaf_in(m, start) != Level::Pte {
            return None;
        }
        self.locate(level, start)
    }

    /// A read of the entry of key `k` in the scanned table `i`, then, when it was set, a
    /// test-and-clear; returns the read's answer (the test-and-clear's too).
    fn scan_entry(&mut self, i: usize, k: u64, t: Target) -> bool {
        let e = position(k);
        if self.entries.scanned.table(i).get(e).is_some() {
            // Found set, it is cleared again in place: the state of forgetting it and
            // clearing it anew, but for its span's bound, which it keeps.
            return self.read_scanned(i, k, t, true).0;
        }
        if dead_span(&self.workload, t.level, t.span.start) {
            // Only a set entry is tested and cleared: a clear one's test-and-clear would
            // move it within the dead set.
            let set = self.read_dead(k, false).0;
            if set {
                self.read_dead(k, true);
            }
            return set;
        }
        // Untracked and reachable: it reads set, and is cleared now.
        let cleared = Cleared::new(self.now, self.seq);
        self.entries.scanned.table_mut(i).set(e, cleared);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{engine, tracked, twin_step};
    use super::*;
    use crate::stat::dead::RECENT_DEAD;
    use tierscope_core::machine::{scan_table_by_entry, table_entries_by_entry};
    use tierscope_core::rng::Rng;
    use tierscope_core::workload::{parse_masim, Density};
    use tierscope_core::{Flush, Machine};

    /// More dead keys than the dead set holds exactly.
    const RECENT_DEAD_KEYS: u64 = RECENT_DEAD as u64 + 1;

    #[test]
    fn a_whole_table_read_answers_as_its_entries_read_one_by_one() {
        // Two engines of one seed under the same random operations: scans of whole tables,
        // reads or test-and-clears of some of their entries at once (base-page tables of a
        // hot region, of a gaussian's centre and tails, of a region no access reaches, and
        // tables the fast paths leave to the entry-by-entry read: upper levels, a table
        // with no mapping), single reads and test-and-clears of their entries, flushes and
        // time. One uses `scan_table_accessed` and `table_entries_accessed`, the other
        // reads entry by entry. Every answer, every count and every tracked entry (key,
        // time, flush number, freshness) agree.
        let mut spec = parse_masim(
            "cold, 64MiB\nhot, 16MiB\ng, 1GiB\n\np\n1000\nhot, 1, 4096, 1, rw\ng, 1, 4096, 1, rw\n",
        )
        .unwrap();
        spec.phases[0].patterns[1].density = Density::Gaussian {
            mean: 0.5,
            sigma: 0.004,
        };
        let (mut a, mut b) = (engine(&spec, 1), engine(&spec, 1));
        let starts = a.layout.region_starts.clone();
        let (cold, hot, g) = (starts[0], starts[1], starts[2]);
        let sigma = (0.004 * (1u64 << 30) as f64) as u64;
        let centre = g + (1 << 29);
        let two_mib = 2 << 20;
        let mut tables = vec![
            (Level::Pte, cold + 3 * two_mib),
            (Level::Pte, hot),
            (Level::Pte, hot + 5 * two_mib),
            (Level::Pte, Level::Pmd.align_down(centre)),
            (Level::Pte, Level::Pmd.align_down(centre + 3 * sigma)),
            (Level::Pte, Level::Pmd.align_down(centre - 12 * sigma)),
            (Level::Pte, Level::Pmd.align_down(centre + 60 * sigma)),
            (Level::Pmd, Level::Pud.align_down(hot)),
            // The heap ends 2 MiB below the libraries: a table with no mapping.
            (Level::Pte, a.layout.heap.end),
        ];
        tables.push((Level::Pte, tables[3].1 + two_mib));
        let mut rng = Rng::new(17);
        let mut t = 0;
        let (mut set, mut clear, mut selected) = (0, 0, 0);
        for _ in 0..600 {
            let (level, start) = tables[rng.below(tables.len() as u64) as usize];
            let va = start + rng.below(512) * level.span();
            let op = rng.below(9);
            if twin_step(
                (&mut a, &mut b),
                op,
                (level, va),
                (&mut t, &mut rng, 40_000_000),
            ) {
                continue;
            }
            match op {
                3 | 4 => {
                    let (mut got, mut want) = ([0; 8], [0; 8]);
                    let n = a.scan_table_accessed(level, start, &mut got);
                    assert_eq!(n, scan_table_by_entry(&mut b, level, start, &mut want));
                    assert_eq!(got, want);
                    assert_eq!(n, got.iter().map(|w| w.count_ones()).sum::<u32>());
                    set += n;
                    clear += 512 - n;
                }
                5 => assert_eq!(
                    a.test_and_clear_accessed(level, va),
                    b.test_and_clear_accessed(level, va)
                ),
                7 | 8 => {
                    // Some of the table's entries, a run or scattered, tested and cleared
                    // or read.
                    let mut which = [0u64; 8];
                    let (from, len) = (rng.below(512), 1 + rng.below(512));
                    for e in from..(from + len).min(512) {
                        if op == 7 || rng.below(3) == 0 {
                            which[(e / 64) as usize] |= 1 << (e % 64);
                        }
                    }
                    let clear = rng.below(2) == 0;
                    let (mut got, mut want) = ([0; 8], [0; 8]);
                    a.table_entries_accessed(level, start, &which, clear, &mut got);
                    table_entries_by_entry(&mut b, level, start, (&which, clear), &mut want);
                    assert_eq!(got, want);
                    assert!(got.iter().zip(&which).all(|(g, w)| g & !w == 0));
                    selected += 1;
                }
                _ => {
                    let all = rng.below(4) == 0;
                    let what = if all { Flush::All } else { Flush::Page(va) };
                    a.flush(what);
                    b.flush(what);
                }
            }
            assert_eq!(a.cost, b.cost);
            assert_eq!(tracked(&a), tracked(&b));
        }
        // The fast path took the base-page tables in mappings (and only they are kept
        // whole), and both answers were common.
        assert_eq!(a.entries.scanned.find(0), None);
        let kept = tables
            .iter()
            .filter(|&&(level, start)| {
                a.entries
                    .scanned_table_of(key(Bit::Accessed, level, start))
                    .is_some()
            })
            .count();
        assert_eq!(kept, 8);
        assert!(set > 2_000 && clear > 20_000, "{set} set, {clear} clear");
        assert!(selected > 100, "{selected}");
    }

    #[test]
    fn a_dead_table_cleared_whole_answers_as_its_entries_one_by_one() {
        // A linear scan's passes over a region no access reaches: whole tables (and, as a
        // batch ending inside one, all but a few entries) tested and cleared at once on one
        // engine, entry by entry on its twin, with single test-and-clears and reads between
        // the passes. From the second pass the tables answer at once; then the dead set
        // forgets their keys (a million others cleared after them), and a forgotten key
        // reads clear only by its chunk's count, which the next pass must ask again.
        let spec =
            parse_masim("cold, 64MiB\nhot, 16MiB\n\np\n1000\nhot, 1, 4096, 1, ro\n").unwrap();
        let (mut a, mut b) = (engine(&spec, 1), engine(&spec, 1));
        let cold = Level::Pmd.align_down(a.layout.region_starts[0] + (2 << 20) - 1);
        let tables: Vec<u64> = (0..31).map(|i| cold + i * (2 << 20)).collect();
        let mut rng = Rng::new(5);
        let mut set_after_forgetting = 0;
        for pass in 0..6 {
            if pass == 4 {
                for e in [&mut a, &mut b] {
                    for k in 0..RECENT_DEAD_KEYS {
                        e.entries
                            .clear_dead(key(Bit::Accessed, Level::Pte, (1 << 44) + (k << 12)));
                    }
                }
                assert!(tables.iter().all(|&t| !a.entries.dead().table_held(key(
                    Bit::Accessed,
                    Level::Pte,
                    t
                ))));
            }
            for &t in &tables {
                let mut which = [u64::MAX; 8];
                if pass != 1 && rng.below(4) == 0 {
                    // The batch ends a few entries before the table does.
                    which[7] >>= 1 + rng.below(40);
                }
                let (mut got, mut want) = ([0; 8], [0; 8]);
                a.table_entries_accessed(Level::Pte, t, &which, true, &mut got);
                table_entries_by_entry(&mut b, Level::Pte, t, (&which, true), &mut want);
                assert_eq!(got, want, "pass {pass}");
                if pass == 4 {
                    set_after_forgetting += got.iter().map(|w| w.count_ones()).sum::<u32>();
                }
                let va = t + rng.below(512) * 4096;
                assert_eq!(
                    a.test_and_clear_accessed(Level::Pte, va),
                    b.test_and_clear_accessed(Level::Pte, va)
                );
                assert_eq!(a.accessed(Level::Pte, va), b.accessed(Level::Pte, va));
                assert_eq!(a.cost, b.cost);
            }
            if pass == 1 {
                // The first pass left the tables whole in the set: they answer at once.
                assert!(tables.iter().all(|&t| a.entries.dead().table_held(key(
                    Bit::Accessed,
                    Level::Pte,
                    t
                ))));
            }
        }
        // Forgotten keys read set by their chunk's count: asked again, not answered clear.
        assert!(set_after_forgetting > 100, "{set_after_forgetting}");
    }
}
