//! The neighbour tenant of a policy run (`[tiering.neighbour]`): its engine, its clock and
//! its per-tenant counter. Its clock is its CPU time: each step it advances by the quota
//! in force times the wall time the step spent in an on-phase, so a CPU quota throttles
//! exactly the requests its program issues. The requests of each step load its tier in
//! the victim's performance window (`tiering_run`). A throttling policy reads its counter
//! at the policy's interval: NEMO's Listing 3 (one state every request of the tenant adds
//! 1 to, read and reset) on the engine's memory-controller telemetry, or MBM (the exact
//! count of its requests, polled).

use serde::Serialize;
use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, ReadEffect, TelemetryId, TelemetrySpec, Translation, Update,
};
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, Capabilities, Engine, Nanos, RegionReport, Snapshot};
use tierscope_monitors::Truth;
use tierscope_tiering::policy::throttle::{TenantTelemetry, REQUEST_BYTES};
use tierscope_tiering::Policy;

use crate::config::{Experiment, Neighbour, Workload};
use crate::run::RunError;

/// NEMO's keys: 2 MiB physical regions (Listing 3's `HP_SHIFT`).
const KEY_SHIFT: u32 = 21;

/// What the neighbour did in one policy run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NeighbourRun {
    pub name: String,
    /// The counter the policy read ("nemo", "mbm"), when one did.
    pub telemetry: Option<TenantTelemetry>,
    /// Bytes per second of the run it issued, and the tier served it (when the tier is
    /// saturated the tenants share it in proportion to their demand).
    pub bandwidth: f64,
    pub served_bandwidth: f64,
    /// On-phases started, those in which the quota in force was cut, and the mean time
    /// from a phase's start to that cut, ns.
    pub on_phases: u64,
    pub detected: u64,
    pub detection_ns: Option<f64>,
    /// Mean quota in force when an on-phase starts.
    pub start_quota: Option<f64>,
    /// Counter readings the policy received, and their CPU time, ns.
    pub readings: u64,
    pub telemetry_cpu_ns: Option<f64>,
    /// The requests the readings counted over those issued, minus 1.
    pub bandwidth_error: Option<f64>,
}

/// The counter a throttling policy reads.
enum Counter {
    /// NEMO: the telemetry registered on the neighbour's engine.
    Nemo(TelemetryId),
    /// MBM: the tenant's requests at the last poll.
    Mbm { at_last: u64 },
}

struct Reader {
    telemetry: TenantTelemetry,
    counter: Counter,
    interval: Nanos,
    next: Nanos,
    last: Nanos,
    reads: u64,
    /// Requests the readings counted.
    counted: u64,
    snapshot: Snapshot,
}

/// The neighbour tenant, stepped by the drive loop.
pub struct NeighbourTenant {
    engine: Box<dyn Engine>,
    name: String,
    on: Nanos,
    cycle: Nanos,
    offset: Nanos,
    step: Nanos,
    pub tier: usize,
    /// Its clock: CPU time, ns.
    cpu_ns: f64,
    /// Wall time of the last step, and the quota in force since.
    last: Nanos,
    quota: f64,
    next_step: Nanos,
    /// Requests issued so far.
    issued: u64,
    /// The throttling policy and its counter, when the run has one.
    policy: Option<(Box<dyn Policy>, Reader)>,
    /// The on-phase seen last (its index), and its start while no cut was seen in it.
    phase: Option<u64>,
    phase_start: Option<Nanos>,
    on_phases: u64,
    detected: u64,
    detection_sum: f64,
    start_quota_sum: f64,
}

impl NeighbourTenant {
    /// The neighbour of `exp`, read by `policy` when one throttles it (`telemetry`, read
    /// every `interval`).
    pub fn new(
        exp: &Experiment,
        n: &Neighbour,
        tier: usize,
        policy: Option<(Box<dyn Policy>, TenantTelemetry, Nanos)>,
    ) -> Result<Self, RunError> {
        let mut own = exp.clone();
        own.seed = Rng::for_stream(exp.seed, "neighbour").next_u64();
        own.workload = Workload {
            spec: n.spec(),
            rate: n.rate.0,
            threads: 1,
            accesses_per_op: None,
            program: None,
            trace: None,
        };
        own.tiering = None;
        let mut engine = crate::build::engine(&own, Capabilities::NONE, Truth::Accessed)?;
        let heap = engine.heap();
        let policy = match policy {
            None => None,
            Some((p, telemetry, interval)) => {
                let counter = match telemetry {
                    TenantTelemetry::Nemo => Counter::Nemo(listing3(engine.as_mut(), heap)?),
                    TenantTelemetry::Mbm => Counter::Mbm { at_last: 0 },
                };
                let reader = Reader {
                    telemetry,
                    counter,
                    interval,
                    next: interval,
                    last: 0,
                    reads: 0,
                    counted: 0,
                    snapshot: Snapshot {
                        start: 0,
                        end: 0,
                        regions: vec![RegionReport {
                            start: heap.start,
                            end: heap.end,
                            nr_accesses: 0,
                            age: 0,
                        }],
                    },
                };
                Some((p, reader))
            }
        };
        let cycle = n.cycle_ns();
        let offset = match n.offset {
            Some(o) => o.0,
            None => (Rng::for_stream(exp.seed, "neighbour/phase").unit() * cycle as f64) as u64,
        };
        Ok(NeighbourTenant {
            engine,
            name: n.name.clone(),
            on: n.on.0,
            cycle,
            offset: offset.min(cycle.saturating_sub(1)),
            step: n.step.0,
            tier,
            cpu_ns: 0.0,
            last: 0,
            quota: 1.0,
            next_step: n.step.0,
            issued: 0,
            policy,
            phase: None,
            phase_start: None,
            on_phases: 0,
            detected: 0,
            detection_sum: 0.0,
            start_quota_sum: 0.0,
        })
    }

    /// Position in the on/off cycle at `t`: (cycle index, time into it).
    fn position(&self, t: Nanos) -> (u64, Nanos) {
        let s = t + self.cycle - self.offset;
        (s / self.cycle, s % self.cycle)
    }

    /// On-phase time in [0, t].
    fn on_time(&self, t: Nanos) -> Nanos {
        let on_upto = |t: Nanos| {
            let (k, r) = self.position(t);
            k * self.on + r.min(self.on)
        };
        on_upto(t) - on_upto(0)
    }

    pub fn next_wakeup(&self) -> Nanos {
        match &self.policy {
            Some((_, r)) => self.next_step.min(r.next),
            None => self.next_step,
        }
    }

    /// Runs the tenant up to wall time `now`; returns the bytes it issued since the last
    /// call. Reads its counter when a reading is due, and takes the quota in force next.
    pub fn wake(&mut self, now: Nanos) -> f64 {
        let busy = self.on_time(now) - self.on_time(self.last);
        self.cpu_ns += self.quota * busy as f64;
        self.engine.advance_to(self.cpu_ns.round() as Nanos);
        let total = self.engine.stats().accesses;
        let new = total - self.issued;
        self.issued = total;
        if let Some((policy, r)) = &mut self.policy {
            if now >= r.next {
                let requests = match &mut r.counter {
                    Counter::Nemo(id) => read_state(self.engine.as_mut(), *id),
                    Counter::Mbm { at_last } => {
                        let n = total - *at_last;
                        *at_last = total;
                        n
                    }
                };
                r.reads += 1;
                r.counted += requests;
                r.snapshot.start = r.last;
                r.snapshot.end = now;
                r.snapshot.regions[0].nr_accesses = requests.min(u32::MAX as u64) as u32;
                policy.observe(&r.snapshot);
                r.last = now;
                r.next = now + r.interval;
            }
        }
        let quota = match &mut self.policy {
            Some((policy, _)) => policy.quota(now),
            None => 1.0,
        };
        let (k, into) = self.position(now);
        if into < self.on {
            if self.phase != Some(k) {
                self.phase = Some(k);
                self.on_phases += 1;
                self.start_quota_sum += self.quota;
                // A phase already running when the run starts counts from the start.
                self.phase_start = Some(now.saturating_sub(into));
            }
            if quota < self.quota {
                if let Some(start) = self.phase_start.take() {
                    self.detected += 1;
                    self.detection_sum += (now - start) as f64;
                }
            }
        }
        self.quota = quota;
        self.last = now;
        if now >= self.next_step {
            self.next_step = (now / self.step + 1) * self.step;
        }
        new as f64 * REQUEST_BYTES
    }

    /// The run's account; `served` is the bytes the tier served it, `duration` the run's.
    pub fn finish(
        mut self,
        served: f64,
        duration: Nanos,
        cost: &tierscope_core::CostModel,
    ) -> NeighbourRun {
        let secs = duration as f64 * 1e-9;
        let (telemetry, readings, cpu, error) = match &mut self.policy {
            None => (None, 0, None, None),
            Some((_, r)) => {
                let cpu = r.telemetry.cpu_ns(r.reads, cost);
                // What the counter still holds belongs to the counted total (a last read,
                // the experiment's, not charged).
                let rest = match &mut r.counter {
                    Counter::Nemo(id) => read_state(self.engine.as_mut(), *id),
                    Counter::Mbm { at_last } => self.issued - *at_last,
                };
                let counted = r.counted + rest;
                let error = (self.issued > 0).then(|| counted as f64 / self.issued as f64 - 1.0);
                (Some(r.telemetry), r.reads, Some(cpu), error)
            }
        };
        NeighbourRun {
            name: self.name,
            telemetry,
            bandwidth: self.issued as f64 * REQUEST_BYTES / secs,
            served_bandwidth: served / secs,
            on_phases: self.on_phases,
            detected: self.detected,
            detection_ns: (self.detected > 0).then(|| self.detection_sum / self.detected as f64),
            start_quota: (self.on_phases > 0).then(|| self.start_quota_sum / self.on_phases as f64),
            readings,
            telemetry_cpu_ns: cpu,
            bandwidth_error: error,
        }
    }
}

/// Registers Listing 3's rule on the engine's memory-controller telemetry: every 2 MiB
/// region of `heap` translates to the one state, each request adds 1, a read resets it.
fn listing3(engine: &mut dyn Engine, heap: AddrRange) -> Result<TelemetryId, RunError> {
    let m = engine.as_machine();
    let mut keys = vec![];
    let mut va = heap.start;
    while va < heap.end {
        if let Some(pa) = m.phys_addr(va) {
            keys.push(pa >> KEY_SHIFT);
        }
        va += 1 << KEY_SHIFT;
    }
    let entries = (keys.iter().max().map_or(1, |k| k + 1)).next_power_of_two();
    let spec = TelemetrySpec {
        filter: Filter {
            kinds: Kinds::Both,
            range: AddrRange::new(0, entries << KEY_SHIFT),
        },
        translation: Translation {
            primary: MaskShift::bits(KEY_SHIFT, KEY_SHIFT + entries.trailing_zeros()),
            sub: None,
        },
        update: Update::COUNT,
        notify: None,
        read_effect: ReadEffect::Reset(0),
        entries: entries as u32,
        states: 1,
        width: 64,
    };
    let nemo = m
        .mem_telemetry()
        .ok_or_else(|| RunError::Engine("the neighbour's engine has no NEMO telemetry".into()))?;
    let bad = |e: String| RunError::Engine(format!("neighbour's NEMO counter: {e}"));
    let id = nemo.register(&spec).map_err(|e| bad(e.to_string()))?;
    for key in keys {
        nemo.set_translation(id, key, 0)
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(id)
}

/// Reads (and resets) the counter's state.
fn read_state(engine: &mut dyn Engine, id: TelemetryId) -> u64 {
    engine
        .as_machine()
        .mem_telemetry()
        .expect("registered on this engine")
        .read(id, 0)
        .expect("the telemetry and its state exist")
}
