//! The statistical engine: the exact engine's semantics (ACCESSED bits re-set only by walks
//! that load the entry, walks starting below the deepest paging-structure-cache hit,
//! Linux's flushes) answered from access-rate densities instead of executed accesses.
//! Memory holds only what monitors touched: the entries they cleared and the flushes they
//! issued, plus one record per pattern batch of each workload thread.
//!
//! - [`density`]: the workload's phases and patterns, each thread's batch schedule;
//! - [`caches`]: TLB and paging-structure-cache miss probabilities per pattern;
//! - [`walks`]: the probability that a cleared entry was loaded by a walk;
//! - [`entries`]: the sparse store of cleared entries ([`cleared`] their table), [`dead`]
//!   the ones no access can set again, [`filter`] the filter in front of their tables,
//!   [`scanned`] those of page tables monitors read whole;
//! - [`truth`]: the ground truth from expected access counts;
//! - [`pmu`]: PEBS-like samples;
//! - [`nemo`]: memory-controller telemetry's expected counts;
//! - [`engine`]: the `Machine` and `Engine` implementation.

pub mod caches;
pub mod cleared;
pub mod dead;
pub mod density;
pub mod engine;
pub mod entries;
pub mod filter;
pub mod nemo;
pub mod pmu;
pub mod scanned;
pub mod truth;
pub mod walks;

pub use engine::StatEngine;
