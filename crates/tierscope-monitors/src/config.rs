//! Monitor configurations: one struct per technique, a tagged enum as the registry, and
//! the named presets of the Telescope paper.

use serde::{Deserialize, Serialize};
use tierscope_core::units::{Duration, NS_PER_MS, NS_PER_S};
use tierscope_core::Level;

/// Every monitor tierscope has, by its `type` tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum MonitorConfig {
    Damon(DamonConfig),
    Telescope(TelescopeConfig),
}

impl MonitorConfig {
    /// The configuration a preset name stands for.
    pub fn preset(name: &str) -> Option<MonitorConfig> {
        let damon = |sample_ms| {
            MonitorConfig::Damon(DamonConfig {
                sample: Duration(sample_ms * NS_PER_MS),
                ..DamonConfig::default()
            })
        };
        let telescope = |variant| {
            MonitorConfig::Telescope(TelescopeConfig {
                variant,
                ..TelescopeConfig::default()
            })
        };
        Some(match name {
            "damon-mod" => damon(5),
            "damon-agg" => damon(1),
            "telescope-bnd" => telescope(Variant::Bounded),
            "telescope-flx" => telescope(Variant::Flex),
            _ => return None,
        })
    }

    pub const PRESETS: [&'static str; 4] =
        ["damon-mod", "damon-agg", "telescope-bnd", "telescope-flx"];

    pub fn kind(&self) -> &'static str {
        match self {
            MonitorConfig::Damon(_) => "damon",
            MonitorConfig::Telescope(_) => "telescope",
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        match self {
            MonitorConfig::Damon(c) => c.attrs().validate(),
            MonitorConfig::Telescope(c) => {
                c.attrs().validate()?;
                c.flex_threshold.validate()
            }
        }
    }
}

/// DAMON's monitoring attributes, shared by the techniques built on its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionAttrs {
    pub sample: u64,
    pub aggr: u64,
    pub ops_update: u64,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
}

impl RegionAttrs {
    pub fn validate(&self) -> Result<(), String> {
        if self.sample == 0 {
            return Err("sample: must be positive".into());
        }
        if self.aggr < self.sample {
            return Err(format!(
                "aggr: must be at least the sampling interval ({} ns < {} ns)",
                self.aggr, self.sample
            ));
        }
        if self.ops_update == 0 {
            return Err("ops_update: must be positive".into());
        }
        if self.min_nr_regions < 3 {
            return Err(format!(
                "min_nr_regions: must be at least 3 (got {})",
                self.min_nr_regions
            ));
        }
        if self.max_nr_regions < self.min_nr_regions {
            return Err(format!(
                "max_nr_regions: must be at least min_nr_regions ({} < {})",
                self.max_nr_regions, self.min_nr_regions
            ));
        }
        Ok(())
    }
}

/// The kernel's DAMON with virtual-address operations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DamonConfig {
    pub sample: Duration,
    pub aggr: Duration,
    /// How often the monitored address ranges are refreshed (damo passes 1 s).
    pub ops_update: Duration,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
}

impl Default for DamonConfig {
    fn default() -> Self {
        DamonConfig {
            sample: Duration(5 * NS_PER_MS),
            aggr: Duration(200 * NS_PER_MS),
            ops_update: Duration(NS_PER_S),
            min_nr_regions: 10,
            max_nr_regions: 1000,
        }
    }
}

impl DamonConfig {
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
/// region exactly (docs/TELESCOPE.md discusses both readings of the paper).
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

/// Whether Telescope invalidates cached translations after clearing an ACCESSED bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushPolicy {
    /// Never flush (what DAMON does at the leaf).
    None,
    /// Flush the span of every cleared non-leaf entry (a range flush: a full flush when the
    /// span exceeds the kernel's 33-page ceiling); leaf clears are not flushed.
    Upper,
    /// Flush after every clear, leaf included.
    All,
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

    fn validate(&self) -> Result<(), String> {
        for l in Level::ALL {
            let t = self.get(l);
            if !(0.0..1.0).contains(&t) {
                return Err(format!("flex_threshold.{l}: must be in [0, 1), got {t}"));
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
        }
    }
}

impl TelescopeConfig {
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
