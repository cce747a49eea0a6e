//! Linear accessed-bit scanning (the Telescope paper's section 3.1; kstaled, idle page
//! tracking, Thermostat/Cori-style schedulers): test-and-clear the ACCESSED bit of every
//! mapped leaf entry (PTE for 4 KiB pages, PMD for 2 MiB pages), `batch` bytes at a time,
//! sleeping between batches. By default nothing is flushed (as idle page tracking's
//! `ptep_test_and_clear_young` on x86): a page whose translation stays cached looks idle.
//! `flush = "all"` flushes everything once per batch that cleared a bit.
//!
//! Each page keeps the outcome of its last `history` scans; at the end of every full pass
//! (one aggregation window) the pages are reported, coalesced into regions of equal
//! `nr_accesses` (= scans of the history that found the page accessed). The first pass
//! only clears: a bit means something only once it has been cleared.
//!
//! Time: a batch's work takes the cycles the cost model charges for it (so a pass takes
//! longer as the footprint grows), then the thread sleeps `sleep + sleep_slack`.

use crate::registry::{BuildContext, Preset, Technique};
use crate::shared::FlushPolicy;
use serde::{Deserialize, Serialize};
use tierscope_core::machine::{select_entries, TABLE_ENTRIES};
use tierscope_core::units::{Duration, Size, NS_PER_MS};
use tierscope_core::FeedKind;
use tierscope_core::{
    CostModel, FieldError, Flush, Intervals, Level, Machine, Monitor, Nanos, OpCounter,
    RegionReport, Snapshot,
};

/// Per-page history updates of the scan.
pub static SCAN_PAGES: OpCounter = OpCounter {
    name: "scan_pages",
    cycles: |m| m.scan_page,
    on_workload_core: false,
};
/// Batches of the scan (each: take the mm lock, start a page-range walk).
pub static SCAN_BATCHES: OpCounter = OpCounter {
    name: "scan_batches",
    cycles: |m| m.scan_batch,
    on_workload_core: false,
};
/// Sleeps between batches (timer set-up, switch out and back in).
pub static SCAN_SLEEPS: OpCounter = OpCounter {
    name: "scan_sleeps",
    cycles: |m| m.scan_sleep,
    on_workload_core: false,
};

/// Linear accessed-bit scanning (kstaled, idle page tracking, the Telescope paper's
/// section 3.1 strawman): test-and-clear every mapped leaf entry, `batch` bytes at a time,
/// sleeping `sleep` between batches. One full pass is one aggregation window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScanConfig {
    /// Bytes of mappings scanned before each sleep (paper: 256 MB).
    pub batch: Size,
    /// Sleep after each batch (paper: 0 / 10 / 100 ms).
    pub sleep: Duration,
    /// What a sleep costs beyond its length: msleep() rounds up by one jiffy (HZ=1000) and
    /// the wake-up waits for the scheduler. Default 2.5 ms, from the paper's Figure 3
    /// (aggressive mode, "0 ms", ran at 49.2% of a core: 2.7 ms of every 5.4 ms batch off
    /// the CPU).
    pub sleep_slack: Duration,
    /// Scans of history kept per page (1..=8); a page's nr_accesses is the number of those
    /// scans that found it accessed.
    pub history: u32,
    /// `none` (default; the kernel's young-bit clearing on x86) or `all`: one full TLB
    /// flush after every batch that cleared a bit (`upper` is the same as `none`: a scan
    /// clears only leaves).
    pub flush: FlushPolicy,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            batch: Size(256 << 20),
            sleep: Duration(10 * NS_PER_MS),
            sleep_slack: Duration(2_500_000),
            history: 4,
            flush: FlushPolicy::None,
        }
    }
}

impl Technique for ScanConfig {
    fn presets() -> Vec<Preset<Self>> {
        // The paper's Figure 3: sleep 0 / 10 / 100 ms after every 256 MiB batch.
        let scan = |sleep_ms| ScanConfig {
            sleep: Duration(sleep_ms * NS_PER_MS),
            ..ScanConfig::default()
        };
        vec![
            Preset {
                name: "scan-agg",
                help: "linear accessed-bit scan, 256 MiB batches, no sleep between them",
                config: scan(0),
            },
            Preset {
                name: "scan-mod",
                help: "linear scan sleeping 10 ms between 256 MiB batches",
                config: scan(10),
            },
            Preset {
                name: "scan-cons",
                help: "linear scan sleeping 100 ms between 256 MiB batches",
                config: scan(100),
            },
        ]
    }

    fn emits(&self) -> FeedKind {
        FeedKind::AccessChecks
    }

    fn counters() -> &'static [&'static OpCounter] {
        static OWN: [&OpCounter; 3] = [&SCAN_PAGES, &SCAN_BATCHES, &SCAN_SLEEPS];
        &OWN
    }

    fn flushes(&self) -> bool {
        self.flush == FlushPolicy::All
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.batch.0 < 4096 {
            return Err(FieldError::new(
                "batch",
                format!("must be at least 4KiB, got {} bytes", self.batch.0),
            ));
        }
        if !(1..=8).contains(&self.history) {
            return Err(FieldError::new(
                "history",
                format!("must be 1..=8, got {}", self.history),
            ));
        }
        if self.sleep.0 + self.sleep_slack.0 == 0 {
            return Err(FieldError::new(
                "sleep",
                "sleep + sleep_slack must be positive (a scan must yield)",
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor> {
        Box::new(ScanMonitor::new(self.clone(), *ctx.cost))
    }
}

/// One page of a mapping: its address, leaf level (span), history and age.
struct Pages {
    start: u64,
    leaf: Level,
    /// Bit i set: the i-th most recent scan found the page accessed.
    history: Vec<u8>,
    /// Passes the page's nr_accesses has stayed the same.
    age: Vec<u16>,
}

/// Adds a scan's answer `old` for page `i` of `p` to its history (`keep`: the history's
/// bits) and ages the page when its count of accesses stayed the same.
fn record(p: &mut Pages, i: usize, old: bool, keep: u8) {
    let h = &mut p.history[i];
    let before = h.count_ones();
    *h = ((*h << 1) | old as u8) & keep;
    let a = &mut p.age[i];
    *a = if h.count_ones() == before {
        a.saturating_add(1)
    } else {
        0
    };
}

pub struct ScanMonitor {
    cfg: ScanConfig,
    model: CostModel,
    /// Every mapped range, split by page size, in address order (built on first wake).
    pages: Vec<Pages>,
    /// Where the next batch starts: index into `pages` and page index inside it.
    cursor: (usize, usize),
    passes_done: u64,
    pass_start: Nanos,
    next_wakeup: Nanos,
    /// Time of the most recent completed pass (for reports and tests).
    last_pass_ns: Nanos,
}

impl ScanMonitor {
    pub fn new(cfg: ScanConfig, model: CostModel) -> Self {
        ScanMonitor {
            cfg,
            model,
            pages: vec![],
            cursor: (0, 0),
            passes_done: 0,
            pass_start: 0,
            next_wakeup: 0,
            last_pass_ns: 0,
        }
    }

    /// Full passes completed.
    pub fn passes(&self) -> u64 {
        self.passes_done
    }

    /// Duration of the most recent full pass, nanoseconds (0 before the first).
    pub fn last_pass_ns(&self) -> Nanos {
        self.last_pass_ns
    }

    fn build_pages(&mut self, m: &mut dyn Machine) {
        for map in m.mappings() {
            // Every mapping has one page size; its leaves sit at that size's level.
            let leaf = map.page_size.leaf_level();
            let start = leaf.align_down(map.range.start);
            let n = ((map.range.end - start).div_ceil(leaf.span())) as usize;
            self.pages.push(Pages {
                start,
                leaf,
                history: vec![0; n],
                age: vec![0; n],
            });
        }
    }

    /// Scans one batch from the cursor; returns true when the pass completed.
    fn scan_batch(&mut self, m: &mut dyn Machine) -> bool {
        let keep = if self.cfg.history >= 8 {
            0xff
        } else {
            (1u8 << self.cfg.history) - 1
        };
        let mut budget = self.cfg.batch.0;
        m.cost_mut().charge(&SCAN_BATCHES, 1);
        let mut first_in_batch = true;
        let first_pass = self.passes_done == 0;
        let mut cleared = false;
        while budget > 0 {
            let (pi, mut idx) = self.cursor;
            let Some(p) = self.pages.get_mut(pi) else {
                break;
            };
            let leaf = p.leaf;
            let n = p.history.len();
            while idx < n && budget > 0 {
                let va = p.start + ((idx as u64) << leaf.span_shift());
                let steps_before = m.cost().walk_steps;
                let old = m.test_and_clear_accessed(leaf, va).unwrap_or(false);
                // The machine charges a walk from the root for every operation; a page
                // range walk (walk_page_range) descends once per table: one step per
                // level whose table changes at `va`, the full walk only at the start.
                if !first_in_batch {
                    let mut needed = 0;
                    let mut l = leaf.up();
                    while let Some(up) = l {
                        if va & (up.span() - 1) != 0 {
                            break;
                        }
                        needed += 1;
                        l = up.up();
                    }
                    let c = m.cost_mut();
                    c.walk_steps = steps_before + needed.min(c.walk_steps - steps_before);
                }
                first_in_batch = false;
                cleared |= old;
                idx += 1;
                budget = budget.saturating_sub(leaf.span());
                // In the first pass the bit was set by whatever happened since the page
                // was mapped: it only clears.
                if !first_pass {
                    record(p, idx - 1, old, keep);
                }
                // The rest of this page table within the budget, at once: none of its
                // entries starts a table, so the walk descends no further for them.
                let va = p.start + ((idx as u64) << leaf.span_shift());
                let table_span = leaf.span() * TABLE_ENTRIES;
                if idx >= n || budget == 0 || va.is_multiple_of(table_span) {
                    continue;
                }
                let table = va - va % table_span;
                let from = (va - table) >> leaf.span_shift();
                let count = (TABLE_ENTRIES - from)
                    .min((n - idx) as u64)
                    .min(budget.div_ceil(leaf.span()));
                let which = select_entries(from..from + count);
                let mut olds = [0u64; 8];
                let steps_before = m.cost().walk_steps;
                m.table_entries_accessed(leaf, table, &which, true, &mut olds);
                m.cost_mut().walk_steps = steps_before;
                for e in from..from + count {
                    let old = olds[(e / 64) as usize] >> (e % 64) & 1 == 1;
                    cleared |= old;
                    idx += 1;
                    budget = budget.saturating_sub(leaf.span());
                    if !first_pass {
                        record(p, idx - 1, old, keep);
                    }
                }
            }
            if idx >= n {
                self.cursor = (pi + 1, 0);
            } else {
                self.cursor = (pi, idx);
            }
        }
        if cleared && self.cfg.flush == FlushPolicy::All {
            // One full flush per batch (a batch spans far more than 33 pages).
            m.flush(Flush::All);
        }
        self.cursor.0 >= self.pages.len()
    }

    fn report(&self) -> Vec<RegionReport> {
        let mut out: Vec<RegionReport> = vec![];
        for p in &self.pages {
            let span = p.leaf.span();
            for (i, (&h, &age)) in p.history.iter().zip(&p.age).enumerate() {
                let start = p.start + i as u64 * span;
                let nr = h.count_ones();
                match out.last_mut() {
                    Some(r) if r.end == start && r.nr_accesses == nr => {
                        r.end = start + span;
                        r.age = r.age.min(age as u32);
                    }
                    _ => out.push(RegionReport {
                        start,
                        end: start + span,
                        nr_accesses: nr,
                        age: age as u32,
                    }),
                }
            }
        }
        out
    }
}

impl Monitor for ScanMonitor {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        if self.pages.is_empty() {
            self.build_pages(m);
            self.pass_start = now;
        }
        let before = *m.cost();
        let done = self.scan_batch(m);
        let visited = m.cost().clear_ops - before.clear_ops;
        let c = m.cost_mut();
        c.charge(&SCAN_PAGES, visited);
        c.charge(&SCAN_SLEEPS, 1);
        // This batch's work takes the cycles the model charges for the counters' growth.
        let cycles = self.model.cycles(m.cost()) - self.model.cycles(&before);
        let work_ns = self.model.nanos(cycles) as u64;
        self.next_wakeup = now + work_ns + self.cfg.sleep.0 + self.cfg.sleep_slack.0;
        if !done {
            return None;
        }
        self.cursor = (0, 0);
        self.passes_done += 1;
        self.last_pass_ns = now - self.pass_start;
        let start = self.pass_start;
        self.pass_start = now;
        // The first pass only cleared the bits; from the second on they mean something.
        (self.passes_done >= 2).then(|| Snapshot {
            start,
            end: now,
            regions: self.report(),
        })
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.sleep.0 + self.cfg.sleep_slack.0,
            aggr: self.last_pass_ns,
            ops_update: self.last_pass_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::testing::FakeMachine;
    use tierscope_core::units::{Duration, Size};
    use tierscope_core::PageSize;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn scan(batch: u64) -> ScanMonitor {
        let cfg = ScanConfig {
            batch: Size(batch),
            sleep: Duration(1_000_000),
            history: 1,
            ..ScanConfig::default()
        };
        ScanMonitor::new(cfg, CostModel::default())
    }

    /// Wakes the monitor until it completes `passes` more passes; returns the snapshots.
    fn run_passes(s: &mut ScanMonitor, m: &mut FakeMachine, passes: u64) -> Vec<Snapshot> {
        let target = s.passes() + passes;
        let mut out = vec![];
        while s.passes() < target {
            m.now = s.next_wakeup();
            out.extend(s.wake(m));
        }
        out
    }

    #[test]
    fn every_leaf_is_visited_exactly_once_per_pass_4k_and_2m() {
        let maps = [
            (4 * MIB, 9 * MIB + 12 * 4096, PageSize::Base4K),
            (GIB, GIB + 64 * MIB, PageSize::Huge2M),
            (2 * GIB, 2 * GIB + 3 * MIB, PageSize::Base4K),
        ];
        let mut m = FakeMachine::new(&maps);
        let leaves = m.leaves();
        assert_eq!(leaves.len(), 5 * 256 + 12 + 32 + 3 * 256);
        // Batches of 3 MiB cut through pages runs and across mappings.
        let mut s = scan(3 * MIB);
        for pass in 1..=3u32 {
            run_passes(&mut s, &mut m, 1);
            assert_eq!(
                m.clears.len(),
                leaves.len(),
                "pass {pass}: no stray entries"
            );
            for leaf in &leaves {
                assert_eq!(m.clears.get(leaf), Some(&pass), "{leaf:?} in pass {pass}");
            }
            // Huge pages are cleared at the PMD, never below.
            assert!(m.clears.keys().all(|(l, va)| *l == Level::Pte
                || (*l == Level::Pmd && (GIB..GIB + 64 * MIB).contains(va))));
        }
        // A page-range walk descends once per table, not once per entry.
        assert!(m.cost.walk_steps < m.cost.clear_ops / 8);
        assert_eq!(m.cost.get(&SCAN_PAGES), 3 * leaves.len() as u64);
    }

    #[test]
    fn accessed_pages_are_reported_at_their_leaf_granularity() {
        let maps = [
            (4 * MIB, 8 * MIB, PageSize::Base4K),
            (GIB, GIB + 16 * MIB, PageSize::Huge2M),
        ];
        let mut m = FakeMachine::new(&maps);
        // Every page was touched when the workload initialised it.
        m.accessed = m.leaves().into_iter().collect();
        let mut s = scan(256 * MIB);
        s.cfg.history = 4;
        assert!(
            run_passes(&mut s, &mut m, 1).is_empty(),
            "first pass only clears"
        );
        // One 4 KiB page and one 2 MiB page are accessed during the next pass.
        m.accessed.insert((Level::Pte, 5 * MIB + 4096));
        m.accessed.insert((Level::Pmd, GIB + 6 * MIB));
        let snaps = run_passes(&mut s, &mut m, 1);
        assert_eq!(snaps.len(), 1);
        let hot: Vec<(u64, u64)> = snaps[0]
            .regions
            .iter()
            .filter(|r| r.nr_accesses > 0)
            .map(|r| (r.start, r.end))
            .collect();
        assert_eq!(
            hot,
            vec![
                (5 * MIB + 4096, 5 * MIB + 8192),
                (GIB + 6 * MIB, GIB + 8 * MIB)
            ]
        );
        // The regions tile the mappings.
        let covered: u64 = snaps[0].regions.iter().map(|r| r.end - r.start).sum();
        assert_eq!(covered, 4 * MIB + 16 * MIB);
    }

    #[test]
    fn pass_time_grows_linearly_with_the_footprint() {
        let mut times = vec![];
        for gib in [1u64, 4] {
            let mut m = FakeMachine::new(&[(GIB, GIB + gib * GIB, PageSize::Base4K)]);
            let mut s = ScanMonitor::new(
                ScanConfig {
                    sleep: Duration(10_000_000),
                    ..ScanConfig::default()
                },
                CostModel::default(),
            );
            run_passes(&mut s, &mut m, 2);
            times.push(s.last_pass_ns() as f64);
        }
        let ratio = times[1] / times[0];
        assert!((ratio - 4.0).abs() < 0.05, "{times:?}");
        // 256 MiB batches: ~2.8 ms of work (65536 pages x ~90 cycles) + 12.5 ms asleep.
        let per_batch = times[0] / 4.0 / 1e6;
        assert!((15.0..15.6).contains(&per_batch), "{per_batch} ms");
    }
}
