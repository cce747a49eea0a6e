//! Experiments: the file format, the runner that drives monitors on engines, and the
//! evaluation of their snapshots against the ground truth.

pub mod build;
pub mod config;
pub mod cost;
pub mod drive;
pub mod evaluate;
#[cfg(test)]
mod fuzz_tests;
pub mod impact;
pub mod neighbour;
pub mod nemo_thp;
pub mod page_stats;
pub mod result;
pub mod run;
pub mod sweep;
pub mod tiering_run;

pub use config::{parse_experiment, ConfigError, Experiment, Format};
pub use result::{MonitorRun, Progress, RunResult, Summary, WindowMetrics};
pub use run::{run_experiment, RunError};
pub use tiering_run::{PolicyRun, TierSummary, TierWindow};
