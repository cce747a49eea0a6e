//! The exact engine: executes every access of every workload thread through its core's
//! TLBs and paging-structure caches and the page walker, and serves monitors the real bits.

use crate::config::MachineConfig;
use crate::layout::{lay_out, Layout};
use crate::mmu::Mmu;
use crate::page_table::PageTable;
use crate::stream::AccessStream;
use crate::truth::TruthRecorder;
use crate::WorkloadParams;
use tierscope_core::rng::Rng;
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    Nanos, Paging,
};

/// Accesses one thread issues before the next thread takes its turn.
const INTERLEAVE: u64 = 1024;

pub struct ExactEngine {
    mmu: Mmu,
    layout: Layout,
    streams: Vec<AccessStream>,
    truth: TruthRecorder,
    now: Nanos,
    cost: CostCounters,
}

impl ExactEngine {
    pub fn new(config: &MachineConfig, params: &WorkloadParams) -> Result<Self, String> {
        let paging = config.paging();
        let layout = lay_out(params.spec, paging, config.page_size)?;
        let mut pt = PageTable::new(paging);
        for m in &layout.mappings {
            pt.map(m.range, m.page_size);
        }
        // The workload initialised every page (masim writes its regions at start-up).
        pt.touch_everything();
        let has_huge = layout
            .mappings
            .iter()
            .any(|m| m.page_size.leaf_level() != Level::Pte);
        let mmu = Mmu::new(pt, params.threads as usize, &config.tlb, has_huge);
        let streams = (0..params.threads)
            .map(|t| {
                AccessStream::new(
                    params.spec,
                    &layout.region_starts,
                    params.rate,
                    Rng::for_stream(params.seed, &format!("workload/thread{t}")),
                )
            })
            .collect();
        let truth = TruthRecorder::new(layout.heap, params.block_size, params.truth_threshold);
        Ok(ExactEngine {
            mmu,
            layout,
            streams,
            truth,
            now: 0,
            cost: CostCounters::default(),
        })
    }

    /// Bytes of page-table state (for memory reports).
    pub fn page_table_bytes(&self) -> usize {
        self.mmu.pt.memory_bytes()
    }
}

impl Machine for ExactEngine {
    fn paging(&self) -> Paging {
        self.mmu.pt.paging()
    }

    fn now(&self) -> Nanos {
        self.now
    }

    fn mappings(&self) -> &[Mapping] {
        &self.layout.mappings
    }

    fn leaf_level(&mut self, va: u64) -> Option<Level> {
        self.mmu.pt.leaf(va).map(|(l, _, _)| l)
    }

    fn accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (e, steps) = self.mmu.pt.locate(level, va)?;
        self.cost.entries_read += 1;
        self.cost.walk_steps += steps as u64;
        Some(self.mmu.pt.accessed(e))
    }

    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (e, steps) = self.mmu.pt.locate(level, va)?;
        let old = self.mmu.pt.accessed(e);
        self.mmu.pt.clear_accessed(e);
        self.cost.entries_read += 1;
        self.cost.walk_steps += steps as u64;
        self.cost.clear_ops += 1;
        self.cost.bits_cleared += old as u64;
        Some(old)
    }

    fn dirty(&mut self, va: u64) -> Option<bool> {
        let (_, e, steps) = self.mmu.pt.leaf(va)?;
        self.cost.entries_read += 1;
        self.cost.walk_steps += steps as u64;
        Some(self.mmu.pt.dirty(e))
    }

    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        let (_, e, steps) = self.mmu.pt.leaf(va)?;
        let old = self.mmu.pt.dirty(e);
        self.mmu.pt.clear_dirty(e);
        self.cost.entries_read += 1;
        self.cost.walk_steps += steps as u64;
        self.cost.clear_ops += 1;
        Some(old)
    }

    fn flush(&mut self, what: Flush) {
        if self.mmu.flush(what) {
            self.cost.flushes_full += 1;
        } else {
            self.cost.flushes_page += 1;
        }
    }

    fn cost(&self) -> &CostCounters {
        &self.cost
    }

    fn cost_mut(&mut self) -> &mut CostCounters {
        &mut self.cost
    }
}

impl Engine for ExactEngine {
    fn advance_to(&mut self, t: Nanos) {
        if t <= self.now {
            return;
        }
        let target = self.streams[0].count_at(t);
        let (mmu, truth) = (&mut self.mmu, &mut self.truth);
        if self.streams.len() == 1 {
            self.streams[0].run(target, |va, w| {
                mmu.access(0, va, w);
                truth.record(va);
            });
        } else {
            while self.streams[0].issued() < target {
                let step = (self.streams[0].issued() + INTERLEAVE).min(target);
                for (core, s) in self.streams.iter_mut().enumerate() {
                    s.run(step, |va, w| {
                        mmu.access(core, va, w);
                        truth.record(va);
                    });
                }
            }
        }
        self.now = t;
    }

    fn take_truth(&mut self) -> BlockIntervals {
        self.truth.take()
    }

    fn heap(&self) -> AddrRange {
        self.layout.heap
    }

    fn stats(&self) -> MachineStats {
        self.mmu.stats
    }

    fn as_machine(&mut self) -> &mut dyn Machine {
        self
    }
}
