//! Acting on telemetry: tiering policies turn snapshots into moves, the migration engine
//! carries them out on a machine's tiers with their costs, and the performance model turns
//! per-tier traffic into application time (docs/models/TIERING.md).

#[cfg(test)]
mod fuzz_tests;
pub mod migration;
pub mod perf;
pub mod policy;
pub mod registry;
#[cfg(test)]
pub(crate) mod test_support;

pub use migration::{MigrationConfig, MigrationStats, Migrator, Move};
pub use perf::{window_time, AppModel, WindowPerf};
pub use policy::{Policy, PolicyConfig, View};
pub use registry::{PolicyContext, PolicyTechnique};
