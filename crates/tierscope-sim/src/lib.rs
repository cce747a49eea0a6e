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
use tierscope_core::{Capabilities, Capability, Engine};

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
    /// Bits drawn from the workload's access-rate density (docs/models/FIDELITY.md).
    Stat,
}

impl SimEngine {
    /// The optional hardware the engine offers monitors and policies: declared here, once,
    /// and checked against what a built engine answers (tests below).
    pub const fn capabilities(self) -> Capabilities {
        match self {
            SimEngine::Exact => Capabilities::of(&[
                Capability::Pmu,
                Capability::WriteLog,
                Capability::Tiers,
                Capability::MemTelemetry,
            ]),
            // No write log: the statistical engine does not execute the stores whose
            // first occurrence PML logs (docs/models/MACHINE.md, "Simulated PML").
            SimEngine::Stat => {
                Capabilities::of(&[Capability::Pmu, Capability::Tiers, Capability::MemTelemetry])
            }
        }
    }
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

#[cfg(test)]
mod capability_tests {
    use super::*;
    use tierscope_core::tiers::{tier_preset, InitialPlacement, TierSetup};
    use tierscope_core::workload::masim;

    /// What each engine declares is what a built one answers.
    #[test]
    fn declared_capabilities_are_the_ones_offered() {
        let spec = masim::parse_masim("a, 64MiB\n\np\n100\na, 1, 4096, 1\n").unwrap();
        let params = WorkloadParams {
            spec: &spec,
            rate: 1_000_000,
            threads: 1,
            seed: 1,
            block_size: 2 << 20,
            truth_threshold: 1,
        };
        let tiers = TierSetup {
            tiers: vec![
                tier_preset("dram").unwrap().spec(16 << 20),
                tier_preset("cxl").unwrap().spec(1 << 30),
            ],
            initial: InitialPlacement::default(),
        };
        for kind in [SimEngine::Exact, SimEngine::Stat] {
            let mut e =
                build_engine(kind, &SimMachine::default(), &params, Some(&tiers), false).unwrap();
            let declared = kind.capabilities();
            let m = e.as_machine();
            let offered = [
                (Capability::Pmu, m.pmu().is_some()),
                (Capability::WriteLog, m.write_log().is_some()),
                (Capability::Tiers, m.tiers().is_some()),
                (Capability::MemTelemetry, m.mem_telemetry().is_some()),
            ];
            for (c, has) in offered {
                assert_eq!(declared.contains(c), has, "{kind:?} {c:?}");
            }
        }
    }
}
