//! The exact engine: executes every access of every workload thread through its core's
//! TLBs and paging-structure caches and the page walker, and serves monitors the real bits.

use crate::config::SimMachine;
use crate::exec::{run_core, Batch};
use crate::layout::{lay_out, Layout};
use crate::mmu::Mmu;
use crate::page_table::PageTable;
use crate::parallel::{self, Worker};
use crate::pml::{NoPml, Pml};
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

/// Accesses one thread issues before the next thread takes its turn (on one host
/// thread; PMU samples are ordered by these turns whatever the host threads).
pub(crate) const INTERLEAVE: u64 = 1024;

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
pub(crate) struct Counter {
    event: PmuEvent,
    period: u64,
    left: u64,
}

impl Counter {
    /// Counts an access; true when it is to be sampled.
    #[inline(always)]
    pub(crate) fn tick(&mut self, store: bool) -> bool {
        let counts = match self.event {
            PmuEvent::LoadsAndStores => true,
            PmuEvent::Loads => !store,
            PmuEvent::Stores => store,
        };
        if !counts {
            return false;
        }
        self.left -= 1;
        if self.left == 0 {
            self.left = self.period;
            return true;
        }
        false
    }
}

/// The time of access number `i` of a thread issuing `rate` accesses per second.
#[inline(always)]
pub(crate) fn time_of(i: u64, rate: u64) -> Nanos {
    (i as u128 * 1_000_000_000 / rate as u128) as u64
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
    /// Host threads the workload's cores may run on (`SimMachine::host_threads`).
    host_threads: usize,
    /// Per host thread state of the parallel path, made on first use.
    workers: Vec<Worker>,
    /// The sequential path's batch buffer.
    batch: Batch,
}

/// Host memory of one page table of 512 leaves: its 8 bit words of 32 bytes, its child
/// base (4 bytes) and its level (1 byte).
pub const LEAF_TABLE_BYTES: u64 = 8 * 32 + 4 + 1;
/// Host memory of one directory table: a leaf table's and its 512 child slots of 4 bytes.
pub const DIRECTORY_TABLE_BYTES: u64 = LEAF_TABLE_BYTES + 512 * 4;

/// About how many bytes of host memory one exact engine running `spec` holds: its page
/// table ([`LEAF_TABLE_BYTES`] per table of 4 KiB pages, i.e. 0.51 bytes per 4 KiB page;
/// [`DIRECTORY_TABLE_BYTES`] per directory, i.e. 4.5 bytes per 2 MiB page), a leaf hint
/// of 4 bytes per 2 MiB of the heap, the truth's count of 4 bytes per `block_size` of the
/// heap (once more per host thread beyond the first), and 8 bytes per record of a replayed
/// trace. Errors when the spec does not fit the address space.
pub fn memory_estimate(
    config: &SimMachine,
    spec: &tierscope_core::workload::WorkloadSpec,
    block_size: u64,
    trace_records: u64,
) -> Result<u64, String> {
    let layout = lay_out(spec, config.paging, config.page_size)?;
    let root = config.paging.root().index();
    let mut bytes: u128 = 0;
    for m in &layout.mappings {
        for l in m.page_size.leaf_level().index()..root {
            let tables = u128::from(m.range.len() >> (21 + 9 * l as u32)) + 2;
            let each = if l == 0 {
                LEAF_TABLE_BYTES
            } else {
                DIRECTORY_TABLE_BYTES
            };
            bytes += tables * u128::from(each);
        }
    }
    // The root directory.
    bytes += u128::from(DIRECTORY_TABLE_BYTES);
    let heap = u128::from(layout.heap.len());
    bytes += heap.div_ceil(2 << 20) * 4;
    let truths = 1 + u128::from(config.host_threads.max(1)).saturating_sub(1);
    bytes += heap.div_ceil(u128::from(block_size.max(1))) * 4 * truths;
    bytes += u128::from(trace_records) * 8;
    Ok(u64::try_from(bytes).unwrap_or(u64::MAX))
}

impl ExactEngine {
    pub fn new(config: &SimMachine, params: &WorkloadParams) -> Result<Self, String> {
        let paging = config.paging;
        let layout = lay_out(params.spec, paging, config.page_size)?;
        let mut pt = PageTable::new(paging);
        pt.reserve_for(layout.mappings.iter().map(|m| (m.range, m.page_size)));
        for m in &layout.mappings {
            pt.map(m.range, m.page_size);
        }
        pt.set_hint_span(layout.heap);
        // The workload initialised every page (masim writes its regions at start-up).
        pt.touch_everything();
        let has_huge = layout
            .mappings
            .iter()
            .any(|m| m.page_size.leaf_level() != Level::Pte);
        let mut mmu = Mmu::new(pt, params.threads as usize, &config.tlb, has_huge);
        mmu.set_host(config.host_pages);
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
            host_threads: config.host_threads.max(1) as usize,
            workers: vec![],
            batch: Batch::default(),
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
        self.workers.clear();
    }

    /// Gives the machine memory tiers, placed as `setup` says.
    pub fn set_tiers(&mut self, setup: &TierSetup) {
        self.tiers = Some(TierState::new(setup, &self.layout));
    }

    /// Runs every core on this host thread, in turns of INTERLEAVE accesses (one core:
    /// to `target` at once); with a PMU, every qualifying access counts down its core's
    /// counter. Everything the engine models is allowed here (PML, NEMO).
    fn advance_sequential(&mut self, target: u64, mut pmu: Option<&mut [Counter]>) {
        let mmu = &mut self.mmu;
        let (pt, cores, mut pml) = (&mmu.pt, &mut mmu.cores, mmu.pml.as_deref_mut());
        let (truth, samples) = (&mut self.truth, &mut self.pmu.samples);
        let mut tiers = self.tiers.as_mut();
        let heap_start = self.layout.heap.start;
        let mut nemo = (self.nemo.registered() > 0).then_some(&mut self.nemo);
        let rate = self.streams[0].rate();
        let turn = if self.streams.len() == 1 {
            u64::MAX
        } else {
            INTERLEAVE
        };
        while self.streams[0].issued() < target {
            let step = self.streams[0].issued().saturating_add(turn).min(target);
            for ((core, s), c) in self.streams.iter_mut().enumerate().zip(cores.iter_mut()) {
                let mut counter = pmu.as_deref_mut().map(|p| &mut p[core]);
                let mut i = s.issued();
                // A closure per call below (a macro, not a variable): each is then called
                // from one place and inlined into its loop.
                macro_rules! effect {
                    () => {
                        |va, w| {
                            truth.record(va, w);
                            if let Some(t) = tiers.as_deref_mut() {
                                t.record(va, w);
                            }
                            if let Some(d) = nemo.as_deref_mut() {
                                d.access(&request(heap_start, va, w));
                            }
                            if let Some(c) = counter.as_deref_mut() {
                                if c.tick(w) {
                                    samples.push(PmuSample {
                                        time: time_of(i, rate),
                                        va,
                                        store: w,
                                    });
                                }
                            }
                            i += 1;
                        }
                    };
                }
                let batch = &mut self.batch;
                match pml.as_deref_mut() {
                    Some(p) => run_core(c, pt, p, s, step, batch, effect!()),
                    None => run_core(c, pt, &mut NoPml, s, step, batch, effect!()),
                }
            }
        }
    }

    /// Whether this advance may run the cores on several host threads: more than one of
    /// each, enough accesses to pay for starting the threads, and nothing whose outcome
    /// depends on the order of the cores' accesses (PML's log and NEMO's pipelines are
    /// single streams; they keep the sequential path).
    fn parallel_threads(&self, target: u64) -> usize {
        let n = self.host_threads.min(self.streams.len());
        let work = target - self.streams[0].issued();
        if n < 2
            || work < parallel::MIN_ACCESSES
            || self.mmu.pml.is_some()
            || self.nemo.registered() > 0
        {
            return 1;
        }
        n
    }

    /// Advances every core to `target`: on `threads` host threads when above one,
    /// else sequentially. With `pmu`, each core counts down its own counter.
    fn advance_cores(&mut self, target: u64, pmu: Option<&mut [Counter]>, threads: usize) {
        if threads < 2 {
            return self.advance_sequential(target, pmu);
        }
        if self.workers.len() != threads {
            let tiers = self.tiers.as_ref().map_or(0, |t| t.tier_count());
            self.workers = (0..threads)
                .map(|_| Worker::new(self.truth.empty_like(), tiers))
                .collect();
        }
        let mmu = &mut self.mmu;
        parallel::advance(
            &mmu.pt,
            &mut mmu.cores,
            &mut self.streams,
            target,
            pmu,
            self.tiers.as_ref(),
            &mut self.workers,
        );
        for w in &mut self.workers {
            self.truth.merge(&mut w.truth);
            if let Some(t) = self.tiers.as_mut() {
                t.add_traffic(&mut w.traffic);
            }
        }
        parallel::merge_samples(&mut self.workers, &mut self.pmu.samples);
    }

    /// With the PMU on, each core has its own counter (kept across calls in
    /// `pmu.programmed` for core 0 and `pmu.cores` for the others).
    fn advance_sampled(&mut self, target: u64, pmu: Counter, threads: usize) {
        let mut cores = std::mem::take(&mut self.pmu.cores);
        cores.resize(self.streams.len(), pmu);
        cores[0] = pmu;
        self.advance_cores(target, Some(&mut cores), threads);
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
        let threads = self.parallel_threads(target);
        if let Some(pmu) = self.pmu.programmed {
            self.advance_sampled(target, pmu, threads);
        } else {
            self.advance_cores(target, None, threads);
        }
        if let Some(p) = self.mmu.pml.as_deref_mut() {
            self.cost.charge(&crate::pml::PML_EXITS, p.take_exits());
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
        self.mmu.stats()
    }

    fn as_machine(&mut self) -> &mut dyn Machine {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimMachine;
    use tierscope_core::tiers::TierTraffic;
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
    fn memory_estimate_covers_what_the_engine_holds() {
        for (page, cfg) in [
            (
                tierscope_core::PageSize::Base4K,
                "a, 3GiB\nb, 100MiB\n\np\n10\na, 1, 4096, 1\n",
            ),
            (
                tierscope_core::PageSize::Huge2M,
                "a, 3GiB\n\np\n10\na, 1, 4096, 1\n",
            ),
        ] {
            let spec = parse_masim(cfg).unwrap();
            let machine = SimMachine {
                page_size: page,
                ..SimMachine::default()
            };
            let e = ExactEngine::new(
                &machine,
                &WorkloadParams {
                    spec: &spec,
                    rate: 1_000_000,
                    threads: 1,
                    seed: 9,
                    block_size: 2 << 20,
                    truth_threshold: 1,
                },
            )
            .unwrap();
            let held = e.mmu.pt.memory_bytes() as u64 + 4 * e.truth.block_count() as u64;
            let est = memory_estimate(&machine, &spec, 2 << 20, 0).unwrap();
            // Over, by the partial tables it counts at both ends of every mapping.
            assert!(
                est >= held && est < held + 64 * 1024,
                "{page:?}: {est} vs {held}"
            );
        }
        // Per 4 KiB page about half a byte: 64 TiB of them is about 8.3 GiB.
        let spec = parse_masim("a, 64TiB\n\np\n10\na, 1, 4096, 1\n").unwrap();
        let five = SimMachine {
            paging: tierscope_core::Paging::FiveLevel,
            ..SimMachine::default()
        };
        let est = memory_estimate(&five, &spec, 2 << 20, 0).unwrap();
        assert!((8 << 30..9 << 30).contains(&est), "{est}");
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

    /// Everything a run shows, window by window: truth, leaf and upper bits of a sample
    /// of pages (read and cleared, as a monitor does), tier traffic, PMU samples, stats.
    #[derive(Debug, PartialEq)]
    struct Observed {
        truth: Vec<BlockIntervals>,
        bits: Vec<Option<bool>>,
        traffic: Vec<(f64, f64)>,
        samples: Vec<(u64, u64, bool)>,
        stats: MachineStats,
    }

    /// The straightforward reference: one access at a time through `Mmu::access`, cores
    /// in turns of INTERLEAVE, no batches, no lookahead, no host threads (the engine's
    /// loop before it was batched and threaded).
    struct Reference {
        mmu: Mmu,
        streams: Vec<AccessStream>,
        truth: TruthRecorder,
        tiers: TierState,
        pmu: Vec<Counter>,
        samples: Vec<PmuSample>,
    }

    impl Reference {
        fn advance_to(&mut self, t: Nanos) {
            let target = self.streams[0].count_at(t);
            while self.streams[0].issued() < target {
                let step = (self.streams[0].issued() + INTERLEAVE).min(target);
                for (core, s) in self.streams.iter_mut().enumerate() {
                    let (mmu, truth, tiers) = (&mut self.mmu, &mut self.truth, &mut self.tiers);
                    let (counter, samples) = (&mut self.pmu[core], &mut self.samples);
                    let (mut i, rate) = (s.issued(), s.rate());
                    s.run(step, |va, w| {
                        mmu.access(core, va, w);
                        truth.record(va, w);
                        tiers.record(va, w);
                        if counter.tick(w) {
                            let time = time_of(i, rate);
                            samples.push(PmuSample { time, va, store: w });
                        }
                        i += 1;
                    });
                }
            }
        }
    }

    const SPEC: &str = "a, 64MiB\nb, 16MiB\n\np1\n30\na, 1, 4096, 3, rw\nb, 0, 64, 1, wo\n\n\
                        p2\n20\nb, 1, 4096, 1, ro\na, 0, 4104, 1, rw\n";

    /// Runs `threads` workload threads on `host_threads` (or the reference when None),
    /// 12 windows of 40k accesses per thread (above parallel::MIN_ACCESSES).
    fn observe(
        threads: u32,
        host_threads: Option<u32>,
        page: tierscope_core::PageSize,
    ) -> Observed {
        let spec = parse_masim(SPEC).unwrap();
        let params = WorkloadParams {
            spec: &spec,
            rate: 10_000_000,
            threads,
            seed: 5,
            block_size: 2 << 20,
            truth_threshold: 2,
        };
        let config = SimMachine {
            page_size: page,
            host_threads: host_threads.unwrap_or(1),
            ..SimMachine::default()
        };
        let tier = |name: &str, capacity| {
            tierscope_core::tiers::tier_preset(name)
                .unwrap()
                .spec(capacity)
        };
        let setup = TierSetup {
            tiers: vec![tier("dram", 16 << 20), tier("cxl", 1 << 30)],
            initial: tierscope_core::tiers::InitialPlacement::Interleaved,
        };
        let mut e = ExactEngine::new(&config, &params).unwrap();
        e.set_tiers(&setup);
        e.pmu()
            .unwrap()
            .program(PmuEvent::LoadsAndStores, Some(331));
        let mut reference = host_threads.is_none().then(|| Reference {
            mmu: e.mmu.clone(),
            streams: e.streams.clone(),
            truth: e.truth.empty_like(),
            tiers: TierState::new(&setup, &e.layout),
            pmu: vec![e.pmu.programmed.unwrap(); threads as usize],
            samples: vec![],
        });
        let heap = e.heap();
        let mut seen = Observed {
            truth: vec![],
            bits: vec![],
            traffic: vec![],
            samples: vec![],
            stats: MachineStats::default(),
        };
        for w in 1..=12u64 {
            let t = w * 4_000_000;
            // Monitor work happens on the engine's machine; the reference shares none
            // of it, so it clears and flushes its own copy the same way.
            match reference.as_mut() {
                Some(r) => r.advance_to(t),
                None => e.advance_to(t),
            }
            let mut va = heap.start + (w % 3) * 4096;
            while va < heap.end {
                for l in [Level::Pte, Level::Pmd, Level::Pud, Level::Pml4] {
                    let bit = match reference.as_mut() {
                        Some(r) => r.mmu.pt.locate(l, va).map(|(e, _)| {
                            let old = r.mmu.pt.accessed(e);
                            r.mmu.pt.clear_accessed(e);
                            old
                        }),
                        None => e.test_and_clear_accessed(l, va),
                    };
                    seen.bits.push(bit);
                }
                va += 4096 * 29;
            }
            let flush = (w % 4 == 0).then_some(Flush::All);
            let mut traffic = [TierTraffic::default(); 2];
            match reference.as_mut() {
                Some(r) => {
                    flush.map(|f| r.mmu.flush(f));
                    seen.truth.push(r.truth.take());
                    r.tiers.take_traffic(&mut traffic);
                }
                None => {
                    if let Some(f) = flush {
                        e.flush(f);
                    }
                    seen.truth.push(e.take_truth());
                    e.tiers().unwrap().take_traffic(&mut traffic);
                }
            }
            seen.traffic
                .extend(traffic.iter().map(|t| (t.reads, t.writes)));
        }
        let samples = match reference.as_mut() {
            Some(r) => std::mem::take(&mut r.samples),
            None => {
                let mut out = vec![];
                e.pmu().unwrap().drain(&mut out);
                out
            }
        };
        seen.samples = samples.iter().map(|s| (s.time, s.va, s.store)).collect();
        seen.stats = match &reference {
            Some(r) => r.mmu.stats(),
            None => e.stats(),
        };
        seen
    }

    #[test]
    fn host_threads_and_batching_change_nothing() {
        use tierscope_core::PageSize;
        for (threads, page) in [
            (1, PageSize::Base4K),
            (2, PageSize::Base4K),
            (3, PageSize::Base4K),
            (2, PageSize::Huge2M),
        ] {
            let reference = observe(threads, None, page);
            assert!(reference.stats.walks > 0 && !reference.samples.is_empty());
            for host in [1, 2, 3] {
                assert!(
                    observe(threads, Some(host), page) == reference,
                    "{threads} threads, {page}, {host} host threads differ from the reference"
                );
            }
        }
    }
}
