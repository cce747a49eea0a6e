//! Telemetry techniques. Each implements [`tierscope_core::Monitor`] and sees only the
//! [`tierscope_core::Machine`] interface. One file per technique, its config beside it;
//! [`registry`] is the one list of them (config enum, presets, requirements, building).

pub mod damon;
pub mod nemo;
pub mod nemo_rule;
pub mod numa_hint;
pub mod pebs;
pub mod pml;
pub mod pruned_walk;
pub mod region_monitor;
pub mod regions;
pub mod registry;
pub mod scan;
pub mod shared;
pub mod split_hint;
pub mod telescope;

pub use registry::{MonitorConfig, Truth};
