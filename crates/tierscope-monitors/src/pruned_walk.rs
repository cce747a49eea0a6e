//! Pruned walk: once per window, read the page tables from the root down, entering only
//! the entries whose ACCESSED bit is set, and clear what was read; one full flush then
//! makes the next window's first access to every page walk from the root again. Beyond the
//! paper; docs/techniques/PRUNED_WALK.md says where it wins and where it loses.
//!
//! Why it is exact at its depth: after a full flush no translation is cached, so the first
//! access to a page in the window walks from the root and sets the ACCESSED bit of every
//! entry on its path. An entry found clear therefore had no access under it, and its
//! subtree need not be read: the walk costs what the accessed footprint costs, not what
//! the heap does (Linux's MGLRU skips non-young PMDs for the same reason). DAMON and
//! Telescope sample one address or entry per region instead, so what they find depends on
//! where their random regions fall (docs/results/ROBUSTNESS.md).
//!
//! Two additions make it a DAMON-shaped monitor:
//! - Frequency probes. Between walks, every sampling interval, one random entry at the
//!   walk's depth among each run of entries the last walk found accessed is tested and
//!   cleared, as DAMON samples a region; the runs' counts become the reported
//!   `nr_accesses`. What the probes find accessed is added to the window's walk (a probe
//!   clears bits the walk would otherwise read).
//! - Start-up. The workload set every bit when it initialised its memory, so the children
//!   of an entry say nothing until they have been cleared once. The first walk that finds
//!   such an entry accessed clears its children and reports the entry's whole span (as
//!   Telescope would); from the next window on its children are read.

use crate::regions::three_regions;
use crate::registry::{BuildContext, Preset, Technique};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use tierscope_core::machine::FLUSH_CEILING_PAGES;
use tierscope_core::rng::Rng;
use tierscope_core::units::{Duration, NS_PER_MS};
use tierscope_core::FeedKind;
use tierscope_core::{
    AddrRange, FieldError, Flush, Intervals, Level, Machine, Monitor, Nanos, RegionReport, Snapshot,
};

/// Pruned walk (crate::pruned_walk): the page tables read top-down once per window where
/// the ACCESSED bits lead, with per-sample probes for access frequency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrunedWalkConfig {
    /// Interval between frequency probes.
    pub sample: Duration,
    /// The window: one walk, one snapshot.
    pub aggr: Duration,
    /// The lowest level the walk reads (`pmd`: 2 MiB blocks; `pte`: 4 KiB pages; `pud`:
    /// 1 GiB). Huge pages are read at their leaf.
    pub depth: Level,
    /// Most runs probed per sampling interval (runs beyond it are grouped with their
    /// nearest neighbours); 0 turns probing off, and accessed blocks report 1.
    pub max_probes: u32,
    /// Windows an entry one level above `depth` is read alone after a walk found at least
    /// [`DENSE_SHARE`] of its children accessed: set, it is reported whole (idle children
    /// included). Its children are read again after that. 0 (the default) never skips, and
    /// every window stays exact.
    pub dense_windows: u32,
}

impl Default for PrunedWalkConfig {
    fn default() -> Self {
        PrunedWalkConfig {
            sample: Duration(5 * NS_PER_MS),
            aggr: Duration(200 * NS_PER_MS),
            depth: Level::Pmd,
            max_probes: 100,
            dense_windows: 0,
        }
    }
}

impl Technique for PrunedWalkConfig {
    fn presets() -> Vec<Preset<Self>> {
        vec![Preset {
            name: "pruned-walk",
            help: "the page tables read top-down each window where ACCESSED bits lead, exact \
                   at 2 MiB, with per-sample probes for frequency (beyond the paper: \
                   docs/techniques/PRUNED_WALK.md)",
            config: PrunedWalkConfig::default(),
        }]
    }

    fn emits(&self) -> FeedKind {
        FeedKind::AccessChecks
    }

    fn flushes(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.sample.0 == 0 {
            return Err(FieldError::new("sample", "must be positive"));
        }
        if self.aggr.0 < self.sample.0 {
            return Err(FieldError::new(
                "aggr",
                format!(
                    "must be at least the sampling interval ({} ns < {} ns)",
                    self.aggr.0, self.sample.0
                ),
            ));
        }
        if self.depth > Level::Pud {
            return Err(FieldError::new(
                "depth",
                format!("must be pte, pmd or pud (got {})", self.depth),
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor> {
        Box::new(PrunedWalkMonitor::new(self.clone(), ctx.rng))
    }
}

/// Share of an entry's children accessed in a window above which `dense_windows` lets the
/// walk skip them.
pub const DENSE_SHARE: f64 = 0.95;

/// A group of accessed runs probed as one: `spans[first..end]` of the last walk.
#[derive(Debug, Clone, Copy)]
struct Unit {
    first: usize,
    end: usize,
    /// Samples of this window whose probe found its entry accessed.
    count: u32,
}

pub struct PrunedWalkMonitor {
    cfg: PrunedWalkConfig,
    rng: Rng,
    started: bool,
    next_wakeup: Nanos,
    window_start: Nanos,
    samples_in_window: u32,
    /// Windows reported so far (ages count them).
    windows: u32,
    /// Non-leaf entries whose children have been cleared at least once (`base | level`):
    /// their children's bits mean something.
    clean: HashSet<u64>,
    /// Dense entries read alone (`base | level`), until the window numbered here.
    skipping: HashMap<u64, u32>,
    /// The last window's accessed spans (sorted, disjoint, at least the depth's span
    /// each), the blocks before each in `cum` (one more entry), and the probe units.
    spans: Vec<(u64, u64)>,
    cum: Vec<u64>,
    units: Vec<Unit>,
    /// The probes prepared at the last wake: unit index, the entry's level and address.
    probes: Vec<(usize, Level, u64)>,
    /// Depth-level blocks the probes found accessed this window.
    seen: Vec<u64>,
    /// Accessed blocks with the window their current streak of accessed windows began
    /// (sorted); blocks once accessed, now idle, with the window they went idle.
    hot_since: Vec<(u64, u32)>,
    idle_since: BTreeMap<u64, u32>,
    /// The walk cleared set bits since the last flush: everything must be flushed.
    flush_all: bool,
    /// Since the last flush, the probes cleared these set leaf entries (cached in the
    /// TLBs), and set non-leaf entries under this address (cached in the paging-structure
    /// caches, which any INVLPG empties).
    cleared_leaves: Vec<(u64, u64)>,
    cleared_upper: Option<u64>,
    /// Scratch: the children of one table found accessed, per level.
    scratch: Vec<Vec<u64>>,
}

impl PrunedWalkMonitor {
    pub fn new(cfg: PrunedWalkConfig, rng: Rng) -> Self {
        PrunedWalkMonitor {
            cfg,
            rng,
            started: false,
            next_wakeup: 0,
            window_start: 0,
            samples_in_window: 0,
            windows: 0,
            clean: HashSet::new(),
            skipping: HashMap::new(),
            spans: vec![],
            cum: vec![0],
            units: vec![],
            probes: vec![],
            seen: vec![],
            hot_since: vec![],
            idle_since: BTreeMap::new(),
            flush_all: false,
            cleared_leaves: vec![],
            cleared_upper: None,
            scratch: vec![vec![]; Level::ALL.len()],
        }
    }

    fn block_span(&self) -> u64 {
        self.cfg.depth.span()
    }

    fn samples_per_window(&self) -> u32 {
        if self.cfg.max_probes == 0 {
            1
        } else {
            (self.cfg.aggr.0 / self.cfg.sample.0).max(1) as u32
        }
    }

    /// The ranges monitored, as DAMON's (everything mapped minus the two largest gaps).
    fn ranges(m: &dyn Machine) -> Vec<AddrRange> {
        match three_regions(m.mappings()) {
            Some(r) => r.to_vec(),
            None => m.mappings().iter().map(|x| x.range).collect(),
        }
    }

    /// Reads the entry at `level` covering `va` and clears it when set (read first, as
    /// the kernel's test-and-clear-young does). The software walk from the root is
    /// charged only when `descend`: the first entry of a table (walk_page_range).
    fn read_clear(
        &mut self,
        m: &mut dyn Machine,
        level: Level,
        va: u64,
        descend: bool,
    ) -> Option<bool> {
        let before = m.cost().walk_steps;
        let set = m.accessed(level, va)?;
        let after = m.cost().walk_steps;
        if set {
            m.test_and_clear_accessed(level, va);
            self.flush_all = true;
        }
        m.cost_mut().walk_steps = if descend { after } else { before };
        Some(set)
    }

    /// The walk: every root entry over the monitored ranges, and below every accessed
    /// one. Appends the accessed spans (clipped to the ranges) to `out` in address order.
    fn walk(&mut self, m: &mut dyn Machine, ranges: &[AddrRange], out: &mut Vec<(u64, u64)>) {
        let root = m.paging().root();
        let mut set = std::mem::take(&mut self.scratch[root.index()]);
        set.clear();
        self.read_table(m, root, None, ranges, &mut set);
        for &va in &set {
            self.enter(m, root, va, ranges, out);
        }
        self.scratch[root.index()] = set;
    }

    /// Reads the entries at `level` over `ranges` (within `parent`'s span when given) and
    /// collects an address inside each accessed one in `set`; returns how many it read.
    fn read_table(
        &mut self,
        m: &mut dyn Machine,
        level: Level,
        parent: Option<(u64, u64)>,
        ranges: &[AddrRange],
        set: &mut Vec<u64>,
    ) -> usize {
        let span = level.span();
        let mut last = None;
        let mut first = true;
        let mut read = 0;
        for r in ranges {
            let (lo, hi) = match parent {
                Some((s, e)) => (r.start.max(s), r.end.min(e)),
                None => (r.start, r.end),
            };
            let mut entry = level.align_down(lo);
            while entry < hi {
                if last != Some(entry) {
                    last = Some(entry);
                    // An address inside the range: the entry's own start may be unmapped.
                    let va = entry.max(lo);
                    if let Some(accessed) = self.read_clear(m, level, va, first) {
                        if accessed {
                            set.push(va);
                        }
                        read += 1;
                        first = false;
                    }
                }
                entry += span;
            }
        }
        read
    }

    /// The accessed entry at `level` holding `va`: report it (at the walk's depth or a
    /// huge leaf), or read its children and enter the accessed ones; children never
    /// cleared yet are cleared and the entry's span reported whole.
    fn enter(
        &mut self,
        m: &mut dyn Machine,
        level: Level,
        va: u64,
        ranges: &[AddrRange],
        out: &mut Vec<(u64, u64)>,
    ) {
        let base = level.align_down(va);
        let span = (base, base + level.span());
        let leaf = m.leaf_level(va).unwrap_or(Level::Pte);
        let child = match level.down() {
            Some(c) if level > self.cfg.depth && level > leaf => c,
            _ => return push_clipped(out, span, ranges),
        };
        let key = base | level.index() as u64;
        if let Some(&until) = self.skipping.get(&key) {
            // Dense when last read: the entry alone stands for its span.
            if self.windows + 1 < until {
                return push_clipped(out, span, ranges);
            }
            // Its children kept the bits of the skipped windows: read them again only
            // after one clearing.
            self.skipping.remove(&key);
            self.clean.remove(&key);
        }
        let mut set = std::mem::take(&mut self.scratch[child.index()]);
        set.clear();
        let read = self.read_table(m, child, Some(span), ranges, &mut set);
        if self.clean.insert(key) {
            push_clipped(out, span, ranges);
        } else {
            let dense = set.len() as f64 >= DENSE_SHARE * read as f64;
            if self.cfg.dense_windows > 0 && child == self.cfg.depth && dense {
                // This walk closes window `windows + 1`; the next `dense_windows` skip.
                let until = self.windows + 2 + self.cfg.dense_windows;
                self.skipping.insert(key, until);
            }
            for &c in &set {
                self.enter(m, child, c, ranges, out);
            }
        }
        self.scratch[child.index()] = set;
    }

    /// Whether the block at `va` lies under an entry the walk skips: its bits may be
    /// older than the window, so probes do not report it.
    fn skipped(&self, va: u64) -> bool {
        let Some(up) = self.cfg.depth.up() else {
            return false;
        };
        !self.skipping.is_empty()
            && self
                .skipping
                .contains_key(&(up.align_down(va) | up.index() as u64))
    }

    /// Checks the probes prepared at the last wake.
    fn check_probes(&mut self, m: &mut dyn Machine) {
        for i in 0..self.probes.len() {
            let (u, level, va) = self.probes[i];
            m.cost_mut().region_visits += 1;
            if m.accessed(level, va) == Some(true) {
                self.units[u].count += 1;
                if !self.skipped(va) {
                    self.seen.push(va);
                }
            }
        }
    }

    /// One probe per unit: a random block among its accessed spans, cleared.
    fn prepare_probes(&mut self, m: &mut dyn Machine) {
        self.probes.clear();
        let shift = self.cfg.depth.span_shift();
        for u in 0..self.units.len() {
            let Unit { first, end, .. } = self.units[u];
            m.cost_mut().region_visits += 1;
            m.cost_mut().random_draws += 1;
            let k = self.rng.range(self.cum[first], self.cum[end]);
            let s = self.cum.partition_point(|&c| c <= k) - 1;
            // An address inside the span (its first block may be clipped to a range).
            let va = self.spans[s]
                .0
                .max(self.cfg.depth.align_down(self.spans[s].0) + ((k - self.cum[s]) << shift));
            let leaf = m.leaf_level(va);
            let level = leaf.map_or(self.cfg.depth, |l| l.max(self.cfg.depth));
            if m.test_and_clear_accessed(level, va) == Some(true) {
                // Set since its last clear, which was in this window (the walk clears
                // every set bit under a set parent): accessed in this window.
                if !self.skipped(va) {
                    self.seen.push(va);
                }
                if leaf == Some(level) {
                    let start = level.align_down(va);
                    self.cleared_leaves.push((start, start + level.span()));
                } else {
                    self.cleared_upper = Some(va);
                }
            }
            self.probes.push((u, level, va));
        }
    }

    /// Flushes what was cleared since the last flush. After a walk, everything: the next
    /// window's first access to every page must walk from the root. After probes only,
    /// the cleared leaves page by page up to the kernel's ceiling (else everything), and
    /// for cleared non-leaf entries one INVLPG, which also empties every paging-structure
    /// cache (Intel SDM vol. 3, 4.10.4.1): their bits are set again by the next walk
    /// through them, and TLB-resident pages keep their translations.
    fn flush(&mut self, m: &mut dyn Machine) {
        let pages: u64 = self.cleared_leaves.iter().map(|(s, e)| (e - s) >> 12).sum();
        if self.flush_all || pages > FLUSH_CEILING_PAGES {
            m.flush(Flush::All);
        } else if !self.cleared_leaves.is_empty() {
            for &(start, end) in &self.cleared_leaves {
                m.flush(Flush::Range { start, end });
            }
        } else if let Some(va) = self.cleared_upper {
            m.flush(Flush::Page(va));
        }
        self.flush_all = false;
        self.cleared_leaves.clear();
        self.cleared_upper = None;
    }

    /// The window's accessed spans: the walk's with the probes' blocks added; sorted,
    /// merged.
    fn accessed_spans(&mut self, mut walked: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        let depth = self.cfg.depth;
        walked.extend(self.seen.drain(..).map(|va| {
            let b = depth.align_down(va);
            (b, b + depth.span())
        }));
        walked.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(walked.len());
        for (s, e) in walked {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }

    /// Turns this window's accessed spans into the snapshot's regions over `ranges`.
    fn report(&mut self, spans: &[(u64, u64)], ranges: &[AddrRange]) -> Vec<RegionReport> {
        let w = self.windows;
        let bs = self.block_span();
        // Ages: a block's streak of accessed windows, or of idle ones since it was last
        // accessed (since the start for memory never seen accessed).
        let mut hot = Vec::with_capacity(self.hot_since.len());
        let mut old = self.hot_since.iter().peekable();
        for &(s, e) in spans {
            let mut b = self.cfg.depth.align_down(s);
            while b < e {
                while old.peek().is_some_and(|&&(o, _)| o < b) {
                    let (o, _) = *old.next().expect("peeked");
                    self.idle_since.insert(o, w);
                }
                let since = match old.peek() {
                    Some(&&(o, since)) if o == b => {
                        old.next();
                        since
                    }
                    _ => {
                        self.idle_since.remove(&b);
                        w
                    }
                };
                hot.push((b, since));
                b += bs;
            }
        }
        for &(o, _) in old {
            self.idle_since.insert(o, w);
        }
        self.hot_since = hot;
        let max = self.samples_per_window();
        let mut out = vec![];
        for r in ranges {
            let mut pos = r.start;
            let lo = spans.partition_point(|&(_, e)| e <= r.start);
            for &(s, e) in spans[lo..].iter().take_while(|&&(s, _)| s < r.end) {
                let (s, e) = (s.max(r.start), e.min(r.end));
                if pos < s {
                    out.push(self.idle_region(pos, s));
                }
                self.push_hot(&mut out, s, e, max);
                pos = e;
            }
            if pos < r.end {
                out.push(self.idle_region(pos, r.end));
            }
        }
        out
    }

    fn idle_region(&self, start: u64, end: u64) -> RegionReport {
        let last = self.idle_since.range(start..end).map(|(_, &w)| w).max();
        RegionReport {
            start,
            end,
            nr_accesses: 0,
            age: self.windows - last.unwrap_or(0),
        }
    }

    /// The accessed span [s, e) cut where the probe units that counted it change.
    fn push_hot(&self, out: &mut Vec<RegionReport>, s: u64, e: u64, max: u32) {
        let mut pos = s;
        while pos < e {
            // The unit holding `pos` (units cover address ranges in order), if any.
            let u = self
                .units
                .partition_point(|u| self.spans[u.end - 1].1 <= pos);
            let (count, until) = match self.units.get(u) {
                Some(unit) if self.spans[unit.first].0 <= pos => {
                    (unit.count, self.spans[unit.end - 1].1.min(e))
                }
                Some(unit) => (0, self.spans[unit.first].0.min(e)),
                None => (0, e),
            };
            let lo = self
                .hot_since
                .partition_point(|&(b, _)| b < self.cfg.depth.align_down(pos));
            let hi = self.hot_since.partition_point(|&(b, _)| b < until);
            let since = self.hot_since[lo..hi].iter().map(|&(_, w)| w).max();
            out.push(RegionReport {
                start: pos,
                end: until,
                nr_accesses: count.clamp(1, max),
                age: self.windows - since.unwrap_or(self.windows),
            });
            pos = until;
        }
    }

    /// Probe units for the next window: the accessed runs, grouped across the smallest
    /// gaps when there are more than `max_probes`.
    fn place_units(&mut self, spans: Vec<(u64, u64)>) {
        let shift = self.cfg.depth.span_shift();
        self.cum.clear();
        self.cum.push(0);
        for &(s, e) in &spans {
            // Blocks the span touches (a span clipped to a range may start mid-block).
            let blocks = ((e - 1) >> shift) - (s >> shift) + 1;
            let last = *self.cum.last().expect("starts with 0");
            self.cum.push(last + blocks);
        }
        self.units.clear();
        let max = self.cfg.max_probes as usize;
        if max > 0 && !spans.is_empty() {
            // Cut between the runs at the max - 1 widest gaps.
            let mut gaps: Vec<(u64, usize)> = (1..spans.len())
                .map(|i| (spans[i].0 - spans[i - 1].1, i))
                .collect();
            gaps.sort_unstable_by(|a, b| b.cmp(a));
            let mut cuts: Vec<usize> = gaps.iter().take(max - 1).map(|&(_, i)| i).collect();
            cuts.sort_unstable();
            let mut first = 0;
            for end in cuts.into_iter().chain([spans.len()]) {
                self.units.push(Unit {
                    first,
                    end,
                    count: 0,
                });
                first = end;
            }
        }
        self.spans = spans;
    }
}

/// Appends `span` clipped to each of `ranges` to `out`.
fn push_clipped(out: &mut Vec<(u64, u64)>, span: (u64, u64), ranges: &[AddrRange]) {
    for r in ranges {
        let (s, e) = (span.0.max(r.start), span.1.min(r.end));
        if s < e {
            out.push((s, e));
        }
    }
}

impl Monitor for PrunedWalkMonitor {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        let ranges = Self::ranges(m);
        let mut snapshot = None;
        if !self.started {
            // Everything was set at start-up: this walk only clears the root's children.
            let mut spans = vec![];
            self.walk(m, &ranges, &mut spans);
            self.started = true;
            self.window_start = now;
        } else {
            self.check_probes(m);
            self.samples_in_window += 1;
            if self.samples_in_window >= self.samples_per_window() {
                let mut walked = vec![];
                self.walk(m, &ranges, &mut walked);
                let spans = self.accessed_spans(walked);
                self.windows += 1;
                let regions = self.report(&spans, &ranges);
                snapshot = Some(Snapshot {
                    start: self.window_start,
                    end: now,
                    regions,
                });
                self.place_units(spans);
                self.samples_in_window = 0;
                self.window_start = now;
            }
        }
        self.prepare_probes(m);
        self.flush(m);
        let step = if self.cfg.max_probes == 0 {
            self.cfg.aggr.0
        } else {
            self.cfg.sample.0
        };
        self.next_wakeup = now + step;
        snapshot
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.cfg.sample.0,
            aggr: self.cfg.aggr.0,
            ops_update: self.cfg.aggr.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use tierscope_core::testing::FakeMachine;
    use tierscope_core::PageSize;

    const MIB2: u64 = 2 << 20;
    const GIB: u64 = 1 << 30;
    /// 512 GiB-aligned, so the heap sits under one PML4 entry.
    const BASE: u64 = 1 << 40;
    const MS: u64 = 1_000_000;

    /// The 2 MiB blocks reported with any access.
    fn hot_blocks(s: &Snapshot) -> BTreeSet<u64> {
        let mut out = BTreeSet::new();
        for r in s.regions.iter().filter(|r| r.nr_accesses > 0) {
            let mut b = r.start & !(MIB2 - 1);
            while b < r.end {
                out.insert(b);
                b += MIB2;
            }
        }
        out
    }

    /// A 4 GiB heap of 4 KiB pages, every page touched as the workload's start-up does.
    fn heap() -> FakeMachine {
        let mut m = FakeMachine::new(&[(BASE, BASE + 4 * GIB, PageSize::Base4K)]);
        let pages: Vec<u64> = (0..4 * GIB / 4096).map(|p| BASE + p * 4096).collect();
        m.touch(&pages);
        m
    }

    /// Runs one window: before each wake, touches one random page of each block that
    /// `touches` lists for that sample; returns the window's snapshot and the blocks
    /// touched in it.
    fn window(
        mon: &mut PrunedWalkMonitor,
        m: &mut FakeMachine,
        rng: &mut Rng,
        touches: impl Fn(u32, &mut Rng) -> Vec<u64>,
    ) -> (Snapshot, BTreeSet<u64>) {
        let mut truth = BTreeSet::new();
        for k in 0.. {
            m.now = mon.next_wakeup();
            let pages: Vec<u64> = touches(k, rng)
                .into_iter()
                .map(|b| b + rng.below(512) * 4096)
                .collect();
            truth.extend(pages.iter().map(|p| p & !(MIB2 - 1)));
            m.touch(&pages);
            if let Some(s) = mon.wake(m) {
                return (s, truth);
            }
        }
        unreachable!()
    }

    fn pud(i: u64) -> u64 {
        BASE + i * GIB
    }

    #[test]
    fn reports_exactly_the_blocks_accessed_in_each_window() {
        let mut m = heap();
        let mut mon = PrunedWalkMonitor::new(PrunedWalkConfig::default(), Rng::new(1));
        let mut rng = Rng::new(2);
        assert!(
            mon.wake(&mut m).is_none(),
            "the start-up walk reports nothing"
        );
        // Blocks of the first `puds` 1 GiB entries, a few at a time: a dense run and
        // scattered blocks, touched at random samples.
        let random_blocks = |puds: u64| {
            move |k: u32, rng: &mut Rng| -> Vec<u64> {
                let mut out = vec![];
                if k % 7 == 3 {
                    let start = pud(rng.below(puds)) + rng.below(400) * MIB2;
                    out.extend((0..rng.range(1, 100)).map(|i| start + i * MIB2));
                }
                if rng.below(4) == 0 {
                    out.push(pud(rng.below(puds)) + rng.below(512) * MIB2);
                }
                out
            }
        };
        // First window with PUDs 0 and 1 accessed: their children still carry the
        // start-up's bits, so both are reported whole.
        let (s, _) = window(&mut mon, &mut m, &mut rng, random_blocks(2));
        let whole: BTreeSet<u64> = (0..2 * GIB / MIB2).map(|b| BASE + b * MIB2).collect();
        assert_eq!(hot_blocks(&s), whole);
        for _ in 0..20 {
            let (s, truth) = window(&mut mon, &mut m, &mut rng, random_blocks(2));
            assert_eq!(hot_blocks(&s), truth);
        }
        // PUD 2 joins: whole for one window, exact from the next.
        let (s, truth) = window(&mut mon, &mut m, &mut rng, |k, rng| {
            let mut out = random_blocks(2)(k, rng);
            out.push(pud(2) + 7 * MIB2);
            out
        });
        let mut expected: BTreeSet<u64> = truth.into_iter().filter(|&b| b < pud(2)).collect();
        expected.extend((0..GIB / MIB2).map(|b| pud(2) + b * MIB2));
        assert_eq!(hot_blocks(&s), expected);
        for _ in 0..20 {
            let (s, truth) = window(&mut mon, &mut m, &mut rng, random_blocks(3));
            assert_eq!(hot_blocks(&s), truth);
            // The snapshot covers the heap, sorted and disjoint.
            assert!(s.regions.windows(2).all(|w| w[0].end <= w[1].start));
            let covered: u64 = s.regions.iter().map(|r| r.end - r.start).sum();
            assert_eq!(covered, 4 * GIB);
        }
    }

    #[test]
    fn reads_nothing_below_idle_entries() {
        let mut m = heap();
        let mut mon = PrunedWalkMonitor::new(PrunedWalkConfig::default(), Rng::new(1));
        let mut rng = Rng::new(3);
        mon.wake(&mut m);
        for _ in 0..10 {
            window(&mut mon, &mut m, &mut rng, |_, rng| {
                vec![pud(1) + rng.below(512) * MIB2]
            });
        }
        // Below PUD 1 its 2 MiB entries; elsewhere only the 1 GiB entries; no 4 KiB entry.
        assert!(m.clears.keys().all(|&(l, _)| l != Level::Pte));
        let pmds: Vec<u64> = m
            .clears
            .keys()
            .filter(|&&(l, _)| l == Level::Pmd)
            .map(|&(_, va)| va)
            .collect();
        assert!(!pmds.is_empty());
        assert!(
            pmds.iter().all(|&va| (pud(1)..pud(2)).contains(&va)),
            "{pmds:x?}"
        );
    }

    #[test]
    fn dense_entries_are_read_alone_for_dense_windows_and_never_miss_a_block() {
        let mut m = heap();
        // No probes: every clear of a 2 MiB entry below is then the walk's.
        let cfg = PrunedWalkConfig {
            dense_windows: 4,
            max_probes: 0,
            ..PrunedWalkConfig::default()
        };
        let mut mon = PrunedWalkMonitor::new(cfg, Rng::new(1));
        let mut rng = Rng::new(6);
        mon.wake(&mut m);
        let blocks = |n: u64| {
            move |k: u32, _: &mut Rng| -> Vec<u64> {
                if k == 0 {
                    (0..n).map(|b| pud(1) + b * MIB2).collect()
                } else {
                    vec![]
                }
            }
        };
        let pmd_clears = |m: &FakeMachine| -> u32 {
            m.clears
                .iter()
                .filter(|(&(l, va), _)| l == Level::Pmd && (pud(1)..pud(2)).contains(&va))
                .map(|(_, &n)| n)
                .sum()
        };
        // All 512 blocks accessed: window 1 clears the children (start-up), window 2 reads
        // them and finds the entry dense, windows 3-6 skip them, window 7 clears them
        // again, window 8 reads them, and so on.
        for _ in 0..2 {
            window(&mut mon, &mut m, &mut rng, blocks(512));
        }
        let mut read_in = vec![];
        for _ in 0..12 {
            let before = pmd_clears(&m);
            let (s, truth) = window(&mut mon, &mut m, &mut rng, blocks(512));
            assert_eq!(hot_blocks(&s), truth);
            read_in.push(pmd_clears(&m) > before);
        }
        let (skip, read) = (false, true);
        let cycle = [skip, skip, skip, skip, read, read];
        assert_eq!(read_in, [cycle, cycle].concat());
        // A quarter of them stay accessed: reported whole while skipped (a superset of
        // the truth), exact once the children are read again (at most 4 + 2 windows).
        let mut exact_after = None;
        for w in 0..8 {
            let (s, truth) = window(&mut mon, &mut m, &mut rng, blocks(128));
            let hot = hot_blocks(&s);
            assert!(hot.is_superset(&truth), "window {w}");
            if hot == truth && exact_after.is_none() {
                exact_after = Some(w);
            }
            if let Some(first) = exact_after {
                assert_eq!(hot, truth, "window {w}, exact since {first}");
            }
        }
        assert!(exact_after.is_some_and(|w| w <= 6), "{exact_after:?}");
        // Idle as a whole: reported idle at once, skipped or not.
        for _ in 0..3 {
            window(&mut mon, &mut m, &mut rng, blocks(512));
        }
        let (s, _) = window(&mut mon, &mut m, &mut rng, |_, _| vec![]);
        assert!(hot_blocks(&s).is_empty());
    }

    #[test]
    fn probes_count_how_often_a_run_is_accessed() {
        let mut m = heap();
        let cfg = PrunedWalkConfig::default();
        let samples = (cfg.aggr.0 / cfg.sample.0) as u32;
        let mut mon = PrunedWalkMonitor::new(cfg, Rng::new(1));
        let mut rng = Rng::new(4);
        mon.wake(&mut m);
        // Block a is accessed before every sample, b once per window, c in every
        // fourth sample: three runs far apart.
        let (a, b, c) = (pud(0) + 10 * MIB2, pud(1) + 100 * MIB2, pud(3) + 3 * MIB2);
        let touches = move |k: u32, _: &mut Rng| {
            let mut out = vec![a];
            if k == 5 {
                out.push(b);
            }
            if k.is_multiple_of(4) {
                out.push(c);
            }
            out
        };
        for _ in 0..3 {
            window(&mut mon, &mut m, &mut rng, touches);
        }
        let (s, _) = window(&mut mon, &mut m, &mut rng, touches);
        let count = |va: u64| {
            s.regions
                .iter()
                .find(|r| r.start <= va && va < r.end)
                .unwrap()
                .nr_accesses
        };
        assert_eq!(count(a), samples);
        assert_eq!(count(b), 1);
        assert_eq!(count(c), samples / 4);
        assert_eq!(count(pud(2)), 0);
    }

    #[test]
    fn ages_count_streaks_of_accessed_and_idle_windows() {
        let mut m = heap();
        let mut mon = PrunedWalkMonitor::new(PrunedWalkConfig::default(), Rng::new(1));
        let mut rng = Rng::new(5);
        mon.wake(&mut m);
        // The first block of its 1 GiB entry: the idle run below it was never accessed.
        let block = pud(2);
        let mut last = None;
        for _ in 0..6 {
            last = Some(window(&mut mon, &mut m, &mut rng, move |_, _| vec![block]).0);
        }
        let age = |s: &Snapshot, va: u64| {
            s.regions
                .iter()
                .find(|r| r.start <= va && va < r.end)
                .unwrap()
                .age
        };
        let s = last.as_ref().unwrap();
        // Accessed in windows 1-6: five windows after the streak began.
        assert_eq!(age(s, block), 5);
        // Below it, never accessed since the start.
        assert_eq!(age(s, pud(0)), 6);
        // Above it, the rest of its 1 GiB entry, reported whole in window 1 (its
        // children still carried the start-up's bits), is idle since window 2.
        assert_eq!(age(s, pud(3)), 4);
        for _ in 0..3 {
            last = Some(window(&mut mon, &mut m, &mut rng, |_, _| vec![]).0);
        }
        // Idle in windows 7-9: two windows after that streak began, as above.
        assert_eq!(age(last.as_ref().unwrap(), block), 2);
    }

    #[test]
    fn runs_beyond_max_probes_are_grouped_across_the_smallest_gaps() {
        let cfg = PrunedWalkConfig {
            max_probes: 2,
            ..PrunedWalkConfig::default()
        };
        let mut mon = PrunedWalkMonitor::new(cfg, Rng::new(1));
        let span = |b: u64, n: u64| (BASE + b * MIB2, BASE + (b + n) * MIB2);
        // Gaps of 1, 1, 50 and 2 blocks: the cut falls at the widest.
        mon.place_units(vec![
            span(0, 2),
            span(3, 1),
            span(5, 4),
            span(59, 1),
            span(62, 3),
        ]);
        let units: Vec<(usize, usize)> = mon.units.iter().map(|u| (u.first, u.end)).collect();
        assert_eq!(units, vec![(0, 3), (3, 5)]);
        assert_eq!(mon.cum, vec![0, 2, 3, 7, 8, 11]);
    }

    #[test]
    fn config_errors_name_the_field() {
        let bad = PrunedWalkConfig {
            depth: Level::Pml4,
            ..PrunedWalkConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "depth");
        let bad = PrunedWalkConfig {
            aggr: Duration(MS),
            ..PrunedWalkConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "aggr");
    }
}
