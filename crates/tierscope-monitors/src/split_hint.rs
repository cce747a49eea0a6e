//! Split-hint: Telescope-BND with its upper-level ACCESSED bits used as *hints* of where
//! to look, the pages' own bits where a region is sparse, and adaptive intervals. Beyond
//! the paper; docs/techniques/SPLIT_HINT.md says where it wins and where it loses.
//!
//! Three changes to Telescope-BND, each answering one of its known weaknesses:
//! 1. Trial tables. Telescope counts a region accessed whenever the upper-level entry it
//!    probes is, so a region with a few hot pages under every entry reads as hot as a whole
//!    (the kernel reviewers' objection, docs/techniques/SPLIT_HINT.md). At every window end each
//!    region whose hint was set in any sample has one random leaf table (512 leaf
//!    entries) in it cleared, and read at the next two window ends: the share of entries
//!    accessed is the region's page-level density.
//! 2. Page mode. When a trial table is sparse (two windows found the same few entries
//!    accessed, at most `sparse_share` of them), every leaf table of its region is scanned
//!    once per window and reported entry by entry, with the pages' own bits;
//!    `max_page_tables` bounds the cost.
//!    A table leaves page mode when it stays idle for two windows or turns dense
//!    (Telescope's region counts are right again there).
//! 3. Adaptive intervals. When the hints contradict the last window over half of its hot
//!    bytes (at least 64 MiB) in two samples in a row, the window closes at once and the
//!    monitor runs five short windows (10 samples at the fastest interval): five rounds of
//!    splits and merges in the time of one normal window, so it re-converges sooner. Then
//!    windows return to full length, and after every five windows without a change the
//!    sampling interval doubles, up to `max_sample`, so a settled workload costs less.

use crate::region_monitor::{prepare_all, Probe};
use crate::regions::{three_regions, Regions};
use crate::registry::{BuildContext, Preset, Technique};
use crate::shared::{FlushPolicy, RegionAttrs};
use crate::telescope::{TelescopeConfig, TelescopeProbe, Variant};
use serde::{Deserialize, Serialize};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use tierscope_core::machine::{for_each_selected, FLUSH_CEILING_PAGES, TABLE_ENTRIES};
use tierscope_core::rng::Rng;
use tierscope_core::units::{Duration, NS_PER_MS};
use tierscope_core::FeedKind;
use tierscope_core::{
    AddrRange, FieldError, Flush, Intervals, Level, Machine, Monitor, Nanos, RegionReport, Snapshot,
};

/// Split-hint (crate::split_hint): Telescope-BND's regions and hints, trial leaf tables to
/// find sparse regions, page mode under them, and adaptive intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SplitHintConfig {
    /// The fastest sampling interval (after a change, and at the start).
    pub sample: Duration,
    /// The slowest sampling interval a settled workload backs off to.
    pub max_sample: Duration,
    /// Samples per window once settled (40 x 5 ms = Telescope's 200 ms window).
    pub window_samples: u32,
    /// Samples per window right after a change.
    pub fast_window_samples: u32,
    pub ops_update: Duration,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
    /// As Telescope's; page-mode scans always flush what they clear.
    pub flush: FlushPolicy,
    /// A trial table is sparse when two windows found the same entries accessed, at most
    /// this share of its 512; its region then goes to page mode.
    pub sparse_share: f64,
    /// Most leaf tables (of 512 entries) scanned at once, trials and page mode: bounds the
    /// scans' cost.
    pub max_page_tables: u32,
    /// Hints contradicting the last window over this share of its hot bytes (at least
    /// 64 MiB), twice in a row, close the window and start short windows.
    pub change_share: f64,
    /// Adapt the intervals; `false` keeps Telescope's fixed 5 ms / 200 ms.
    pub adaptive: bool,
}

impl Default for SplitHintConfig {
    fn default() -> Self {
        let t = TelescopeConfig::default();
        SplitHintConfig {
            sample: t.sample,
            max_sample: Duration(20 * NS_PER_MS),
            window_samples: 40,
            fast_window_samples: 10,
            ops_update: t.ops_update,
            min_nr_regions: t.min_nr_regions,
            max_nr_regions: t.max_nr_regions,
            flush: t.flush,
            sparse_share: 0.25,
            max_page_tables: 1024,
            change_share: 0.5,
            adaptive: true,
        }
    }
}

impl SplitHintConfig {
    /// The region attributes of a settled window at the fastest interval.
    pub fn attrs(&self) -> RegionAttrs {
        RegionAttrs {
            sample: self.sample.0,
            aggr: self.sample.0.saturating_mul(self.window_samples as u64),
            ops_update: self.ops_update.0,
            min_nr_regions: self.min_nr_regions,
            max_nr_regions: self.max_nr_regions,
        }
    }
}

impl Technique for SplitHintConfig {
    fn presets() -> Vec<Preset<Self>> {
        vec![Preset {
            name: "split-hint",
            help: "Telescope-BND with page-level checks of sparse regions and adaptive \
                   intervals (beyond the paper: docs/techniques/SPLIT_HINT.md)",
            config: SplitHintConfig::default(),
        }]
    }

    /// Its page-mode scans flush what they clear.
    fn emits(&self) -> FeedKind {
        FeedKind::AccessChecks
    }

    fn flushes(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), FieldError> {
        self.attrs().validate().map_err(|mut e| {
            if e.field == "aggr" {
                e.field = "window_samples".into();
            }
            e
        })?;
        if self.max_sample.0 < self.sample.0 {
            return Err(FieldError::new(
                "max_sample",
                format!(
                    "must be at least sample ({} ns < {} ns)",
                    self.max_sample.0, self.sample.0
                ),
            ));
        }
        for (field, v) in [
            ("window_samples", self.window_samples),
            ("fast_window_samples", self.fast_window_samples),
        ] {
            if v == 0 {
                return Err(FieldError::new(field, "must be at least 1"));
            }
        }
        if self.fast_window_samples > self.window_samples {
            return Err(FieldError::new(
                "fast_window_samples",
                format!(
                    "must be at most window_samples ({} > {})",
                    self.fast_window_samples, self.window_samples
                ),
            ));
        }
        if !(0.0..1.0).contains(&self.sparse_share) {
            return Err(FieldError::new(
                "sparse_share",
                format!("must be in [0, 1), got {}", self.sparse_share),
            ));
        }
        if !(self.change_share > 0.0 && self.change_share.is_finite()) {
            return Err(FieldError::new(
                "change_share",
                format!("must be positive, got {}", self.change_share),
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor> {
        Box::new(SplitHintMonitor::new(self.clone(), ctx.rng))
    }
}

/// Windows without any accessed entry after which a table leaves page mode.
const QUIET_WINDOWS: u8 = 2;
/// Share of a page-mode table's entries accessed in a window above which it is dense.
const DENSE_SHARE: f64 = 0.5;
/// Share of its samples a region's hint must be set in to count as hot for the change
/// detector.
const HINTED_SHARE: f64 = 0.5;
/// Share of the entries two scans of a sparse trial table found that both found.
const STABLE_SHARE: f64 = 0.8;
/// Windows without a detected change before the sampling interval backs off a step:
/// time for splits and merges to refine the edges of a new hot set.
const SETTLE_WINDOWS: u32 = 5;
/// Hot bytes below which the change detector compares against this instead.
const CHANGE_FLOOR: u64 = 64 << 20;
/// Consecutive contradicting samples that close a window early.
const CHANGE_SAMPLES: u32 = 2;

/// Why a leaf table is being scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Sampled to measure its region's page-level density.
    Trial,
    /// Under a sparse region: reported entry by entry.
    Page,
}

/// One leaf table being scanned every window.
#[derive(Debug, Clone)]
struct Table {
    mode: Mode,
    leaf: Level,
    /// An address of the region the table was added for.
    origin: u64,
    /// Entries found accessed by the last scan, and by the one before.
    accessed: [u64; 8],
    previous: [u64; 8],
    /// Window-end scans since the table was added.
    scans: u8,
    /// Consecutive scans that found nothing accessed.
    quiet: u8,
    /// Added since the last window's scan: `accessed` holds the bits found when it was
    /// first cleared, which say nothing about any window.
    fresh: bool,
}

impl Table {
    fn new(mode: Mode, leaf: Level, origin: u64) -> Self {
        Table {
            mode,
            leaf,
            origin,
            accessed: [0; 8],
            previous: [0; 8],
            scans: 0,
            quiet: 0,
            fresh: true,
        }
    }

    fn share_accessed(&self) -> f64 {
        let set: u32 = self.accessed.iter().map(|w| w.count_ones()).sum();
        set as f64 / TABLE_ENTRIES as f64
    }
}

pub struct SplitHintMonitor {
    cfg: SplitHintConfig,
    attrs: RegionAttrs,
    hint: TelescopeProbe,
    rng: Rng,
    regions: Option<Regions>,
    /// Leaf tables scanned every window, by the address their span starts at.
    tables: BTreeMap<u64, Table>,
    /// The current sampling interval.
    sample: Nanos,
    /// Samples the current window lasts.
    window_samples: u32,
    samples_in_window: u32,
    /// Samples of the previous window (its counts are in `last_nr_accesses`).
    last_window_samples: u32,
    window_start: Nanos,
    next_wakeup: Nanos,
    next_ops_update: Nanos,
    prepared: bool,
    /// Consecutive samples whose hints contradicted the last window.
    contradicting: u32,
    /// Windows at full length since the last change or back-off step.
    settled_windows: u32,
    /// Scratch: entries the last table scan cleared.
    cleared: Vec<u64>,
}

impl SplitHintMonitor {
    pub fn new(cfg: SplitHintConfig, rng: Rng) -> Self {
        let attrs = cfg.attrs();
        // The probe reads only the entry-picking and flush fields; the intervals and
        // region limits are this monitor's.
        let hint = TelescopeProbe::new(TelescopeConfig {
            variant: Variant::Bounded,
            flush: cfg.flush,
            ..TelescopeConfig::default()
        });
        SplitHintMonitor {
            sample: cfg.sample.0,
            window_samples: cfg.window_samples,
            last_window_samples: cfg.window_samples,
            next_ops_update: cfg.ops_update.0,
            cfg,
            attrs,
            hint,
            rng,
            regions: None,
            tables: BTreeMap::new(),
            samples_in_window: 0,
            window_start: 0,
            next_wakeup: 0,
            prepared: false,
            contradicting: 0,
            settled_windows: 0,
            cleared: vec![],
        }
    }

    fn ranges(m: &dyn Machine) -> Vec<AddrRange> {
        match three_regions(m.mappings()) {
            Some(r) => r.to_vec(),
            None => m.mappings().iter().map(|x| x.range).collect(),
        }
    }

    /// Checks every region's hint; returns whether the hints contradict the last window
    /// over at least `change_share` of its hot bytes.
    fn check_all(&mut self, m: &mut dyn Machine) -> bool {
        let regions = self.regions.as_mut().expect("prepared");
        let half = self.last_window_samples as f64 * HINTED_SHARE;
        let (mut hot_bytes, mut contradicted) = (0u64, 0u64);
        self.hint.warm(&regions.list, m);
        for (i, r) in regions.list.iter_mut().enumerate() {
            m.cost_mut().region_visits += 1;
            let hint = self.hint.check(i, r, m);
            r.nr_accesses += hint as u32;
            let was_hot = r.last_nr_accesses as f64 >= half;
            if was_hot {
                hot_bytes += r.size();
            }
            // Only regions that kept their count for a window (age >= 1) vote: fresh
            // pieces at the edge of a hot set flicker without anything having moved.
            let settled = r.age >= 1;
            if settled && ((was_hot && !hint) || (r.last_nr_accesses == 0 && hint)) {
                contradicted += r.size();
            }
        }
        // A hot set of a few MiB flickers at its edges by a share of its size: changes
        // smaller than the floor never close a window.
        let floor = CHANGE_FLOOR;
        contradicted as f64 >= self.cfg.change_share * hot_bytes.max(floor) as f64
    }

    /// Adds the leaf tables inside `[start, end)` in `mode`, within the budget.
    fn add_tables(&mut self, m: &mut dyn Machine, start: u64, end: u64, mode: Mode, origin: u64) {
        let mut pos = start;
        while pos < end && self.tables.len() < self.cfg.max_page_tables as usize {
            let Some(leaf) = m.leaf_level(pos) else {
                break;
            };
            let span = leaf.span() * TABLE_ENTRIES;
            let table = pos & !(span - 1);
            // A trial measures its region alone; page mode also takes the tables the
            // region only overlaps (a dense neighbour makes them leave again).
            if mode == Mode::Page || (table >= start && table + span <= end) {
                match self.tables.entry(table) {
                    Entry::Occupied(mut e) => e.get_mut().mode = mode,
                    Entry::Vacant(e) => {
                        // Clear it now, so its first scan reads exactly one window.
                        let mut t = Table::new(mode, leaf, origin);
                        scan_table(m, table, leaf, &mut t.accessed, &mut self.cleared);
                        e.insert(t);
                    }
                }
            }
            pos = table + span;
        }
    }

    /// Turns the regions of sparse trial tables to page mode, drops the other trials, and
    /// starts one trial in every region with a hint set that has no scanned table yet.
    fn place_tables(&mut self, m: &mut dyn Machine) {
        // A trial decides after two windows: sparse when both found the same few entries
        // accessed. Few entries alone are not enough: a dense region whose pages are each
        // touched now and then (a large hot set, or a short window) also shows few, but
        // different ones every window. An idle table says nothing either: the region may
        // be a dense hot part next to a cold one, which splitting resolves.
        let share = self.cfg.sparse_share;
        let sparse: Vec<u64> = self
            .tables
            .values()
            .filter(|t| t.mode == Mode::Trial && t.scans >= 2)
            .filter(|t| {
                let (a, b) = (&t.accessed, &t.previous);
                let both: u32 = a.iter().zip(b).map(|(x, y)| (x & y).count_ones()).sum();
                let either: u32 = a.iter().zip(b).map(|(x, y)| (x | y).count_ones()).sum();
                either > 0
                    && either as f64 <= share * TABLE_ENTRIES as f64
                    && both as f64 >= STABLE_SHARE * either as f64
            })
            .map(|t| t.origin)
            .collect();
        let regions = self.regions.take().expect("prepared");
        for a in sparse {
            let i = regions.list.partition_point(|r| r.end <= a);
            if let Some(r) = regions.list.get(i) {
                // The trial table overlaps the region, so it turns to page mode too, with
                // this window's scan.
                self.add_tables(m, r.start, r.end, Mode::Page, r.start);
            }
        }
        self.tables
            .retain(|_, t| t.mode != Mode::Trial || t.scans < 2);
        for r in &regions.list {
            // Every region about to be reported hot is checked, small ones too: their
            // leaf-level hints are DAMON's coin flips.
            if r.nr_accesses == 0 || self.tables.len() >= self.cfg.max_page_tables as usize {
                continue;
            }
            let Some(leaf) = m.leaf_level(r.start) else {
                continue;
            };
            let span = leaf.span() * TABLE_ENTRIES;
            let (first, last) = (r.start / span, (r.end - 1) / span + 1);
            m.cost_mut().random_draws += 1;
            let table = self.rng.range(first, last) * span;
            if !self.tables.contains_key(&table) {
                self.add_tables(m, table, table + span, Mode::Trial, r.start);
            }
        }
        self.regions = Some(regions);
        let mut cleared = std::mem::take(&mut self.cleared);
        flush_cleared(m, &mut cleared);
        self.cleared = cleared;
    }

    /// Scans every table (the accessed entries of the window, cleared again); drops
    /// page-mode tables that went quiet or dense.
    fn scan_tables(&mut self, m: &mut dyn Machine) {
        let mut cleared = std::mem::take(&mut self.cleared);
        for (&start, t) in self.tables.iter_mut() {
            t.previous = t.accessed;
            let set = scan_table(m, start, t.leaf, &mut t.accessed, &mut cleared);
            t.fresh = false;
            t.scans = t.scans.saturating_add(1);
            t.quiet = if set == 0 { t.quiet + 1 } else { 0 };
        }
        flush_cleared(m, &mut cleared);
        self.cleared = cleared;
        self.tables.retain(|_, t| {
            t.mode == Mode::Trial || (t.quiet < QUIET_WINDOWS && t.share_accessed() <= DENSE_SHARE)
        });
    }

    /// The page-mode tables scanned this window, entry by entry.
    fn page_runs(&self, window_samples: u32) -> Vec<RegionReport> {
        let mut out = vec![];
        for (&start, t) in &self.tables {
            if t.mode == Mode::Page && !t.fresh {
                push_runs(&mut out, start, t.leaf.span(), &t.accessed, window_samples);
            }
        }
        out
    }

    /// Ends the window: page scan, sparse detection, DAMON's merge, the report, the
    /// interval adaptation, reset and split.
    fn end_window(&mut self, m: &mut dyn Machine, now: Nanos, changed: bool) -> Snapshot {
        let samples = self.samples_in_window;
        self.scan_tables(m);
        self.place_tables(m);
        let pages = self.page_runs(samples);
        let regions = self.regions.as_mut().expect("prepared");
        let threshold = regions.max_nr_accesses() / 10;
        let limit = regions.sz_limit();
        regions.merge(threshold, limit, m.cost_mut());
        let report = overlay(&regions.report(), &pages);
        regions.reset_aggregated();
        regions.split(&mut self.rng, m.cost_mut());
        self.hint.regions_changed(&regions.list);
        self.adapt(changed);
        self.last_window_samples = samples;
        self.samples_in_window = 0;
        self.contradicting = 0;
        let snapshot = Snapshot {
            start: self.window_start,
            end: now,
            regions: report,
        };
        self.window_start = now;
        snapshot
    }

    /// After a contradiction: fastest interval, short windows. Without one: full-length
    /// windows again, and every [`SETTLE_WINDOWS`] windows a doubled sampling interval.
    fn adapt(&mut self, changed: bool) {
        if !self.cfg.adaptive {
            return;
        }
        if changed {
            self.sample = self.cfg.sample.0;
            self.window_samples = self.cfg.fast_window_samples;
            self.settled_windows = 0;
            return;
        }
        self.settled_windows += 1;
        if self.settled_windows < SETTLE_WINDOWS {
            return;
        }
        self.settled_windows = 0;
        if self.window_samples < self.cfg.window_samples {
            self.window_samples = self.cfg.window_samples;
        } else {
            self.sample = (self.sample * 2).min(self.cfg.max_sample.0);
        }
    }
}

impl Monitor for SplitHintMonitor {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        if self.regions.is_none() {
            self.regions = Some(Regions::new(&Self::ranges(m), self.attrs));
        }
        let mut snapshot = None;
        if self.prepared {
            let contradicts = self.check_all(m);
            self.samples_in_window += 1;
            self.contradicting = if contradicts {
                self.contradicting + 1
            } else {
                0
            };
            let changed = self.cfg.adaptive && self.contradicting >= CHANGE_SAMPLES;
            if self.samples_in_window >= self.window_samples || changed {
                snapshot = Some(self.end_window(m, now, changed));
            }
            if now >= self.next_ops_update {
                let regions = self.regions.as_mut().expect("created above");
                regions.set_ranges(&Self::ranges(m));
                self.next_ops_update += self.cfg.ops_update.0;
                self.hint.regions_changed(&regions.list);
            }
        }
        let regions = self.regions.as_mut().expect("created above");
        prepare_all(&mut self.hint, &mut regions.list, m, &mut self.rng);
        self.prepared = true;
        self.next_wakeup = now + self.sample;
        snapshot
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.sample.0,
            aggr: self.cfg.sample.0 * self.cfg.window_samples as u64,
            ops_update: self.cfg.ops_update.0,
        }
    }
}

/// Reads the 512 entries of the leaf table at `start`, clearing the accessed ones (read
/// first, clear only what is set, as ptep_test_and_clear_young does); records them in
/// `accessed` and their addresses in `cleared`. Returns how many were set.
fn scan_table(
    m: &mut dyn Machine,
    start: u64,
    leaf: Level,
    accessed: &mut [u64; 8],
    cleared: &mut Vec<u64>,
) -> u32 {
    let set = m.scan_table_accessed(leaf, start, accessed);
    for_each_selected(accessed, |k| cleared.push(start + k * leaf.span()));
    set
}

/// Cleared bits of cached translations would stay clear: flushes what was cleared, page
/// by page up to the kernel's ceiling, else everything; empties `cleared`.
fn flush_cleared(m: &mut dyn Machine, cleared: &mut Vec<u64>) {
    if cleared.len() as u64 > FLUSH_CEILING_PAGES {
        m.flush(Flush::All);
    } else {
        for &va in cleared.iter() {
            m.flush(Flush::Page(va));
        }
    }
    cleared.clear();
}

/// Runs of equally accessed entries of one table as regions: accessed entries with the
/// window's sample count, the others with 0.
fn push_runs(out: &mut Vec<RegionReport>, start: u64, step: u64, bits: &[u64; 8], n: u32) {
    for k in 0..TABLE_ENTRIES {
        let set = bits[(k / 64) as usize] >> (k % 64) & 1 == 1;
        let nr_accesses = if set { n } else { 0 };
        let (s, e) = (start + k * step, start + (k + 1) * step);
        match out.last_mut() {
            Some(r) if r.end == s && r.nr_accesses == nr_accesses => r.end = e,
            _ => out.push(RegionReport {
                start: s,
                end: e,
                nr_accesses,
                age: 0,
            }),
        }
    }
}

/// The regions with the page-mode entries laid over them: where a page run overlaps a
/// region, the run's count replaces the region's. Both inputs are sorted and disjoint.
fn overlay(regions: &[RegionReport], pages: &[RegionReport]) -> Vec<RegionReport> {
    if pages.is_empty() {
        return regions.to_vec();
    }
    let mut out = Vec::with_capacity(regions.len() + pages.len());
    let mut j = 0;
    for r in regions {
        let mut pos = r.start;
        while j < pages.len() && pages[j].end <= pos {
            j += 1;
        }
        while j < pages.len() && pages[j].start < r.end {
            let p = pages[j];
            if p.start > pos {
                out.push(RegionReport {
                    start: pos,
                    end: p.start,
                    ..*r
                });
            }
            let (s, e) = (p.start.max(pos), p.end.min(r.end));
            if s < e {
                out.push(RegionReport {
                    start: s,
                    end: e,
                    ..p
                });
            }
            pos = pos.max(e);
            if p.end > r.end {
                break;
            }
            j += 1;
        }
        if pos < r.end {
            out.push(RegionReport {
                start: pos,
                end: r.end,
                ..*r
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region_monitor::RegionMonitor;
    use tierscope_core::testing::FakeMachine;
    use tierscope_core::PageSize;

    const MIB: u64 = 1 << 20;
    const BASE: u64 = 1 << 40;

    /// Address intervals of the regions with any access.
    fn hot_intervals(report: &[RegionReport]) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = vec![];
        for r in report.iter().filter(|r| r.nr_accesses > 0) {
            match out.last_mut() {
                Some(last) if last.1 == r.start => last.1 = r.end,
                _ => out.push((r.start, r.end)),
            }
        }
        out
    }

    fn total(a: &[(u64, u64)]) -> u64 {
        a.iter().map(|(s, e)| e - s).sum()
    }

    fn intersection(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
        let (mut i, mut j, mut sum) = (0, 0, 0);
        while i < a.len() && j < b.len() {
            let (lo, hi) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
            sum += hi.saturating_sub(lo);
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        sum
    }

    /// A 4 KiB heap at `BASE` whose `hot` pages are accessed before every wake.
    struct Hot {
        m: FakeMachine,
        hot: Vec<u64>,
    }

    impl Hot {
        fn new(size: u64, hot: Vec<u64>) -> Self {
            let m = FakeMachine::new(&[(BASE, BASE + size, PageSize::Base4K)]);
            Hot { m, hot }
        }
    }

    /// Runs `monitor` until `until`; returns its snapshots.
    fn run(monitor: &mut dyn Monitor, h: &mut Hot, until: Nanos) -> Vec<Snapshot> {
        let mut out = vec![];
        while monitor.next_wakeup() <= until {
            h.m.now = monitor.next_wakeup();
            h.m.touch(&h.hot);
            out.extend(monitor.wake(&mut h.m));
        }
        out
    }

    /// One hot page in every 100 of a 32 MiB stretch of a 256 MiB heap.
    fn sparse() -> Hot {
        let hot = (0..32 * MIB / 4096)
            .step_by(100)
            .map(|p| BASE + 64 * MIB + p * 4096)
            .collect();
        Hot::new(256 * MIB, hot)
    }

    #[test]
    fn sparse_pages_are_reported_page_by_page_where_telescope_reports_all() {
        let (sec, cfg) = (1_000_000_000, SplitHintConfig::default());
        let mut m = sparse();
        let mut sh = SplitHintMonitor::new(cfg.clone(), Rng::new(3));
        let truth: Vec<(u64, u64)> = m.hot.iter().map(|&va| (va, va + 4096)).collect();
        // Over the windows of the last 5 s: edge regions flicker from window to window.
        let late = |snaps: Vec<Snapshot>| -> Vec<Vec<(u64, u64)>> {
            snaps
                .iter()
                .filter(|s| s.start >= 5 * sec)
                .map(|s| hot_intervals(&s.regions))
                .collect()
        };
        // Precision and recall pooled over the windows.
        let score = |windows: &[Vec<(u64, u64)>]| {
            let found: u64 = windows.iter().map(|r| intersection(r, &truth)).sum();
            let reported: u64 = windows.iter().map(|r| total(r)).sum();
            let hot = windows.len() as u64 * total(&truth);
            (found as f64 / reported as f64, found as f64 / hot as f64)
        };
        let (precision, recall) = score(&late(run(&mut sh, &mut m, 10 * sec)));

        let mut m = sparse();
        let tele = TelescopeConfig::default();
        let mut bnd = RegionMonitor::new(tele.attrs(), TelescopeProbe::new(tele), Rng::new(3));
        let (telescope, _) = score(&late(run(&mut bnd, &mut m, 10 * sec)));
        // Hot pages left in regions too small for a trial table are DAMON's problem again.
        assert!(recall >= 0.8, "{recall}");
        assert!(precision >= 5.0 * telescope, "{precision} vs {telescope}");
    }

    #[test]
    fn dense_hot_sets_stay_in_region_mode() {
        let hot = (0..16 * MIB / 4096)
            .map(|p| BASE + 64 * MIB + p * 4096)
            .collect();
        let mut m = Hot::new(256 * MIB, hot);
        let mut sh = SplitHintMonitor::new(SplitHintConfig::default(), Rng::new(5));
        let snaps = run(&mut sh, &mut m, 10_000_000_000);
        let last = snaps.last().unwrap();
        let (truth, reported) = (
            [(BASE + 64 * MIB, BASE + 80 * MIB)],
            hot_intervals(&last.regions),
        );
        assert_eq!(intersection(&reported, &truth), 16 * MIB, "{reported:?}");
        assert!(total(&reported) <= 18 * MIB, "{reported:?}");
        // Page mode at most at the set's two edges (where a table is partly hot).
        let paged = sh.tables.values().filter(|t| t.mode == Mode::Page).count();
        assert!(paged <= 2, "{paged}");
        assert!(last.regions.len() < 50, "{}", last.regions.len());
    }

    #[test]
    fn intervals_back_off_when_settled_and_snap_back_on_a_change() {
        let cfg = SplitHintConfig::default();
        let hot = |at: u64| (0..4096).map(|p| BASE + at + p * 4096).collect();
        let mut m = Hot::new(256 * MIB, hot(32 * MIB));
        let mut sh = SplitHintMonitor::new(cfg.clone(), Rng::new(7));
        run(&mut sh, &mut m, 10_000_000_000);
        assert_eq!(sh.sample, cfg.max_sample.0);
        // The hot set moves: the next window closes within a few samples, at the fastest
        // interval, and short windows follow.
        m.hot = hot(160 * MIB);
        let moved_at = m.m.now;
        let mut first = None;
        while first.is_none() {
            m.m.now = sh.next_wakeup();
            m.m.touch(&m.hot);
            first = sh.wake(&mut m.m);
        }
        let first = first.unwrap();
        assert!(first.end - moved_at <= 3 * cfg.max_sample.0, "{first:?}");
        assert_eq!(sh.sample, cfg.sample.0);
        assert_eq!(sh.window_samples, cfg.fast_window_samples);
        let snaps = run(&mut sh, &mut m, moved_at + 1_000_000_000);
        let reported = hot_intervals(&snaps.last().unwrap().regions);
        let truth = [(BASE + 160 * MIB, BASE + 176 * MIB)];
        assert_eq!(intersection(&reported, &truth), 16 * MIB, "{reported:?}");
        assert!(total(&reported) <= 32 * MIB, "{reported:?}");
    }

    #[test]
    fn overlay_replaces_region_counts_where_pages_are_known() {
        let r = |start, end, nr| RegionReport {
            start,
            end,
            nr_accesses: nr,
            age: 0,
        };
        let regions = [r(0, 100, 5), r(100, 300, 0), r(300, 400, 7)];
        let pages = [r(50, 60, 1), r(60, 150, 0), r(350, 400, 2)];
        assert_eq!(
            overlay(&regions, &pages),
            vec![
                r(0, 50, 5),
                r(50, 60, 1),
                r(60, 100, 0),
                r(100, 150, 0),
                r(150, 300, 0),
                r(300, 350, 7),
                r(350, 400, 2),
            ]
        );
    }
}
