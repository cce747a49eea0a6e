//! Monitor configurations: one struct per technique, a tagged enum as the registry, and
//! the named presets of the Telescope paper.

use serde::{Deserialize, Serialize};
use tierscope_core::units::{Duration, Rate, Size, NS_PER_MS, NS_PER_S};
use tierscope_core::{Level, PmuEvent};

/// Every monitor tierscope has, by its `type` tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum MonitorConfig {
    Damon(DamonConfig),
    Telescope(TelescopeConfig),
    Scan(ScanConfig),
    Pebs(PebsConfig),
    /// Telescope-BND with page-level checks of sparse regions and adaptive intervals
    /// (beyond the paper: docs/SPLIT_HINT.md).
    #[serde(rename = "split_hint")]
    SplitHint(SplitHintConfig),
    /// KVM dirty logging (engine `kvm` only): built by tierscope-experiment, which owns
    /// the KVM engine (`tierscope_kvm::pml::PmlMonitor`).
    Pml(PmlConfig),
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
        // The paper's Figure 3: sleep 0 / 10 / 100 ms after every 256 MiB batch.
        let scan = |sleep_ms| {
            MonitorConfig::Scan(ScanConfig {
                sleep: Duration(sleep_ms * NS_PER_MS),
                ..ScanConfig::default()
            })
        };
        // Section 6.1.1: perf at 5 kHz (moderate) and 10 kHz (aggressive).
        let pebs = |hz| {
            MonitorConfig::Pebs(PebsConfig {
                frequency: Rate(hz),
                ..PebsConfig::default()
            })
        };
        Some(match name {
            "damon-mod" => damon(5),
            "damon-agg" => damon(1),
            "telescope-bnd" => telescope(Variant::Bounded),
            "telescope-flx" => telescope(Variant::Flex),
            "scan-agg" => scan(0),
            "scan-mod" => scan(10),
            "scan-cons" => scan(100),
            "pebs-mod" => pebs(5_000),
            "pebs-agg" => pebs(10_000),
            "pml" => MonitorConfig::Pml(PmlConfig::default()),
            "split-hint" => MonitorConfig::SplitHint(SplitHintConfig::default()),
            _ => return None,
        })
    }

    pub const PRESETS: [&'static str; 11] = [
        "damon-mod",
        "damon-agg",
        "telescope-bnd",
        "telescope-flx",
        "split-hint",
        "scan-agg",
        "scan-mod",
        "scan-cons",
        "pebs-mod",
        "pebs-agg",
        "pml",
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            MonitorConfig::Damon(_) => "damon",
            MonitorConfig::Telescope(_) => "telescope",
            MonitorConfig::Scan(_) => "scan",
            MonitorConfig::Pebs(_) => "pebs",
            MonitorConfig::SplitHint(_) => "split_hint",
            MonitorConfig::Pml(_) => "pml",
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        match self {
            MonitorConfig::Damon(c) => c.attrs().validate(),
            MonitorConfig::Telescope(c) => {
                c.attrs().validate()?;
                c.flex_threshold.validate()
            }
            MonitorConfig::Scan(c) => c.validate(),
            MonitorConfig::Pebs(c) => c.validate(),
            MonitorConfig::SplitHint(c) => c.validate(),
            MonitorConfig::Pml(c) => c.validate(),
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
    /// Flush after clearing (the kernel never does: `none`). DAMON clears only leaves, so
    /// `upper` behaves as `none` and `all` flushes every cleared leaf's page.
    pub flush: FlushPolicy,
}

impl Default for DamonConfig {
    fn default() -> Self {
        DamonConfig {
            sample: Duration(5 * NS_PER_MS),
            aggr: Duration(200 * NS_PER_MS),
            ops_update: Duration(NS_PER_S),
            min_nr_regions: 10,
            max_nr_regions: 1000,
            flush: FlushPolicy::None,
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

    pub fn validate(&self) -> Result<(), String> {
        self.attrs().validate()?;
        if self.max_sample.0 < self.sample.0 {
            return Err(format!(
                "max_sample: must be at least sample ({} ns < {} ns)",
                self.max_sample.0, self.sample.0
            ));
        }
        if self.window_samples == 0 || self.fast_window_samples == 0 {
            return Err("window_samples and fast_window_samples: must be at least 1".into());
        }
        if self.fast_window_samples > self.window_samples {
            return Err(format!(
                "fast_window_samples: must be at most window_samples ({} > {})",
                self.fast_window_samples, self.window_samples
            ));
        }
        if !(0.0..1.0).contains(&self.sparse_share) {
            return Err(format!(
                "sparse_share: must be in [0, 1), got {}",
                self.sparse_share
            ));
        }
        if !(self.change_share > 0.0 && self.change_share.is_finite()) {
            return Err(format!(
                "change_share: must be positive, got {}",
                self.change_share
            ));
        }
        Ok(())
    }
}

/// Linear accessed-bit scanning (kstaled, idle page tracking, the Telescope paper's
/// section 3.1 strawman): test-and-clear every mapped leaf entry, `batch` bytes at a time,
/// sleeping `sleep` between batches. One full pass is one aggregation window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScanConfig {
    /// Bytes of mappings scanned before each sleep (paper: 256 MB).
    pub batch: Size,
    /// Sleep after each batch (paper: 0 / 10 / 100 ms).
    pub sleep: Duration,
    /// What a sleep costs beyond its length: msleep() rounds up by one jiffy (HZ=1000) and
    /// the wake-up waits for the scheduler. Default 2.5 ms, from the paper's Figure 3
    /// (aggressive mode, "0 ms", ran at 49.2% of a core: 2.7 ms of every 5.4 ms batch off
    /// the CPU).
    pub sleep_slack: Duration,
    /// Scans of history kept per page (1..=8); a page's nr_accesses is the number of those
    /// scans that found it accessed.
    pub history: u32,
    /// `none` (default; the kernel's young-bit clearing on x86) or `all`: one full TLB
    /// flush after every batch that cleared a bit (`upper` is the same as `none`: a scan
    /// clears only leaves).
    pub flush: FlushPolicy,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            batch: Size(256 << 20),
            sleep: Duration(10 * NS_PER_MS),
            sleep_slack: Duration(2_500_000),
            history: 4,
            flush: FlushPolicy::None,
        }
    }
}

impl ScanConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.batch.0 < 4096 {
            return Err(format!(
                "batch: must be at least 4KiB, got {} bytes",
                self.batch.0
            ));
        }
        if !(1..=8).contains(&self.history) {
            return Err(format!("history: must be 1..=8, got {}", self.history));
        }
        if self.sleep.0 + self.sleep_slack.0 == 0 {
            return Err("sleep + sleep_slack: must be positive (a scan must yield)".into());
        }
        Ok(())
    }
}

/// PEBS through perf: every `period`-th qualifying event records its address; in
/// frequency mode (no `period`) the period adapts so that about `frequency` samples per
/// second are taken, as perf's `-F` does. Linux's throttling applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PebsConfig {
    /// Target samples per second per event (perf -F; paper: 5 kHz and 10 kHz).
    pub frequency: Rate,
    /// A fixed sample-after value instead (perf -c); overrides `frequency`.
    pub period: Option<u64>,
    pub event: PmuEvent,
    /// The window samples are aggregated over (one snapshot each).
    pub aggr: Duration,
    /// Samples are counted per aligned bin of this size (paper: 2 MB).
    pub bin: Size,
    /// A bin is reported hot (nr_accesses = its samples) only with at least this many
    /// samples in the window; below it, cold (0). Default 2: the one value consistent
    /// with all of the Telescope paper's PEBS figures (calibrated on them; 1 reports every
    /// sampled bin, HeMem's 4 is for counts kept across time, not per window).
    /// docs/BASELINES.md, section 2.
    pub hot_samples: u32,
    /// The kernel's tick (HZ=1000): throttling and the frequency adjustment act per tick.
    pub tick: Duration,
    /// kernel.perf_event_max_sample_rate.
    pub max_sample_rate: u64,
    /// kernel.perf_cpu_time_max_percent.
    pub cpu_time_max_percent: u32,
    /// How long one interrupt takes, as the kernel measures it for the throttle (keep it
    /// equal to `cost.pmu_interrupt / cost.cpu_hz`: 4200 cycles at 2.1 GHz = 2 us).
    pub interrupt: Duration,
}

impl Default for PebsConfig {
    fn default() -> Self {
        PebsConfig {
            frequency: Rate(5_000),
            period: None,
            event: PmuEvent::LoadsAndStores,
            aggr: Duration(200 * NS_PER_MS),
            bin: Size(2 << 20),
            hot_samples: 2,
            tick: Duration(NS_PER_MS),
            max_sample_rate: 100_000,
            cpu_time_max_percent: 25,
            interrupt: Duration(2_000),
        }
    }
}

impl PebsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.period.is_none() && self.frequency.0 == 0 {
            return Err("frequency: must be positive (or give a period)".into());
        }
        if self.period.is_none() && self.frequency.0 > self.max_sample_rate {
            // perf_event_open fails with EINVAL, as the kernel does.
            return Err(format!(
                "frequency: {} Hz exceeds max_sample_rate ({} Hz)",
                self.frequency.0, self.max_sample_rate
            ));
        }
        if self.period == Some(0) {
            return Err("period: must be positive".into());
        }
        if self.bin.0 < 4096 || !self.bin.0.is_power_of_two() {
            return Err(format!(
                "bin: must be a power of two of at least 4KiB, got {} bytes",
                self.bin.0
            ));
        }
        if self.hot_samples == 0 {
            return Err(format!(
                "hot_samples: must be at least 1 (samples in a window that make a bin hot), got {}",
                self.hot_samples
            ));
        }
        if self.tick.0 == 0 || self.aggr.0 < self.tick.0 {
            return Err("tick: must be positive and aggr at least one tick".into());
        }
        if self.max_sample_rate == 0 || self.cpu_time_max_percent > 100 {
            return Err("max_sample_rate must be positive, cpu_time_max_percent <= 100".into());
        }
        Ok(())
    }
}

/// Write logging through KVM's dirty log (what Intel PML logs in hardware; vmmload): each
/// window, the 4 KiB pages the guest wrote, reported per 2 MiB block (`nr_accesses` =
/// pages written), classified hot / warm / cold by an EMA. Only with `engine = "kvm"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PmlConfig {
    /// Harvest and aggregation window (vmmload: 250 ms).
    pub window: Duration,
    /// EMA weight of the newest window (0 < alpha <= 1).
    pub alpha: f64,
    /// A block is hot when its EMA of pages written per window reaches this.
    pub hot_pages: f64,
    /// A block is cold after this long without writes (otherwise warm).
    pub cold_after: Duration,
    /// Also detect reads through the page-table pages the MMU dirtied (vmmload).
    pub read_detection: bool,
}

impl Default for PmlConfig {
    fn default() -> Self {
        PmlConfig {
            window: Duration(250 * NS_PER_MS),
            alpha: 0.5,
            hot_pages: 32.0,
            cold_after: Duration(2 * NS_PER_S),
            read_detection: false,
        }
    }
}

impl PmlConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.window.0 == 0 {
            return Err("window: must be positive".into());
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(format!(
                "alpha: expected 0 < alpha <= 1, got {}",
                self.alpha
            ));
        }
        if self.hot_pages.is_nan() || self.hot_pages <= 0.0 {
            return Err(format!(
                "hot_pages: must be positive, got {}",
                self.hot_pages
            ));
        }
        Ok(())
    }
}
