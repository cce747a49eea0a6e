//! The vocabulary every tierscope crate shares: addresses and page-table levels, units,
//! the [`machine::Machine`] and [`machine::Monitor`] traits, snapshots, cost accounting,
//! workload specifications and a deterministic random number generator.

pub mod addr;
pub mod cost;
pub mod error;
pub mod feed;
pub mod fuzz;
#[cfg(test)]
mod fuzz_tests;
pub mod limits;
pub mod machine;
pub mod memtel;
pub mod placement;
pub mod rng;
pub mod snapshot;
// The one fake machine of the crates' unit tests. Always compiled, not behind a feature:
// a feature enabled by dev-dependencies gives `cargo test` a different build of this crate
// and of every crate above it than the extension's, so `make test` compiled the workspace twice.
#[doc(hidden)]
pub mod testing;
pub mod tiers;
pub mod units;
pub mod workload;

pub use addr::{AddrRange, Level, Mapping, PageSize, Paging};
pub use cost::{CostCounters, CostModel, OpCounter};
pub use error::{did_you_mean, FieldError};
pub use feed::{FeedKind, PolicyInput};
pub use machine::{
    BlockIntervals, Capabilities, Capability, Engine, Flush, Machine, MachineStats, Monitor, Pmu,
    PmuEvent, PmuSample, ProgramEnd, WriteLog,
};
pub use placement::Placement;
pub use snapshot::{Intervals, RegionReport, Snapshot};
pub use tiers::{TierSpec, TierTraffic, Tiers};
pub use units::Nanos;
