//! Telescope's probe (Nair et al., ATC '24, section 5.2): per region and sampling interval,
//! profile one page-table entry at the highest level that fits the region, so one ACCESSED
//! bit can watch up to 512 GiB. `bounded` only picks entries inside the region; `flex`
//! accepts entries that overshoot by at most a per-level fraction of their span.
//! docs/techniques/TELESCOPE.md records the readings chosen where the paper is open.

use crate::damon::{DamonConfig, WINDOW_POINTS};
use crate::region_monitor::{Probe, RegionMonitor};
use crate::regions::Region;
use crate::registry::{BuildContext, Preset, Technique};
use crate::shared::{FlushPolicy, RegionAttrs, Sampling};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tierscope_core::machine::{entry_qualifies, WindowEntry, WindowFlush, FLUSH_CEILING_PAGES};
use tierscope_core::rng::Rng;
use tierscope_core::units::Duration;
use tierscope_core::FeedKind;
use tierscope_core::{AddrRange, FieldError, Flush, Level, Machine, Monitor};

/// How Telescope picks the page-table level to profile for a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The highest level whose entry lies entirely inside the region.
    Bounded,
    /// The highest level whose entry overshoots the region by at most the level's error
    /// threshold; falls back to bounded.
    Flex,
}

/// Which entry Telescope profiles when the highest fitting level does not tile the
/// region exactly (docs/techniques/TELESCOPE.md discusses both readings of the paper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryPick {
    /// Draw a sampling address uniformly in the region, then climb from the leaf while the
    /// entry around it qualifies (the upstream kernel patch). Entries are picked in
    /// proportion to the bytes they cover.
    Address,
    /// Decompose the region into the largest qualifying entries and pick one of them
    /// uniformly, whatever its size.
    Uniform,
}

/// Flex's error thresholds: the fraction of an entry's span that may lie outside the
/// region. Paper defaults: 15% at PUD and above, 25% at PMD and PTE.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LevelThresholds {
    pub pte: f64,
    pub pmd: f64,
    pub pud: f64,
    pub pml4: f64,
    pub pml5: f64,
}

impl Default for LevelThresholds {
    fn default() -> Self {
        LevelThresholds {
            pte: 0.25,
            pmd: 0.25,
            pud: 0.15,
            pml4: 0.15,
            pml5: 0.15,
        }
    }
}

impl LevelThresholds {
    pub fn get(&self, level: Level) -> f64 {
        match level {
            Level::Pte => self.pte,
            Level::Pmd => self.pmd,
            Level::Pud => self.pud,
            Level::Pml4 => self.pml4,
            Level::Pml5 => self.pml5,
        }
    }

    fn validate(&self) -> Result<(), FieldError> {
        for l in Level::ALL {
            let t = self.get(l);
            if !(0.0..1.0).contains(&t) {
                return Err(FieldError::new(
                    format!("flex_threshold.{l}"),
                    format!("must be in [0, 1), got {t}"),
                ));
            }
        }
        Ok(())
    }
}

/// Telescope: DAMON's region management, profiling entries at every page-table level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelescopeConfig {
    pub variant: Variant,
    pub sample: Duration,
    pub aggr: Duration,
    pub ops_update: Duration,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
    pub flex_threshold: LevelThresholds,
    pub entry_pick: EntryPick,
    pub flush: FlushPolicy,
    /// How the samples are read: `each` (every sample's entry cleared, flushed and read),
    /// `window` (on the statistical engine, each region's count of a whole aggregation
    /// window drawn at once, an approximation: docs/models/FIDELITY.md, "Telescope's window
    /// sampling"; other engines read each sample) or `auto` (the default: `window`, unless
    /// `entry_pick = "uniform"`, whose picks only reading every sample draws).
    pub sampling: Sampling,
}

impl Default for TelescopeConfig {
    fn default() -> Self {
        let d = DamonConfig::default();
        TelescopeConfig {
            variant: Variant::Bounded,
            sample: d.sample,
            aggr: d.aggr,
            ops_update: d.ops_update,
            min_nr_regions: d.min_nr_regions,
            max_nr_regions: d.max_nr_regions,
            flex_threshold: LevelThresholds::default(),
            entry_pick: EntryPick::Address,
            flush: FlushPolicy::Upper,
            sampling: Sampling::Auto,
        }
    }
}

impl Technique for TelescopeConfig {
    fn presets() -> Vec<Preset<Self>> {
        let telescope = |variant| TelescopeConfig {
            variant,
            ..TelescopeConfig::default()
        };
        vec![
            Preset {
                name: "telescope-bnd",
                help: "Telescope, bounded: the highest page-table entry inside each region",
                config: telescope(Variant::Bounded),
            },
            Preset {
                name: "telescope-flx",
                help: "Telescope, flex: entries may overshoot a region by 15-25% of their span",
                config: telescope(Variant::Flex),
            },
        ]
    }

    fn emits(&self) -> FeedKind {
        FeedKind::AccessChecks
    }

    fn flushes(&self) -> bool {
        self.flush != FlushPolicy::None
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.sampling == Sampling::Window && self.entry_pick == EntryPick::Uniform {
            return Err(FieldError::new(
                "sampling",
                "\"window\" draws each sample's address in the region, as entry_pick = \"address\" does; \"uniform\" needs sampling = \"each\"",
            ));
        }
        self.attrs().validate()?;
        self.flex_threshold.validate()
    }

    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor> {
        Box::new(RegionMonitor::new(
            self.attrs(),
            TelescopeProbe::new(self.clone()),
            ctx.rng,
        ))
    }
}

impl TelescopeConfig {
    /// Whether an engine that offers it draws whole windows at once ([`Sampling`]).
    pub fn by_window(&self) -> bool {
        // Window sampling draws address picks only.
        self.sampling
            .by_window(self.entry_pick != EntryPick::Uniform)
    }

    pub fn attrs(&self) -> RegionAttrs {
        RegionAttrs {
            sample: self.sample.0,
            aggr: self.aggr.0,
            ops_update: self.ops_update.0,
            min_nr_regions: self.min_nr_regions,
            max_nr_regions: self.max_nr_regions,
        }
    }
}

pub struct TelescopeProbe {
    cfg: TelescopeConfig,
    /// Per region index: the entry being profiled (level, an address inside its span).
    chosen: Vec<(Level, u64)>,
    /// For `EntryPick::Uniform`: each region's decomposition into entries.
    covers: HashMap<(u64, u64), Vec<(Level, u64)>>,
    /// Spans of upper-level entries cleared in this pass, to flush once at its end.
    pending_flush: Vec<(u64, u64)>,
}

impl TelescopeProbe {
    pub fn new(cfg: TelescopeConfig) -> Self {
        TelescopeProbe {
            cfg,
            chosen: vec![],
            covers: HashMap::new(),
            pending_flush: vec![],
        }
    }

    /// How far an entry at `level` may overshoot a region, as a fraction of its span:
    /// nothing for bounded, the level's threshold for flex.
    fn overshoot(&self, level: Level) -> f64 {
        match self.cfg.variant {
            Variant::Bounded => 0.0,
            Variant::Flex => self.cfg.flex_threshold.get(level),
        }
    }

    /// Whether the entry at `level` containing `va` may profile region `r`.
    fn qualifies(&self, level: Level, va: u64, r: &Region) -> bool {
        entry_qualifies(
            level,
            va,
            AddrRange::new(r.start, r.end),
            self.overshoot(level),
        )
    }

    /// The highest qualifying level for the entry containing `va`, at least the leaf.
    fn level_for(&self, va: u64, r: &Region, m: &mut dyn Machine) -> Level {
        let leaf = m.leaf_level(va).unwrap_or(Level::Pte);
        let mut l = m.paging().root();
        while l > leaf {
            if self.qualifies(l, va, r) {
                return l;
            }
            l = l.down().expect("above the leaf");
        }
        leaf
    }

    /// The region as a sequence of non-overlapping entries, each at the highest level that
    /// qualifies where it starts.
    fn cover(&self, r: &Region, m: &mut dyn Machine) -> Vec<(Level, u64)> {
        let mut out = vec![];
        let mut pos = r.start;
        while pos < r.end {
            let leaf = m.leaf_level(pos).unwrap_or(Level::Pte);
            let mut l = m.paging().root();
            loop {
                let aligned = l.align_down(pos) == pos || (pos == r.start && out.is_empty());
                if l == leaf || (aligned && self.qualifies(l, pos, r)) {
                    break;
                }
                l = l.down().expect("above the leaf");
            }
            out.push((l, pos));
            pos = l.align_down(pos) + l.span();
        }
        out
    }
}

impl Probe for TelescopeProbe {
    fn pick(&mut self, index: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng) {
        let (level, va) = match self.cfg.entry_pick {
            EntryPick::Address => {
                let va = rng.range(r.start, r.end);
                (self.level_for(va, r, m), va)
            }
            EntryPick::Uniform => {
                let key = (r.start, r.end);
                if !self.covers.contains_key(&key) {
                    let c = self.cover(r, m);
                    self.covers.insert(key, c);
                }
                let cover = &self.covers[&key];
                cover[rng.below(cover.len() as u64) as usize]
            }
        };
        m.cost_mut().random_draws += 1;
        r.sampling_addr = va;
        if self.chosen.len() <= index {
            self.chosen.resize(index + 1, (Level::Pte, 0));
        }
        self.chosen[index] = (level, va);
    }

    fn prepare(&mut self, index: usize, _: &Region, m: &mut dyn Machine) {
        let (level, va) = self.chosen[index];
        let cleared = m.test_and_clear_accessed(level, va).is_some();
        let is_leaf = m.leaf_level(va) == Some(level);
        let flush = match self.cfg.flush {
            FlushPolicy::None => false,
            FlushPolicy::Upper => !is_leaf,
            FlushPolicy::All => true,
        };
        if cleared && flush {
            let start = level.align_down(va);
            self.pending_flush.push((start, start + level.span()));
        }
    }

    fn after_prepare(&mut self, m: &mut dyn Machine) {
        if self.pending_flush.is_empty() {
            return;
        }
        // One batched flush per pass, as the kernel's mmu_gather would do: page by page
        // while the pass touched few pages, else everything.
        let pages: u64 = self.pending_flush.iter().map(|(s, e)| (e - s) >> 12).sum();
        if pages > FLUSH_CEILING_PAGES {
            m.flush(Flush::All);
        } else {
            for &(start, end) in &self.pending_flush {
                m.flush(Flush::Range { start, end });
            }
        }
        self.pending_flush.clear();
    }

    fn check(&mut self, index: usize, _: &Region, m: &mut dyn Machine) -> bool {
        let (level, va) = self.chosen[index];
        m.accessed(level, va).unwrap_or(false)
    }

    fn warm(&mut self, regions: &[Region], m: &mut dyn Machine) {
        m.warm_accessed(&self.chosen[..regions.len().min(self.chosen.len())]);
    }

    fn regions_changed(&mut self, _: &[Region]) {
        self.covers.clear();
    }

    fn window_points(&self) -> Option<u32> {
        self.cfg.by_window().then_some(WINDOW_POINTS)
    }

    fn window_rule(&self) -> (WindowEntry, WindowFlush) {
        let overshoot = Level::ALL.map(|l| self.overshoot(l));
        let flush = match self.cfg.flush {
            FlushPolicy::None => WindowFlush::None,
            FlushPolicy::Upper => WindowFlush::Upper,
            FlushPolicy::All => WindowFlush::All,
        };
        (WindowEntry::Highest { overshoot }, flush)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::machine::highest_entry;
    use tierscope_core::testing::FakeMachine;
    use tierscope_core::PageSize;

    #[test]
    fn window_sampling_is_told_the_probes_own_entry_rule() {
        // What the engine is told to pick ([`Probe::window_rule`]) is what the probe picks,
        // for both variants, over regions of every alignment in a 2 TiB mapping.
        let base = 1u64 << 40;
        let mut m = FakeMachine::new(&[(base, base + (2 << 40), PageSize::Base4K)]);
        let root = m.paging().root();
        let mut rng = Rng::new(5);
        for variant in [Variant::Bounded, Variant::Flex] {
            let probe = TelescopeProbe::new(TelescopeConfig {
                variant,
                sampling: Sampling::Window,
                ..TelescopeConfig::default()
            });
            let (WindowEntry::Highest { overshoot }, WindowFlush::Upper) = probe.window_rule()
            else {
                panic!("Telescope's entries and flushes")
            };
            assert_eq!(probe.window_points(), Some(WINDOW_POINTS));
            let mut above = 0;
            for _ in 0..5000 {
                let bits = 12 + rng.below(30);
                let len = 4096 + rng.below(1 << bits);
                let start = base + rng.below((2 << 40) - len);
                let r = Region {
                    start,
                    end: start + len,
                    nr_accesses: 0,
                    last_nr_accesses: 0,
                    age: 0,
                    sampling_addr: start,
                };
                let va = rng.range(r.start, r.end);
                let range = AddrRange::new(r.start, r.end);
                let want = probe.level_for(va, &r, &mut m);
                assert_eq!(highest_entry(range, va, Level::Pte, root, &overshoot), want);
                above += usize::from(want > Level::Pmd);
            }
            assert!(above > 500, "{above}");
        }
        let each = TelescopeProbe::new(TelescopeConfig {
            sampling: Sampling::Each,
            ..TelescopeConfig::default()
        });
        assert_eq!(each.window_points(), None);
        let auto = TelescopeProbe::new(TelescopeConfig::default());
        assert_eq!(
            auto.window_points(),
            Some(WINDOW_POINTS),
            "window by default"
        );
    }

    #[test]
    fn window_sampling_needs_address_picks() {
        let cfg = TelescopeConfig {
            sampling: Sampling::Window,
            entry_pick: EntryPick::Uniform,
            ..TelescopeConfig::default()
        };
        let e = cfg.validate().unwrap_err();
        assert!(e.to_string().contains("sampling"), "{e}");
        let cfg = TelescopeConfig {
            entry_pick: EntryPick::Uniform,
            ..TelescopeConfig::default()
        };
        assert!(cfg.validate().is_ok());
        assert!(!cfg.by_window(), "auto reads uniform picks every sample");
        assert!(TelescopeConfig::default().by_window());
    }
}
