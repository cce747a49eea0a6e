//! Hot-set telemetry on the memory controllers (NEMO paper §5.1, HeMem-NEMO, Listing 2):
//! one add-1 counter per 2 MiB page of the heap, reset on read, read every window. When
//! the heap has more 2 MiB pages than the telemetries have states, the translation
//! entries are time-multiplexed (tierscope-nemo's `Multiplexer`): each window reads the
//! pages programmed during it and programs the next batch, round-robin, so a sweep of the
//! heap takes `ceil(pages / (pipelines x states))` windows (§6.1's formula, rounded up).
//!
//! Each snapshot reports the pages read this window whose count divided by `pebs_period`
//! is positive (HeMem-NEMO "scale[s] NEMO access counts by the PEBS sampling rate" so
//! that HeMem's thresholds, in samples, keep their meaning; `pebs_period = 1` reports raw
//! counts), as a PEBS monitor reports its sampled bins: an unreported page is cold. The
//! remainder of the division carries to the page's next read, as a PEBS counter carries
//! its count across windows: a page with fewer than `pebs_period` accesses per window
//! still reports one "sample" every `pebs_period` accesses.
//! Keys are the pages' physical addresses (`Machine::phys_addr`) over 2 MiB and index the
//! translation table directly, so `entries x 2 MiB` bounds the memory tracked: experiments
//! whose heap is larger are rejected at parse time (`monitors[i].entries`).
//!
//! With `skew_pipelines` > 0 (preset `nemo-memtis`) it is MEMTIS-NEMO's telemetry (§5.2,
//! Listing 1): besides the hot-set counters, `skew_pipelines` pipelines of per-4 KiB
//! counters (`skew_pages` huge pages each, 512 states per page) swept round-robin over the
//! heap's huge pages by a second multiplexer, one batch per window. Its snapshots then add
//! the tracked pages' base-page counts of the window, raw (not scaled), as 4 KiB regions:
//! `FeedKind::HugeAndBaseCounts`, which MEMTIS reads (docs/techniques/MEMTIS.md).

use crate::registry::{BuildContext, Preset, Technique};
use serde::{Deserialize, Serialize};
use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, ReadEffect, TelemetrySpec, Translation, Update,
};
use tierscope_core::units::{Duration, NS_PER_MS};
use tierscope_core::FeedKind;
use tierscope_core::{
    AddrRange, Capabilities, Capability, FieldError, Intervals, Machine, Monitor, Nanos, OpCounter,
    RegionReport, Snapshot,
};

/// Memory-controller telemetry states read (merged over controllers and channels).
pub static NEMO_STATE_READS: OpCounter = OpCounter {
    name: "nemo_state_reads",
    cycles: |m| m.nemo_state_read,
    on_workload_core: false,
};
/// Memory-controller translation entries written (set or cleared).
pub static NEMO_TRANSLATION_WRITES: OpCounter = OpCounter {
    name: "nemo_translation_writes",
    cycles: |m| m.nemo_translation_write,
    on_workload_core: false,
};
/// Memory-controller telemetry interrupts handled (a notify predicate held; nemo_rule).
pub static NEMO_INTERRUPTS: OpCounter = OpCounter {
    name: "nemo_interrupts",
    cycles: |m| m.nemo_interrupt,
    on_workload_core: false,
};
use tierscope_nemo::Multiplexer;

const HUGE: u64 = 2 << 20;
const BASE: u64 = 4096;
/// Base pages per huge page: the states one skewness region takes.
const SUBPAGES: u32 = (HUGE / BASE) as u32;

/// Per-2 MiB-page access counters on the memory controllers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NemoConfig {
    /// The read (and reprogramming) period: one snapshot each.
    pub aggr: Duration,
    /// Pipelines (telemetries) the counters take; the prototype has 8 (§4).
    pub pipelines: u32,
    /// Translation entries per pipeline (a power of two: the key is address bits
    /// 21..21+log2(entries)); 8192 covers 16 GiB of physical memory (§4).
    pub entries: u32,
    /// States (counters) per pipeline: pages tracked at once per pipeline (§4: 8192).
    pub states: u32,
    /// Counts are divided by this before they are reported (HeMem-NEMO's scaling to
    /// PEBS samples); 1 reports raw counts.
    pub pebs_period: u64,
    /// Pipelines of per-4 KiB counters for MEMTIS's skewness (§5.2: 7); 0: none.
    pub skew_pipelines: u32,
    /// Huge pages each skewness pipeline tracks at once (§5.2: 16, so 8192 states).
    pub skew_pages: u32,
}

impl Default for NemoConfig {
    fn default() -> Self {
        NemoConfig {
            aggr: Duration(10 * NS_PER_MS),
            pipelines: 1,
            entries: 8192,
            states: 8192,
            pebs_period: 5003,
            skew_pipelines: 0,
            skew_pages: 16,
        }
    }
}

impl Technique for NemoConfig {
    fn counters() -> &'static [&'static OpCounter] {
        static OWN: [&OpCounter; 2] = [&NEMO_STATE_READS, &NEMO_TRANSLATION_WRITES];
        &OWN
    }

    fn presets() -> Vec<Preset<Self>> {
        vec![
            Preset {
                name: "nemo-hotset",
                help: "NEMO per-2 MiB-page counters read every 10 ms, scaled to PEBS period 5003 \
                   (HeMem-NEMO)",
                config: NemoConfig::default(),
            },
            Preset {
                name: "nemo-memtis",
                help: "NEMO per-2 MiB-page counters scaled to PEBS period 199, and 7 pipelines of \
                   per-4 KiB counters over 16 huge pages each swept every 500 ms \
                   (MEMTIS-NEMO)",
                config: NemoConfig {
                    aggr: Duration(500 * NS_PER_MS),
                    pebs_period: 199,
                    skew_pipelines: 7,
                    ..NemoConfig::default()
                },
            },
        ]
    }

    fn requires(&self) -> Capabilities {
        Capabilities::of(&[Capability::MemTelemetry])
    }

    /// Its hot-set counters scaled to PEBS samples (HeMem-NEMO reads them as HeMem reads
    /// PEBS).
    fn emits(&self) -> FeedKind {
        if self.skew_pipelines > 0 {
            FeedKind::HugeAndBaseCounts
        } else {
            FeedKind::Samples
        }
    }

    fn flushes(&self) -> bool {
        false
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.aggr.0 == 0 {
            return Err(FieldError::new("aggr", "must be positive"));
        }
        if !(1..=8).contains(&self.pipelines) {
            return Err(FieldError::new(
                "pipelines",
                format!(
                    "must be 1 to 8 (the prototype's pipelines), got {}",
                    self.pipelines
                ),
            ));
        }
        if !self.entries.is_power_of_two() || self.entries > 1 << 20 {
            return Err(FieldError::new(
                "entries",
                format!("must be a power of two up to 2^20, got {}", self.entries),
            ));
        }
        if self.states == 0 {
            return Err(FieldError::new("states", "must be at least 1"));
        }
        if self.pebs_period == 0 {
            return Err(FieldError::new("pebs_period", "must be at least 1"));
        }
        if self.pipelines + self.skew_pipelines > 8 {
            return Err(FieldError::new(
                "skew_pipelines",
                format!(
                    "with {} hot-set pipelines at most {} (the prototype's 8 in all)",
                    self.pipelines,
                    8u32.saturating_sub(self.pipelines)
                ),
            ));
        }
        if self.skew_pages == 0 || self.skew_pages > self.entries {
            return Err(FieldError::new(
                "skew_pages",
                format!(
                    "must be 1 to entries ({}), got {}",
                    self.entries, self.skew_pages
                ),
            ));
        }
        // The engines' controllers are the prototype's (docs/techniques/NEMO.md): the pipelines
        // must fit its SRAM, or registering them on the first wake would fail.
        let mut specs = vec![self.spec(); self.pipelines as usize];
        specs.extend(vec![self.skew_spec(); self.skew_pipelines as usize]);
        tierscope_nemo::NemoConfig::prototype().check_fits(&specs)
    }

    fn build(&self, _: BuildContext) -> Box<dyn Monitor> {
        Box::new(NemoMonitor::new(self.clone()))
    }
}

impl NemoConfig {
    /// Listing 2's rule: add 1 per request to the page's counter, reset on read.
    pub fn spec(&self) -> TelemetrySpec {
        let bits = self.entries.trailing_zeros();
        TelemetrySpec {
            filter: Filter {
                kinds: Kinds::Both,
                range: AddrRange::new(0, (self.entries as u64) * HUGE),
            },
            translation: Translation {
                primary: MaskShift::bits(21, 21 + bits),
                sub: None,
            },
            update: Update::COUNT,
            notify: None,
            read_effect: ReadEffect::Reset(0),
            entries: self.entries,
            states: self.states,
            width: 64,
        }
    }

    /// Listing 1's rule: the same key, a counter per 4 KiB base page within it
    /// (`skew_pages` huge pages of 512 states), reset on read.
    pub fn skew_spec(&self) -> TelemetrySpec {
        let mut spec = self.spec();
        spec.translation.sub = Some(MaskShift::bits(12, 21));
        spec.states = self.skew_pages * SUBPAGES;
        spec
    }
}

/// One tracked page.
#[derive(Debug, Clone, Copy)]
struct Page {
    va: u64,
    key: u64,
    /// Scaled count of the last read, reported in the window it was read.
    samples: u64,
    /// Accesses not yet turned into a scaled sample (below `pebs_period`).
    residue: u64,
}

pub struct NemoMonitor {
    cfg: NemoConfig,
    next_wakeup: Nanos,
    window_start: Nanos,
    /// Whether the first wake has programmed the controllers.
    installed: bool,
    /// `None` on a machine without the capability.
    mux: Option<Multiplexer>,
    /// Sorted by key (and so by address: keys are physical page numbers).
    pages: Vec<Page>,
    /// Indices into `pages` of those the last scan read with a sample, ascending: the
    /// window's reports (a scan reads a batch of the pages; visiting all of them every window
    /// cost more than the rest of a terabyte run).
    read_now: Vec<usize>,
    /// The skewness counters' multiplexer (`skew_pipelines` > 0).
    skew_mux: Option<Multiplexer>,
    /// The base-page counts of the pages read by it this window: (page index, counts
    /// from `base_counts[at..at + 512]`), reused every window.
    skew_read: Vec<(usize, usize)>,
    base_counts: Vec<u64>,
}

impl NemoMonitor {
    pub fn new(cfg: NemoConfig) -> Self {
        NemoMonitor {
            cfg,
            next_wakeup: 0,
            window_start: 0,
            installed: false,
            mux: None,
            pages: Vec::new(),
            read_now: Vec::new(),
            skew_mux: None,
            skew_read: Vec::new(),
            base_counts: Vec::new(),
        }
    }

    /// Registers the telemetries and programs the first batch. Without the capability
    /// (a test machine) every window reports the pages cold.
    fn install(&mut self, m: &mut dyn Machine) {
        let mut pages = Vec::new();
        for map in m.mappings() {
            let mut va = map.range.start.next_multiple_of(HUGE);
            while va + HUGE <= map.range.end {
                if let Some(pa) = m.phys_addr(va) {
                    if pa >> 21 < self.cfg.entries as u64 {
                        pages.push(Page {
                            va,
                            key: pa >> 21,
                            samples: 0,
                            residue: 0,
                        });
                    }
                }
                va += HUGE;
            }
        }
        pages.sort_by_key(|p| p.key);
        self.pages = pages;
        let spec = self.cfg.spec();
        let Some(nemo) = m.mem_telemetry() else {
            return;
        };
        let ids = (0..self.cfg.pipelines)
            .map(|_| nemo.register(&spec))
            .collect::<Result<Vec<_>, _>>()
            .expect("the rule is valid and fits a prototype controller (validated config)");
        let keys: Vec<u64> = self.pages.iter().map(|p| p.key).collect();
        let mux = Multiplexer::new(nemo, ids, keys.clone()).expect("keys within the mask");
        let mut writes = mux.writes();
        self.mux = Some(mux);
        if self.cfg.skew_pipelines > 0 {
            let skew = self.cfg.skew_spec();
            let ids = (0..self.cfg.skew_pipelines)
                .map(|_| nemo.register(&skew))
                .collect::<Result<Vec<_>, _>>()
                .expect("the rules fit a prototype controller together (validated config)");
            let mux = Multiplexer::new(nemo, ids, keys).expect("keys within the mask");
            writes += mux.writes();
            self.skew_mux = Some(mux);
        }
        m.cost_mut().charge(&NEMO_TRANSLATION_WRITES, writes);
    }

    /// Reads the skewness batch of the window (its base-page counts kept for the report)
    /// and programs the next.
    fn scan_skew(&mut self, m: &mut dyn Machine) {
        let Some(mux) = &mut self.skew_mux else {
            return;
        };
        let (regions, writes_before) = (mux.programmed().len() as u64, mux.writes());
        let nemo = m.mem_telemetry().expect("installed on this machine");
        let (pages, read, counts) = (&self.pages, &mut self.skew_read, &mut self.base_counts);
        read.clear();
        counts.clear();
        mux.scan(nemo, |key, states| {
            if let Ok(i) = pages.binary_search_by_key(&key, |p| p.key) {
                read.push((i, counts.len()));
                counts.extend_from_slice(states);
            }
        })
        .expect("programmed keys and regions are valid");
        let c = m.cost_mut();
        c.charge(&NEMO_STATE_READS, regions * SUBPAGES as u64);
        c.charge(&NEMO_TRANSLATION_WRITES, mux.writes() - writes_before);
    }

    /// Reads the batch programmed during the window, programs the next.
    fn scan(&mut self, m: &mut dyn Machine) {
        let Some(mux) = &mut self.mux else { return };
        let (before, writes_before) = (mux.programmed().len() as u64, mux.writes());
        let nemo = m.mem_telemetry().expect("installed on this machine");
        let (pages, read) = (&mut self.pages, &mut self.read_now);
        read.clear();
        let period = self.cfg.pebs_period;
        let mut next = 0;
        mux.scan(nemo, |key, states| {
            if let Some(i) = page_of(pages, key, next) {
                next = i + 1;
                let p = &mut pages[i];
                let total = p.residue + states[0];
                // Most pages of a window are below the period: no division for them,
                // and nothing to report (nor to sort below).
                if total < period {
                    (p.samples, p.residue) = (0, total);
                } else {
                    (p.samples, p.residue) = (total / period, total % period);
                    read.push(i);
                }
            }
        })
        .expect("programmed keys and regions are valid");
        read.sort_unstable();
        read.dedup();
        let c = m.cost_mut();
        c.charge(&NEMO_STATE_READS, before);
        c.charge(&NEMO_TRANSLATION_WRITES, mux.writes() - writes_before);
    }

    /// The pages read this window with a scaled count, as a PEBS monitor reports its
    /// sampled bins: an unreported page is cold (a heap of tens of thousands of huge pages
    /// read every 10 ms would otherwise report every one of them every window).
    fn report(&self) -> Vec<RegionReport> {
        let mut out: Vec<RegionReport> = self
            .read_now
            .iter()
            .map(|&i| &self.pages[i])
            // A page a wrapping batch read twice keeps its second count.
            .filter(|p| p.samples > 0)
            .map(|p| RegionReport {
                start: p.va,
                end: p.va + HUGE,
                nr_accesses: p.samples.min(u32::MAX as u64) as u32,
                age: 0,
            })
            .collect();
        for &(i, at) in &self.skew_read {
            let va = self.pages[i].va;
            for (j, &c) in self.base_counts[at..at + SUBPAGES as usize]
                .iter()
                .enumerate()
            {
                if c > 0 {
                    let start = va + j as u64 * BASE;
                    out.push(RegionReport {
                        start,
                        end: start + BASE,
                        nr_accesses: c.min(u32::MAX as u64) as u32,
                        age: 0,
                    });
                }
            }
        }
        // By address, a huge page before its base pages.
        out.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
        out
    }
}

/// The index of the page with `key` in `pages` (sorted by key), tried at `hint` first: the
/// multiplexer programs its keys, which are the pages', in order, so a scan visits
/// consecutive pages and a binary search over a terabyte's pages (16 MiB) is a chain of
/// cache misses per key.
fn page_of(pages: &[Page], key: u64, hint: usize) -> Option<usize> {
    if pages.get(hint).is_some_and(|p| p.key == key) {
        return Some(hint);
    }
    pages.binary_search_by_key(&key, |p| p.key).ok()
}

impl Monitor for NemoMonitor {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        self.next_wakeup = now + self.cfg.aggr.0;
        if !self.installed {
            self.installed = true;
            self.install(m);
            self.window_start = now;
            return None;
        }
        self.scan(m);
        self.scan_skew(m);
        let snapshot = Snapshot {
            start: self.window_start,
            end: now,
            regions: self.report(),
        };
        self.window_start = now;
        Some(snapshot)
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.aggr.0,
            aggr: self.cfg.aggr.0,
            ops_update: self.cfg.aggr.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::parse_masim;
    use tierscope_core::Engine;
    use tierscope_nemo::sweep_time;
    use tierscope_sim::config::SimMachine;
    use tierscope_sim::exact::ExactEngine;
    use tierscope_sim::WorkloadParams;

    #[test]
    fn multiplexing_reads_every_page_within_the_sweep_time() {
        // 40 MiB = 20 pages, uniformly read; 2 pipelines x 3 states = 6 pages per 10 ms
        // window: §6.1's sweep time is 20 x 10 ms / 6 = 33.3 ms, so 4 windows (40 ms).
        let spec = parse_masim("a, 40MiB\n\np\n1000\na, 1, 4096, 1, ro\n").unwrap();
        let params = WorkloadParams {
            spec: &spec,
            rate: 10_000_000,
            threads: 1,
            seed: 3,
            block_size: HUGE,
            truth_threshold: 1,
        };
        let mut e = ExactEngine::new(&SimMachine::default(), &params).unwrap();
        let cfg = NemoConfig {
            pipelines: 2,
            states: 3,
            pebs_period: 1,
            ..NemoConfig::default()
        };
        let formula = sweep_time(20 * HUGE, 10.0, 2, 3, HUGE);
        assert!((formula - 100.0 / 3.0).abs() < 1e-9);
        let mut mon = NemoMonitor::new(cfg);
        let mut read_windows = vec![0u32; 20];
        let mut total = 0u64;
        for w in 0..=4 {
            let t = mon.next_wakeup();
            e.advance_to(t);
            let Some(s) = mon.wake(e.as_machine()) else {
                assert_eq!(w, 0);
                continue;
            };
            // Only the pages read this window, each with its count.
            let read = mon.read_now.clone();
            assert_eq!(s.regions.len(), read.len());
            for (r, &i) in s.regions.iter().zip(&read) {
                assert_eq!(r.start, mon.pages[i].va);
                read_windows[i] += 1;
                // 100k accesses over 20 pages per window: ~5,000 each.
                assert!((4_000..6_000).contains(&r.nr_accesses), "{r:?}");
                total += r.nr_accesses as u64;
            }
        }
        // After ceil(33.3 / 10) = 4 windows, every page was read at least once (the
        // last batch wraps to the first pages, which are read twice).
        assert!(read_windows.iter().all(|&n| n >= 1), "{read_windows:?}");
        assert_eq!(read_windows.iter().sum::<u32>(), 24);
        assert!(total > 0);
        // 4 scans of 6 states, and 6 sets + 4 x (6 clears + 6 sets) entries.
        assert_eq!(e.cost().get(&NEMO_STATE_READS), 24);
        assert_eq!(e.cost().get(&NEMO_TRANSLATION_WRITES), 6 + 4 * 12);
    }

    #[test]
    fn bad_configs_name_their_field() {
        let field = |f: &dyn Fn(&mut NemoConfig)| {
            let mut c = NemoConfig::default();
            f(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(field(&|c| c.pipelines = 9), "pipelines");
        assert_eq!(field(&|c| c.entries = 1000), "entries");
        assert_eq!(field(&|c| c.states = 0), "states");
        assert_eq!(field(&|c| c.pebs_period = 0), "pebs_period");
        assert_eq!(field(&|c| c.aggr = Duration(0)), "aggr");
        // SRAM (1,136 KiB on the prototype): one pipeline with a 2^19-entry table
        // (2^19 x 14 bits = 896 KiB) and 8192 states (128 KiB) fits, two do not; 2^20
        // entries (1,792 KiB) never fit.
        let fits = |f: &dyn Fn(&mut NemoConfig)| {
            let mut c = NemoConfig::default();
            f(&mut c);
            c.validate()
        };
        assert!(fits(&|c| c.entries = 1 << 19).is_ok());
        assert_eq!(field(&|c| c.entries = 1 << 20), "entries");
        assert_eq!(
            field(&|c| (c.entries, c.pipelines) = (1 << 19, 2)),
            "entries"
        );
        // Eight prototype pipelines fill it exactly; 8192 + 1 states each overflow it.
        assert!(fits(&|c| c.pipelines = 8).is_ok());
        assert_eq!(field(&|c| (c.pipelines, c.states) = (8, 8193)), "states");
        // MEMTIS-NEMO: 1 hot-set + 7 skewness pipelines of 16 x 512 states fill it too;
        // 17 pages each overflow it, an eighth skewness pipeline passes the 8 in all.
        let memtis = NemoConfig::presets()[1].config.clone();
        assert_eq!(memtis.emits(), FeedKind::HugeAndBaseCounts);
        assert!(memtis.validate().is_ok());
        let field_of = |f: &dyn Fn(&mut NemoConfig)| {
            let mut c = memtis.clone();
            f(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(field_of(&|c| c.skew_pages = 17), "states");
        assert_eq!(field_of(&|c| c.skew_pages = 0), "skew_pages");
        assert_eq!(field_of(&|c| c.skew_pipelines = 8), "skew_pipelines");
    }
}
