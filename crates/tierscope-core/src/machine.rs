//! The interface between telemetry and hardware. Monitors see only [`Machine`]; engines
//! (the exact simulator, the statistical simulator, a KVM guest) implement it.
//!
//! Every engine has page-table bits, flushes, mappings, time and costs. Optional hardware
//! (a PEBS-like PMU, a write log, memory tiers, memory-controller telemetry) is reached
//! through capability accessors that return `Option`; what an engine offers is declared up front as [`Capabilities`], so an
//! experiment asking for hardware its engine lacks is rejected before it runs.

use crate::addr::{AddrRange, Level, Mapping, Paging};
use crate::cost::CostCounters;
use crate::memtel::MemTelemetry;
use crate::snapshot::{Intervals, Snapshot};
use crate::tiers::Tiers;
use crate::units::Nanos;

/// Which translations a flush drops, with Linux's semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// INVLPG on one address: the TLB entries of the page containing it and, as the SDM
    /// specifies, every paging-structure-cache entry.
    Page(u64),
    /// `flush_tlb_mm_range`: one INVLPG per 4 KiB page when the range has at most
    /// [`FLUSH_CEILING_PAGES`] pages, otherwise a full flush.
    Range { start: u64, end: u64 },
    /// CR3 reload: every non-global TLB entry and paging-structure-cache entry.
    All,
}

/// Which retired memory instructions a PEBS-like sampler counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PmuEvent {
    /// MEM_INST_RETIRED.ALL_LOADS and ALL_STORES (the Telescope paper's PEBS setup).
    LoadsAndStores,
    Loads,
    Stores,
}

/// One PEBS record: when, where, and whether it was a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuSample {
    pub time: Nanos,
    pub va: u64,
    pub store: bool,
}

/// Optional hardware of a machine, which monitors (and policies) may require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// A PEBS-like sampler of retired loads and stores ([`Pmu`]).
    Pmu,
    /// A log of the pages the workload wrote ([`WriteLog`]: KVM's dirty log, PML).
    WriteLog,
    /// Memory tiers with a placement a policy can change ([`Tiers`]).
    Tiers,
    /// Memory-controller telemetry with NEMO's driver API ([`MemTelemetry`]).
    MemTelemetry,
}

impl Capability {
    pub const ALL: [Capability; 4] = [
        Capability::Pmu,
        Capability::WriteLog,
        Capability::Tiers,
        Capability::MemTelemetry,
    ];

    /// The name used in configs, errors and the Python API.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::Pmu => "pmu",
            Capability::WriteLog => "write_log",
            Capability::Tiers => "tiers",
            Capability::MemTelemetry => "mem_telemetry",
        }
    }

    /// What it is, for error messages and help.
    pub const fn describe(self) -> &'static str {
        match self {
            Capability::Pmu => "a PEBS-like PMU sampler",
            Capability::WriteLog => "a write log (PML / KVM dirty log)",
            Capability::Tiers => "memory tiers with a page placement",
            Capability::MemTelemetry => "memory-controller telemetry (NEMO)",
        }
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// A set of [`Capability`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities(u32);

impl Capabilities {
    pub const NONE: Capabilities = Capabilities(0);

    pub const fn of(caps: &[Capability]) -> Capabilities {
        let mut bits = 0;
        let mut i = 0;
        while i < caps.len() {
            bits |= caps[i].bit();
            i += 1;
        }
        Capabilities(bits)
    }

    /// Both sets together.
    pub const fn with(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 | other.0)
    }

    pub const fn contains(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    /// The capabilities of `self` that `offered` lacks, in [`Capability::ALL`] order.
    pub fn missing_from(self, offered: Capabilities) -> Vec<Capability> {
        Capability::ALL
            .into_iter()
            .filter(|&c| self.contains(c) && !offered.contains(c))
            .collect()
    }

    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |&c| self.contains(c))
    }
}

/// A PEBS-like sampler on every core running the workload.
pub trait Pmu {
    /// Programs each workload core's counter to record every `period`-th `event` (a PEBS
    /// counter with that sample-after value, restarting its count); `None` stops sampling.
    fn program(&mut self, event: PmuEvent, period: Option<u64>);

    /// Moves the samples recorded since the last drain into `out`, oldest first.
    fn drain(&mut self, out: &mut Vec<PmuSample>);
}

/// A log of the workload's writes, as Intel PML or KVM's dirty log keeps it.
pub trait WriteLog {
    /// Moves the 4 KiB pages written since the last drain into `out` (addresses, sorted).
    fn drain_written(&mut self, out: &mut Vec<u64>);

    /// Moves into `out` the spans mapped by the leaf page tables written since the last
    /// drain: a walker setting an ACCESSED or DIRTY bit writes the table, so these are the
    /// tables with entries accessed since (vmmload's read inference), sorted.
    fn drain_tables(&mut self, out: &mut Vec<AddrRange>);
}

/// DAMON's (or Telescope's) sampling of one aggregation window, asked of an engine all at
/// once: sampling interval `k` (`0 <= k < samples`) clears the ACCESSED bit of the entry
/// ([`WindowEntry`]) under a random address of each region at `start + k * sample`,
/// flushes as [`WindowFlush`] says once every region is cleared, and reads it one
/// `sample` later.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowSampling {
    pub start: Nanos,
    pub sample: Nanos,
    pub samples: u32,
    /// How many (address, interval) points per region the engine may evaluate to
    /// estimate the region's probability of finding the bit set.
    pub points: u32,
    pub entry: WindowEntry,
    pub flush: WindowFlush,
}

/// Which entry over a sample's address is cleared and read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WindowEntry {
    /// The leaf (DAMON).
    Leaf,
    /// The highest entry, from the root down to above the leaf, whose span overshoots the
    /// region by at most `overshoot[level.index()]` of the span ([`entry_qualifies`]),
    /// else the leaf (Telescope; `bounded` is all zeros).
    Highest { overshoot: [f64; 5] },
}

/// What a pass of samples flushes once every region's entry is cleared: every cleared
/// entry's span (`All`) or those above the leaf (`Upper`), page by page up to
/// [`FLUSH_CEILING_PAGES`] pages in all, else everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowFlush {
    None,
    Upper,
    All,
}

/// Whether the entry at `level` over `va` overshoots `r` by at most `overshoot` of its
/// span (0: lies inside it): Telescope's rule for the entry it may profile.
pub fn entry_qualifies(level: Level, va: u64, r: AddrRange, overshoot: f64) -> bool {
    let start = level.align_down(va);
    let end = start.saturating_add(level.span());
    let outside = r.start.saturating_sub(start) + end.saturating_sub(r.end);
    outside as f64 <= overshoot * level.span() as f64
}

/// The level [`WindowEntry::Highest`] profiles for `va` in region `r`, over a `leaf`
/// mapping, with paging rooted at `root`.
pub fn highest_entry(
    r: AddrRange,
    va: u64,
    leaf: Level,
    root: Level,
    overshoot: &[f64; 5],
) -> Level {
    let mut l = root;
    while l > leaf {
        if entry_qualifies(l, va, r, overshoot[l.index()]) {
            return l;
        }
        l = l.down().expect("above the leaf");
    }
    leaf
}

/// An engine that estimates DAMON's per-sample reads per aggregation window instead of
/// evaluating each (the statistical engine, where each read is a probability anyway).
pub trait WindowSampler {
    /// For each of `regions`, how many of the window's sampling intervals found the bit
    /// set, into `out` (cleared first); charges the reads and test-and-clears the samples
    /// would have made. The regions' entries are left as they were (no bit is cleared).
    fn sample_window(&mut self, w: WindowSampling, regions: &[AddrRange], out: &mut Vec<u32>);
}

/// Linux's `tlb_single_page_flush_ceiling` default.
pub const FLUSH_CEILING_PAGES: u64 = 33;

/// Entries per page table (x86-64, every level).
pub const TABLE_ENTRIES: u64 = 512;

/// Calls `f` with each entry number `k` whose bit `which` sets (bit `k % 64` of word
/// `k / 64`), in increasing order.
#[inline]
pub fn for_each_selected(which: &[u64; 8], mut f: impl FnMut(u64)) {
    for (w, &word) in which.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            f(w as u64 * 64 + bits.trailing_zeros() as u64);
            bits &= bits - 1;
        }
    }
}

/// The selection ([`Machine::table_entries_accessed`]'s `which`) of a table's entries
/// `entries` (a range within `0..TABLE_ENTRIES`).
pub fn select_entries(entries: std::ops::Range<u64>) -> [u64; 8] {
    let mut which = [0u64; 8];
    for k in entries {
        which[(k / 64) as usize] |= 1 << (k % 64);
    }
    which
}

/// [`Machine::table_entries_accessed`] one entry at a time.
pub fn table_entries_by_entry<M: Machine + ?Sized>(
    m: &mut M,
    level: Level,
    start: u64,
    (which, clear): (&[u64; 8], bool),
    old: &mut [u64; 8],
) {
    *old = [0; 8];
    for_each_selected(which, |k| {
        let va = start + k * level.span();
        let set = if clear {
            m.test_and_clear_accessed(level, va)
        } else {
            m.accessed(level, va)
        };
        old[(k / 64) as usize] |= (set.unwrap_or(false) as u64) << (k % 64);
    });
}

/// [`Machine::scan_table_accessed`] one entry at a time: [`Machine::accessed`] of each
/// entry, then [`Machine::test_and_clear_accessed`] of each found set; the walk's steps
/// are counted for the first entry only.
pub fn scan_table_by_entry<M: Machine + ?Sized>(
    m: &mut M,
    level: Level,
    start: u64,
    accessed: &mut [u64; 8],
) -> u32 {
    let step = level.span();
    let mut set = 0;
    *accessed = [0; 8];
    let mut entries = [(level, 0); TABLE_ENTRIES as usize];
    for (k, e) in entries.iter_mut().enumerate() {
        e.1 = start + k as u64 * step;
    }
    m.warm_accessed(&entries);
    for k in 0..TABLE_ENTRIES {
        let va = start + k * step;
        let steps_before = m.cost().walk_steps;
        if m.accessed(level, va).unwrap_or(false) {
            m.test_and_clear_accessed(level, va);
            accessed[(k / 64) as usize] |= 1 << (k % 64);
            set += 1;
        }
        // One descent per table (walk_page_range), not one per entry.
        if k > 0 {
            m.cost_mut().walk_steps = steps_before;
        }
    }
    set
}

/// What a monitor can observe and do, the way a kernel thread on another core would.
///
/// Every operation is counted in [`Machine::cost`]; the bit operations model the kernel's
/// software walk from the root to the addressed entry.
pub trait Machine {
    /// 4- or 5-level paging.
    fn paging(&self) -> Paging;

    /// The current time, in nanoseconds since the run started.
    fn now(&self) -> Nanos;

    /// The process's mappings, sorted by address (like /proc/pid/maps).
    fn mappings(&self) -> &[Mapping];

    /// The level of the leaf entry mapping `va` (Pte for 4 KiB, Pmd for a 2 MiB page), or
    /// `None` when `va` is unmapped.
    fn leaf_level(&mut self, va: u64) -> Option<Level>;

    /// Reads the ACCESSED bit of the entry at `level` on the path to `va`. `None` when there
    /// is no such entry (unmapped, or `level` is below a huge leaf).
    fn accessed(&mut self, level: Level, va: u64) -> Option<bool>;

    /// Atomically reads and clears the ACCESSED bit of the entry at `level` covering `va`,
    /// without flushing any cached translation. Returns the old value.
    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool>;

    /// Reads the DIRTY bit of the leaf entry mapping `va`.
    fn dirty(&mut self, va: u64) -> Option<bool>;

    /// Atomically reads and clears the DIRTY bit of the leaf entry mapping `va`.
    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool>;

    /// Drops cached translations on every core running the workload.
    fn flush(&mut self, what: Flush);

    /// A hint that the ACCESSED bits of these entries (level, address) are read or
    /// tested and cleared next. An engine whose lookups of an entry's state miss the
    /// cache may start them all at once, so that the misses overlap instead of coming one
    /// at a time. Every later answer is the same with or without it; nothing is counted.
    fn warm_accessed(&mut self, _entries: &[(Level, u64)]) {}

    /// Reads the ACCESSED bits of the [`TABLE_ENTRIES`] entries of the page table at
    /// `level` whose span starts at `start` (entry `k` maps `start + k * level.span()`)
    /// and clears those found set, as a kernel scan does (`walk_page_range` reading each
    /// entry, `ptep_test_and_clear_young` on the young ones): bit `k` of `accessed` (word
    /// `k / 64`) is set for each entry found set; an entry that does not exist reads
    /// clear. Counts a read per entry and a test-and-clear per set one, with one descent
    /// of the walk for the whole table. Returns how many were set. Every answer and
    /// count is that of [`scan_table_by_entry`], the default; an engine may answer a
    /// whole table at once.
    fn scan_table_accessed(&mut self, level: Level, start: u64, accessed: &mut [u64; 8]) -> u32 {
        scan_table_by_entry(self, level, start, accessed)
    }

    /// Reads (with `clear`: tests and clears) the ACCESSED bits of the entries that
    /// `which` selects (bit `k % 64` of word `k / 64`: entry `k`, mapping `start + k *
    /// level.span()`) of the page table at `level` whose span starts at `start`, in entry
    /// order, and sets each one's bit in `old` (cleared first) when it was set; an entry
    /// that does not exist reads clear. Every answer and count is that of
    /// [`Machine::accessed`] (or [`Machine::test_and_clear_accessed`]) of each entry in
    /// turn, the default; an engine may answer a table's entries at once.
    fn table_entries_accessed(
        &mut self,
        level: Level,
        start: u64,
        which: &[u64; 8],
        clear: bool,
        old: &mut [u64; 8],
    ) {
        table_entries_by_entry(self, level, start, (which, clear), old);
    }

    /// The PMU, when the machine has one ([`Capability::Pmu`]).
    fn pmu(&mut self) -> Option<&mut dyn Pmu> {
        None
    }

    /// The write log, when the machine keeps one ([`Capability::WriteLog`]).
    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        None
    }

    /// Splits the 2 MiB page mapping `va` into 512 base pages that inherit its ACCESSED
    /// and DIRTY bits (Linux's huge-page split). For the migration engine, which flushes
    /// the range afterwards; monitors never call it. False when `va` is not under a huge
    /// leaf, or the machine cannot split.
    fn split_huge(&mut self, _va: u64) -> bool {
        false
    }

    /// Collapses the 512 base pages of the 2 MiB block holding `va` back into one huge
    /// leaf, ACCESSED (DIRTY) when any of them was (khugepaged). For the migration engine,
    /// which flushes afterwards. False when the block is not split, or the machine cannot.
    fn collapse_huge(&mut self, _va: u64) -> bool {
        false
    }

    /// The memory tiers, when the machine models them ([`Capability::Tiers`]).
    fn tiers(&mut self) -> Option<&mut dyn Tiers> {
        None
    }

    /// DAMON's sampling estimated per aggregation window, when the engine offers it (only
    /// ever asked for: an engine without it answers every sample's read one by one).
    fn window_sampler(&mut self) -> Option<&mut dyn WindowSampler> {
        None
    }

    /// Memory-controller telemetry, when the machine has it ([`Capability::MemTelemetry`]).
    fn mem_telemetry(&mut self) -> Option<&mut dyn MemTelemetry> {
        None
    }

    /// The physical address backing `va`, as the kernel's page tables know it: what a
    /// memory-controller telemetry's filter and keys see. `None` when `va` is unmapped or
    /// the machine does not model physical memory.
    fn phys_addr(&self, _va: u64) -> Option<u64> {
        None
    }

    /// The work counted so far.
    fn cost(&self) -> &CostCounters;

    /// For monitors to add their own bookkeeping (splits, merges, region visits, ...).
    fn cost_mut(&mut self) -> &mut CostCounters;
}

/// A telemetry technique. It acts at times it chooses and reports a snapshot at the end of
/// each aggregation window. It must not learn anything except through [`Machine`].
pub trait Monitor: Send {
    /// The time of the next action.
    fn next_wakeup(&self) -> Nanos;

    /// Acts at `machine.now()` (which equals the last `next_wakeup()`); returns a snapshot
    /// when an aggregation window ends.
    fn wake(&mut self, machine: &mut dyn Machine) -> Option<Snapshot>;

    /// The intervals the monitor runs at.
    fn intervals(&self) -> Intervals;
}

/// Counters of the application side of an engine: what the workload's cores saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MachineStats {
    pub accesses: u64,
    pub tlb_l1_hits: u64,
    pub tlb_l2_hits: u64,
    /// Hardware page walks (TLB misses).
    pub walks: u64,
    /// Page-table entries the hardware walker loaded from memory.
    pub walk_loads: u64,
}

/// Truly hot blocks of one window: sorted, disjoint, half-open intervals of block numbers
/// (`address >> block_shift`).
pub type BlockIntervals = Vec<(u64, u64)>;

/// What the experiment runner drives: a [`Machine`] that also runs the workload and
/// measures the ground truth. Monitors never see this interface.
pub trait Engine: Machine + Send {
    /// Runs the workload until time `t` (simulated; real time for a real machine).
    fn advance_to(&mut self, t: Nanos);

    /// Closes the truth window ending now and opens the next: the blocks accessed at
    /// least the configured threshold number of times since the previous call.
    fn take_truth(&mut self) -> BlockIntervals;

    /// Closes the truth window as [`Engine::take_truth`] does, but returns how often each
    /// part of the heap was accessed: disjoint ranges with their accesses per byte
    /// (expected accesses on the statistical engine). For the tiering oracle, which runs
    /// an engine of its own one window ahead. Engines without it return nothing.
    fn take_truth_heat(&mut self) -> Vec<(crate::addr::AddrRange, f64)> {
        Vec::new()
    }

    /// The workload's memory, as one range (heatmaps use offsets from its start).
    fn heap(&self) -> crate::addr::AddrRange;

    fn stats(&self) -> MachineStats;

    fn as_machine(&mut self) -> &mut dyn Machine;

    /// Whether the workload has ended before the run's time was up (a real program that
    /// exited); simulated workloads run for as long as asked.
    fn finished(&self) -> bool {
        false
    }

    /// At the end of a run: how a real program ended (`Ok(None)` for a simulated
    /// workload), or the reason the run failed (the program faulted).
    fn end_report(&mut self) -> Result<Option<ProgramEnd>, String> {
        Ok(None)
    }

    /// On a real machine, which runs in real time: what it achieved against what it was
    /// asked (the access rate, each truth window's real length against the time the
    /// monitor asked to sleep in it), for the runner's guards (docs/models/KVM.md); `None` on
    /// the simulated engines, which always do exactly what they are asked.
    fn real_time_report(&self) -> Option<RealTimeReport> {
        None
    }
}

/// What a real machine measured of its own run ([`Engine::real_time_report`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RealTimeReport {
    /// Accesses per second per workload thread asked for; 0 when unpaced (as fast as it
    /// can), when no rate applies (a real program).
    pub rate_requested: f64,
    /// Workload threads (vCPUs).
    pub threads: usize,
    /// One per truth window ([`Engine::take_truth`] call), in order.
    pub windows: Vec<RealWindow>,
}

/// One truth window of a real machine's run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RealWindow {
    /// Real time since the engine started, ns: the previous `take_truth` (0 for the
    /// first window) and this one.
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// The window's nominal length: the sum, over the [`Engine::advance_to`] calls in it,
    /// of the time asked for (the target minus the time the previous call returned), i.e.
    /// how long the window would have lasted had every wake-up taken no time and come on
    /// time, as on a simulated engine.
    pub nominal_ns: Nanos,
    /// Accesses each workload thread did in the window (empty where not observable).
    pub accesses: Vec<u64>,
}

/// How a real program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramEnd {
    /// One line: exit status, time, system calls.
    pub line: String,
    /// Its exit status (8 bits, as a parent sees it under Linux); `None` when the run's
    /// time was up first and it was stopped.
    pub status: Option<i32>,
}
