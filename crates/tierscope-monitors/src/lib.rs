//! Telemetry techniques. Each implements [`tierscope_core::Monitor`] and sees only the
//! [`tierscope_core::Machine`] interface.

pub mod config;
pub mod damon;
pub mod region_monitor;
pub mod regions;
pub mod telescope;

use config::MonitorConfig;
use region_monitor::RegionMonitor;
use tierscope_core::rng::Rng;
use tierscope_core::Monitor;

/// Builds the monitor `config` describes, drawing its random numbers from `rng`.
pub fn build(config: &MonitorConfig, rng: Rng) -> Box<dyn Monitor> {
    match config {
        MonitorConfig::Damon(c) => Box::new(RegionMonitor::new(
            c.attrs(),
            damon::DamonProbe::default(),
            rng,
        )),
        MonitorConfig::Telescope(c) => Box::new(RegionMonitor::new(
            c.attrs(),
            telescope::TelescopeProbe::new(c.clone()),
            rng,
        )),
    }
}
