//! What a monitor does to the application: a documented model of the slowdown, as a
//! fraction of the workload's runtime (docs/results/BASELINES.md, "Application impact").
//!
//! The workload runs `threads` cores for the run's duration. A monitor takes time from it
//! in four ways:
//! 1. **extra page walks**: flushes drop TLB and paging-structure-cache entries; the
//!    workload's walker then walks (and loads entries) where it would have hit. Measured
//!    exactly: the run's walks minus those of a run of the same access stream with no
//!    monitor (the runner makes one when a monitor can flush; without flushes the two are
//!    identical, clearing a bit does not change what the caches hold);
//! 2. **shootdowns**: every flush interrupts each workload core (IPI, INVLPG or CR3
//!    write, acknowledgement);
//! 3. **PMU interrupts**: PEBS interrupts run on the workload's core (the cost model's
//!    `pmu_interrupt` cycles each);
//! 4. **contention**: a monitoring thread on another core shares the last-level cache,
//!    memory bandwidth and the page-table lock with the workload; a fixed fraction of its
//!    busy time is charged to the workload.
//!
//! slowdown = (1 + 2 + 3) / (threads x duration x cpu_hz) + contention x thread_cycles /
//! (duration x cpu_hz).

use serde::Serialize;
use tierscope_core::{CostCounters, CostModel, MachineStats};

/// The constants of the model (cycles at the cost model's clock).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ImpactModel {
    /// Fixed cost of one extra walk (walker start, TLB fill).
    pub walk_cycles: f64,
    /// One page-table entry the walker loads: half the time from the LLC (~40 cycles),
    /// half from DRAM (~160): 100.
    pub walk_load_cycles: f64,
    /// One shootdown on one workload core: IPI delivery and entry, the invalidation,
    /// the acknowledgement (~1.2 us).
    pub ipi_cycles: f64,
    /// Share of a monitoring thread's busy cycles the workload loses to shared caches,
    /// bandwidth and locks.
    pub contention: f64,
}

impl Default for ImpactModel {
    fn default() -> Self {
        ImpactModel {
            walk_cycles: 20.0,
            walk_load_cycles: 100.0,
            ipi_cycles: 2_500.0,
            contention: 0.02,
        }
    }
}

/// One monitor's slowdown, by cause (each a fraction of the workload's runtime).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Impact {
    pub extra_walks: u64,
    pub extra_walk_loads: u64,
    pub walks: f64,
    pub shootdowns: f64,
    /// Work the monitor puts on the workload's own cores: PMU interrupts, hint faults.
    pub pmu: f64,
    pub contention: f64,
    pub total: f64,
}

/// The slowdown of a run with `stats` and `cost` against `baseline` (the same access
/// stream with no monitor; `None` when no baseline was run, which the runner only skips
/// when no monitor flushes).
pub fn app_slowdown(
    model: &ImpactModel,
    cost_model: &CostModel,
    cost: &CostCounters,
    stats: &MachineStats,
    baseline: Option<&MachineStats>,
    threads: u32,
    duration_ns: u64,
) -> Impact {
    if duration_ns == 0 {
        return Impact::default();
    }
    let core_cycles = cost_model.cpu_hz * duration_ns as f64 * 1e-9;
    let workload_cycles = core_cycles * threads.max(1) as f64;
    let (extra_walks, extra_walk_loads) = match baseline {
        Some(b) => (
            stats.walks.saturating_sub(b.walks),
            stats.walk_loads.saturating_sub(b.walk_loads),
        ),
        None => (0, 0),
    };
    let walks = (extra_walks as f64 * model.walk_cycles
        + extra_walk_loads as f64 * model.walk_load_cycles)
        / workload_cycles;
    let flushes = (cost.flushes_page + cost.flushes_full) as f64;
    let shootdowns = flushes * threads.max(1) as f64 * model.ipi_cycles / workload_cycles;
    let pmu = cost_model.workload_core_cycles(cost) / workload_cycles;
    let thread_cycles = cost_model.cycles(cost) - cost_model.workload_core_cycles(cost);
    let contention = model.contention * thread_cycles / core_cycles;
    Impact {
        extra_walks,
        extra_walk_loads,
        walks,
        shootdowns,
        pmu,
        contention,
        total: walks + shootdowns + pmu + contention,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_a_share_of_the_runtime() {
        let cm = CostModel::default();
        let im = ImpactModel::default();
        let one_s = 1_000_000_000;
        // No monitor work, no extra walks: no slowdown.
        let none = app_slowdown(
            &im,
            &cm,
            &CostCounters::default(),
            &MachineStats::default(),
            None,
            1,
            one_s,
        );
        assert_eq!(none.total, 0.0);
        // 10,000 PEBS interrupts of 4200 cycles in one second at 2.1 GHz: 2%.
        let mut pebs = CostCounters::default();
        pebs.charge(&tierscope_monitors::pebs::PMU_INTERRUPTS, 10_000);
        let s = app_slowdown(&im, &cm, &pebs, &MachineStats::default(), None, 1, one_s);
        assert!((s.pmu - 0.02).abs() < 1e-12, "{s:?}");
        // The sample processing runs elsewhere: only contention charges it.
        assert_eq!(s.contention, 0.0);
        // Extra walks against the baseline.
        let base = MachineStats {
            walks: 100,
            walk_loads: 200,
            ..Default::default()
        };
        let more = MachineStats {
            walks: 1_100,
            walk_loads: 3_200,
            ..Default::default()
        };
        let s = app_slowdown(
            &im,
            &cm,
            &CostCounters::default(),
            &more,
            Some(&base),
            1,
            one_s,
        );
        assert_eq!((s.extra_walks, s.extra_walk_loads), (1_000, 3_000));
        let want = (1_000.0 * im.walk_cycles + 3_000.0 * im.walk_load_cycles) / cm.cpu_hz;
        assert!((s.walks - want).abs() < 1e-12);
    }
}
