//! NEMO's third use case (paper §5.3): detect a memory-bandwidth noisy neighbour and
//! throttle it with a cgroup CPU quota, fed by NEMO's per-tenant counters and
//! notifications (Listing 3) or by MBM-style polling, and measure what the victim's
//! memory latency, the neighbour's throughput and the telemetry's CPU time come to.
//!
//! `tenants` places the tenants' pages and generates their requests; `contention` turns
//! demand into served bandwidth and the victim's latency law (modelled); `telemetry` is
//! the NEMO and MBM side; `controller` the QoS loop; `sim` steps it all through time.
//! [`run`] gives the table of docs/techniques/NEMO.md ("Use case 3").

pub mod contention;
pub mod controller;
pub mod sim;
pub mod telemetry;
pub mod tenants;

pub use controller::{ControllerParams, QuotaController};
pub use sim::{run, run_one, Row, Table, Technique};
pub use tenants::{Layout, OnOff, Tenant, Walk};

use crate::driver::NemoConfig;
use tierscope_core::tiers::{TierSpec, MAX_UTILISATION, TIER_PRESETS};
use tierscope_core::{CostModel, FieldError};

const GIB: f64 = (1u64 << 30) as f64;

/// Everything a run needs. [`Config::paper`] is §5.3's setup with our readings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub seed: u64,
    pub duration_s: f64,
    /// Time step of the simulation; every interval below is a whole number of steps.
    pub step_s: f64,
    /// The memory the tenants share: idle latency, bandwidth, loaded-latency `queueing`,
    /// capacity (a power of two: Listing 3's mask covers all of it).
    pub device: TierSpec,
    pub nemo: NemoConfig,
    pub victim: Tenant,
    /// `demand` is its bandwidth at a full core while running.
    pub neighbour: Tenant,
    /// The neighbour's on/off shape; `offset_s: None` draws it from the seed.
    pub on_s: f64,
    pub off_s: f64,
    pub offset_s: Option<f64>,
    /// Steady tenants besides the victim (none in the paper's setup).
    pub background: Vec<Tenant>,
    /// Controller constants; `target` is the neighbour's cap.
    pub controller: ControllerParams,
    /// NEMO: counters read and reset every window (§5.3: "clears NEMO counters at a
    /// 50 ms interval"); the notify predicate is the cap over one window.
    pub nemo_window_s: f64,
    /// The prototype's emulated notifications: the counter polled this often (§4: "every
    /// 1 ms on a core").
    pub nemo_emulated_poll_s: f64,
    /// MBM polling intervals to compare (§5.3: 1 ms to 100 ms).
    pub mbm_intervals_s: Vec<f64>,
    /// CPU time of one MBM poll, s.
    pub mbm_poll_cost_s: f64,
    /// Cycles of NEMO state reads and interrupts (`nemo_state_read`, `nemo_interrupt`).
    pub cost: CostModel,
}

impl Config {
    /// §5.3's setup: the CXL device NEMO was measured on (380 ns, 16.4 GiB/s, §4) with
    /// 16 GiB of DRAM; the prototype's NEMO; a 1 GiB/s cap; 0.5 s on / 0.5 s off; 10 ms
    /// actuation; 50 ms NEMO windows; MBM at 1, 10 and 100 ms costing 320 us per poll
    /// (32% of a core at 1 ms). Our readings (docs/techniques/NEMO.md): victim 2 GiB/s of random
    /// lines, 10% writes; neighbour streaming non-temporal stores over 2 GiB at the
    /// device's full bandwidth; EWMA weight 0.5, learning rate 0.5.
    pub fn paper() -> Self {
        let cxl = TIER_PRESETS
            .iter()
            .find(|p| p.name == "cxl")
            .expect("the cxl preset exists");
        let device = TierSpec {
            name: "cxl".into(),
            capacity: 16 << 30,
            latency_ns: cxl.latency_ns,
            bandwidth: cxl.bandwidth,
            queueing: cxl.queueing,
            // The contention model queues by `queueing`, not by the preset's measured curve.
            curve: Vec::new(),
            background: 0.0,
        };
        Config {
            seed: 1,
            duration_s: 10.0,
            step_s: 100e-6,
            neighbour: Tenant {
                name: "neighbour".into(),
                huge_pages: 1024,
                demand: device.bandwidth,
                write_share: 1.0,
                walk: Walk::Sequential,
                jitter: 0.0,
            },
            device,
            nemo: NemoConfig::prototype(),
            victim: Tenant {
                name: "victim".into(),
                huge_pages: 2048,
                demand: 2.0 * GIB,
                write_share: 0.1,
                walk: Walk::Random,
                jitter: 0.1,
            },
            on_s: 0.5,
            off_s: 0.5,
            offset_s: None,
            background: Vec::new(),
            controller: ControllerParams {
                target: GIB,
                ewma: 0.5,
                gain: 0.5,
                actuation_s: 0.010,
                min_quota: 0.01,
                hold_while_actuating: true,
            },
            nemo_window_s: 0.050,
            nemo_emulated_poll_s: 0.001,
            mbm_intervals_s: vec![0.001, 0.010, 0.100],
            mbm_poll_cost_s: 320e-6,
            cost: CostModel::default(),
        }
    }

    /// Every tenant: victim, neighbour, then the background ones.
    pub fn tenants(&self) -> Vec<&Tenant> {
        let mut t = vec![&self.victim, &self.neighbour];
        t.extend(self.background.iter());
        t
    }

    /// `seconds` as a whole number of steps, or an error naming `field`.
    pub fn steps(&self, field: &str, seconds: f64) -> Result<u64, FieldError> {
        let n = (seconds / self.step_s).round();
        if !(seconds > 0.0 && n >= 1.0 && (n * self.step_s - seconds).abs() <= 1e-9 * seconds) {
            return Err(FieldError::new(
                field,
                format!(
                    "must be a positive whole number of steps of {} s, got {seconds}",
                    self.step_s
                ),
            ));
        }
        Ok(n as u64)
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        if !(self.step_s.is_finite() && self.step_s > 0.0) {
            return Err(FieldError::new("step_s", "must be a positive time"));
        }
        self.steps("duration_s", self.duration_s)?;
        self.steps("nemo_window_s", self.nemo_window_s)?;
        self.steps("nemo_emulated_poll_s", self.nemo_emulated_poll_s)?;
        let a = self.controller.actuation_s;
        if !(a.is_finite() && a >= 0.0) {
            return Err(FieldError::new(
                "controller.actuation_s",
                format!("must be a time >= 0, got {a}"),
            ));
        }
        for (i, &s) in self.mbm_intervals_s.iter().enumerate() {
            self.steps(&format!("mbm_intervals_s[{i}]"), s)?;
        }
        let d = &self.device;
        if !d.capacity.is_power_of_two() || d.capacity < tenants::HUGE_PAGE {
            return Err(FieldError::new(
                "device.capacity",
                format!(
                    "must be a power of two of at least 2 MiB, got {}",
                    d.capacity
                ),
            ));
        }
        if !(d.bandwidth > 0.0 && d.latency_ns > 0.0 && d.queueing >= 0.0) {
            return Err(FieldError::new(
                "device",
                "needs bandwidth > 0, latency_ns > 0 and queueing >= 0",
            ));
        }
        for (name, t) in [("victim", &self.victim), ("neighbour", &self.neighbour)] {
            t.validate().map_err(|e| e.under(name))?;
        }
        for (i, t) in self.background.iter().enumerate() {
            t.validate()
                .map_err(|e| e.under(&format!("background[{i}]")))?;
        }
        if !(self.on_s > 0.0 && self.off_s >= 0.0) {
            return Err(FieldError::new("on_s", "needs on_s > 0 and off_s >= 0"));
        }
        if let Some(o) = self.offset_s {
            if !(o >= 0.0 && o < self.on_s + self.off_s) {
                return Err(FieldError::new(
                    "offset_s",
                    format!("must be in [0, on_s + off_s), got {o}"),
                ));
            }
        }
        let c = &self.controller;
        if !(c.target > 0.0 && c.target < d.bandwidth * MAX_UTILISATION) {
            return Err(FieldError::new(
                "controller.target",
                "must be a bandwidth above 0 and below the device's",
            ));
        }
        if !(c.ewma > 0.0 && c.ewma <= 1.0) {
            return Err(FieldError::new("controller.ewma", "must be in (0, 1]"));
        }
        if !(c.gain > 0.0 && c.gain <= 1.0) {
            return Err(FieldError::new("controller.gain", "must be in (0, 1]"));
        }
        if !(c.min_quota > 0.0 && c.min_quota <= 1.0) {
            return Err(FieldError::new("controller.min_quota", "must be in (0, 1]"));
        }
        if self.mbm_poll_cost_s.is_nan() || self.mbm_poll_cost_s < 0.0 {
            return Err(FieldError::new("mbm_poll_cost_s", "must be >= 0"));
        }
        let pages: Vec<u64> = self.tenants().iter().map(|t| t.huge_pages).collect();
        Layout::new(&pages, d.capacity / tenants::HUGE_PAGE)?;
        Ok(())
    }
}
