//! DAMON's virtual-address probe (mm/damon/vaddr.c): a random address per region, its
//! leaf entry (PTE, or PMD for a huge page) made old without a TLB flush, checked one
//! sampling interval later; a region whose sampling address lies in the folio checked just
//! before reuses that result.

use crate::region_monitor::{Probe, RegionMonitor};
use crate::regions::Region;
use crate::registry::{BuildContext, Preset, Technique};
use crate::shared::{FlushPolicy, RegionAttrs, Sampling};
use serde::{Deserialize, Serialize};
use tierscope_core::machine::FLUSH_CEILING_PAGES;
use tierscope_core::rng::Rng;
use tierscope_core::units::{Duration, NS_PER_MS, NS_PER_S};
use tierscope_core::FeedKind;
use tierscope_core::{FieldError, Flush, Level, Machine, Monitor};

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
    /// How the samples are read: `each` (every sample's entry, as the kernel does),
    /// `window` (on the statistical engine, each region's count of a whole aggregation
    /// window drawn from an estimate of its probability,
    /// [`tierscope_core::machine::WindowSampler`]; other engines read each sample) or
    /// `auto` (the default: `window`, unless `flush = "all"`, which needs every clear).
    pub sampling: Sampling,
}

/// Points per region and window the engine evaluates under [`Sampling::Window`]: its
/// estimate's spread shrinks with more; 8 keeps a region's cost per simulated second at
/// 40 evaluations for DAMON-MOD and DAMON-AGG alike, against 400 and 2000 reads.
pub const WINDOW_POINTS: u32 = 8;

impl Default for DamonConfig {
    fn default() -> Self {
        DamonConfig {
            sample: Duration(5 * NS_PER_MS),
            aggr: Duration(200 * NS_PER_MS),
            ops_update: Duration(NS_PER_S),
            min_nr_regions: 10,
            max_nr_regions: 1000,
            flush: FlushPolicy::None,
            sampling: Sampling::Auto,
        }
    }
}

impl Technique for DamonConfig {
    fn presets() -> Vec<Preset<Self>> {
        let damon = |sample_ms| DamonConfig {
            sample: Duration(sample_ms * NS_PER_MS),
            ..DamonConfig::default()
        };
        vec![
            Preset {
                name: "damon-mod",
                help: "DAMON, 5 ms sampling / 200 ms aggregation (the Telescope paper's DAMON-MOD)",
                config: damon(5),
            },
            Preset {
                name: "damon-agg",
                help: "DAMON, 1 ms sampling / 200 ms aggregation (DAMON-AGG)",
                config: damon(1),
            },
        ]
    }

    fn emits(&self) -> FeedKind {
        FeedKind::AccessChecks
    }

    fn flushes(&self) -> bool {
        self.flush == FlushPolicy::All
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.sampling == Sampling::Window && self.flush == FlushPolicy::All {
            return Err(FieldError::new(
                "sampling",
                "\"window\" clears no entry, so it cannot flush them (flush = \"all\")",
            ));
        }
        self.attrs().validate()
    }

    fn build(&self, ctx: BuildContext) -> Box<dyn Monitor> {
        let probe = FlushingProbe {
            inner: DamonProbe::default(),
            flush: self.flush == FlushPolicy::All,
            pending: vec![],
            window: self.by_window().then_some(WINDOW_POINTS),
        };
        Box::new(RegionMonitor::new(self.attrs(), probe, ctx.rng))
    }
}

impl DamonConfig {
    /// Whether an engine that offers it draws whole windows at once ([`Sampling`]).
    pub fn by_window(&self) -> bool {
        // Flushing every cleared leaf needs every clear.
        self.sampling.by_window(self.flush != FlushPolicy::All)
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

#[derive(Debug, Default)]
pub struct DamonProbe {
    last_addr: Option<u64>,
    last_folio_size: u64,
    last_accessed: bool,
    /// The entries of a pass, for [`Machine::warm_accessed`].
    entries: Vec<(Level, u64)>,
}

impl Probe for DamonProbe {
    fn pick(&mut self, _: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng) {
        r.sampling_addr = rng.range(r.start, r.end);
        m.cost_mut().random_draws += 1;
    }

    fn prepare(&mut self, _: usize, r: &Region, m: &mut dyn Machine) {
        if let Some(leaf) = m.leaf_level(r.sampling_addr) {
            m.test_and_clear_accessed(leaf, r.sampling_addr);
        }
    }

    fn check(&mut self, index: usize, r: &Region, m: &mut dyn Machine) -> bool {
        // The reuse only applies within one pass over the regions.
        if index == 0 {
            self.last_addr = None;
        }
        if let Some(last) = self.last_addr {
            let mask = !(self.last_folio_size - 1);
            if last & mask == r.sampling_addr & mask {
                return self.last_accessed;
            }
        }
        let (accessed, folio) = match m.leaf_level(r.sampling_addr) {
            Some(leaf) => (
                m.accessed(leaf, r.sampling_addr).unwrap_or(false),
                leaf.span(),
            ),
            None => (false, 4096),
        };
        self.last_addr = Some(r.sampling_addr);
        self.last_folio_size = folio;
        self.last_accessed = accessed;
        accessed
    }

    fn warm(&mut self, regions: &[Region], m: &mut dyn Machine) {
        self.entries.clear();
        for r in regions {
            if let Some(leaf) = m.leaf_level(r.sampling_addr) {
                self.entries.push((leaf, r.sampling_addr));
            }
        }
        m.warm_accessed(&self.entries);
    }
}

/// DAMON with `flush = "all"`: the leaf page of every sampling address is flushed after
/// its bit is cleared, batched per pass like Telescope's (page by page up to the kernel's
/// 33-page ceiling, else one full flush). Without it, the probe runs unchanged.
struct FlushingProbe<P: Probe> {
    inner: P,
    flush: bool,
    pending: Vec<u64>,
    /// Points per region of [`Sampling::Window`], when chosen.
    window: Option<u32>,
}

impl<P: Probe> Probe for FlushingProbe<P> {
    fn pick(&mut self, index: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng) {
        self.inner.pick(index, r, m, rng);
    }

    fn prepare(&mut self, index: usize, r: &Region, m: &mut dyn Machine) {
        self.inner.prepare(index, r, m);
        if self.flush && m.leaf_level(r.sampling_addr).is_some() {
            self.pending.push(r.sampling_addr);
        }
    }

    fn check(&mut self, index: usize, r: &Region, m: &mut dyn Machine) -> bool {
        self.inner.check(index, r, m)
    }

    fn warm(&mut self, regions: &[Region], m: &mut dyn Machine) {
        self.inner.warm(regions, m);
    }

    fn after_prepare(&mut self, m: &mut dyn Machine) {
        self.inner.after_prepare(m);
        if self.pending.is_empty() {
            return;
        }
        if self.pending.len() as u64 > FLUSH_CEILING_PAGES {
            m.flush(Flush::All);
        } else {
            for &va in &self.pending {
                m.flush(Flush::Page(va));
            }
        }
        self.pending.clear();
    }

    fn regions_changed(&mut self, regions: &[Region]) {
        self.inner.regions_changed(regions);
    }

    fn window_points(&self) -> Option<u32> {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sampling_cannot_flush_what_it_never_clears() {
        let window = DamonConfig {
            sampling: Sampling::Window,
            ..DamonConfig::default()
        };
        assert!(window.validate().is_ok());
        let flushing = DamonConfig {
            flush: FlushPolicy::All,
            ..window
        };
        let e = flushing.validate().unwrap_err();
        assert!(e.to_string().contains("sampling"), "{e}");
    }

    #[test]
    fn auto_sampling_reads_every_sample_only_where_it_flushes() {
        let auto = DamonConfig::default();
        assert_eq!(auto.sampling, Sampling::Auto);
        assert!(auto.by_window());
        let flushing = DamonConfig {
            flush: FlushPolicy::All,
            ..DamonConfig::default()
        };
        assert!(flushing.validate().is_ok());
        assert!(!flushing.by_window());
        let each = DamonConfig {
            sampling: Sampling::Each,
            ..DamonConfig::default()
        };
        assert!(!each.by_window());
    }
}
