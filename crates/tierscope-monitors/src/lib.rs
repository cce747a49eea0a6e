//! Telemetry techniques. Each implements [`tierscope_core::Monitor`] and sees only the
//! [`tierscope_core::Machine`] interface.

pub mod config;
pub mod damon;
pub mod pebs;
pub mod region_monitor;
pub mod regions;
pub mod scan;
pub mod split_hint;
pub mod telescope;
#[cfg(test)]
mod test_machine;

use config::{FlushPolicy, MonitorConfig};
use region_monitor::{Probe, RegionMonitor};
use regions::Region;
use tierscope_core::machine::FLUSH_CEILING_PAGES;
use tierscope_core::rng::Rng;
use tierscope_core::{CostModel, Flush, Machine, Monitor};

/// Builds the monitor `config` describes, drawing its random numbers from `rng`, with the
/// default cost model (which only paces the linear scan).
pub fn build(config: &MonitorConfig, rng: Rng) -> Box<dyn Monitor> {
    build_with_cost(config, rng, &CostModel::default())
}

/// Builds the monitor `config` describes. `cost` is the experiment's cost model: a linear
/// scan's batches take the time the model charges for them.
///
/// # Panics
/// On `MonitorConfig::Pml`, which only the KVM engine can back (see the arm below).
pub fn build_with_cost(config: &MonitorConfig, rng: Rng, cost: &CostModel) -> Box<dyn Monitor> {
    match config {
        MonitorConfig::Damon(c) => {
            let probe = FlushingProbe {
                inner: damon::DamonProbe::default(),
                flush: c.flush == FlushPolicy::All,
                pending: vec![],
            };
            Box::new(RegionMonitor::new(c.attrs(), probe, rng))
        }
        MonitorConfig::Telescope(c) => Box::new(RegionMonitor::new(
            c.attrs(),
            telescope::TelescopeProbe::new(c.clone()),
            rng,
        )),
        MonitorConfig::Scan(c) => Box::new(scan::ScanMonitor::new(c.clone(), *cost)),
        MonitorConfig::Pebs(c) => Box::new(pebs::PebsMonitor::new(c.clone())),
        MonitorConfig::SplitHint(c) => Box::new(split_hint::SplitHintMonitor::new(c.clone(), rng)),
        // Experiments reject `pml` with any engine but kvm, and build it themselves
        // (tierscope_experiment::engine) on the KVM engine's dirty log.
        MonitorConfig::Pml(_) => panic!(
            "the pml monitor needs the KVM engine's dirty log: build it with \
             tierscope_experiment::engine, not tierscope_monitors::build"
        ),
    }
}

/// DAMON with `flush = "all"`: the leaf page of every sampling address is flushed after
/// its bit is cleared, batched per pass like Telescope's (page by page up to the kernel's
/// 33-page ceiling, else one full flush). Without it, the probe runs unchanged.
struct FlushingProbe<P: Probe> {
    inner: P,
    flush: bool,
    pending: Vec<u64>,
}

impl<P: Probe> Probe for FlushingProbe<P> {
    fn prepare(&mut self, index: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng) {
        self.inner.prepare(index, r, m, rng);
        if self.flush && m.leaf_level(r.sampling_addr).is_some() {
            self.pending.push(r.sampling_addr);
        }
    }

    fn check(&mut self, index: usize, r: &Region, m: &mut dyn Machine) -> bool {
        self.inner.check(index, r, m)
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
}
