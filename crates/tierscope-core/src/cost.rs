//! What telemetry costs: the operations a monitor performs, counted, and a documented
//! model that turns the counts into CPU cycles of the monitoring thread.
//!
//! Core counts only what many techniques share: the page-table operations every engine
//! charges (reads, walks, test-and-clears, flushes) and the region-list bookkeeping of the
//! region-based monitors. An operation only one technique performs (a PEBS interrupt, a
//! NEMO state read, a PML exit) is an [`OpCounter`] that technique declares as a `static`
//! in its own file and charges with [`CostCounters::charge`]; core stores its count in a
//! small fixed slot array, so a new technique adds a cost without editing this file.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

/// An operation one technique counts, declared by that technique as a `static`:
///
/// ```
/// use tierscope_core::{CostCounters, OpCounter};
/// static FOO_WAKEUPS: OpCounter = OpCounter {
///     name: "foo_wakeups",
///     cycles: |m| m.scan_sleep,
///     on_workload_core: false,
/// };
/// let mut c = CostCounters::default();
/// c.charge(&FOO_WAKEUPS, 3);
/// assert_eq!(c.get(&FOO_WAKEUPS), 3);
/// ```
///
/// Counters are told apart by address, so each must be one `static` (not a `const`).
#[derive(Debug)]
pub struct OpCounter {
    /// Its key in a run's `cost` output (metrics.json, the Python result's `cost` dict).
    pub name: &'static str,
    /// Cycles one operation costs under a cost model.
    pub cycles: fn(&CostModel) -> f64,
    /// Whether the operation runs on the workload's cores (an interrupt, a fault, a VM
    /// exit) rather than on a monitoring thread ([`CostModel::workload_core_cycles`]).
    pub on_workload_core: bool,
}

/// How many distinct technique counters one machine's [`CostCounters`] holds: a monitor's
/// own plus its engine's (a PEBS monitor uses 3, a PML monitor on the exact engine 2).
pub const OP_SLOTS: usize = 8;

/// Work done by one monitor. The machine counts the page-table operations (so a monitor
/// cannot forget one); the monitor counts its own bookkeeping, the shared region-list
/// operations here and its technique's own through [`CostCounters::charge`].
#[derive(Debug, Clone, Copy, Default)]
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
    /// The technique counters charged so far, in the order first charged (allocation-free:
    /// a fixed array, found by the counter's address).
    ops: [Option<(&'static OpCounter, u64)>; OP_SLOTS],
}

/// The generic counters' names, in output order.
pub const GENERIC_COUNTERS: [&str; 10] = [
    "entries_read",
    "walk_steps",
    "clear_ops",
    "bits_cleared",
    "flushes_page",
    "flushes_full",
    "region_visits",
    "random_draws",
    "regions_split",
    "regions_merged",
];

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

    /// Adds `n` operations of a technique's counter `op`.
    ///
    /// # Panics
    /// When more than [`OP_SLOTS`] distinct counters are charged on one machine (raise
    /// the constant).
    #[inline]
    pub fn charge(&mut self, op: &'static OpCounter, n: u64) {
        if n == 0 {
            return;
        }
        for slot in self.ops.iter_mut() {
            match slot {
                Some((o, count)) if std::ptr::eq(*o, op) => {
                    *count += n;
                    return;
                }
                Some(_) => {}
                None => {
                    *slot = Some((op, n));
                    return;
                }
            }
        }
        panic!(
            "cost counter {}: more than {OP_SLOTS} technique counters on one machine",
            op.name
        );
    }

    /// How many operations of `op` were charged.
    pub fn get(&self, op: &OpCounter) -> u64 {
        self.ops()
            .find(|(o, _)| std::ptr::eq(*o, op))
            .map_or(0, |(_, n)| n)
    }

    /// The technique counters charged so far, in the order first charged.
    pub fn ops(&self) -> impl Iterator<Item = (&'static OpCounter, u64)> + '_ {
        self.ops.iter().map_while(|s| *s)
    }

    /// The generic counters with their names ([`GENERIC_COUNTERS`]).
    pub fn generic(&self) -> [(&'static str, u64); 10] {
        let v = [
            self.entries_read,
            self.walk_steps,
            self.clear_ops,
            self.bits_cleared,
            self.flushes_page,
            self.flushes_full,
            self.region_visits,
            self.random_draws,
            self.regions_split,
            self.regions_merged,
        ];
        std::array::from_fn(|i| (GENERIC_COUNTERS[i], v[i]))
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
        for (op, n) in o.ops() {
            self.charge(op, n);
        }
    }

    /// Writes the counters as one map: the generic ones, then every counter of `listed`
    /// (zero when never charged, so every run of an output lists the same keys), then any
    /// other charged counter. What a run's `cost` output is.
    pub fn serialize_listing<S: Serializer>(
        &self,
        listed: &[&'static OpCounter],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (name, v) in self.generic() {
            map.serialize_entry(name, &v)?;
        }
        for op in listed {
            map.serialize_entry(op.name, &self.get(op))?;
        }
        for (op, n) in self.ops() {
            if !listed.iter().any(|l| std::ptr::eq(*l, op)) {
                map.serialize_entry(op.name, &n)?;
            }
        }
        map.end()
    }
}

/// Equal when every counter is, whatever order the technique counters were charged in.
impl PartialEq for CostCounters {
    fn eq(&self, o: &Self) -> bool {
        self.generic() == o.generic()
            && self.ops().all(|(op, n)| o.get(op) == n)
            && o.ops().all(|(op, n)| self.get(op) == n)
    }
}

impl Eq for CostCounters {}

/// The generic counters and the technique counters charged (no zeros for the others).
impl Serialize for CostCounters {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.serialize_listing(&[], serializer)
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

    /// Cycles of all the work in `c`: the generic counters, then each technique counter
    /// at its own cost, in the order first charged.
    pub fn cycles(&self, c: &CostCounters) -> f64 {
        let generic = c.entries_read as f64 * self.entry_read
            + c.walk_steps as f64 * self.walk_step
            + c.clear_ops as f64 * self.clear
            + c.flushes_page as f64 * self.flush_page
            + c.flushes_full as f64 * self.flush_full
            + c.region_visits as f64 * self.region_visit
            + c.random_draws as f64 * self.random_draw
            + c.regions_split as f64 * self.region_split
            + c.regions_merged as f64 * self.region_merge;
        c.ops()
            .fold(generic, |sum, (op, n)| sum + n as f64 * (op.cycles)(self))
    }

    /// The cycles of `c` spent on the workload's own cores (PMU interrupts, hint faults,
    /// PML exits: the technique counters declared `on_workload_core`) rather than on a
    /// monitoring thread.
    pub fn workload_core_cycles(&self, c: &CostCounters) -> f64 {
        c.ops()
            .filter(|(op, _)| op.on_workload_core)
            .fold(0.0, |sum, (op, n)| sum + n as f64 * (op.cycles)(self))
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
    fn every_cost_is_documented_with_its_default() {
        // The `[cost]` table of the experiment reference lists each key a file may set.
        let doc = include_str!("../../../docs/reference/EXPERIMENTS.md");
        let m = CostModel::default();
        for (name, v) in m.costs() {
            let row = format!("| `{name}` | {v} |");
            assert!(doc.contains(&row), "EXPERIMENTS.md [cost] lacks {row}");
        }
        assert!(doc.contains("| `cpu_hz` | 2.1e9 |"));
    }

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

    static INTERRUPTS: OpCounter = OpCounter {
        name: "test_interrupts",
        cycles: |m| m.pmu_interrupt,
        on_workload_core: true,
    };
    static SAMPLES: OpCounter = OpCounter {
        name: "test_samples",
        cycles: |m| m.pmu_sample,
        on_workload_core: false,
    };

    #[test]
    fn technique_counters_count_add_and_cost_by_their_declaration() {
        let m = CostModel::default();
        let mut a = CostCounters::default();
        a.charge(&SAMPLES, 0);
        assert_eq!(a.ops().count(), 0, "a zero charge takes no slot");
        a.charge(&INTERRUPTS, 2);
        a.charge(&SAMPLES, 5);
        a.charge(&INTERRUPTS, 1);
        assert_eq!((a.get(&INTERRUPTS), a.get(&SAMPLES)), (3, 5));
        assert_eq!(m.cycles(&a), 3.0 * m.pmu_interrupt + 5.0 * m.pmu_sample);
        assert_eq!(m.workload_core_cycles(&a), 3.0 * m.pmu_interrupt);
        // Charged in the other order: equal all the same.
        let mut b = CostCounters::default();
        b.charge(&SAMPLES, 5);
        b.charge(&INTERRUPTS, 3);
        assert_eq!(a, b);
        b.charge(&SAMPLES, 1);
        assert_ne!(a, b);
        let mut sum = CostCounters::default();
        sum.add(&a);
        sum.add(&b);
        assert_eq!((sum.get(&INTERRUPTS), sum.get(&SAMPLES)), (6, 11));
    }

    #[test]
    fn the_listing_names_every_listed_counter_and_any_other_charged() {
        let mut c = CostCounters {
            bits_cleared: 7,
            ..Default::default()
        };
        c.charge(&SAMPLES, 4);
        let mut out = serde_json::Serializer::new(Vec::new());
        c.serialize_listing(&[&INTERRUPTS], &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.into_inner()).unwrap();
        // (serde_json's map sorts its keys.)
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        let mut want = GENERIC_COUNTERS.to_vec();
        want.extend(["test_interrupts", "test_samples"]);
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(v["bits_cleared"], 7);
        assert_eq!(v["test_interrupts"], 0);
        assert_eq!(v["test_samples"], 4);
    }

    #[test]
    #[should_panic(expected = "more than 8 technique counters")]
    fn running_out_of_slots_is_a_loud_error() {
        static MANY: [OpCounter; OP_SLOTS + 1] = [const {
            OpCounter {
                name: "many",
                cycles: |_| 1.0,
                on_workload_core: false,
            }
        }; OP_SLOTS + 1];
        let mut c = CostCounters::default();
        for op in &MANY {
            c.charge(op, 1);
        }
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
