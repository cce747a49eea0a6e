//! What telemetry costs: the operations a monitor performs, counted, and a documented
//! model that turns the counts into CPU cycles of the monitoring thread.

use serde::{Deserialize, Serialize};

/// Work done by one monitor. The machine counts the page-table operations (so a monitor
/// cannot forget one); the monitor counts its own bookkeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CostCounters {
    /// Page-table entries whose ACCESSED (or DIRTY) bit was read, including test-and-clear.
    pub entries_read: u64,
    /// Table levels a software walk stepped through to reach those entries.
    pub walk_steps: u64,
    /// Test-and-clear operations issued.
    pub clear_ops: u64,
    /// ACCESSED bits actually flipped from 1 to 0 (the paper's "bits flipped").
    pub bits_cleared: u64,
    /// Flushes of one page (INVLPG plus shootdown).
    pub flushes_page: u64,
    /// Full TLB and paging-structure-cache flushes (CR3 reload plus shootdown).
    pub flushes_full: u64,
    /// Regions visited in a sampling pass.
    pub region_visits: u64,
    /// Random numbers drawn.
    pub random_draws: u64,
    pub regions_split: u64,
    pub regions_merged: u64,
    /// PMU (PEBS) interrupts taken on the workload's cores.
    pub pmu_interrupts: u64,
    /// PMU samples processed (decoded, binned) by the monitor.
    pub pmu_samples: u64,
    /// PMU samples the kernel's throttling suppressed (no cost; for reports).
    pub pmu_throttled: u64,
    /// Per-page history updates of a linear scan.
    pub scan_pages: u64,
    /// Batches of a linear scan (each: take the mm lock, start a page-range walk).
    pub scan_batches: u64,
    /// Sleeps between batches (timer set-up, switch out and back in).
    pub scan_sleeps: u64,
    /// Pages drained from a write log (PML entries, dirty-log bits).
    pub log_pages: u64,
    /// NUMA hint faults taken on the workload's cores (NUMA balancing's scan).
    pub hint_faults: u64,
    /// Memory-controller telemetry states read (merged over controllers and channels).
    pub nemo_state_reads: u64,
    /// Memory-controller translation entries written (set or cleared).
    pub nemo_translation_writes: u64,
    /// Memory-controller telemetry interrupts handled (a notify predicate held).
    pub nemo_interrupts: u64,
    /// "PML log full" VM exits taken on the workload's cores (simulated PML).
    pub pml_exits: u64,
}

impl CostCounters {
    /// Charges a read of one entry's ACCESSED or DIRTY bit reached by a software walk of
    /// `steps` tables. Every engine charges through here, so they count alike.
    #[inline]
    pub fn charge_read(&mut self, steps: u64) {
        self.entries_read += 1;
        self.walk_steps += steps;
    }

    /// Charges a test-and-clear reached by a walk of `steps` tables that found the bit
    /// `was_set` (for ACCESSED, the paper's "bits flipped" counts these).
    #[inline]
    pub fn charge_test_and_clear(&mut self, steps: u64, was_set: bool) {
        self.charge_read(steps);
        self.clear_ops += 1;
        self.bits_cleared += was_set as u64;
    }

    pub fn add(&mut self, o: &CostCounters) {
        self.entries_read += o.entries_read;
        self.walk_steps += o.walk_steps;
        self.clear_ops += o.clear_ops;
        self.bits_cleared += o.bits_cleared;
        self.flushes_page += o.flushes_page;
        self.flushes_full += o.flushes_full;
        self.region_visits += o.region_visits;
        self.random_draws += o.random_draws;
        self.regions_split += o.regions_split;
        self.regions_merged += o.regions_merged;
        self.pmu_interrupts += o.pmu_interrupts;
        self.pmu_samples += o.pmu_samples;
        self.pmu_throttled += o.pmu_throttled;
        self.scan_pages += o.scan_pages;
        self.scan_batches += o.scan_batches;
        self.scan_sleeps += o.scan_sleeps;
        self.log_pages += o.log_pages;
        self.hint_faults += o.hint_faults;
        self.nemo_state_reads += o.nemo_state_reads;
        self.nemo_translation_writes += o.nemo_translation_writes;
        self.nemo_interrupts += o.nemo_interrupts;
        self.pml_exits += o.pml_exits;
    }
}

/// Cycles per counted operation, and the clock that turns cycles into a share of a core.
///
/// The defaults are estimates for a kernel thread on a Cascade Lake Xeon at 2.1 GHz (the
/// Telescope paper's Xeon Gold 6238M); docs/models/COST_MODEL.md explains each one. They are
/// modelled, not measured: override them in the experiment file to test sensitivity, or
/// take them from the KVM engine's calibration on a real host.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// Reading one entry's accessed bit once the walk has reached it (a cached load).
    pub entry_read: f64,
    /// One step of a software page-table walk (pointer chase, likely a cache miss).
    pub walk_step: f64,
    /// The atomic read-modify-write of a test-and-clear (lock btr), beyond the read.
    pub clear: f64,
    /// Initiating a single-page flush on another core (INVLPG + IPI shootdown).
    pub flush_page: f64,
    /// Initiating a full flush on another core (IPI shootdown, CR3 reload).
    pub flush_full: f64,
    /// Per region per sampling pass: list traversal, bookkeeping.
    pub region_visit: f64,
    /// One random number (the kernel's prandom).
    pub random_draw: f64,
    /// Splitting a region (allocation + list insert).
    pub region_split: f64,
    /// Merging two regions (weighted averages + free).
    pub region_merge: f64,
    /// One PEBS interrupt on a workload core: NMI entry/exit, draining the PEBS record,
    /// writing the perf ring buffer. It runs on the workload's core, not the monitor's.
    pub pmu_interrupt: f64,
    /// Reading one sample from the perf ring buffer and adding it to its bin.
    pub pmu_sample: f64,
    /// Updating one page's scan history (shift in the bit, recount).
    pub scan_page: f64,
    /// Starting one scan batch (mmap lock, walk set-up).
    pub scan_batch: f64,
    /// Going to sleep and waking up again between batches.
    pub scan_sleep: f64,
    /// Reading one logged page from a write log and adding it to its block.
    pub log_page: f64,
    /// One NUMA hint fault on a workload core: fault entry and exit, the protection
    /// restored, the hot-page check (the promotion itself is the migration engine's).
    pub hint_fault: f64,
    /// Reading one NEMO state from the controllers' telemetry region and merging its
    /// copies: the region is read in 64 B lines of 8 states (~1,000 cycles per uncached
    /// line over CXL, ~0.5 us), plus the merge.
    pub nemo_state_read: f64,
    /// Writing one NEMO translation entry (a posted MMIO store to each controller).
    pub nemo_translation_write: f64,
    /// Handling one NEMO notification interrupt (an MSI, the driver's dispatch).
    pub nemo_interrupt: f64,
    /// One "PML log full" VM exit on a workload core: the exit and re-entry round trip
    /// plus the host moving the 512 entries into its dirty bitmap (docs/models/COST_MODEL.md).
    pub pml_exit: f64,
    /// Clock of the monitoring core, Hz.
    pub cpu_hz: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            entry_read: 20.0,
            walk_step: 60.0,
            clear: 40.0,
            flush_page: 4_000.0,
            flush_full: 6_000.0,
            region_visit: 30.0,
            random_draw: 20.0,
            region_split: 400.0,
            region_merge: 250.0,
            pmu_interrupt: 4_200.0,
            pmu_sample: 200.0,
            scan_page: 30.0,
            scan_batch: 2_000.0,
            scan_sleep: 5_000.0,
            log_page: 100.0,
            hint_fault: 3_000.0,
            nemo_state_read: 150.0,
            nemo_translation_write: 200.0,
            nemo_interrupt: 4_200.0,
            pml_exit: 12_000.0,
            cpu_hz: 2.1e9,
        }
    }
}

/// Largest cycles per operation accepted (10^9: half a second at the default clock).
pub const MAX_OP_CYCLES: f64 = 1e9;
/// Range of `cpu_hz` accepted: 1 MHz to 100 GHz.
pub const CPU_HZ_RANGE: (f64, f64) = (1e6, 1e11);

impl CostModel {
    /// Every cost with its field name (`cpu_hz` apart).
    fn costs(&self) -> [(&'static str, f64); 20] {
        [
            ("entry_read", self.entry_read),
            ("walk_step", self.walk_step),
            ("clear", self.clear),
            ("flush_page", self.flush_page),
            ("flush_full", self.flush_full),
            ("region_visit", self.region_visit),
            ("random_draw", self.random_draw),
            ("region_split", self.region_split),
            ("region_merge", self.region_merge),
            ("pmu_interrupt", self.pmu_interrupt),
            ("pmu_sample", self.pmu_sample),
            ("scan_page", self.scan_page),
            ("scan_batch", self.scan_batch),
            ("scan_sleep", self.scan_sleep),
            ("log_page", self.log_page),
            ("hint_fault", self.hint_fault),
            ("nemo_state_read", self.nemo_state_read),
            ("nemo_translation_write", self.nemo_translation_write),
            ("nemo_interrupt", self.nemo_interrupt),
            ("pml_exit", self.pml_exit),
        ]
    }

    /// Cycles are counts: each cost in [0, [`MAX_OP_CYCLES`]], and a clock in
    /// [`CPU_HZ_RANGE`] (a zero clock would make every share of a core infinite).
    pub fn validate(&self) -> Result<(), crate::FieldError> {
        for (name, v) in self.costs() {
            if !(0.0..=MAX_OP_CYCLES).contains(&v) {
                return Err(crate::FieldError::new(
                    name,
                    format!("expected cycles from 0 to {MAX_OP_CYCLES:e}, got {v}"),
                ));
            }
        }
        let (lo, hi) = CPU_HZ_RANGE;
        if !(lo..=hi).contains(&self.cpu_hz) {
            return Err(crate::FieldError::new(
                "cpu_hz",
                format!("expected {lo:e} to {hi:e} Hz, got {}", self.cpu_hz),
            ));
        }
        Ok(())
    }

    pub fn cycles(&self, c: &CostCounters) -> f64 {
        c.entries_read as f64 * self.entry_read
            + c.walk_steps as f64 * self.walk_step
            + c.clear_ops as f64 * self.clear
            + c.flushes_page as f64 * self.flush_page
            + c.flushes_full as f64 * self.flush_full
            + c.region_visits as f64 * self.region_visit
            + c.random_draws as f64 * self.random_draw
            + c.regions_split as f64 * self.region_split
            + c.regions_merged as f64 * self.region_merge
            + c.pmu_interrupts as f64 * self.pmu_interrupt
            + c.pmu_samples as f64 * self.pmu_sample
            + c.scan_pages as f64 * self.scan_page
            + c.scan_batches as f64 * self.scan_batch
            + c.scan_sleeps as f64 * self.scan_sleep
            + c.log_pages as f64 * self.log_page
            + c.hint_faults as f64 * self.hint_fault
            + c.nemo_state_reads as f64 * self.nemo_state_read
            + c.nemo_translation_writes as f64 * self.nemo_translation_write
            + c.nemo_interrupts as f64 * self.nemo_interrupt
            + c.pml_exits as f64 * self.pml_exit
    }

    /// The cycles of `c` spent on the workload's own cores (PMU interrupts, hint faults,
    /// PML exits) rather than on a monitoring thread.
    pub fn workload_core_cycles(&self, c: &CostCounters) -> f64 {
        c.pmu_interrupts as f64 * self.pmu_interrupt
            + c.hint_faults as f64 * self.hint_fault
            + c.pml_exits as f64 * self.pml_exit
    }

    /// Nanoseconds `cycles` take at `cpu_hz`.
    pub fn nanos(&self, cycles: f64) -> f64 {
        cycles / self.cpu_hz * 1e9
    }

    /// Share of one core, in percent, spent over `elapsed_ns` of simulated time.
    pub fn cpu_percent(&self, c: &CostCounters, elapsed_ns: u64) -> f64 {
        if elapsed_ns == 0 {
            return 0.0;
        }
        100.0 * self.cycles(c) / (self.cpu_hz * elapsed_ns as f64 * 1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_linear_in_counts() {
        let m = CostModel::default();
        let one = CostCounters {
            entries_read: 1,
            ..Default::default()
        };
        let mut ten = CostCounters::default();
        for _ in 0..10 {
            ten.add(&one);
        }
        assert_eq!(m.cycles(&ten), 10.0 * m.entry_read);
        // 2.1e9 cycles in one second is one full core.
        let full = CostCounters {
            entries_read: (m.cpu_hz / m.entry_read) as u64,
            ..Default::default()
        };
        assert!((m.cpu_percent(&full, 1_000_000_000) - 100.0).abs() < 1e-6);
    }

    #[test]
    fn negative_costs_and_a_zero_clock_are_refused() {
        assert!(CostModel::default().validate().is_ok());
        let bad = |m: CostModel| m.validate().unwrap_err().field;
        let d = CostModel::default();
        assert_eq!(
            bad(CostModel {
                entry_read: -5.0,
                ..d
            }),
            "entry_read"
        );
        assert_eq!(
            bad(CostModel {
                pml_exit: f64::NAN,
                ..d
            }),
            "pml_exit"
        );
        assert_eq!(bad(CostModel { cpu_hz: 0.0, ..d }), "cpu_hz");
        assert_eq!(
            bad(CostModel {
                cpu_hz: -2.1e9,
                ..d
            }),
            "cpu_hz"
        );
        assert_eq!(
            bad(CostModel {
                cpu_hz: f64::INFINITY,
                ..d
            }),
            "cpu_hz"
        );
    }
}
