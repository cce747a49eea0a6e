//! Runs of tiering policies: per policy and per monitor it uses, the engine with tiers,
//! the monitor, the policy and the migration engine in one loop, and the performance
//! model over fixed windows of run time. The references (everything on the fastest tier,
//! everything on the slowest) are computed from the same windows' access counts: the
//! access stream does not depend on placement.

use crate::config::{Experiment, PolicyEntry, Tiering};
use crate::drive::{drive, Participant};
use crate::neighbour::{NeighbourRun, NeighbourTenant};
use crate::result::Progress;
use crate::run::RunError;
use serde::Serialize;
use tierscope_core::rng::Rng;
use tierscope_core::tiers::{TierSpec, TierTraffic, MAX_UTILISATION};
use tierscope_core::{Capabilities, Capability, Engine, Monitor, Nanos, PolicyInput};
use tierscope_monitors::Truth;
use tierscope_tiering::{
    window_time, AppModel, MigrationStats, Migrator, Move, Policy, PolicyConfig, View,
};

const TIERS: Capabilities = Capabilities::of(&[Capability::Tiers]);

/// One window of the performance model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierWindow {
    pub end_ns: u64,
    /// Accesses in the window.
    pub accesses: f64,
    /// Accesses served by each tier.
    pub served: Vec<f64>,
    /// Application time for the window's accesses, ns.
    pub app_ns: f64,
    /// The same accesses all on the fastest / slowest tier, ns.
    pub all_fast_ns: f64,
    pub all_slow_ns: f64,
    /// Loaded latency of each tier, ns.
    pub latency_ns: Vec<f64>,
    /// Bytes of the heap on each tier at the window's end.
    pub placed: Vec<u64>,
    /// Bytes copied by migrations in the window, per tier.
    pub copied: Vec<f64>,
}

/// Totals of one policy run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TierSummary {
    /// Application time for the whole run, migration stalls included, ns.
    pub app_ns: f64,
    pub all_fast_ns: f64,
    pub all_slow_ns: f64,
    /// Accesses per second of application time.
    pub throughput: f64,
    /// all-slow time / this run's time.
    pub speedup_over_slow: f64,
    /// This run's time / the oracle's (set when an oracle ran; 1 = as good).
    pub gap_to_oracle: Option<f64>,
    /// Share of accesses the fastest tier served.
    pub fast_hit_ratio: f64,
    pub migration_cpu_ns: u64,
    /// CPU the monitor took, ns (its cycles at the cost model's clock).
    pub monitor_cpu_ns: f64,
    /// Operations per second of application time, when the workload has operations.
    pub ops_per_s: Option<f64>,
    /// Operation latency percentiles p50, p95, p99 (ns), when it has operations.
    pub op_latency_ns: Option<[f64; 3]>,
}

/// Everything one policy run produced.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRun {
    /// `policy` or `policy@monitor`.
    pub name: String,
    pub policy: String,
    pub kind: &'static str,
    pub monitor: Option<String>,
    pub windows: Vec<TierWindow>,
    pub migration: MigrationStats,
    pub summary: TierSummary,
    /// The neighbour tenant, when the experiment has one.
    pub neighbour: Option<NeighbourRun>,
}

/// One policy run to do: the policy, and the monitor feeding it (index).
#[derive(Debug, Clone, Copy)]
pub struct PolicyJob {
    pub policy: usize,
    pub monitor: Option<usize>,
}

/// Every policy run of the experiment, in output order.
pub fn jobs(exp: &Experiment) -> Vec<PolicyJob> {
    let Some(t) = &exp.tiering else {
        return vec![];
    };
    let mut out = vec![];
    for (p, entry) in t.policies.iter().enumerate() {
        if entry.monitors.is_empty() {
            out.push(PolicyJob {
                policy: p,
                monitor: None,
            });
        }
        for m in &entry.monitors {
            let i = exp
                .monitors
                .iter()
                .position(|e| &e.name == m)
                .expect("validated");
            out.push(PolicyJob {
                policy: p,
                monitor: Some(i),
            });
        }
    }
    out
}

/// What a policy run's participants share: the migration engine, the performance model's
/// windows, and the moves being decided.
struct Shared<'a> {
    tiering: &'a Tiering,
    migrator: Migrator,
    windows: Vec<TierWindow>,
    traffic: Vec<TierTraffic>,
    copied: Vec<f64>,
    moves: Vec<Move>,
    /// Bytes the neighbour tenant issued to each tier since the last window closed, and
    /// the bytes its tier served it over the run.
    neighbour_bytes: Vec<f64>,
    neighbour_served: f64,
    /// The tiers as the window closing sees them (their background raised by the
    /// neighbour's traffic), kept from window to window.
    loaded: Vec<TierSpec>,
}

impl Shared<'_> {
    /// Closes the performance window ending at `end` (the engine is there).
    fn close_window(&mut self, engine: &mut dyn Engine, end: Nanos) {
        engine.advance_to(end);
        let tiers = engine.tiers().expect("tiering engines have tiers");
        self.traffic.fill(TierTraffic::default());
        tiers.take_traffic(&mut self.traffic);
        self.copied.fill(0.0);
        self.migrator.take_copy_bytes(&mut self.copied);
        let app = &self.tiering.app;
        let start = self.windows.last().map_or(0, |w| w.end_ns);
        self.neighbour_load(tiers.specs(), end - start);
        let specs: &[TierSpec] = &self.loaded;
        let perf = window_time(app, specs, &self.traffic, &self.copied);
        let n: f64 = self.traffic.iter().map(TierTraffic::total).sum();
        let on = |t: usize| {
            let mut v = vec![TierTraffic::default(); specs.len()];
            v[t].reads = n;
            window_time(app, specs, &v, &vec![0.0; specs.len()]).time_ns
        };
        let placed = (0..specs.len())
            .map(|t| tiers.placement().bytes_on(t as u8))
            .collect();
        self.windows.push(TierWindow {
            end_ns: end,
            accesses: n,
            served: self.traffic.iter().map(TierTraffic::total).collect(),
            app_ns: perf.time_ns,
            all_fast_ns: on(0),
            all_slow_ns: on(specs.len() - 1),
            latency_ns: perf.latency_ns,
            placed,
            copied: self.copied.clone(),
        });
    }

    /// Sets `loaded` to the tiers with the neighbour tenant's traffic of the window of
    /// `span` ns closing now added to their background (the tiers as they are without a
    /// neighbour). Where the tenants together ask for more than a tier serves, the
    /// neighbour gets the share of the room its demand has (the victim's demand read at the
    /// window's pace): a saturated controller serves in arrival order.
    fn neighbour_load(&mut self, specs: &[TierSpec], span: Nanos) {
        if self.loaded.len() != specs.len() {
            self.loaded = specs.to_vec();
        }
        let secs = span as f64 * 1e-9;
        for (i, (t, spec)) in self.loaded.iter_mut().zip(specs).enumerate() {
            t.background = spec.background;
            let demand = self.neighbour_bytes[i] / secs;
            if span == 0 || demand == 0.0 {
                continue;
            }
            let victim = self.traffic[i].total() * self.tiering.app.line_bytes / secs;
            let room = t.bandwidth * MAX_UTILISATION - t.background;
            let served = if demand + victim > room {
                room * demand / (demand + victim)
            } else {
                demand
            };
            t.background += served;
            self.neighbour_served += served * secs;
        }
        self.neighbour_bytes.fill(0.0);
    }

    /// Each tier's loaded latency in the last window (idle, with background, before any).
    fn latency(&self) -> Vec<f64> {
        match self.windows.last() {
            Some(w) => w.latency_ns.clone(),
            None => self
                .tiering
                .setup
                .tiers
                .iter()
                .map(|t| t.loaded_latency(t.background / t.bandwidth))
                .collect(),
        }
    }

    /// Lets `policy` decide at the engine's time and carries its moves out (placed
    /// directly when they are `free`).
    fn act(&mut self, policy: &mut dyn Policy, engine: &mut dyn Engine, free: bool) {
        self.moves.clear();
        let latency_ns = self.latency();
        let now = engine.now();
        let tiers = engine.tiers().expect("tiering engines have tiers");
        let view = View {
            now,
            tiers: tiers.specs(),
            placement: tiers.placement(),
            latency_ns: &latency_ns,
        };
        policy.act(&view, &mut self.moves);
        if free {
            Migrator::place_free(engine.as_machine(), &self.moves);
        } else {
            self.migrator.apply(engine.as_machine(), &self.moves);
        }
    }
}

/// The performance model's windows: one closes every `[tiering] window` of run time.
struct PerfWindows {
    period: Nanos,
    next: Nanos,
}

impl Participant<Shared<'_>> for PerfWindows {
    fn next_wakeup(&self) -> Nanos {
        self.next
    }

    fn wake(&mut self, e: &mut dyn Engine, s: &mut Shared, now: Nanos) -> Result<(), RunError> {
        s.close_window(e, now);
        self.next += self.period;
        Ok(())
    }
}

/// The neighbour tenant: steps its clock and adds its traffic to the coming window; a
/// throttling policy it carries reads its counter and sets its quota. Listed before the
/// performance windows, so a window closing at a step's time includes that step.
struct NeighbourPart(NeighbourTenant);

impl Participant<Shared<'_>> for NeighbourPart {
    fn next_wakeup(&self) -> Nanos {
        self.0.next_wakeup()
    }

    fn wake(&mut self, _: &mut dyn Engine, s: &mut Shared, now: Nanos) -> Result<(), RunError> {
        let bytes = self.0.wake(now);
        s.neighbour_bytes[self.0.tier] += bytes;
        Ok(())
    }
}

/// A policy fed by a monitor: the monitor wakes at its own times, the policy observes each
/// snapshot and acts when it is due, checked when its monitor wakes.
struct MonitorFed {
    monitor: Box<dyn Monitor>,
    policy: Box<dyn Policy>,
}

impl Participant<Shared<'_>> for MonitorFed {
    fn next_wakeup(&self) -> Nanos {
        self.monitor.next_wakeup()
    }

    fn wake(&mut self, e: &mut dyn Engine, s: &mut Shared, now: Nanos) -> Result<(), RunError> {
        if let Some(snapshot) = self.monitor.wake(e.as_machine()) {
            self.policy.observe(&snapshot);
        }
        if self.policy.next_action() <= now {
            s.act(self.policy.as_mut(), e, false);
        }
        Ok(())
    }
}

/// A policy fed once per period by the engine: the coming period's access counts from a
/// second engine running ahead on the same seed (the access stream does not depend on
/// placement), or the period that just ended as this engine counted it (nothing before the
/// first). It acts at every period's start.
struct EngineFed {
    policy: Box<dyn Policy>,
    /// The engine one period ahead, for a policy fed the coming period.
    ahead: Option<Box<dyn Engine>>,
    period: Nanos,
    at: Nanos,
    end: Nanos,
    free: bool,
}

impl Participant<Shared<'_>> for EngineFed {
    fn next_wakeup(&self) -> Nanos {
        if self.at < self.end {
            self.at
        } else {
            Nanos::MAX
        }
    }

    fn wake(&mut self, e: &mut dyn Engine, s: &mut Shared, now: Nanos) -> Result<(), RunError> {
        let next = now.saturating_add(self.period).min(self.end);
        let heat = match &mut self.ahead {
            Some(ahead) => {
                ahead.advance_to(next);
                ahead.take_truth_heat()
            }
            None if now == 0 => vec![],
            None => e.take_truth_heat(),
        };
        self.policy.observe_heat(&heat);
        s.act(self.policy.as_mut(), e, self.free);
        self.at = next;
        Ok(())
    }
}

/// The participants of a run: the neighbour tenant first (when there is one), then the
/// performance windows.
fn with_neighbour<'a, 'b>(
    neighbour: &'a mut Option<NeighbourPart>,
    windows: &'a mut PerfWindows,
) -> Vec<&'a mut dyn Participant<Shared<'b>>> {
    let mut parts: Vec<&mut dyn Participant<Shared>> = vec![];
    if let Some(n) = neighbour {
        parts.push(n);
    }
    parts.push(windows);
    parts
}

/// Runs one policy job.
pub fn run_policy(
    exp: &Experiment,
    job: PolicyJob,
    progress: &Progress,
    slot: usize,
) -> Result<PolicyRun, RunError> {
    let tiering = exp.tiering.as_ref().expect("policy jobs need [tiering]");
    let entry: &PolicyEntry = &tiering.policies[job.policy];
    let n_tiers = tiering.setup.tiers.len();
    let granule = exp.machine.page_size.bytes();
    let end = exp.duration_ns;
    let mut shared = Shared {
        tiering,
        migrator: Migrator::new(tiering.migration, granule, n_tiers),
        windows: vec![],
        traffic: vec![TierTraffic::default(); n_tiers],
        copied: vec![0.0; n_tiers],
        moves: vec![],
        neighbour_bytes: vec![0.0; n_tiers],
        neighbour_served: 0.0,
        loaded: vec![],
    };
    let mut windows = PerfWindows {
        period: tiering.window_ns,
        next: tiering.window_ns,
    };
    let mut monitor_cycles = 0.0;
    let mut neighbour = match &tiering.neighbour {
        None => None,
        Some((n, tier)) => {
            let throttle = match &entry.config {
                PolicyConfig::Throttle(c) => {
                    Some((entry.config.build(None), c.telemetry, c.interval.0))
                }
                _ => None,
            };
            Some(NeighbourPart(NeighbourTenant::new(
                exp, n, *tier, throttle,
            )?))
        }
    };
    let mut engine;
    match (entry.config.input(), job.monitor) {
        (PolicyInput::Monitor(_), Some(m)) => {
            let mc = &exp.monitors[m].config;
            engine = crate::build::engine(exp, mc.requires().with(TIERS), mc.truth())?;
            let monitor = mc.build(
                Rng::for_stream(exp.seed, &format!("monitor/{}", exp.monitors[m].name)),
                &exp.cost,
            );
            let policy = entry.config.build(Some((monitor.intervals(), mc.emits())));
            let mut fed = MonitorFed { monitor, policy };
            let mut parts = with_neighbour(&mut neighbour, &mut windows);
            parts.push(&mut fed);
            drive(
                engine.as_mut(),
                &mut parts,
                &mut shared,
                end,
                progress,
                Some(slot),
            )?;
            monitor_cycles = exp.cost.cycles(engine.as_machine().cost());
        }
        (input @ (PolicyInput::Lookahead | PolicyInput::EngineHistory), _) => {
            engine = crate::build::engine(exp, TIERS, Truth::Accessed)?;
            let ahead = match input {
                PolicyInput::Lookahead => Some(crate::build::engine(
                    exp,
                    Capabilities::NONE,
                    Truth::Accessed,
                )?),
                _ => None,
            };
            let mut fed = EngineFed {
                policy: entry.config.build(None),
                ahead,
                period: entry
                    .config
                    .period_ns()
                    .expect("engine-fed policies have a period"),
                at: 0,
                end,
                free: entry.config.free_moves(),
            };
            let mut parts = with_neighbour(&mut neighbour, &mut windows);
            parts.push(&mut fed);
            drive(
                engine.as_mut(),
                &mut parts,
                &mut shared,
                end,
                progress,
                Some(slot),
            )?;
        }
        (PolicyInput::Nothing | PolicyInput::TenantCounter, _) => {
            // The placement stays as it started (a throttling policy rides on the
            // neighbour tenant).
            engine = crate::build::engine(exp, TIERS, Truth::Accessed)?;
            let mut parts = with_neighbour(&mut neighbour, &mut windows);
            drive(
                engine.as_mut(),
                &mut parts,
                &mut shared,
                end,
                progress,
                Some(slot),
            )?;
        }
        (PolicyInput::Monitor(_), None) => {
            unreachable!("`jobs` gives every monitor-fed policy run its monitor")
        }
    }
    if shared.windows.last().is_none_or(|w| w.end_ns < end) {
        shared.close_window(engine.as_mut(), end);
    }
    progress.set(slot, end);
    let w = &shared.windows;
    let stats = shared.migrator.stats;
    let app_ns: f64 = w.iter().map(|x| x.app_ns).sum::<f64>() + stats.stall_ns as f64;
    let all_fast_ns: f64 = w.iter().map(|x| x.all_fast_ns).sum();
    let all_slow_ns: f64 = w.iter().map(|x| x.all_slow_ns).sum();
    let accesses: f64 = w.iter().map(|x| x.accesses).sum();
    let fast: f64 = w.iter().map(|x| x.served[0]).sum();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let monitor = job.monitor.map(|m| exp.monitors[m].name.clone());
    let per_op = exp.workload.accesses_per_op;
    let summary = TierSummary {
        app_ns,
        all_fast_ns,
        all_slow_ns,
        throughput: ratio(accesses, app_ns * 1e-9),
        speedup_over_slow: ratio(all_slow_ns, app_ns),
        gap_to_oracle: None,
        fast_hit_ratio: ratio(fast, accesses),
        migration_cpu_ns: stats.cpu_ns,
        monitor_cpu_ns: monitor_cycles / exp.cost.cpu_hz * 1e9,
        ops_per_s: per_op.map(|a| ratio(accesses / a, app_ns * 1e-9)),
        op_latency_ns: per_op.map(|a| op_percentiles(w, a, &tiering.app)),
    };
    Ok(PolicyRun {
        name: match &monitor {
            Some(m) => format!("{}@{m}", entry.name),
            None => entry.name.clone(),
        },
        policy: entry.name.clone(),
        kind: entry.config.kind(),
        monitor,
        windows: std::mem::take(&mut shared.windows),
        migration: stats,
        summary,
        neighbour: neighbour.map(|n| n.0.finish(shared.neighbour_served, end, &exp.cost)),
    })
}

/// Operation latency percentiles (p50, p95, p99), ns. An operation's accesses are taken to
/// be served by one tier (its item's: an item's lines sit together), drawn with the
/// window's served shares, each at that window's loaded latency; operations are weighted
/// by window. docs/models/TIERING.md discusses the approximation.
pub fn op_percentiles(windows: &[TierWindow], per_op: f64, app: &AppModel) -> [f64; 3] {
    let mut points: Vec<(f64, f64)> = vec![];
    for w in windows {
        for (t, &served) in w.served.iter().enumerate() {
            if served > 0.0 {
                let latency = per_op * (app.compute_ns + w.latency_ns[t] / app.mlp);
                points.push((latency, served / per_op));
            }
        }
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = points.iter().map(|p| p.1).sum();
    let at = |q: f64| {
        let mut seen = 0.0;
        for &(latency, ops) in &points {
            seen += ops;
            if seen >= q * total {
                return latency;
            }
        }
        points.last().map_or(0.0, |p| p.0)
    };
    [at(0.5), at(0.95), at(0.99)]
}

/// Fills in every run's gap to the oracle's time, when an oracle ran.
pub fn set_oracle_gaps(runs: &mut [PolicyRun]) {
    let Some(oracle) = runs
        .iter()
        .find(|r| r.kind == "oracle")
        .map(|r| r.summary.app_ns)
    else {
        return;
    };
    for r in runs {
        if oracle > 0.0 {
            r.summary.gap_to_oracle = Some(r.summary.app_ns / oracle);
        }
    }
}

#[cfg(test)]
mod op_tests {
    use super::*;

    #[test]
    fn op_percentiles_by_hand() {
        // Window 1: 90 ops' worth on tier 0 (100 ns), 10 on tier 1 (300 ns); window 2:
        // all 100 on tier 1 at a loaded 400 ns. Two accesses per op, mlp 1: op latencies
        // 200 (90 ops), 600 (10 ops), 800 (100 ops).
        let w = |served: Vec<f64>, latency_ns: Vec<f64>| TierWindow {
            end_ns: 0,
            accesses: served.iter().sum(),
            served,
            app_ns: 0.0,
            all_fast_ns: 0.0,
            all_slow_ns: 0.0,
            latency_ns,
            placed: vec![],
            copied: vec![],
        };
        let windows = [
            w(vec![180.0, 20.0], vec![100.0, 300.0]),
            w(vec![0.0, 200.0], vec![100.0, 400.0]),
        ];
        let p = op_percentiles(&windows, 2.0, &AppModel::default());
        // 200 ops: p50 is the 100th (600 ns), p95 and p99 in the 800 ns group.
        assert_eq!(p, [600.0, 800.0, 800.0]);
    }
}
