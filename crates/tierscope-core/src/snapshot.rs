//! What monitors report: DAMON-shaped snapshots of regions with access counts and ages.

use crate::units::Nanos;
use serde::{Deserialize, Serialize};

/// One monitored region at the end of an aggregation window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionReport {
    pub start: u64,
    pub end: u64,
    /// Samples in the window that found the region accessed.
    pub nr_accesses: u32,
    /// Aggregation windows the region's access count has stayed about the same.
    pub age: u32,
}

/// A monitor's view of the address space over one aggregation window `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub start: Nanos,
    pub end: Nanos,
    /// Sorted by address and disjoint.
    pub regions: Vec<RegionReport>,
}

/// The intervals a monitor runs at, as DAMON names them (for damo records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intervals {
    pub sample: Nanos,
    pub aggr: Nanos,
    pub ops_update: Nanos,
}
