//! What a run produces: per monitor, its snapshots, the truth for the same windows, the
//! per-window and summary metrics, and its cost.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Intervals, MachineStats, Mapping, Snapshot,
};

/// Precision and recall of one aggregation window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowMetrics {
    pub start_ns: u64,
    pub end_ns: u64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Bytes in blocks reported hot.
    pub reported_hot_bytes: u64,
    /// Bytes in blocks truly hot.
    pub true_hot_bytes: u64,
    pub nr_regions: u32,
    /// Monitor cycles spent in this window.
    pub cycles: f64,
}

/// Means over the windows after warm-up, and totals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub cycles: f64,
    pub cpu_percent: f64,
    pub bits_cleared: u64,
    pub entries_read: u64,
    pub clear_ops: u64,
    pub flushes: u64,
    pub regions_split: u64,
    pub regions_merged: u64,
    /// Windows that entered the means.
    pub windows_evaluated: u32,
    pub mean_nr_regions: f64,
    /// The application's modelled slowdown, a fraction of its runtime (crate::impact).
    pub app_slowdown: f64,
    /// Mean time from a phase change to the window from which precision and recall stay
    /// at least 0.9 (crate::evaluate::convergence); `None` for one-phase workloads.
    pub convergence_ms: Option<f64>,
    /// Phase changes after the warm-up, and how many of them the monitor converged after.
    pub phase_changes: u32,
    pub phase_changes_converged: u32,
}

/// Everything one monitor's run produced.
#[derive(Debug, Clone, Serialize)]
pub struct MonitorRun {
    pub name: String,
    pub kind: &'static str,
    /// What its snapshots' `nr_accesses` count (plots label their colour scale with it).
    pub feed: tierscope_core::FeedKind,
    pub intervals: Intervals,
    pub snapshots: Vec<Snapshot>,
    /// The truth of each snapshot's window, same order.
    pub truth: Vec<BlockIntervals>,
    pub windows: Vec<WindowMetrics>,
    pub summary: Summary,
    /// Serialized with every registered technique counter listed (crate::cost).
    #[serde(serialize_with = "crate::cost::serialize")]
    pub cost: CostCounters,
    pub machine: MachineStats,
    /// `summary.app_slowdown` by cause.
    pub impact: crate::impact::Impact,
    /// Real CPU time the run thread spent in the monitor's wake-ups (CLOCK_THREAD_CPUTIME_ID),
    /// ns, on the kvm engine (host flushes included); 0 on the simulated engines, whose
    /// outputs stay reproducible byte for byte.
    pub monitor_cpu_ns: u64,
    /// How the real program ended (exit status, time, system calls), on a program run.
    pub program: Option<String>,
    /// The real program's exit status; `None` when it was stopped (or on a synthetic
    /// workload).
    pub program_status: Option<i32>,
    /// On the kvm engine: what the run achieved against what was asked, and whether the
    /// run is valid (`tierscope_kvm::guard`, docs/models/KVM.md); `None` on simulated engines,
    /// whose runs always are.
    pub kvm: Option<tierscope_kvm::guard::RealCheck>,
}

/// A whole experiment's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub duration_ns: u64,
    pub block_size: u64,
    /// The workload's memory (heatmaps plot offsets from its start).
    pub heap: AddrRange,
    pub mappings: Vec<Mapping>,
    pub monitors: Vec<MonitorRun>,
    /// Tiering policy runs (empty without `[tiering]`).
    pub policies: Vec<crate::tiering_run::PolicyRun>,
}

/// Shared between a run and whoever watches it: progress per monitor and a cancel flag.
#[derive(Debug)]
pub struct Progress {
    done_ns: Vec<AtomicU64>,
    total_ns: u64,
    cancel: AtomicBool,
}

impl Progress {
    pub fn new(monitors: usize, total_ns: u64) -> Self {
        Progress {
            done_ns: (0..monitors).map(|_| AtomicU64::new(0)).collect(),
            total_ns,
            cancel: AtomicBool::new(false),
        }
    }

    /// One slot per run of `exp`: its monitors, then its tiering policy runs.
    pub fn for_experiment(exp: &crate::Experiment) -> Self {
        Progress::new(
            exp.monitors.len() + crate::tiering_run::jobs(exp).len(),
            exp.duration_ns,
        )
    }

    /// Simulated nanoseconds done, summed over monitors, and the total to do.
    pub fn fraction(&self) -> (u64, u64) {
        let done = self.done_ns.iter().map(|d| d.load(Ordering::Relaxed)).sum();
        (done, self.total_ns * self.done_ns.len() as u64)
    }

    /// Progress of run `index` (monitors first, then tiering policy runs; indices beyond
    /// the runs the watcher counts are ignored).
    pub fn set(&self, index: usize, now_ns: u64) {
        if let Some(d) = self.done_ns.get(index) {
            d.store(now_ns, Ordering::Relaxed);
        }
    }

    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}
