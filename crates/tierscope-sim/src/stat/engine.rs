//! The statistical engine: [`Machine`] and [`Engine`] without executing accesses.
//!
//! Advancing time only extends each thread's batch schedule (one entry per 131072
//! accesses). Reading a cleared bit asks [`super::walks`] for the probability that a walk
//! loaded the entry since it was last looked at, and draws the answer from a hash of
//! (seed, entry, interval), so a run is deterministic per seed and independent of the
//! order in which entries are read.

mod scan;
mod upper_windows;
mod windows;

pub use windows::BITS_CLEARED_UNSURE;

use std::cell::Cell;

use super::caches::RegionCaches;
use super::density::{Lookups, Schedule, Workload};
use super::entries::{key, Bit, Cleared, EntryStore, FastSet};
use super::nemo::StatNemo;
use super::pmu::Pmu;
use super::scanned::position;
use super::walks::{
    load_bound, loaded_remembered, span_facts, unloaded_by_zones, FlushEvent, FlushKind, FlushLog,
    SpanFacts, Target, World,
};
use crate::config::SimMachine;
use crate::layout::{lay_out, Layout};
use crate::tiers::TierState;
use crate::WorkloadParams;
use tierscope_core::machine::{scan_table_by_entry, table_entries_by_entry, FLUSH_CEILING_PAGES};
use tierscope_core::memtel::MemTelemetry;
use tierscope_core::rng::{mix64, Rng};
use tierscope_core::tiers::{TierSetup, Tiers};
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    Nanos, Paging,
};

pub struct StatEngine {
    paging: Paging,
    layout: Layout,
    workload: Workload,
    schedules: Vec<Schedule>,
    /// Per global pattern id: the caches' steady state while it runs.
    caches: Vec<RegionCaches>,
    entries: EntryStore,
    flushes: FlushLog,
    /// The schedules' searches the reads repeat.
    lookups: Lookups,
    /// Orders clears and flushes that happen at the same simulated time.
    seq: u64,
    seed: u64,
    now: Nanos,
    /// `workload.count_at(now)`: each thread's accesses so far (every read asks).
    now_count: u64,
    cost: CostCounters,
    truth_from: u64,
    block_shift: u32,
    truth_threshold: u32,
    pmu: Pmu,
    stats: MachineStats,
    /// Accesses of each thread already folded into `stats`.
    stats_done: u64,
    tiers: Option<TierState>,
    /// Accesses of each thread already counted in the tiers' traffic.
    tiers_done: u64,
    nemo: StatNemo,
    /// 2 MiB blocks (address >> 21) of huge-page mappings split into base pages. The
    /// cache models keep the mapping's page size (they are per pattern): a split changes
    /// which entries exist and hold the bits, not the modelled TLB miss rates.
    split: FastSet<u64>,
    /// Index in the layout's mappings of the one [`Self::mapping_of`] found last: a scan's
    /// consecutive entries, and most monitors' next pick, fall in the same mapping, so
    /// checking it first skips the search. The mappings never change after `new`, so
    /// the index is never stale, only possibly not the one wanted.
    last_mapping: Cell<usize>,
    /// Whether a first read may be told by the patterns' small-mass zones (tests turn it
    /// off to compare against the evaluation).
    zones: bool,
}

/// The least f32 at or above `x` (NaN stays NaN).
fn round_up(x: f64) -> f32 {
    let y = x as f32;
    if (y as f64) < x {
        y.next_up()
    } else {
        y
    }
}

/// Whether no pattern of any phase of `workload` ever accesses the span of the entry at
/// `level` for `va`.
fn dead_span(workload: &Workload, level: Level, va: u64) -> bool {
    let start = level.align_down(va);
    !workload.ever_touches(AddrRange::new(start, start + level.span()))
}

/// A uniform draw in [0, 1) from a hash.
pub(super) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The entry a read of `bit` at `level` over `va` is about, under a `leaf` mapping.
fn target(bit: Bit, level: Level, leaf: Level, va: u64) -> Target {
    let span_start = level.align_down(va);
    Target {
        level,
        leaf,
        span: AddrRange::new(span_start, span_start + level.span()),
        stores_only: bit == Bit::Dirty,
    }
}

/// What a read of a tracked entry found.
enum Read {
    /// A walk loaded the entry since its clear (it reads set); `worst` is its span's
    /// bound, to keep if it is cleared again.
    Loaded { worst: f32 },
    /// Still clear, from now on in this state.
    Clear(Cleared),
}

/// The engine's state a read of a tracked entry evaluates against: all of it but the
/// entry stores, which the caller updates with the answer.
struct Reader<'a> {
    world: World<'a>,
    workload: &'a Workload,
    lookups: &'a mut Lookups,
    flushes: &'a FlushLog,
    seed: u64,
    now: Nanos,
    now_count: u64,
    seq: u64,
    zones: bool,
}

impl Reader<'_> {
    /// Whether a walk loaded the entry of key `k`, `t`, cleared as `c`, since then.
    /// `mass` is where the span's mass is kept for the next reads (NaN: not known, or
    /// no single one, [`SpanFacts::mass`]): read only by an evaluation, written by a
    /// first read, which computes it.
    fn evaluate(&mut self, k: u64, t: Target, c: Cleared, mass: &mut f64) -> Read {
        let first_flush = self.flushes.first_after(c.seq);
        let (ia, ib) = (self.workload.count_at(c.since), self.now_count);
        let u = unit(mix64(
            self.seed ^ mix64(k ^ mix64(c.since ^ mix64(self.now.wrapping_add(0x51)))),
        ));
        let accesses = (ib - ia) * self.world.schedules.len() as u64;
        // A first read in a gaussian's tails (a scan's entries there) is mostly told by the
        // zones' bound on the span's mass: the entry stays clear, its facts still unknown.
        let (loaded, worst) = if c.worst.is_nan()
            && self.zones
            && unloaded_by_zones(self.workload, t.span, u, accesses)
        {
            (false, f32::NAN)
        } else {
            // A first read computes the span's facts: the bound to keep, and the mass its
            // evaluation would compute again (later reads rarely evaluate).
            let worst = if c.worst.is_nan() {
                let f = span_facts(self.workload, t.span);
                *mass = f.mass;
                round_up(f.worst)
            } else {
                c.worst
            };
            // `loaded_remembered`'s own first test, here so that `mass` is only read
            // when the interval is evaluated (a NaN bound bounds nothing).
            let unloaded_by_bound = u >= load_bound(worst as f64, accesses);
            let loaded = !unloaded_by_bound
                && loaded_remembered(
                    &self.world,
                    self.lookups,
                    t,
                    ia,
                    ib,
                    c.fresh,
                    &self.flushes.events[first_flush..],
                    u,
                    SpanFacts {
                        worst: worst as f64,
                        mass: *mass,
                    },
                );
            (loaded, worst)
        };
        if loaded {
            return Read::Loaded { worst };
        }
        // Still clear: a clear now would change nothing (it keeps the freshness).
        Read::Clear(Cleared {
            since: self.now,
            seq: self.seq,
            fresh: self.flushes.fresh_after(c.fresh, t, first_flush),
            worst,
        })
    }

    /// The state of a tracked entry found set and cleared again now.
    fn recleared(&self, worst: f32) -> Cleared {
        Cleared {
            since: self.now,
            seq: self.seq,
            fresh: 0,
            worst,
        }
    }
}

impl StatEngine {
    pub fn new(config: &SimMachine, params: &WorkloadParams) -> Result<Self, String> {
        let paging = config.paging;
        let layout = lay_out(params.spec, paging, config.page_size)?;
        let workload = Workload::new(params.spec, &layout.region_starts, params.rate);
        let caches = workload
            .patterns
            .iter()
            .map(|p| {
                RegionCaches::with_host(
                    p.region,
                    &p.density,
                    config.page_size,
                    config.host_pages,
                    paging,
                    &config.tlb,
                )
            })
            .collect();
        // The same stream names as the exact engine's threads, though the numbers drawn
        // differ (the exact engine also draws every access's offset).
        let schedules = (0..params.threads)
            .map(|t| {
                Schedule::new(
                    &workload,
                    Rng::for_stream(params.seed, &format!("workload/thread{t}")),
                )
            })
            .collect();
        Ok(StatEngine {
            paging,
            layout,
            workload,
            schedules,
            caches,
            entries: EntryStore::default(),
            flushes: FlushLog::default(),
            lookups: Lookups::default(),
            seq: 0,
            seed: params.seed,
            now: 0,
            now_count: 0,
            cost: CostCounters::default(),
            truth_from: 0,
            block_shift: params.block_size.trailing_zeros(),
            truth_threshold: params.truth_threshold,
            pmu: Pmu::new(params.threads as usize, params.seed),
            stats: MachineStats::default(),
            stats_done: 0,
            tiers: None,
            tiers_done: 0,
            nemo: StatNemo::new(Rng::for_stream(params.seed, "nemo")),
            split: FastSet::default(),
            last_mapping: Cell::new(0),
            zones: true,
        })
    }

    /// Gives the machine memory tiers, placed as `setup` says.
    pub fn set_tiers(&mut self, setup: &TierSetup) {
        self.tiers = Some(TierState::new(setup, &self.layout));
    }

    /// Bytes of per-entry state (for memory reports).
    pub fn entry_bytes(&self) -> usize {
        self.entries.memory_bytes()
    }

    fn mapping_of(&self, va: u64) -> Option<&Mapping> {
        let m = &self.layout.mappings;
        if let Some(last) = m.get(self.last_mapping.get()) {
            if last.range.contains(va) {
                return Some(last);
            }
        }
        let i = m.partition_point(|m| m.range.end <= va);
        let found = m.get(i).filter(|m| m.range.contains(va))?;
        self.last_mapping.set(i);
        Some(found)
    }

    /// The level of the leaf mapping `va`: the mapping's page size, or base pages where a
    /// huge page was split.
    fn leaf_of(&self, va: u64) -> Option<Level> {
        Some(self.leaf_in(self.mapping_of(va)?, va))
    }

    /// [`Self::leaf_of`] for `va` inside `m`.
    fn leaf_in(&self, m: &Mapping, va: u64) -> Level {
        let leaf = m.page_size.leaf_level();
        if leaf == Level::Pmd && !self.split.is_empty() && self.split.contains(&(va >> 21)) {
            Level::Pte
        } else {
            leaf
        }
    }

    /// The leaf level under which the entry at `level` for `va` sits, when it exists: the
    /// exact page table has an entry where a mapping reaches into its span.
    fn locate(&self, level: Level, va: u64) -> Option<(Level, u32)> {
        let root = self.paging.root();
        if level > root {
            return None;
        }
        let leaf = match self.mapping_of(va) {
            Some(m) => {
                let leaf = self.leaf_in(m, va);
                (level >= leaf).then_some(leaf)?
            }
            None => {
                // A non-leaf entry whose span holds some mapping of smaller pages.
                let span =
                    AddrRange::new(level.align_down(va), level.align_down(va) + level.span());
                self.layout
                    .mappings
                    .iter()
                    .find(|m| m.range.overlap(&span) > 0 && m.page_size.leaf_level() < level)
                    .map(|m| m.page_size.leaf_level())?
            }
        };
        Some((leaf, (root.index() - level.index() + 1) as u32))
    }

    /// Whether no pattern of any phase ever accesses the span of the entry.
    fn is_dead(&self, level: Level, va: u64) -> bool {
        dead_span(&self.workload, level, va)
    }

    /// The current value of a bit, evaluating a cleared entry up to now.
    fn read(&mut self, bit: Bit, level: Level, leaf: Level, va: u64) -> bool {
        self.read_entry(bit, level, leaf, va, false).0
    }

    /// The current value of a bit, which is then clear from now on (a test-and-clear).
    fn read_and_clear(&mut self, bit: Bit, level: Level, leaf: Level, va: u64) -> bool {
        let (old, dead, tracked) = self.read_entry(bit, level, leaf, va, true);
        if !tracked {
            self.clear_entry(bit, level, va, dead);
        }
        old
    }

    /// [`Self::read`], whether the entry is dead (known on the way, so that a clear
    /// right after need not ask again), and whether it is now tracked as clear from now
    /// on. With `clear`, an entry found tracked stays so, cleared in place: the same
    /// state as forgetting it and clearing it again, without a second probe.
    fn read_entry(
        &mut self,
        bit: Bit,
        level: Level,
        leaf: Level,
        va: u64,
        clear: bool,
    ) -> (bool, bool, bool) {
        let k = key(bit, level, va);
        if let Some(i) = self.entries.scanned_table_of(k) {
            return self.read_scanned(i, k, target(bit, level, leaf, va), clear);
        }
        if !self.entries.maybe_cleared(k) {
            return self.read_untracked(k, level, va, clear);
        }
        let (mut reader, entries) = self.reader();
        // One probe of the table: the entry is read, then updated or removed in place;
        // for a test-and-clear of an entry the table may hold but does not, the probe
        // that found it absent also places it (a scan's fresh entries, once the filter is
        // too full to rule them out).
        // Whether the entry is dead, when the probe had to ask (asked once).
        let mut dead = None;
        let slot = if clear {
            use hashbrown::hash_table::Entry;
            match entries.cleared.entry(k) {
                Entry::Occupied(o) => Some(o),
                Entry::Vacant(v) => {
                    if dead_span(reader.workload, level, va) {
                        dead = Some(true);
                        None
                    } else {
                        v.insert((k, Cleared::new(reader.now, reader.seq)));
                        entries.note_cleared(k);
                        return (true, false, true);
                    }
                }
            }
        } else {
            entries.cleared.find(k)
        };
        let Some(mut slot) = slot else {
            if dead == Some(true) {
                return self.read_dead(k, clear);
            }
            return self.read_untracked(k, level, va, clear);
        };
        // The per-entry table keeps no mass: a first read hands it to its evaluation.
        let mut mass = f64::NAN;
        match reader.evaluate(k, target(bit, level, leaf, va), slot.get().1, &mut mass) {
            Read::Loaded { worst } => {
                if clear {
                    slot.get_mut().1 = reader.recleared(worst);
                } else {
                    slot.remove();
                }
                (true, false, clear)
            }
            Read::Clear(c) => {
                slot.get_mut().1 = c;
                (false, false, true)
            }
        }
    }

    /// [`Self::read_entry`] of the entry of key `k` in the scanned table `i`.
    fn read_scanned(&mut self, i: usize, k: u64, t: Target, clear: bool) -> (bool, bool, bool) {
        let e = position(k);
        let (mut reader, entries) = self.reader();
        let table = entries.scanned.table_mut(i);
        let Some(c) = table.get(e) else {
            if dead_span(reader.workload, t.level, t.span.start) {
                return self.read_dead(k, clear);
            }
            if clear {
                table.set(e, Cleared::new(reader.now, reader.seq));
            }
            return (true, false, clear);
        };
        match reader.evaluate(k, t, c, table.mass_mut(e)) {
            Read::Loaded { worst } => {
                if clear {
                    table.set(e, reader.recleared(worst));
                } else {
                    table.remove(e);
                }
                (true, false, clear)
            }
            Read::Clear(c) => {
                table.set(e, c);
                (false, false, true)
            }
        }
    }

    /// [`Self::read_entry`] of the entry of key `k` at `level` over `va`, which the
    /// per-entry table does not hold: set, unless it is dead.
    #[inline]
    fn read_untracked(&mut self, k: u64, level: Level, va: u64, clear: bool) -> (bool, bool, bool) {
        if self.is_dead(level, va) {
            return self.read_dead(k, clear);
        }
        (true, false, false)
    }

    /// [`Self::read_entry`] of the dead entry of key `k`.
    #[inline]
    fn read_dead(&mut self, k: u64, clear: bool) -> (bool, bool, bool) {
        let u = unit(mix64(self.seed ^ mix64(k ^ 0xdead)));
        if clear {
            // One look at the dead set for the read and the clear.
            return (!self.entries.dead_test_and_clear(k, u), true, true);
        }
        (!self.entries.dead_is_clear(k, u), true, false)
    }

    /// What reading a tracked entry needs, beside the entry stores to update.
    fn reader(&mut self) -> (Reader<'_>, &mut EntryStore) {
        (
            Reader {
                world: World {
                    workload: &self.workload,
                    caches: &self.caches,
                    schedules: &self.schedules,
                },
                workload: &self.workload,
                lookups: &mut self.lookups,
                flushes: &self.flushes,
                seed: self.seed,
                now: self.now,
                now_count: self.now_count,
                seq: self.seq,
                zones: self.zones,
            },
            &mut self.entries,
        )
    }

    /// Marks a bit clear from now on.
    fn clear(&mut self, bit: Bit, level: Level, va: u64) {
        let dead = self.is_dead(level, va);
        self.clear_entry(bit, level, va, dead);
    }

    /// [`Self::clear`] of an entry whose deadness is known.
    fn clear_entry(&mut self, bit: Bit, level: Level, va: u64, dead: bool) {
        let k = key(bit, level, va);
        if dead {
            // Nothing will ever set it again: no need for a time or freshness.
            self.entries.clear_dead(k);
            return;
        }
        // A still-clear entry keeps the freshness `read` just brought up to date.
        let (now, seq) = (self.now, self.seq);
        let cleared = |c: Option<Cleared>| match c {
            Some(c) => Cleared {
                since: now,
                seq,
                ..c
            },
            None => Cleared::new(now, seq),
        };
        if let Some(i) = self.entries.scanned_table_of(k) {
            let table = self.entries.scanned.table_mut(i);
            table.set(position(k), cleared(table.get(position(k))));
            return;
        }
        use hashbrown::hash_table::Entry;
        match self.entries.cleared.entry(k) {
            Entry::Occupied(mut o) => {
                let c = &mut o.get_mut().1;
                *c = cleared(Some(*c));
            }
            Entry::Vacant(v) => {
                v.insert((k, cleared(None)));
                self.entries.note_cleared(k);
            }
        }
    }

    fn update_stats(&mut self, until: u64) {
        for s in &self.schedules {
            let mut si = s.find(self.stats_done);
            while si < s.segments.len() && s.segments[si].first < until {
                let seg = s.segments[si];
                let n = seg.end().min(until) - seg.first.max(self.stats_done);
                let p = &self.workload.patterns[seg.pattern as usize];
                let walks = n as f64 * self.caches[seg.pattern as usize].tlb_miss(p.region);
                self.stats.accesses += n;
                self.stats.walks += walks.round() as u64;
                si += 1;
            }
        }
        self.stats_done = until;
    }
}

impl Machine for StatEngine {
    fn paging(&self) -> Paging {
        self.paging
    }

    fn now(&self) -> Nanos {
        self.now
    }

    fn mappings(&self) -> &[Mapping] {
        &self.layout.mappings
    }

    fn leaf_level(&mut self, va: u64) -> Option<Level> {
        self.leaf_of(va)
    }

    fn accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (leaf, steps) = self.locate(level, va)?;
        self.cost.charge_read(steps as u64);
        Some(self.read(Bit::Accessed, level, leaf, va))
    }

    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (leaf, steps) = self.locate(level, va)?;
        let old = self.read_and_clear(Bit::Accessed, level, leaf, va);
        self.cost.charge_test_and_clear(steps as u64, old);
        Some(old)
    }

    fn dirty(&mut self, va: u64) -> Option<bool> {
        let leaf = self.leaf_of(va)?;
        let (_, steps) = self.locate(leaf, va)?;
        self.cost.charge_read(steps as u64);
        Some(self.read(Bit::Dirty, leaf, leaf, va))
    }

    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        let leaf = self.leaf_of(va)?;
        let (_, steps) = self.locate(leaf, va)?;
        let old = self.read_and_clear(Bit::Dirty, leaf, leaf, va);
        self.cost.charge_read(steps as u64);
        self.cost.clear_ops += 1;
        Some(old)
    }

    fn warm_accessed(&mut self, entries: &[(Level, u64)]) {
        // Prefetches, which retire at once, so that a pass's misses can overlap and the
        // reads that follow find their lines cached. (Lookups whose answers nobody waits
        // for do not overlap: a mispredicted branch on a missing line waits for it.)
        let Some(map) = self.entries.slot_map() else {
            return;
        };
        for &(level, va) in entries {
            self.entries.prefetch(map, key(Bit::Accessed, level, va));
        }
    }

    fn scan_table_accessed(&mut self, level: Level, start: u64, accessed: &mut [u64; 8]) -> u32 {
        match self.scan_base_table(level, start, accessed) {
            Some(set) => set,
            None => scan_table_by_entry(self, level, start, accessed),
        }
    }

    fn table_entries_accessed(
        &mut self,
        level: Level,
        start: u64,
        which: &[u64; 8],
        clear: bool,
        old: &mut [u64; 8],
    ) {
        if self
            .base_table_entries(level, start, (which, clear), old)
            .is_none()
        {
            table_entries_by_entry(self, level, start, (which, clear), old);
        }
    }

    fn flush(&mut self, what: Flush) {
        let kind = match what {
            Flush::All => Some(FlushKind::All),
            Flush::Page(va) => Some(FlushKind::Pages {
                start: va & !4095,
                end: (va & !4095) + 4096,
            }),
            Flush::Range { start, end } => {
                if end <= start {
                    None
                } else if (end.saturating_sub(1) >> 12) - (start >> 12) + 1 > FLUSH_CEILING_PAGES {
                    Some(FlushKind::All)
                } else {
                    Some(FlushKind::Pages {
                        start: start & !4095,
                        end,
                    })
                }
            }
        };
        match kind {
            Some(FlushKind::All) => self.cost.flushes_full += 1,
            _ => self.cost.flushes_page += 1,
        }
        if let Some(kind) = kind {
            self.seq += 1;
            self.flushes.push(FlushEvent {
                seq: self.seq,
                at: self.now_count,
                kind,
            });
        }
    }

    fn split_huge(&mut self, va: u64) -> bool {
        if self.leaf_of(va) != Some(Level::Pmd) {
            return false;
        }
        // The base pages inherit the huge entry's bits: an entry not tracked as clear
        // reads set, so only clear bits need recording, on every base page.
        let block = va & !((2 << 20) - 1);
        let clear: Vec<Bit> = [Bit::Accessed, Bit::Dirty]
            .into_iter()
            .filter(|&b| !self.read(b, Level::Pmd, Level::Pmd, block))
            .collect();
        self.split.insert(va >> 21);
        for b in clear {
            for k in 0..512 {
                self.clear(b, Level::Pte, block + k * 4096);
            }
        }
        true
    }

    fn collapse_huge(&mut self, va: u64) -> bool {
        if !self.split.contains(&(va >> 21)) {
            return false;
        }
        // The huge leaf is ACCESSED (DIRTY) when any base page is.
        let block = va & !((2 << 20) - 1);
        let set: Vec<(Bit, bool)> = [Bit::Accessed, Bit::Dirty]
            .into_iter()
            .map(|b| {
                let any = (0..512).any(|k| self.read(b, Level::Pte, Level::Pte, block + k * 4096));
                (b, any)
            })
            .collect();
        self.split.remove(&(va >> 21));
        for (b, any) in set {
            if any {
                self.entries.remove(key(b, Level::Pmd, block));
            } else {
                self.clear(b, Level::Pmd, block);
            }
        }
        true
    }

    fn pmu(&mut self) -> Option<&mut dyn tierscope_core::Pmu> {
        Some(&mut self.pmu)
    }

    fn tiers(&mut self) -> Option<&mut dyn Tiers> {
        self.tiers.as_mut().map(|t| t as &mut dyn Tiers)
    }

    fn mem_telemetry(&mut self) -> Option<&mut dyn MemTelemetry> {
        Some(&mut self.nemo)
    }

    fn window_sampler(&mut self) -> Option<&mut dyn tierscope_core::machine::WindowSampler> {
        Some(self)
    }

    /// As on the exact engine: the heap's virtual address minus its start.
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

impl Engine for StatEngine {
    fn advance_to(&mut self, t: Nanos) {
        if t <= self.now {
            return;
        }
        let target = self.workload.count_at(t);
        for s in &mut self.schedules {
            s.run(&self.workload, target);
        }
        self.pmu.run(&self.workload, &self.schedules, target);
        self.update_stats(target);
        if let Some(tiers) = &mut self.tiers {
            tiers.account_segments(&self.workload, &self.schedules, self.tiers_done, target);
            self.tiers_done = target;
        }
        let done = self.workload.count_at(self.now);
        self.nemo.account_segments(
            &self.workload,
            &self.schedules,
            done,
            target,
            self.layout.heap,
        );
        self.now = t;
        self.now_count = target;
    }

    fn take_truth(&mut self) -> BlockIntervals {
        let ib = self.workload.count_at(self.now);
        let out = super::truth::hot_blocks(
            &self.workload,
            &self.schedules,
            (self.truth_from, ib),
            self.block_shift,
            self.truth_threshold,
            self.seed,
        );
        self.truth_from = ib;
        out
    }

    fn take_truth_heat(&mut self) -> Vec<(AddrRange, f64)> {
        let ib = self.workload.count_at(self.now);
        let out = super::truth::heat(
            &self.workload,
            &self.schedules,
            (self.truth_from, ib),
            self.block_shift,
        );
        self.truth_from = ib;
        out
    }

    fn heap(&self) -> AddrRange {
        self.layout.heap
    }

    fn stats(&self) -> MachineStats {
        self.stats
    }

    fn as_machine(&mut self) -> &mut dyn Machine {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::{parse_masim, WorkloadSpec};
    use tierscope_core::{PageSize, PmuEvent};

    pub(super) fn engine(spec: &WorkloadSpec, threads: u32) -> StatEngine {
        let params = WorkloadParams {
            spec,
            rate: 1_000_000,
            threads,
            seed: 9,
            block_size: 2 << 20,
            truth_threshold: 1,
        };
        StatEngine::new(&SimMachine::default(), &params).unwrap()
    }

    /// Every tracked entry (key, time, flush number, freshness), in key order.
    pub(super) fn tracked(e: &StatEngine) -> Vec<(u64, Nanos, u64, u8)> {
        let mut v: Vec<_> = e
            .entries
            .tracked()
            .map(|(k, c)| (k, c.since, c.seq, c.fresh))
            .collect();
        v.sort_unstable();
        v
    }

    /// The operations two twin engines undergo alike in the tests below: `op` 0 lets a
    /// time below `max_dt` pass (drawn from `rng`), 1 flushes `va`'s page, 2 reads the
    /// entry (the answers must agree). False for any other `op`, which the test does itself.
    pub(super) fn twin_step(
        (a, b): (&mut StatEngine, &mut StatEngine),
        op: u64,
        (level, va): (Level, u64),
        (t, rng, max_dt): (&mut u64, &mut Rng, u64),
    ) -> bool {
        match op {
            0 => {
                *t += rng.below(max_dt);
                a.advance_to(*t);
                b.advance_to(*t);
            }
            1 => {
                a.flush(Flush::Page(va));
                b.flush(Flush::Page(va));
            }
            2 => assert_eq!(a.accessed(level, va), b.accessed(level, va)),
            _ => return false,
        }
        true
    }

    #[test]
    fn round_up_is_the_least_f32_at_or_above() {
        let mut rng = Rng::new(3);
        for i in 0..100_000 {
            // Every scale a span's bound takes, subnormal f32s and infinity included.
            let x = if i == 0 {
                f64::INFINITY
            } else {
                rng.unit() * 2f64.powi(rng.below(400) as i32 - 200)
            };
            let y = round_up(x);
            assert!(y as f64 >= x, "{x} {y}");
            assert!((y.next_down() as f64) < x, "{x} {y}");
        }
        assert!(round_up(f64::NAN).is_nan());
    }

    #[test]
    fn pmu_records_every_period_th_qualifying_access() {
        // The exact engine's test, on the statistical engine: the counts must be the same.
        let spec = parse_masim("a, 64MiB\n\np\n1000\na, 1, 4096, 1, rw\n").unwrap();
        for threads in [1, 2] {
            let mut e = engine(&spec, threads);
            e.pmu().unwrap().program(PmuEvent::Stores, Some(100));
            e.advance_to(50_000_000);
            e.advance_to(100_000_000); // 100k accesses per thread, half of them stores
            let mut out = vec![];
            e.pmu().unwrap().drain(&mut out);
            assert_eq!(out.len() as u32, 500 * threads);
            assert!(out.iter().all(|s| s.store && e.heap().contains(s.va)));
            assert!(out.iter().all(|s| s.time < 100_000_000));
            assert!(out.windows(2).all(|w| w[0].time <= w[1].time));
            e.pmu().unwrap().program(PmuEvent::Stores, None);
            e.advance_to(200_000_000);
            e.pmu().unwrap().drain(&mut out);
            assert_eq!(out.len() as u32, 500 * threads, "no samples once stopped");
        }
    }

    #[test]
    fn untouched_entries_read_set_and_dead_ones_stay_clear() {
        let spec = parse_masim("cold, 1GiB\nhot, 64MiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let mut e = engine(&spec, 1);
        let cold = e.layout.region_starts[0] + 12345;
        let hot = e.layout.region_starts[1] + 4096;
        assert_eq!(e.accessed(Level::Pte, cold), Some(true));
        assert_eq!(e.test_and_clear_accessed(Level::Pte, cold), Some(true));
        assert_eq!(e.test_and_clear_accessed(Level::Pte, hot), Some(true));
        assert_eq!(e.test_and_clear_accessed(Level::Pte, hot), Some(false));
        assert_eq!(e.cost().bits_cleared, 2);
        e.advance_to(1_000_000_000); // 1M accesses over 16k hot pages: surely walked
        assert_eq!(e.accessed(Level::Pte, cold), Some(false));
        assert_eq!(e.accessed(Level::Pte, hot), Some(true));
        // No entry below a mapping's leaf, none outside the mappings.
        assert_eq!(e.accessed(Level::Pte, 0x1000), None);
        assert!(e.accessed(Level::Pml4, hot).is_some());
        assert!(e.entry_bytes() < 1 << 20);
    }

    #[test]
    fn split_pages_inherit_the_bits_and_collapse_back() {
        let spec = parse_masim("cold, 1GiB\nhot, 64MiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let machine = SimMachine {
            page_size: PageSize::Huge2M,
            ..SimMachine::default()
        };
        let params = WorkloadParams {
            spec: &spec,
            rate: 1_000_000,
            threads: 1,
            seed: 9,
            block_size: 2 << 20,
            truth_threshold: 1,
        };
        let mut e = StatEngine::new(&machine, &params).unwrap();
        let hot = e.layout.region_starts[1];
        assert_eq!(e.leaf_level(hot + 4096), Some(Level::Pmd));
        assert!(!e.collapse_huge(hot), "not split");
        assert_eq!(e.test_and_clear_accessed(Level::Pmd, hot), Some(true));
        assert!(e.split_huge(hot + 12345));
        assert!(!e.split_huge(hot), "already split");
        assert_eq!(e.leaf_level(hot + 4096), Some(Level::Pte));
        assert_eq!(
            e.leaf_level(hot + (2 << 20)),
            Some(Level::Pmd),
            "one block only"
        );
        // The base pages inherit the cleared bit and the set DIRTY bit.
        assert_eq!(e.accessed(Level::Pte, hot + 4096), Some(false));
        assert_eq!(e.accessed(Level::Pte, hot + 511 * 4096), Some(false));
        assert_eq!(e.dirty(hot + 4096), Some(true));
        // The migration engine flushes after a split: the next accesses walk.
        e.flush(Flush::Range {
            start: hot,
            end: hot + (2 << 20),
        });
        e.advance_to(1_000_000_000); // ~61 accesses per hot 4 KiB page
        assert_eq!(e.accessed(Level::Pte, hot + 4096), Some(true));
        // Collapsed: one huge leaf, ACCESSED since a base page is.
        e.test_and_clear_dirty(hot + 4096);
        assert!(e.collapse_huge(hot));
        assert_eq!(e.leaf_level(hot + 4096), Some(Level::Pmd));
        assert_eq!(e.accessed(Level::Pte, hot), None);
        assert_eq!(e.accessed(Level::Pmd, hot), Some(true));
    }

    #[test]
    fn test_and_clear_is_a_read_then_a_clear() {
        // Two engines of one seed under the same random operations on a handful of
        // entries (hot and dead, PTE and PMD, both bits) with time and flushes between:
        // one test-and-clears in one probe, the other reads and then clears (the way it
        // was done before). Every answer and every tracked entry (time, flush number,
        // freshness) must agree.
        let spec = parse_masim("cold, 1GiB\nhot, 64MiB\n\np\n1000\nhot, 1, 4096, 1, rw\n").unwrap();
        let (mut a, mut b) = (engine(&spec, 1), engine(&spec, 1));
        let (cold, hot) = (a.layout.region_starts[0], a.layout.region_starts[1]);
        let vas = [
            hot,
            hot + 4096,
            hot + (8 << 20),
            cold + 4096,
            cold + (3 << 21),
        ];
        let mut rng = Rng::new(12);
        let mut t = 0;
        let mut seen = [0; 2];
        for _ in 0..2000 {
            let va = vas[rng.below(vas.len() as u64) as usize];
            let level = if rng.below(3) == 0 {
                Level::Pmd
            } else {
                Level::Pte
            };
            // Up to 30 ms pass: about one access per hot page on average, so some
            // entries load and some do not.
            let op = rng.below(6);
            let alike = (&mut t, &mut rng, 30_000_000);
            if twin_step((&mut a, &mut b), op, (level, va), alike) {
                assert_eq!(tracked(&a), tracked(&b));
                continue;
            }
            match op {
                3 => {
                    let want = b.leaf_of(va).map(|leaf| {
                        let old = b.read(Bit::Dirty, leaf, leaf, va);
                        b.clear(Bit::Dirty, leaf, va);
                        old
                    });
                    assert_eq!(a.test_and_clear_dirty(va), want);
                }
                _ => {
                    let want = b.locate(level, va).map(|(leaf, _)| {
                        let old = b.read(Bit::Accessed, level, leaf, va);
                        b.clear(Bit::Accessed, level, va);
                        old
                    });
                    let got = a.test_and_clear_accessed(level, va);
                    assert_eq!(got, want);
                    if let Some(old) = got {
                        seen[old as usize] += 1;
                    }
                }
            }
            assert_eq!(tracked(&a), tracked(&b));
        }
        // Both outcomes happened often: entries found set again and entries still clear.
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
    }

    #[test]
    fn warming_entries_changes_no_answer() {
        // Two engines of one seed under the same reads, clears and flushes; one is warned
        // of a few entries (those read next and others) before each operation. Every
        // answer and every tracked entry agree. Both first clear enough of a hot region
        // that the table is large enough to be prefetched.
        let spec = parse_masim("cold, 1GiB\nhot, 1GiB\n\np\n1000\nhot, 1, 4096, 1, rw\n").unwrap();
        let (mut a, mut b) = (engine(&spec, 1), engine(&spec, 1));
        let (cold, hot) = (a.layout.region_starts[0], a.layout.region_starts[1]);
        let pages = crate::stat::cleared::PREFETCH_MIN_KEYS as u64 + 1000;
        for e in [&mut a, &mut b] {
            for p in 0..pages {
                e.test_and_clear_accessed(Level::Pte, hot + (p << 12));
            }
        }
        assert!(a.entries.slot_map().is_some());
        let mut rng = Rng::new(21);
        let pick = |rng: &mut Rng| {
            let base = if rng.below(2) == 0 { hot } else { cold };
            let level = [Level::Pte, Level::Pmd, Level::Pud][rng.below(3) as usize];
            (level, base + (rng.below(16_384) << 12))
        };
        let mut t = 0;
        for _ in 0..3000 {
            let (level, va) = pick(&mut rng);
            let others = [(level, va), pick(&mut rng), pick(&mut rng)];
            a.warm_accessed(&others);
            let op = rng.below(4);
            if !twin_step(
                (&mut a, &mut b),
                op,
                (level, va),
                (&mut t, &mut rng, 20_000_000),
            ) {
                assert_eq!(
                    a.test_and_clear_accessed(level, va),
                    b.test_and_clear_accessed(level, va)
                );
            }
            assert_eq!(a.entries.tracked_len(), b.entries.tracked_len());
        }
        assert_eq!(tracked(&a), tracked(&b));
    }

    #[test]
    fn reads_told_by_the_zones_answer_as_evaluated() {
        // Two engines of one seed over a narrow gaussian, one reading every entry with the
        // evaluation: a scan's test-and-clears and reads of PTEs and PMDs from the centre
        // to the far tails, with time and flushes between. Every answer and every tracked
        // entry agree, and the zones told most first reads in the tails.
        let mut spec = parse_masim("g, 16GiB\n\np\n1000\ng, 1, 4096, 1, rw\n").unwrap();
        spec.phases[0].patterns[0].density = tierscope_core::workload::Density::Gaussian {
            mean: 0.5,
            sigma: 0.002,
        };
        let (mut a, mut b) = (engine(&spec, 1), engine(&spec, 1));
        b.zones = false;
        let g = a.layout.region_starts[0];
        let sigma = 0.002 * (16u64 << 30) as f64;
        let mut rng = Rng::new(23);
        let mut t = 0;
        let mut cleared = 0;
        for round in 0..40 {
            // A scan of 256 consecutive pages somewhere from the centre to 45 sigma out.
            let z = rng.unit() * [6.0, 45.0][round % 2] * [1.0, -1.0][rng.below(2) as usize];
            let from = Level::Pte.align_down(((g + (8 << 30)) as f64 + z * sigma) as u64);
            let level = [Level::Pte, Level::Pte, Level::Pmd][rng.below(3) as usize];
            let vas: Vec<u64> = (0..256).map(|i| from + i * level.span()).collect();
            for &va in &vas {
                assert_eq!(
                    a.test_and_clear_accessed(level, va),
                    b.test_and_clear_accessed(level, va)
                );
            }
            cleared += vas.len();
            for _ in 0..8 {
                let op = rng.below(3);
                let va = vas[rng.below(vas.len() as u64) as usize];
                twin_step(
                    (&mut a, &mut b),
                    op,
                    (level, va),
                    (&mut t, &mut rng, 50_000_000),
                );
            }
            for &va in &vas {
                assert_eq!(a.accessed(level, va), b.accessed(level, va));
            }
            assert_eq!(tracked(&a), tracked(&b));
        }
        // Every tracked entry was read since its clear: those left without their span's
        // facts were told by the zones (in the tails, about half the scans).
        let unknown = |e: &StatEngine| {
            e.entries
                .tracked()
                .filter(|(_, c)| c.worst.is_nan())
                .count()
        };
        let tracked_now = a.entries.tracked_len();
        assert_eq!(unknown(&b), 0);
        assert!(
            unknown(&a) * 3 > tracked_now,
            "{} of {tracked_now}",
            unknown(&a)
        );
        assert!(tracked_now * 4 > cleared, "{tracked_now} of {cleared}");
    }

    #[test]
    fn truth_is_the_accessed_region() {
        let spec = parse_masim("cold, 1GiB\nhot, 64MiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let mut e = engine(&spec, 1);
        e.advance_to(200_000_000);
        let hot = e.layout.region_starts[1];
        assert_eq!(e.take_truth(), vec![(hot >> 21, (hot + (64 << 20)) >> 21)]);
        assert_eq!(e.take_truth(), vec![]);
    }

    #[test]
    fn truth_of_densities() {
        use tierscope_core::workload::Density;
        let mut spec = parse_masim("cold, 1GiB\nhot, 1GiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        // Hotspot at 1%: every 2 MiB block holds about five hot pages, all hot.
        spec.phases[0].patterns[0].density = Density::Hotspot { hot_fraction: 0.01 };
        let mut e = engine(&spec, 1);
        e.advance_to(200_000_000);
        let hot = e.layout.region_starts[1];
        assert_eq!(e.take_truth(), vec![(hot >> 21, (hot + (1 << 30)) >> 21)]);
        // A narrow gaussian: the blocks around the mean, a drawn tail, the same per seed.
        spec.phases[0].patterns[0].density = Density::Gaussian {
            mean: 0.5,
            sigma: 0.01,
        };
        let truth = |spec: &WorkloadSpec| {
            let mut e = engine(spec, 1);
            e.advance_to(200_000_000);
            e.take_truth()
        };
        let t = truth(&spec);
        assert_eq!(t, truth(&spec));
        let blocks: u64 = t.iter().map(|(a, b)| b - a).sum();
        // 200k accesses, sigma 5.4 blocks: blocks up to 4.4 sigma (23 blocks) from the mean
        // expect an access, about 47 in all.
        assert!((30..=50).contains(&blocks), "{blocks}");
        let mid = (hot + (1 << 29)) >> 21;
        assert!(t.iter().any(|&(a, b)| a <= mid && mid < b));
    }

    #[test]
    fn dead_entries_beyond_the_exact_set_are_counted_per_chunk() {
        use crate::stat::dead::RECENT_DEAD;
        let spec = parse_masim("cold, 8GiB\nhot, 64MiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let mut e = engine(&spec, 1);
        let base = Level::Pud.align_down(e.layout.region_starts[0]) + (1 << 30);
        // Clear every page of five whole GiB chunks: more than the exact set holds.
        let pages = 5u64 << 18;
        assert!(pages as usize > RECENT_DEAD);
        for i in 0..pages {
            e.test_and_clear_accessed(Level::Pte, base + (i << 12));
        }
        // The oldest were folded into full chunks: still read clear, with no flip counted.
        assert_eq!(e.accessed(Level::Pte, base), Some(false));
        assert_eq!(
            e.test_and_clear_accessed(Level::Pte, base + 4096),
            Some(false)
        );
        assert_eq!(e.cost().bits_cleared, pages);
        assert!(e.entry_bytes() < 64 << 20, "{}", e.entry_bytes());
    }

    #[test]
    fn mapping_of_answers_as_the_search_whatever_it_found_last() {
        // Addresses in every mapping, at their edges and in the gaps between them, asked
        // in a random order and then in runs: the remembered mapping never answers for an
        // address outside it, and every answer is the binary search's.
        let spec = parse_masim("cold, 1GiB\nhot, 64MiB\n\np\n1000\nhot, 1, 4096, 1\n").unwrap();
        let e = engine(&spec, 1);
        let maps = &e.layout.mappings;
        assert!(maps.len() >= 3, "several mappings to move between");
        let mut vas = vec![0, u64::MAX];
        for m in maps {
            let r = m.range;
            vas.extend([r.start - 1, r.start, r.start + 4096, (r.start + r.end) / 2]);
            vas.extend([r.end - 1, r.end, r.end + 4096]);
        }
        let search = |va: u64| {
            let i = maps.partition_point(|m| m.range.end <= va);
            maps.get(i)
                .filter(|m| m.range.contains(va))
                .map(|m| m.range)
        };
        let mut rng = Rng::new(4);
        let mut found = 0;
        for _ in 0..20_000 {
            let va = vas[rng.below(vas.len() as u64) as usize];
            let run = 1 + rng.below(3);
            for _ in 0..run {
                let got = e.mapping_of(va).map(|m| m.range);
                assert_eq!(got, search(va), "{va:#x}");
                found += got.is_some() as u32;
            }
        }
        assert!(found > 5_000, "{found}");
    }
}
