//! Simulated machines. The exact engine executes every access through TLBs,
//! paging-structure caches and a page walker over a compact radix page table; the
//! statistical engine answers the same questions from access-rate densities.

pub mod cache;
pub mod config;
pub mod exact;
pub mod layout;
pub mod mmu;
pub mod page_table;
pub mod stat;
pub mod stream;
pub mod truth;

use config::{EngineKind, MachineConfig};
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

/// Builds the simulated engine `config` asks for.
pub fn build_engine(
    config: &MachineConfig,
    params: &WorkloadParams,
) -> Result<Box<dyn Engine>, String> {
    match config.engine {
        EngineKind::Exact => Ok(Box::new(exact::ExactEngine::new(config, params)?)),
        EngineKind::Stat => Ok(Box::new(stat::StatEngine::new(config, params)?)),
        EngineKind::Kvm => Err(
            "the kvm engine is built by tierscope-experiment (tierscope_experiment::engine), \
             not tierscope_sim::build_engine"
                .into(),
        ),
    }
}
