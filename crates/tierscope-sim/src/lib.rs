//! Simulated machines. The exact engine executes every access through TLBs,
//! paging-structure caches and a page walker over a compact radix page table; the
//! statistical engine answers the same questions from access-rate densities.

pub mod cache;
pub mod config;
pub mod exact;
mod exec;
pub mod layout;
pub mod mmu;
pub mod page_table;
mod parallel;
pub mod pml;
pub mod prefetch;
pub mod stat;
pub mod stream;
pub mod tiers;
pub mod truth;

use config::SimMachine;
use tierscope_core::tiers::TierSetup;
use tierscope_core::workload::WorkloadSpec;
use tierscope_core::Engine;

/// The workload side of an engine: what runs, how fast, and how the truth is measured.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadParams<'a> {
    pub spec: &'a WorkloadSpec,
    /// Accesses per simulated second, per thread.
    pub rate: u64,
    pub threads: u32,
    pub seed: u64,
    /// Granularity of the ground truth, bytes (a power of two).
    pub block_size: u64,
    /// Accesses in a window for a block to count as hot.
    pub truth_threshold: u32,
}

/// The two simulated engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimEngine {
    /// Every access through TLBs, paging-structure caches and the page walker.
    Exact,
    /// Bits drawn from the workload's access-rate density (docs/FIDELITY.md).
    Stat,
}

/// Builds a simulated engine, with memory tiers when `tiers` is given. With
/// `written_truth` the exact engine's truth counts stores only (for a write log; the
/// statistical engine has no write log).
pub fn build_engine(
    kind: SimEngine,
    machine: &SimMachine,
    params: &WorkloadParams,
    tiers: Option<&TierSetup>,
    written_truth: bool,
) -> Result<Box<dyn Engine>, String> {
    Ok(match kind {
        SimEngine::Exact => {
            let mut e = exact::ExactEngine::new(machine, params)?;
            if let Some(t) = tiers {
                e.set_tiers(t);
            }
            if written_truth {
                e.set_written_truth();
            }
            Box::new(e)
        }
        SimEngine::Stat => {
            let mut e = stat::StatEngine::new(machine, params)?;
            if let Some(t) = tiers {
                e.set_tiers(t);
            }
            Box::new(e)
        }
    })
}
