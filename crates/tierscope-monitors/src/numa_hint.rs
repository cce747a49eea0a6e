//! Linux's NUMA balancing in memory-tiering mode (`numa_balancing = 2`, the mechanism TPP
//! promotes with): every `scan_period` the next `scan_size` bytes of the task's mappings
//! are made inaccessible (`change_prot_numa`), so the next access to each page takes a
//! NUMA hint fault; a page on a slower tier whose fault comes within `hot_threshold` of
//! its scan is a promotion candidate. On a machine with tiers, pages on the top tier are
//! skipped, as tiering mode does (they have nowhere to be promoted to); without tiers
//! every page is scanned (NUMA balancing's normal mode).
//!
//! Model: the scan clears the ACCESSED bit of every leaf entry in the batch and flushes
//! the batch's range (the protection change and its shootdown: the next access must walk
//! and so sets the bit again); `hot_threshold` later the bits are read. A set bit is an
//! access, hence a fault, within the threshold. What differs from Linux: the decision is
//! made when the threshold expires rather than at the fault, so a promotion comes up to
//! `hot_threshold` later than Linux's (same pages, same order); faults that come after the
//! threshold are neither seen nor charged (Linux takes them and does not promote).
//!
//! Each scan period yields one snapshot: the batch whose threshold just expired, its
//! faulted pages with `nr_accesses` 1, the others 0. Faults are charged as `hint_faults`
//! (on the workload's cores). The scan walks mappings in address order and wraps, as
//! `task_numa_work` advances `numa_scan_offset`.

use crate::registry::{BuildContext, Preset, Technique};
use serde::{Deserialize, Serialize};
use tierscope_core::machine::{for_each_selected, select_entries, TABLE_ENTRIES};
use tierscope_core::units::{Duration, Size, NS_PER_MS};
use tierscope_core::FeedKind;
use tierscope_core::{
    AddrRange, FieldError, Flush, Intervals, Level, Machine, Monitor, Nanos, OpCounter,
    RegionReport, Snapshot,
};

/// NUMA hint faults taken on the workload's cores.
pub static HINT_FAULTS: OpCounter = OpCounter {
    name: "hint_faults",
    cycles: |m| m.hint_fault,
    on_workload_core: true,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NumaHintConfig {
    /// Bytes of mappings made inaccessible per scan (Linux: `numa_balancing_scan_size_mb`,
    /// 256 MB).
    pub scan_size: Size,
    /// Time between scans (TPP's setting: 1000 ms; Linux adapts it between
    /// `scan_period_min_ms` and `scan_period_max_ms`, which this does not).
    pub scan_period: Duration,
    /// A fault within this long of the scan marks the page hot
    /// (`numa_balancing_hot_threshold_ms`, 1000 ms).
    pub hot_threshold: Duration,
}

impl Default for NumaHintConfig {
    fn default() -> Self {
        NumaHintConfig {
            scan_size: Size(256 << 20),
            scan_period: Duration(1000 * NS_PER_MS),
            hot_threshold: Duration(1000 * NS_PER_MS),
        }
    }
}

impl Technique for NumaHintConfig {
    fn presets() -> Vec<Preset<Self>> {
        vec![Preset {
            name: "numa-hint",
            help: "NUMA balancing hint faults in tiering mode (TPP): 256 MB per 1 s scan, \
                   hot when faulted within 1 s",
            config: NumaHintConfig::default(),
        }]
    }

    fn emits(&self) -> FeedKind {
        FeedKind::HintFaults
    }

    fn counters() -> &'static [&'static OpCounter] {
        static OWN: [&OpCounter; 1] = [&HINT_FAULTS];
        &OWN
    }

    fn flushes(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.scan_size.0 < 4096 {
            return Err(FieldError::new(
                "scan_size",
                format!("must be at least 4KiB, got {} bytes", self.scan_size.0),
            ));
        }
        if self.scan_period.0 == 0 {
            return Err(FieldError::new("scan_period", "must be positive"));
        }
        if self.hot_threshold.0 == 0 {
            return Err(FieldError::new("hot_threshold", "must be positive"));
        }
        Ok(())
    }

    fn build(&self, _: BuildContext) -> Box<dyn Monitor> {
        Box::new(NumaHintMonitor::new(self.clone()))
    }
}

/// A scanned batch waiting for its threshold: the leaf pages made inaccessible.
struct Pending {
    due: Nanos,
    scanned_at: Nanos,
    /// (range, leaf level) runs of scanned pages, in address order.
    runs: Vec<(AddrRange, Level)>,
}

pub struct NumaHintMonitor {
    cfg: NumaHintConfig,
    /// Where the next scan starts: mapping index and address inside it.
    cursor: (usize, u64),
    next_scan: Nanos,
    pending: std::collections::VecDeque<Pending>,
}

impl NumaHintMonitor {
    pub fn new(cfg: NumaHintConfig) -> Self {
        NumaHintMonitor {
            cfg,
            cursor: (0, 0),
            next_scan: 0,
            pending: Default::default(),
        }
    }

    /// Makes the next `scan_size` bytes of mappings inaccessible, skipping top-tier pages.
    fn scan(&mut self, m: &mut dyn Machine) -> Vec<(AddrRange, Level)> {
        let mut budget = self.cfg.scan_size.0;
        let mut batch: Vec<AddrRange> = vec![];
        let maps: Vec<_> = m
            .mappings()
            .iter()
            .map(|x| (x.range, x.page_size))
            .collect();
        if maps.is_empty() {
            return vec![];
        }
        // At most one lap per scan, however small the heap.
        let mut visited = 0;
        while budget > 0 && visited <= maps.len() {
            let (mi, at) = self.cursor;
            let (range, page) = maps[mi % maps.len()];
            let from = at.max(range.start);
            let take = (range.end - from).min(budget.next_multiple_of(page.bytes()));
            if take > 0 {
                batch.push(AddrRange::new(from, from + take));
            }
            budget = budget.saturating_sub(take);
            if from + take >= range.end {
                self.cursor = ((mi + 1) % maps.len(), 0);
                visited += 1;
            } else {
                self.cursor = (mi, from + take);
            }
        }
        let mut runs = vec![];
        for r in batch {
            let leaf = m
                .leaf_level(r.start)
                .expect("batches are cut from the mappings");
            // Only pages off the top tier: tiering mode leaves the others mapped.
            let mut off_top = vec![];
            match m.tiers() {
                Some(t) => t.placement().runs(r, |run, tier| {
                    if tier != 0 {
                        off_top.push(run);
                    }
                }),
                None => off_top.push(r),
            }
            let mut old = [0; 8];
            for run in off_top {
                for_each_table(leaf, run, |table, which| {
                    m.table_entries_accessed(leaf, table, which, true, &mut old);
                });
                m.flush(Flush::Range {
                    start: run.start,
                    end: run.end,
                });
                runs.push((run, leaf));
            }
        }
        runs
    }

    /// Reads the bits of a batch whose threshold expired: the pages that faulted.
    fn check(m: &mut dyn Machine, p: &Pending) -> Vec<RegionReport> {
        let mut out: Vec<RegionReport> = vec![];
        let mut faults = 0;
        let mut old = [0; 8];
        for &(run, leaf) in &p.runs {
            for_each_table(leaf, run, |table, which| {
                m.table_entries_accessed(leaf, table, which, false, &mut old);
                for_each_selected(which, |k| {
                    let va = table + k * leaf.span();
                    let hit = old[(k / 64) as usize] >> (k % 64) & 1 == 1;
                    faults += hit as u64;
                    let (s, e) = (va.max(run.start), (va + leaf.span()).min(run.end));
                    match out.last_mut() {
                        Some(last) if last.end == s && (last.nr_accesses == 1) == hit => {
                            last.end = e
                        }
                        _ => out.push(RegionReport {
                            start: s,
                            end: e,
                            nr_accesses: hit as u32,
                            age: 0,
                        }),
                    }
                });
            });
        }
        m.cost_mut().charge(&HINT_FAULTS, faults);
        out
    }
}

/// Calls `f` with each page table at `leaf` holding leaf entries of `run` (the entries
/// from the one over `run.start` up to `run.end`), and which of its entries those are
/// ([`Machine::table_entries_accessed`]'s selection), in address order.
fn for_each_table(leaf: Level, run: AddrRange, mut f: impl FnMut(u64, &[u64; 8])) {
    let step = leaf.span();
    let table_span = step * TABLE_ENTRIES;
    let mut va = leaf.align_down(run.start);
    while va < run.end {
        let table = va & !(table_span - 1);
        let end = run.end.min(table + table_span);
        let (from, to) = ((va - table) / step, (end - table).div_ceil(step));
        f(table, &select_entries(from..to));
        va = table + to * step;
    }
}

impl Monitor for NumaHintMonitor {
    fn next_wakeup(&self) -> Nanos {
        match self.pending.front() {
            Some(p) => p.due.min(self.next_scan),
            None => self.next_scan,
        }
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        let mut snapshot = None;
        if self.pending.front().is_some_and(|p| p.due <= now) {
            let p = self.pending.pop_front().expect("checked");
            snapshot = Some(Snapshot {
                start: p.scanned_at,
                end: now,
                regions: Self::check(m, &p),
            });
        }
        if self.next_scan <= now {
            let runs = self.scan(m);
            self.pending.push_back(Pending {
                due: now + self.cfg.hot_threshold.0,
                scanned_at: now,
                runs,
            });
            self.next_scan = now + self.cfg.scan_period.0;
        }
        snapshot
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.hot_threshold.0,
            aggr: self.cfg.scan_period.0,
            ops_update: self.cfg.scan_period.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::testing::FakeMachine;
    use tierscope_core::PageSize;

    #[test]
    fn tables_of_a_run_hold_its_entries_in_order() {
        // Runs of every length and alignment, within a table and across several, of
        // base and huge pages: the tables' selected entries, in turn, are the entries
        // from the one over the run's start up to its end, each once, in order.
        let mut rng = tierscope_core::rng::Rng::new(6);
        for _ in 0..2_000 {
            let leaf = [Level::Pte, Level::Pmd][rng.below(2) as usize];
            let start = (1 << 40) + rng.below(3 << 30);
            let run = AddrRange::new(start, start + 1 + rng.below(6 << 20));
            let mut want = vec![];
            let mut va = leaf.align_down(run.start);
            while va < run.end {
                want.push(va);
                va += leaf.span();
            }
            let mut got = vec![];
            for_each_table(leaf, run, |table, which| {
                assert_eq!(table % (leaf.span() * TABLE_ENTRIES), 0);
                for_each_selected(which, |k| got.push(table + k * leaf.span()));
            });
            assert_eq!(got, want);
        }
    }

    #[test]
    fn reports_pages_touched_within_the_threshold_batch_by_batch() {
        // 64 pages, 16 per scan every 10 ms, read 5 ms after each scan.
        let mut m = FakeMachine::new(&[(0, 64 << 12, PageSize::Base4K)]);
        let mut mon = NumaHintMonitor::new(NumaHintConfig {
            scan_size: Size(16 << 12),
            scan_period: Duration(10_000_000),
            hot_threshold: Duration(5_000_000),
        });
        let mut snaps = vec![];
        let mut touched_at = vec![];
        for step in 0..8u64 {
            let t = mon.next_wakeup();
            m.now = t;
            if let Some(s) = mon.wake(&mut m) {
                snaps.push(s);
            }
            // After each scan, touch one page of the batch just scanned: page 3 of it.
            if t.is_multiple_of(10_000_000) {
                let page = (step / 2 % 4) * 16 + 3;
                m.touch(&[page << 12]);
                touched_at.push(page);
            }
        }
        assert_eq!(snaps.len(), 4, "one per expired batch");
        for (i, s) in snaps.iter().enumerate() {
            let base = (i as u64 % 4) * 16;
            // The batch, whole, with only the touched page faulted.
            assert_eq!(s.regions.first().unwrap().start, base << 12);
            assert_eq!(s.regions.last().unwrap().end, (base + 16) << 12);
            let hot: Vec<_> = s.regions.iter().filter(|r| r.nr_accesses == 1).collect();
            assert_eq!(hot.len(), 1, "{s:?}");
            assert_eq!(
                (hot[0].start, hot[0].end),
                ((base + 3) << 12, (base + 4) << 12)
            );
            assert_eq!(s.end - s.start, 5_000_000);
        }
        assert_eq!(m.cost.get(&HINT_FAULTS), 4);
        // Every scanned page was made inaccessible once per scan.
        assert_eq!(m.clears.values().sum::<u32>(), 64);
    }
}
