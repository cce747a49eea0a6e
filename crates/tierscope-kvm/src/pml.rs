//! A `pml` monitor on KVM's dirty log: the pages the guest wrote in each window (what Intel
//! PML logs in hardware and vmmload reads), aggregated to 2 MiB blocks, classified hot /
//! warm / cold by an exponential moving average as in the vmmload paper (250 ms windows, a
//! block cools down within ~2 s without writes). Optionally it also detects reads the
//! vmmload way, through the page-table pages the MMU dirtied when it set ACCESSED bits.

use crate::engine::DirtyLog;
use std::collections::BTreeMap;
use tierscope_core::units::NS_PER_MS;
use tierscope_core::{AddrRange, Intervals, Machine, Monitor, Nanos, RegionReport, Snapshot};

/// Heat class of a 2 MiB block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heat {
    Hot,
    Warm,
    Cold,
}

#[derive(Debug, Clone, Copy)]
pub struct PmlConfig {
    /// Window (harvest and aggregation interval).
    pub window: Nanos,
    /// EMA weight of the newest window.
    pub alpha: f64,
    /// A block is hot when its EMA of pages written per window reaches this.
    pub hot_pages: f64,
    /// A block is cold after this long without writes (otherwise warm).
    pub cold_after: Nanos,
    /// Also count pages read, detected through dirtied page-table pages.
    pub read_detection: bool,
}

impl Default for PmlConfig {
    fn default() -> Self {
        PmlConfig {
            window: 250 * NS_PER_MS,
            alpha: 0.5,
            hot_pages: 32.0,
            cold_after: 2_000 * NS_PER_MS,
            read_detection: false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Block {
    ema: f64,
    last_touch: Nanos,
    heat: Heat,
    age: u32,
}

/// Cost of the monitor itself, measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct PmlCost {
    pub harvests: u64,
    pub harvest_ns: u64,
    pub pages_logged: u64,
    pub table_entries_examined: u64,
}

pub struct PmlMonitor {
    log: DirtyLog,
    cfg: PmlConfig,
    heap: AddrRange,
    next: Nanos,
    window_start: Nanos,
    blocks: BTreeMap<u64, Block>,
    last_written: Vec<u64>,
    last_read: Vec<u64>,
    cost: PmlCost,
}

const BLOCK: u64 = 2 << 20;

impl PmlMonitor {
    /// `start`: the current time (the first window ends at `start + window`).
    pub fn new(log: DirtyLog, cfg: PmlConfig, start: Nanos) -> PmlMonitor {
        let l = log.layout();
        let heap = AddrRange::new(l.heap_va, l.heap_va + l.heap_len);
        // Start from a clean log.
        let _ = log.harvest();
        if cfg.read_detection {
            let _ = log.harvest_accessed();
        }
        PmlMonitor {
            log,
            cfg,
            heap,
            next: start + cfg.window,
            window_start: start,
            blocks: BTreeMap::new(),
            last_written: vec![],
            last_read: vec![],
            cost: PmlCost::default(),
        }
    }

    /// The 4 KiB pages written in the last window (sorted VAs).
    pub fn last_written_pages(&self) -> &[u64] {
        &self.last_written
    }

    /// Pages detected read (accessed) in the last window, when read detection is on.
    pub fn last_read_pages(&self) -> &[u64] {
        &self.last_read
    }

    /// Every tracked 2 MiB block with its class.
    pub fn classes(&self) -> Vec<(AddrRange, Heat)> {
        self.blocks
            .iter()
            .map(|(&b, s)| (AddrRange::new(b * BLOCK, (b + 1) * BLOCK), s.heat))
            .collect()
    }

    pub fn measured_cost(&self) -> PmlCost {
        self.cost
    }

    /// Harvests and classifies; returns the snapshot of the window ending at `now`.
    pub fn window(&mut self, now: Nanos) -> Snapshot {
        let t0 = std::time::Instant::now();
        let written = self.log.harvest().unwrap_or_default();
        let read = if self.cfg.read_detection {
            match self.log.harvest_accessed() {
                Ok((pages, examined)) => {
                    self.cost.table_entries_examined += examined;
                    pages.into_iter().map(|(va, _)| va).collect()
                }
                Err(_) => vec![],
            }
        } else {
            vec![]
        };
        self.cost.harvests += 1;
        self.cost.harvest_ns += t0.elapsed().as_nanos() as u64;
        self.cost.pages_logged += written.len() as u64;

        let mut counts: BTreeMap<u64, u32> = BTreeMap::new();
        for &p in written.iter().chain(read.iter()) {
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
            } else if now.saturating_sub(s.last_touch) >= cold_after {
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

        // Regions: written blocks with their page counts; the gaps with zero.
        let mut regions = vec![];
        let mut cursor = self.heap.start;
        for (&b, &n) in &counts {
            let (start, end) = (b * BLOCK, (b + 1) * BLOCK);
            if start < cursor || end > self.heap.end {
                continue;
            }
            if start > cursor {
                regions.push(RegionReport {
                    start: cursor,
                    end: start,
                    nr_accesses: 0,
                    age: 0,
                });
            }
            regions.push(RegionReport {
                start,
                end,
                nr_accesses: n,
                age: self.blocks.get(&b).map_or(0, |s| s.age),
            });
            cursor = end;
        }
        if cursor < self.heap.end {
            regions.push(RegionReport {
                start: cursor,
                end: self.heap.end,
                nr_accesses: 0,
                age: 0,
            });
        }
        self.last_written = written;
        self.last_read = read;
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
        self.next
    }

    fn wake(&mut self, machine: &mut dyn Machine) -> Option<Snapshot> {
        let now = machine.now();
        let snap = self.window(now);
        while self.next <= now {
            self.next += self.cfg.window;
        }
        Some(snap)
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.window,
            aggr: self.cfg.window,
            ops_update: self.cfg.window,
        }
    }
}
