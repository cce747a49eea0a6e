//! Noisy-neighbour throttling (NEMO paper §5.3): read the neighbour tenant's memory
//! bandwidth from a per-tenant counter at a fixed interval and cap it with a cgroup CPU
//! quota. The counter is NEMO's (Listing 3: every request of the tenant adds 1 to one
//! state, read and reset) or MBM's (a per-tenant byte counter polled through PQoS); the
//! runner reads it on the neighbour's engine (`[tiering.neighbour]`) and hands each
//! reading over as a snapshot of one region whose `nr_accesses` is the 64-byte requests
//! since the last read. The policy moves no pages: its output is the quota
//! ([`Policy::quota`]).
//!
//! The controller: an EWMA of the readings; the quota `q` moves a share `gain` towards the
//! one that would bring the EWMA to the cap, `q * target / ewma` (the tenant's bandwidth
//! taken as proportional to its CPU share), clamped to `[min_quota, 1]`. A quota write
//! takes `actuation` to come into force (cgroup CPU bandwidth control acts on its next
//! period), and with `hold_while_actuating` no new write is decided while one is in
//! flight (the previous one's effect is not visible yet). docs/techniques/THROTTLE.md.

use std::collections::VecDeque;

use super::{Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::units::{Duration, Size, NS_PER_MS};
use tierscope_core::{CostModel, FieldError, Nanos, PolicyInput, Snapshot};

/// Bytes one counted request moves (NEMO's Listing 3 adds 1 per 64-byte request; MBM's
/// byte count is read as requests of this size).
pub const REQUEST_BYTES: f64 = 64.0;

/// CPU time of one MBM poll through PQoS, ns: the paper's §5.3 reports 32 % of a core at
/// a 1 ms polling interval, so 320 us a poll.
pub const MBM_POLL_NS: f64 = 320_000.0;

/// Which per-tenant counter the policy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantTelemetry {
    /// NEMO's per-tenant counter (Listing 3), one state read per reading (as the
    /// prototype ran it: notifications emulated by polling the counter, §4).
    Nemo,
    /// Intel MBM through PQoS: an exact per-tenant byte count, polled.
    Mbm,
}

impl TenantTelemetry {
    /// CPU time of `reads` readings, ns: NEMO's state reads at the cost model's cycles,
    /// MBM's polls at [`MBM_POLL_NS`].
    pub fn cpu_ns(self, reads: u64, cost: &CostModel) -> f64 {
        match self {
            TenantTelemetry::Nemo => reads as f64 * cost.nemo_state_read / cost.cpu_hz * 1e9,
            TenantTelemetry::Mbm => reads as f64 * MBM_POLL_NS,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThrottleConfig {
    /// The counter read.
    pub telemetry: TenantTelemetry,
    /// How often it is read.
    pub interval: Duration,
    /// The neighbour's bandwidth cap, bytes per second (written as a size: "1GiB").
    pub target: Size,
    /// Weight of the newest reading in the EWMA, (0, 1].
    pub ewma: f64,
    /// Share of the way to the ideal quota taken per decision, (0, 1].
    pub gain: f64,
    /// Time a quota write takes to come into force.
    pub actuation: Duration,
    /// The lowest quota, (0, 1].
    pub min_quota: f64,
    /// No new write while one is in flight.
    pub hold_while_actuating: bool,
}

impl Default for ThrottleConfig {
    /// §5.3's setup: a 1 GiB/s cap, 10 ms actuation; NEMO's counter polled every 1 ms (the
    /// prototype's emulated notifications). Our readings: EWMA weight 0.5, gain 0.5, a
    /// 1 % floor.
    fn default() -> Self {
        ThrottleConfig {
            telemetry: TenantTelemetry::Nemo,
            interval: Duration(NS_PER_MS),
            target: Size(1 << 30),
            ewma: 0.5,
            gain: 0.5,
            actuation: Duration(10 * NS_PER_MS),
            min_quota: 0.01,
            hold_while_actuating: true,
        }
    }
}

impl PolicyTechnique for ThrottleConfig {
    const HELP: &'static str = "noisy-neighbour throttling: the [tiering.neighbour] tenant's \
                                bandwidth from NEMO or MBM capped by a CPU quota (no moves)";

    fn by_name() -> Option<Self> {
        Some(Self::default())
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::TenantCounter
    }

    fn period_ns(&self) -> Option<u64> {
        Some(self.interval.0)
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        if self.interval.0 == 0 {
            return Err(FieldError::new("interval", "must be positive"));
        }
        if self.target.0 == 0 {
            return Err(FieldError::new("target", "must be a positive bandwidth"));
        }
        for (field, v) in [
            ("ewma", self.ewma),
            ("gain", self.gain),
            ("min_quota", self.min_quota),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(FieldError::new(field, format!("must be in (0, 1], got {v}")));
            }
        }
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        // At most one write per reading, so the writes in flight fit one actuation.
        let in_flight = (self.actuation.0 / self.interval.0.max(1)) as usize + 2;
        Box::new(Throttle {
            config: self.clone(),
            ewma: 0.0,
            decided: 1.0,
            applied: 1.0,
            pending: VecDeque::with_capacity(in_flight),
        })
    }
}

pub struct Throttle {
    config: ThrottleConfig,
    ewma: f64,
    /// The last quota written, and the one in force.
    decided: f64,
    applied: f64,
    /// Writes not in force yet: (due, quota), in time order.
    pending: VecDeque<(Nanos, f64)>,
}

impl Throttle {
    /// One reading of `bandwidth` bytes/s at `now`: updates the EWMA and maybe writes a
    /// new quota.
    fn reading(&mut self, now: Nanos, bandwidth: f64) {
        let p = &self.config;
        self.ewma = p.ewma * bandwidth + (1.0 - p.ewma) * self.ewma;
        if p.hold_while_actuating && self.pending.back().is_some_and(|&(due, _)| due > now) {
            return;
        }
        let q = self.decided;
        let ideal = if self.ewma > 0.0 {
            (q * p.target.0 as f64 / self.ewma).min(1.0)
        } else {
            1.0
        };
        let next = (q + p.gain * (ideal - q)).clamp(p.min_quota, 1.0);
        if next != q {
            self.decided = next;
            self.pending.push_back((now + p.actuation.0, next));
        }
    }
}

impl Policy for Throttle {
    fn observe(&mut self, s: &Snapshot) {
        let span = s.end.saturating_sub(s.start);
        if span == 0 {
            return;
        }
        let requests: u64 = s.regions.iter().map(|r| u64::from(r.nr_accesses)).sum();
        self.reading(s.end, requests as f64 * REQUEST_BYTES / (span as f64 * 1e-9));
    }

    fn next_action(&self) -> Nanos {
        Nanos::MAX
    }

    fn act(&mut self, _: &View, _: &mut Vec<Move>) {}

    fn quota(&mut self, now: Nanos) -> f64 {
        while let Some(&(due, q)) = self.pending.front() {
            if due > now {
                break;
            }
            self.applied = q;
            self.pending.pop_front();
        }
        self.applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::RegionReport;

    const MS: Nanos = NS_PER_MS;

    fn throttle(hold: bool) -> Throttle {
        let c = ThrottleConfig {
            target: Size(1_600_000),
            hold_while_actuating: hold,
            ..ThrottleConfig::default()
        };
        let mut t = Throttle {
            config: c.clone(),
            ewma: 0.0,
            decided: 1.0,
            applied: 1.0,
            pending: VecDeque::new(),
        };
        t.pending.reserve(16);
        t
    }

    /// A reading over `(end - 1 ms, end]` of `bandwidth` bytes/s.
    fn snapshot(end: Nanos, bandwidth: f64) -> Snapshot {
        let requests = (bandwidth * 1e-3 / REQUEST_BYTES).round() as u32;
        Snapshot {
            start: end - MS,
            end,
            regions: vec![RegionReport {
                start: 0,
                end: 1 << 21,
                nr_accesses: requests,
                age: 0,
            }],
        }
    }

    #[test]
    fn step_response_by_hand() {
        // Target 1.6 MB/s, readings of 6.4 MB/s (100 requests a ms): EWMA 3.2, 4.8 (MB/s);
        // ideal quotas 0.5 then 0.75 * 1/3 = 0.25; with gain 0.5 the quota goes 0.75, then
        // 0.5. Each write is in force 10 ms after its reading.
        let mut t = throttle(false);
        t.observe(&snapshot(MS, 6.4e6));
        assert_eq!((t.ewma, t.decided), (3.2e6, 0.75));
        t.observe(&snapshot(2 * MS, 6.4e6));
        assert_eq!((t.ewma, t.decided), (4.8e6, 0.5));
        assert_eq!(t.quota(11 * MS - 1), 1.0);
        assert_eq!(t.quota(11 * MS), 0.75);
        assert_eq!(t.quota(12 * MS), 0.5);
    }

    #[test]
    fn holding_skips_decisions_while_a_write_is_in_flight() {
        let mut t = throttle(true);
        t.observe(&snapshot(MS, 6.4e6));
        t.observe(&snapshot(2 * MS, 6.4e6));
        assert_eq!((t.ewma, t.decided, t.pending.len()), (4.8e6, 0.75, 1));
        t.observe(&snapshot(11 * MS, 6.4e6));
        assert!(t.decided < 0.75);
    }

    #[test]
    fn floored_at_min_quota_and_recovers_when_the_neighbour_sleeps() {
        let mut t = throttle(false);
        for i in 1..60 {
            t.observe(&snapshot(i * MS, 1e9));
        }
        assert_eq!(t.decided, 0.01);
        for i in 60..200 {
            t.observe(&snapshot(i * MS, 0.0));
        }
        assert!(t.decided > 0.999, "{}", t.decided);
        assert!(t.quota(300 * MS) > 0.999);
    }

    #[test]
    fn telemetry_cpu_by_hand() {
        // 1000 NEMO state reads at 150 cycles and 2.1 GHz; 100 MBM polls at 320 us.
        let cost = CostModel::default();
        let nemo = TenantTelemetry::Nemo.cpu_ns(1000, &cost);
        assert!((nemo - 1000.0 * cost.nemo_state_read / cost.cpu_hz * 1e9).abs() < 1e-9);
        assert_eq!(TenantTelemetry::Mbm.cpu_ns(100, &cost), 32e6);
    }

    #[test]
    fn bad_settings_name_their_field() {
        let field = |c: ThrottleConfig| c.check(2).unwrap_err().field;
        let d = ThrottleConfig::default;
        assert_eq!(
            field(ThrottleConfig {
                interval: Duration(0),
                ..d()
            }),
            "interval"
        );
        assert_eq!(field(ThrottleConfig { gain: 0.0, ..d() }), "gain");
        assert_eq!(
            field(ThrottleConfig {
                min_quota: 1.5,
                ..d()
            }),
            "min_quota"
        );
    }
}
