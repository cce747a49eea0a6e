//! PML: write logging, on any machine with a write log (KVM's dirty log today; what Intel
//! PML logs in hardware and vmmload reads). Each window it drains the pages written,
//! reports them per 2 MiB block (`nr_accesses` = pages written) and classifies blocks
//! hot / warm / cold by an exponential moving average, as the vmmload paper does (250 ms
//! windows, a block cools down within ~2 s without writes). Optionally it also detects
//! reads the vmmload way: a walker setting an ACCESSED bit writes the page table, so the
//! log names the leaf tables with entries accessed since the last drain, and those tables
//! are scanned (test-and-clear) through the machine.

use crate::registry::{BuildContext, Preset, Technique};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierscope_core::units::{Duration, NS_PER_MS, NS_PER_S};
use tierscope_core::FeedKind;
use tierscope_core::{
    AddrRange, Capabilities, Capability, FieldError, Intervals, Machine, Monitor, Nanos, OpCounter,
    RegionReport, Snapshot,
};

/// Pages drained from the write log (PML entries, dirty-log bits).
pub static LOG_PAGES: OpCounter = OpCounter {
    name: "log_pages",
    cycles: |m| m.log_page,
    on_workload_core: false,
};

/// Write logging (PML / KVM's dirty log; vmmload): each window, the 4 KiB pages written,
/// reported per 2 MiB block (`nr_accesses` = pages written), classified hot / warm / cold
/// by an EMA. Needs an engine with a write log (`kvm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PmlConfig {
    /// Harvest and aggregation window (vmmload: 250 ms).
    pub window: Duration,
    /// EMA weight of the newest window (0 < alpha <= 1).
    pub alpha: f64,
    /// A block is hot when its EMA of pages written per window reaches this.
    pub hot_pages: f64,
    /// A block is cold after this long without writes (otherwise warm).
    pub cold_after: Duration,
    /// Also detect reads through the page tables the walker wrote (vmmload).
    pub read_detection: bool,
}

impl Default for PmlConfig {
    fn default() -> Self {
        PmlConfig {
            window: Duration(250 * NS_PER_MS),
            alpha: 0.5,
            hot_pages: 32.0,
            cold_after: Duration(2 * NS_PER_S),
            read_detection: false,
        }
    }
}

impl Technique for PmlConfig {
    fn presets() -> Vec<Preset<Self>> {
        vec![Preset {
            name: "pml",
            help: "write logging (PML / KVM dirty log) with vmmload's hot / warm / cold classes",
            config: PmlConfig::default(),
        }]
    }

    fn requires(&self) -> Capabilities {
        Capabilities::of(&[Capability::WriteLog])
    }

    fn flushes(&self) -> bool {
        false
    }

    fn emits(&self) -> FeedKind {
        FeedKind::Writes
    }

    fn counters() -> &'static [&'static OpCounter] {
        static OWN: [&OpCounter; 1] = [&LOG_PAGES];
        &OWN
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.window.0 == 0 {
            return Err(FieldError::new("window", "must be positive"));
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(FieldError::new(
                "alpha",
                format!("expected 0 < alpha <= 1, got {}", self.alpha),
            ));
        }
        if self.hot_pages.is_nan() || self.hot_pages <= 0.0 {
            return Err(FieldError::new(
                "hot_pages",
                format!("must be positive, got {}", self.hot_pages),
            ));
        }
        Ok(())
    }

    fn build(&self, _: BuildContext) -> Box<dyn Monitor> {
        Box::new(PmlMonitor::new(self.clone()))
    }
}

/// Heat class of a 2 MiB block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heat {
    Hot,
    Warm,
    Cold,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    ema: f64,
    last_touch: Nanos,
    heat: Heat,
    age: u32,
}

const BLOCK: u64 = 2 << 20;
/// Entries per page table.
const TABLE_ENTRIES: u64 = 512;

pub struct PmlMonitor {
    cfg: PmlConfig,
    /// None until the first wake, which drains what the log held before the run.
    next: Option<Nanos>,
    window_start: Nanos,
    blocks: BTreeMap<u64, Block>,
    written: Vec<u64>,
    read: Vec<u64>,
    tables: Vec<AddrRange>,
    /// Per 4 KiB page: windows in which it was read only, and written (vmmload's
    /// read/write view of each page; reads are known only with read detection).
    page_rw: BTreeMap<u64, (u32, u32)>,
}

impl PmlMonitor {
    pub fn new(cfg: PmlConfig) -> PmlMonitor {
        PmlMonitor {
            cfg,
            next: None,
            window_start: 0,
            blocks: BTreeMap::new(),
            written: vec![],
            read: vec![],
            tables: vec![],
            page_rw: BTreeMap::new(),
        }
    }

    /// Per 4 KiB page seen: (windows read but not written, windows written), sorted by
    /// address. A written page is counted as written only (its ACCESSED bit is set by
    /// the write too).
    pub fn page_read_write(&self) -> &BTreeMap<u64, (u32, u32)> {
        &self.page_rw
    }

    /// The share of a page's windows in which it was read but not written, in [0, 1]
    /// (None for a page never seen): 1 for read-only pages, 0 for pages written in every
    /// window they were touched.
    pub fn read_share(&self, page: u64) -> Option<f64> {
        let &(r, w) = self.page_rw.get(&(page & !4095))?;
        Some(f64::from(r) / f64::from(r + w))
    }

    /// The 4 KiB pages written in the last window (sorted addresses).
    pub fn last_written_pages(&self) -> &[u64] {
        &self.written
    }

    /// Pages detected read (accessed) in the last window, when read detection is on.
    pub fn last_read_pages(&self) -> &[u64] {
        &self.read
    }

    /// Every tracked 2 MiB block with its class.
    pub fn classes(&self) -> Vec<(AddrRange, Heat)> {
        self.blocks
            .iter()
            .map(|(&b, s)| (AddrRange::new(b * BLOCK, (b + 1) * BLOCK), s.heat))
            .collect()
    }

    /// Drains the log into `written` and, with read detection, `read`.
    fn drain(&mut self, m: &mut dyn Machine) {
        self.written.clear();
        self.read.clear();
        self.tables.clear();
        let Some(log) = m.write_log() else {
            return;
        };
        log.drain_written(&mut self.written);
        if self.cfg.read_detection {
            log.drain_tables(&mut self.tables);
        }
        m.cost_mut().charge(&LOG_PAGES, self.written.len() as u64);
        for t in &self.tables {
            let entry = t.len() / TABLE_ENTRIES;
            for k in 0..TABLE_ENTRIES {
                let va = t.start + k * entry;
                let Some(level) = m.leaf_level(va) else {
                    continue;
                };
                if m.test_and_clear_accessed(level, va) == Some(true) {
                    self.read.push(va);
                }
            }
        }
    }

    /// Classifies the blocks with this window's counts; returns the snapshot ending now.
    fn window(&mut self, now: Nanos, m: &dyn Machine) -> Snapshot {
        for &p in &self.written {
            self.page_rw.entry(p).or_default().1 += 1;
        }
        for &p in &self.read {
            if self.written.binary_search(&p).is_err() {
                self.page_rw.entry(p).or_default().0 += 1;
            }
        }
        let mut counts: BTreeMap<u64, u32> = BTreeMap::new();
        for &p in self.written.iter().chain(self.read.iter()) {
            *counts.entry(p / BLOCK).or_default() += 1;
        }
        let (alpha, hot, cold_after) = (self.cfg.alpha, self.cfg.hot_pages, self.cfg.cold_after);
        for &b in counts.keys() {
            self.blocks.entry(b).or_insert(Block {
                ema: 0.0,
                last_touch: now,
                heat: Heat::Cold,
                age: 0,
            });
        }
        for (b, s) in self.blocks.iter_mut() {
            let n = counts.get(b).copied().unwrap_or(0);
            s.ema = alpha * f64::from(n) + (1.0 - alpha) * s.ema;
            if n > 0 {
                s.last_touch = now;
            }
            let heat = if s.ema >= hot {
                Heat::Hot
            } else if now.saturating_sub(s.last_touch) >= cold_after.0 {
                Heat::Cold
            } else {
                Heat::Warm
            };
            if heat == s.heat {
                s.age += 1;
            } else {
                s.heat = heat;
                s.age = 0;
            }
        }

        // Per mapping: written blocks with their page counts, the gaps with zero.
        let mut regions = vec![];
        for map in m.mappings() {
            let (start, end) = (map.range.start, map.range.end);
            let mut cursor = start;
            for (&b, &n) in counts.range(start / BLOCK..end.div_ceil(BLOCK)) {
                let (bs, be) = ((b * BLOCK).max(start), ((b + 1) * BLOCK).min(end));
                if bs > cursor {
                    regions.push(RegionReport {
                        start: cursor,
                        end: bs,
                        nr_accesses: 0,
                        age: 0,
                    });
                }
                regions.push(RegionReport {
                    start: bs,
                    end: be,
                    nr_accesses: n,
                    age: self.blocks.get(&b).map_or(0, |s| s.age),
                });
                cursor = be;
            }
            if cursor < end {
                regions.push(RegionReport {
                    start: cursor,
                    end,
                    nr_accesses: 0,
                    age: 0,
                });
            }
        }
        let snap = Snapshot {
            start: self.window_start,
            end: now,
            regions,
        };
        self.window_start = now;
        snap
    }
}

impl Monitor for PmlMonitor {
    fn next_wakeup(&self) -> Nanos {
        self.next.unwrap_or(0)
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        self.drain(m);
        let Some(mut next) = self.next else {
            // Start from a clean log.
            self.window_start = now;
            self.next = Some(now + self.cfg.window.0);
            return None;
        };
        let snap = self.window(now, m);
        while next <= now {
            next += self.cfg.window.0;
        }
        self.next = Some(next);
        Some(snap)
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.window.0,
            aggr: self.cfg.window.0,
            ops_update: self.cfg.window.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::testing::{FakeLog, FakeMachine};
    use tierscope_core::PageSize;

    #[test]
    fn windows_report_written_blocks_and_classes_cool_down() {
        let base = 1u64 << 30;
        let mut m = FakeMachine::new(&[(base, base + (8 << 20), PageSize::Base4K)]);
        m.log = Some(FakeLog::default());
        let cfg = PmlConfig {
            hot_pages: 8.0,
            read_detection: true,
            ..PmlConfig::default()
        };
        let mut p = PmlMonitor::new(cfg);
        // Written before the run: drained and dropped by the first wake.
        m.log.as_mut().unwrap().written = vec![base];
        assert!(p.wake(&mut m).is_none());
        let step = PmlConfig::default().window.0;
        // 16 pages of block 0 written, and one leaf table whose first 3 entries were read.
        m.now = step;
        let log = m.log.as_mut().unwrap();
        log.written = (0..16).map(|i| base + i * 4096).collect();
        log.tables = vec![AddrRange::new(base + (2 << 20), base + (4 << 20))];
        m.touch(&[
            base + (2 << 20),
            base + (2 << 20) + 4096,
            base + (2 << 20) + 8192,
        ]);
        let s = p.wake(&mut m).unwrap();
        assert_eq!(p.last_read_pages().len(), 3);
        assert_eq!(
            m.cost.get(&LOG_PAGES),
            17,
            "the pre-run page is drained (and charged) too"
        );
        let block = |s: &Snapshot, a: u64| {
            *s.regions
                .iter()
                .find(|r| r.start <= a && a < r.end)
                .unwrap()
        };
        assert_eq!(block(&s, base).nr_accesses, 16);
        assert_eq!(block(&s, base + (2 << 20)).nr_accesses, 3);
        assert_eq!(block(&s, base + (6 << 20)).nr_accesses, 0);
        assert_eq!(s.regions.first().unwrap().start, base);
        assert_eq!(s.regions.last().unwrap().end, base + (8 << 20));
        assert!(s.regions.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(p.classes()[0].1, Heat::Hot); // EMA 8 >= 8
                                                 // Read-only pages and written pages, per page.
        assert_eq!(p.read_share(base + (2 << 20) + 4096), Some(1.0));
        assert_eq!(p.read_share(base + 4096 * 3 + 17), Some(0.0));
        assert_eq!(p.read_share(base + (6 << 20)), None);
        assert_eq!(p.page_read_write().len(), 16 + 3);
        // Nothing written for 2 s: block 0 cools to cold.
        for k in 2..12 {
            m.now = k * step;
            p.wake(&mut m).unwrap();
        }
        assert!(p.classes().iter().all(|&(_, h)| h == Heat::Cold));
    }
}
