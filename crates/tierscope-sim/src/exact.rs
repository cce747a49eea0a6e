//! The exact engine: executes every access of every workload thread through its core's
//! TLBs and paging-structure caches and the page walker, and serves monitors the real bits.

use crate::config::SimMachine;
use crate::layout::{lay_out, Layout};
use crate::mmu::Mmu;
use crate::page_table::PageTable;
use crate::pml::Pml;
use crate::stream::AccessStream;
use crate::tiers::TierState;
use crate::truth::TruthRecorder;
use crate::WorkloadParams;
use tierscope_core::memtel::MemTelemetry;
use tierscope_core::rng::Rng;
use tierscope_core::tiers::TierSetup;
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    Nanos, Paging, Pmu, PmuEvent, PmuSample, Tiers, WriteLog,
};
use tierscope_nemo::{Driver, NemoConfig, Request};

/// Accesses one thread issues before the next thread takes its turn.
const INTERLEAVE: u64 = 1024;

/// How many accesses ahead the single-threaded loop prefetches page-table bits.
const PREFETCH_DISTANCE: usize = 16;

/// Bytes of one memory request: every access is one cache line reaching memory (no LLC
/// filter yet, as the engine's truth and tier traffic count every access).
const LINE_BYTES: u32 = 64;

/// The memory-controller request of an access to `va`: physical addresses are the heap's
/// virtual addresses minus its (2 MiB-aligned) start (`phys_addr`).
#[inline(always)]
fn request(heap_start: u64, va: u64, write: bool) -> Request {
    Request {
        addr: va - heap_start,
        write,
        bytes: LINE_BYTES,
    }
}

/// A PEBS counter: counts qualifying events down from the period; at zero it records.
#[derive(Debug, Clone, Copy)]
struct Counter {
    event: PmuEvent,
    period: u64,
    left: u64,
}

/// The PMU of the workload's cores: the programmed counter, each core's running copy, and
/// the samples not yet drained.
#[derive(Debug, Default)]
struct ExactPmu {
    programmed: Option<Counter>,
    /// Per-core counters while sampling (core 0's also lives in `programmed`).
    cores: Vec<Counter>,
    samples: Vec<PmuSample>,
}

impl Pmu for ExactPmu {
    fn program(&mut self, event: PmuEvent, period: Option<u64>) {
        self.programmed = period.map(|p| Counter {
            event,
            period: p.max(1),
            left: p.max(1),
        });
        self.cores.clear();
    }

    fn drain(&mut self, out: &mut Vec<PmuSample>) {
        out.append(&mut self.samples);
    }
}

pub struct ExactEngine {
    mmu: Mmu,
    pmu: ExactPmu,
    layout: Layout,
    streams: Vec<AccessStream>,
    truth: TruthRecorder,
    tiers: Option<TierState>,
    /// NEMO on the memory controllers (the prototype's shape); every access goes through
    /// it while a telemetry is registered, and none pays for it otherwise.
    nemo: Driver,
    now: Nanos,
    cost: CostCounters,
}

impl ExactEngine {
    pub fn new(config: &SimMachine, params: &WorkloadParams) -> Result<Self, String> {
        let paging = config.paging;
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
        let mut nemo = Driver::new(NemoConfig::prototype());
        nemo.set_llc(config.llc.as_ref().map(tierscope_nemo::Llc::new));
        Ok(ExactEngine {
            mmu,
            pmu: ExactPmu::default(),
            layout,
            streams,
            truth,
            tiers: None,
            nemo,
            now: 0,
            cost: CostCounters::default(),
        })
    }

    /// Replays `trace` instead of the workload's patterns: its records placed in the heap
    /// laid out from `trace.spec(..)` (the engine must have been built from that spec, with
    /// one thread), at the stream's rate.
    pub fn replay(&mut self, trace: &tierscope_core::workload::trace::Trace) {
        assert_eq!(self.streams.len(), 1, "a trace is one thread");
        let placed = trace.placed(&self.layout.region_starts);
        let rate = self.streams[0].rate();
        self.streams[0] = AccessStream::from_trace(placed.into(), rate);
    }

    /// Scores the truth on writes only (a write log's truth: `Truth::Written`).
    pub fn set_written_truth(&mut self) {
        self.truth.set_writes_only();
    }

    /// Gives the machine memory tiers, placed as `setup` says.
    pub fn set_tiers(&mut self, setup: &TierSetup) {
        self.tiers = Some(TierState::new(setup, &self.layout));
    }

    /// One thread, no PMU: the fast path. Accesses are generated PREFETCH_DISTANCE ahead
    /// of their execution and the line holding their leaf bits is prefetched (the walk is
    /// otherwise bound by cache misses). Order and results are unchanged.
    fn advance_single(&mut self, target: u64) {
        let (mmu, truth, mut tiers) = (&mut self.mmu, &mut self.truth, self.tiers.as_mut());
        let heap_start = self.layout.heap.start;
        let mut nemo = (self.nemo.registered() > 0).then_some(&mut self.nemo);
        let mut ring = [(0u64, false); PREFETCH_DISTANCE];
        let mut filled = 0usize;
        let mut head = 0usize;
        self.streams[0].run(target, |va, w| {
            if filled == PREFETCH_DISTANCE {
                let (old_va, old_w) = ring[head];
                mmu.access(0, old_va, old_w);
                truth.record(old_va, old_w);
                if let Some(t) = tiers.as_deref_mut() {
                    t.record(old_va, old_w);
                }
                if let Some(d) = nemo.as_deref_mut() {
                    d.access(&request(heap_start, old_va, old_w));
                }
            } else {
                filled += 1;
            }
            mmu.pt.prefetch(mmu.pt.leaf_hint(va));
            ring[head] = (va, w);
            head = (head + 1) % PREFETCH_DISTANCE;
        });
        for k in 0..filled {
            let (va, w) = ring[(head + PREFETCH_DISTANCE - filled + k) % PREFETCH_DISTANCE];
            mmu.access(0, va, w);
            truth.record(va, w);
            if let Some(t) = tiers.as_deref_mut() {
                t.record(va, w);
            }
            if let Some(d) = nemo.as_deref_mut() {
                d.access(&request(heap_start, va, w));
            }
        }
    }

    /// Several threads (each on its own core) take turns of INTERLEAVE accesses; with a
    /// PMU, every qualifying access counts down its core's counter.
    fn advance_threads(&mut self, target: u64, mut pmu: Option<&mut [Counter]>) {
        let (mmu, truth, samples) = (&mut self.mmu, &mut self.truth, &mut self.pmu.samples);
        let mut tiers = self.tiers.as_mut();
        let heap_start = self.layout.heap.start;
        let mut nemo = (self.nemo.registered() > 0).then_some(&mut self.nemo);
        let rate = self.streams[0].rate();
        while self.streams[0].issued() < target {
            let step = (self.streams[0].issued() + INTERLEAVE).min(target);
            for (core, s) in self.streams.iter_mut().enumerate() {
                let mut counter = pmu.as_deref_mut().map(|p| &mut p[core]);
                let mut i = s.issued();
                s.run(step, |va, w| {
                    mmu.access(core, va, w);
                    truth.record(va, w);
                    if let Some(t) = tiers.as_deref_mut() {
                        t.record(va, w);
                    }
                    if let Some(d) = nemo.as_deref_mut() {
                        d.access(&request(heap_start, va, w));
                    }
                    if let Some(c) = counter.as_deref_mut() {
                        let counts = match c.event {
                            PmuEvent::LoadsAndStores => true,
                            PmuEvent::Loads => !w,
                            PmuEvent::Stores => w,
                        };
                        if counts {
                            c.left -= 1;
                            if c.left == 0 {
                                c.left = c.period;
                                samples.push(PmuSample {
                                    time: (i as u128 * 1_000_000_000 / rate as u128) as u64,
                                    va,
                                    store: w,
                                });
                            }
                        }
                    }
                    i += 1;
                });
            }
        }
    }

    /// With the PMU on, each core has its own counter (kept across calls in
    /// `pmu.programmed` for core 0 and `pmu.cores` for the others).
    fn advance_sampled(&mut self, target: u64, pmu: Counter) {
        let mut cores = std::mem::take(&mut self.pmu.cores);
        cores.resize(self.streams.len(), pmu);
        cores[0] = pmu;
        self.advance_threads(target, Some(&mut cores));
        self.pmu.programmed = Some(cores[0]);
        self.pmu.cores = cores;
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
        self.cost.charge_read(steps as u64);
        Some(self.mmu.pt.accessed(e))
    }

    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (e, steps) = self.mmu.pt.locate(level, va)?;
        let old = self.mmu.pt.accessed(e);
        self.mmu.pt.clear_accessed(e);
        self.cost.charge_test_and_clear(steps as u64, old);
        Some(old)
    }

    fn dirty(&mut self, va: u64) -> Option<bool> {
        let (_, e, steps) = self.mmu.pt.leaf(va)?;
        self.cost.charge_read(steps as u64);
        Some(self.mmu.pt.dirty(e))
    }

    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        let (_, e, steps) = self.mmu.pt.leaf(va)?;
        let old = self.mmu.pt.dirty(e);
        self.mmu.pt.clear_dirty(e);
        self.cost.charge_read(steps as u64);
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

    fn pmu(&mut self) -> Option<&mut dyn Pmu> {
        Some(&mut self.pmu)
    }

    /// Simulated PML (crate::pml); logging starts with the first call.
    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        let (heap, huge) = (self.layout.heap, self.mmu.has_huge());
        let pml = self
            .mmu
            .pml
            .get_or_insert_with(|| Box::new(Pml::new(heap, huge)));
        Some(pml.as_mut() as &mut dyn WriteLog)
    }

    fn split_huge(&mut self, va: u64) -> bool {
        self.mmu.pt.split_huge(va)
    }

    fn collapse_huge(&mut self, va: u64) -> bool {
        self.mmu.pt.collapse_huge(va)
    }

    fn tiers(&mut self) -> Option<&mut dyn Tiers> {
        self.tiers.as_mut().map(|t| t as &mut dyn Tiers)
    }

    fn mem_telemetry(&mut self) -> Option<&mut dyn MemTelemetry> {
        Some(&mut self.nemo)
    }

    fn phys_addr(&self, va: u64) -> Option<u64> {
        let heap = self.layout.heap;
        heap.contains(va).then(|| va - heap.start)
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
        if let Some(p) = self.mmu.pml.as_deref_mut() {
            if p.take_invept() {
                // The drain cleared EPT dirty bits: INVEPT drops every cached translation.
                self.mmu.flush(Flush::All);
                self.cost.flushes_full += 1;
            }
        }
        if let Some(pmu) = self.pmu.programmed {
            self.advance_sampled(target, pmu);
        } else if self.streams.len() == 1 {
            self.advance_single(target);
        } else {
            self.advance_threads(target, None);
        }
        if let Some(p) = self.mmu.pml.as_deref_mut() {
            self.cost.pml_exits += p.take_exits();
        }
        self.now = t;
    }

    fn take_truth(&mut self) -> BlockIntervals {
        self.truth.take()
    }

    fn take_truth_heat(&mut self) -> Vec<(AddrRange, f64)> {
        self.truth.take_heat()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimMachine;
    use tierscope_core::workload::parse_masim;

    fn engine(spec: &tierscope_core::workload::WorkloadSpec, threads: u32) -> ExactEngine {
        let params = WorkloadParams {
            spec,
            rate: 1_000_000,
            threads,
            seed: 9,
            block_size: 2 << 20,
            truth_threshold: 1,
        };
        ExactEngine::new(&SimMachine::default(), &params).unwrap()
    }

    #[test]
    fn pmu_records_every_period_th_qualifying_access() {
        let spec = parse_masim("a, 64MiB\n\np\n1000\na, 1, 4096, 1, rw\n").unwrap();
        for threads in [1, 2] {
            let mut e = engine(&spec, threads);
            e.pmu().unwrap().program(PmuEvent::Stores, Some(100));
            e.advance_to(100_000_000); // 100k accesses per thread, half of them stores
            let mut out = vec![];
            e.pmu().unwrap().drain(&mut out);
            assert_eq!(out.len() as u32, 500 * threads);
            assert!(out.iter().all(|s| s.store && e.heap().contains(s.va)));
            assert!(out.iter().all(|s| s.time < 100_000_000));
            e.pmu().unwrap().program(PmuEvent::Stores, None);
            e.advance_to(200_000_000);
            e.pmu().unwrap().drain(&mut out);
            assert_eq!(out.len() as u32, 500 * threads, "no samples once stopped");
        }
    }

    #[test]
    fn truth_and_bits_identical_with_and_without_prefetch_path() {
        // The single-thread fast path (prefetching) and the general path must execute the
        // same accesses: compare the truth of a window and the bits of a sample of pages.
        let spec = parse_masim("a, 256MiB\n\np\n1000\na, 1, 4096, 1, wo\n").unwrap();
        let mut fast = engine(&spec, 1);
        let mut general = engine(&spec, 1);
        for e in [&mut fast, &mut general] {
            let heap = e.heap();
            let mut va = heap.start;
            while va < heap.end {
                e.test_and_clear_accessed(Level::Pte, va);
                va += 4096 * 7;
            }
        }
        fast.advance_to(50_000_000);
        general.advance_threads(general.streams[0].count_at(50_000_000), None);
        general.now = 50_000_000;
        assert_eq!(fast.take_truth(), general.take_truth());
        let heap = fast.heap();
        let mut va = heap.start;
        while va < heap.end {
            assert_eq!(
                fast.accessed(Level::Pte, va),
                general.accessed(Level::Pte, va)
            );
            va += 4096 * 7;
        }
        assert_eq!(fast.stats(), general.stats());
    }
}
