//! Runs of tiering policies: per policy and per monitor it uses, the engine with tiers,
//! the monitor, the policy and the migration engine in one loop, and the performance
//! model over fixed windows of run time. The references (everything on the fastest tier,
//! everything on the slowest) are computed from the same windows' access counts: the
//! access stream does not depend on placement.

use crate::config::{Experiment, PolicyEntry, Tiering};
use crate::drive::{drive, Participant};
use crate::result::Progress;
use crate::run::RunError;
use serde::Serialize;
use tierscope_core::rng::Rng;
use tierscope_core::tiers::{TierSpec, TierTraffic};
use tierscope_core::{Capabilities, Capability, Engine, Monitor, Nanos, PolicyInput};
use tierscope_monitors::Truth;
use tierscope_tiering::{window_time, AppModel, MigrationStats, Migrator, Move, Policy, View};

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
        let specs: &[TierSpec] = tiers.specs();
        let app = &self.tiering.app;
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
    };
    let mut windows = PerfWindows {
        period: tiering.window_ns,
        next: tiering.window_ns,
    };
    let mut monitor_cycles = 0.0;
    let mut engine;
    match (entry.config.input(), job.monitor) {
        (PolicyInput::Monitor(_), Some(m)) => {
            let mc = &exp.monitors[m].config;
            engine = crate::build::engine(exp, mc.requires().with(TIERS), mc.truth())?;
            let monitor = mc.build(
                Rng::for_stream(exp.seed, &format!("monitor/{}", exp.monitors[m].name)),
                &exp.cost,
            );
            let policy = entry.config.build(Some(monitor.intervals()));
            let mut fed = MonitorFed { monitor, policy };
            let mut parts: [&mut dyn Participant<Shared>; 2] = [&mut windows, &mut fed];
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
            let mut parts: [&mut dyn Participant<Shared>; 2] = [&mut windows, &mut fed];
            drive(
                engine.as_mut(),
                &mut parts,
                &mut shared,
                end,
                progress,
                Some(slot),
            )?;
        }
        (PolicyInput::Nothing, _) => {
            // The placement stays as it started.
            engine = crate::build::engine(exp, TIERS, Truth::Accessed)?;
            let mut parts: [&mut dyn Participant<Shared>; 1] = [&mut windows];
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
    })
}

/// Operation latency percentiles (p50, p95, p99), ns. An operation's accesses are taken to
/// be served by one tier (its item's: an item's lines sit together), drawn with the
/// window's served shares, each at that window's loaded latency; operations are weighted
/// by window. docs/TIERING.md discusses the approximation.
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
mod tests {
    use crate::config::{parse_experiment, Format};
    use crate::{run_experiment, Progress, RunResult};
    use std::path::Path;

    /// Random loads on a 64 MiB hot region between two cold GiBs; a 256 MiB fast tier
    /// that starts out holding the first cold GiB's beginning.
    fn run(engine: &str, extra_policies: &str) -> RunResult {
        run_with(
            engine,
            "damon-mod\"\n[[monitors]]\npreset = \"telescope-bnd",
            extra_policies,
        )
    }

    /// `run` with other monitors (presets, joined by the caller) and policies.
    fn run_with(engine: &str, monitors: &str, extra_policies: &str) -> RunResult {
        let text = format!(
            r#"
duration = "3s"
warmup = "0s"
[machine]
engine = "{engine}"
[workload]
rate = "2M/s"
regions = [
    {{ name = "cold_top", size = "1GiB" }},
    {{ name = "hot", size = "64MiB" }},
    {{ name = "cold_bottom", size = "1GiB" }},
]
phases = [{{ name = "p", duration = "3s", patterns = [{{ region = "hot", kind = "random", mode = "rw" }}] }}]
[[monitors]]
preset = "{monitors}"
[tiering]
tiers = [{{ preset = "dram", capacity = "256MiB" }}, "cxl"]
policies = ["telescope-rule", "oracle", "static"{extra_policies}]
"#
        );
        let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
        run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
    }

    #[test]
    fn invariants_hold_on_both_engines() {
        for engine in ["exact", "stat"] {
            let r = run(
                engine,
                r#", { type = "damos", damo = "--damos_action migrate_hot 0 --damos_access_rate 10% max --damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_age 3 max" }"#,
            );
            let names: Vec<&str> = r.policies.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    "telescope-rule@damon-mod",
                    "telescope-rule@telescope-bnd",
                    "oracle",
                    "static",
                    "damos@damon-mod",
                    "damos@telescope-bnd"
                ],
                "{engine}"
            );
            let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
            for p in &r.policies {
                let s = &p.summary;
                let at = format!("{engine} {}", p.name);
                // Accesses by tier sum to all accesses: 2 M/s for 3 s.
                let total: f64 = p.windows.iter().map(|w| w.accesses).sum();
                assert!((total - 6e6).abs() < 1.0, "{at}: {total}");
                for w in &p.windows {
                    assert!(close(w.served.iter().sum::<f64>(), w.accesses), "{at}");
                }
                // Between all-fast and all-slow, and no better than the oracle.
                assert!(s.app_ns >= s.all_fast_ns * (1.0 - 1e-9), "{at}");
                assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
                assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
                // Bytes migrated are whole pages.
                let m = &p.migration;
                assert_eq!(m.promoted_bytes + m.demoted_bytes, m.pages * 4096, "{at}");
            }
            // The hot set fits: the oracle is all-fast.
            assert!(
                close(oracle.summary.app_ns, oracle.summary.all_fast_ns),
                "{engine}"
            );
            assert_eq!(oracle.migration.pages, 0, "the oracle's moves are free");
            // First touch put the cold top in the fast tier: never migrating is all-slow.
            let fixed = r.policies.iter().find(|p| p.kind == "static").unwrap();
            assert!(
                close(fixed.summary.app_ns, fixed.summary.all_slow_ns),
                "{engine}"
            );
            // Telemetry-driven policies move the hot region up and end up serving it fast.
            for p in r.policies.iter().filter(|p| p.monitor.is_some()) {
                let last = p.windows.last().unwrap();
                assert!(last.served[0] / last.accesses > 0.95, "{engine} {}", p.name);
                assert!(
                    p.migration.promoted_bytes >= 64 << 20,
                    "{engine} {}",
                    p.name
                );
                assert!(
                    p.summary.speedup_over_slow > 1.5,
                    "{engine} {}: {:?}",
                    p.name,
                    p.summary
                );
                let gap = p.summary.gap_to_oracle.unwrap();
                // Detection takes windows (DAMOS also waits for cold regions to age before
                // making room), during which the oracle is already fast.
                assert!((1.0..2.0).contains(&gap), "{engine} {}: {gap}", p.name);
            }
        }
    }

    #[test]
    fn invariants_hold_for_ycsb_mixes_on_both_engines() {
        // A, D and E with scattered, newest-first and scanned keys over 80 MB of items and
        // a 32 MiB fast tier.
        for kv in [
            r#"mix = "ycsb-a", distribution = "scrambled-zipfian""#,
            r#"mix = "ycsb-d", distribution = "latest", insert_steps = 4"#,
            r#"mix = "ycsb-e", distribution = "scrambled-zipfian", max_scan = 20"#,
        ] {
            for engine in ["exact", "stat"] {
                let text = format!(
                    r#"
duration = "2s"
warmup = "0s"
[machine]
engine = "{engine}"
[workload]
rate = "2M/s"
kv = {{ keys = 20000, value_size = "4000B", {kv}, duration = "2s" }}
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{{ preset = "dram", capacity = "32MiB" }}, "cxl"]
policies = ["telescope-rule", "oracle", "static"]
"#
                );
                let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
                let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
                let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
                for p in &r.policies {
                    let s = &p.summary;
                    let at = format!("{engine} {kv} {}", p.name);
                    let total: f64 = p.windows.iter().map(|w| w.accesses).sum();
                    assert!((total - 4e6).abs() < 1.0, "{at}: {total}");
                    for w in &p.windows {
                        assert!(close(w.served.iter().sum::<f64>(), w.accesses), "{at}");
                    }
                    assert!(s.app_ns >= s.all_fast_ns * (1.0 - 1e-9), "{at}");
                    assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
                    assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
                    let m = &p.migration;
                    assert_eq!(m.promoted_bytes + m.demoted_bytes, m.pages * 4096, "{at}");
                }
                // Skewed keys: the oracle gains over all-slow with a fast tier of 40 %.
                assert!(oracle.summary.speedup_over_slow > 1.1, "{engine} {kv}");
            }
        }
    }

    #[test]
    fn pebs_policies_promote_the_hot_region() {
        for engine in ["exact", "stat"] {
            let r = run_with(engine, "pebs-hemem", r#", "hemem", "memtis""#);
            let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
            for kind in ["hemem", "memtis"] {
                let p = r.policies.iter().find(|p| p.kind == kind).unwrap();
                let at = format!("{engine} {}", p.name);
                assert_eq!(p.monitor.as_deref(), Some("pebs-hemem"));
                let s = &p.summary;
                assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
                assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
                let last = p.windows.last().unwrap();
                assert!(last.served[0] / last.accesses > 0.9, "{at}: {last:?}");
                let m = &p.migration;
                assert_eq!(m.promoted_bytes + m.demoted_bytes, m.pages * 4096, "{at}");
            }
        }
    }

    #[test]
    fn hemem_on_nemo_counts_promotes_the_hot_region() {
        // HeMem-NEMO (§5.1): the same policy fed by memory-controller counts scaled to
        // PEBS samples, on both engines.
        for engine in ["exact", "stat"] {
            let r = run_with(engine, "nemo-hotset", r#", "hemem""#);
            let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
            let p = r.policies.iter().find(|p| p.kind == "hemem").unwrap();
            let at = format!("{engine} {}", p.name);
            assert_eq!(p.monitor.as_deref(), Some("nemo-hotset"), "{at}");
            let s = &p.summary;
            assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
            assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
            let last = p.windows.last().unwrap();
            assert!(last.served[0] / last.accesses > 0.9, "{at}: {last:?}");
            // Reads and reprogramming are charged, and stay a small share of a core.
            assert!(s.monitor_cpu_ns > 0.0, "{at}");
        }
    }

    #[test]
    fn tpp_promotes_on_hint_faults_and_keeps_its_watermark() {
        for engine in ["exact", "stat"] {
            // Scan a GiB every half second, hot within 100 ms: the hot region is in the
            // second or third batch of the first lap.
            let r = run_with(
                engine,
                "numa-hint\"\nscan_size = \"1GiB\"\nscan_period = \"500ms\"\nhot_threshold = \"100ms",
                r#", "tpp""#,
            );
            let names: Vec<&str> = r.policies.iter().map(|p| p.name.as_str()).collect();
            // telescope-rule can use any monitor of accesses; TPP only hint faults.
            assert!(names.contains(&"tpp@numa-hint"), "{names:?}");
            let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
            let p = r.policies.iter().find(|p| p.kind == "tpp").unwrap();
            let at = format!("{engine} {}", p.name);
            let s = &p.summary;
            assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
            assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
            let last = p.windows.last().unwrap();
            assert!(last.served[0] / last.accesses > 0.95, "{at}: {last:?}");
            // The 256 MiB fast tier started full (first touch): room for 64 MiB and the
            // 2 % reserve came from demotions, and it ends at most 98 % full (to the page).
            let m = &p.migration;
            assert!(m.promoted_bytes >= 64 << 20, "{at}: {m:?}");
            assert!(m.demoted_bytes >= m.promoted_bytes, "{at}: {m:?}");
            let cap = 256u64 << 20;
            assert!(
                last.placed[0] <= cap - cap / 50 + 4096,
                "{at}: {:?}",
                last.placed
            );
            // The hint faults cost CPU on the workload's cores.
            assert!(s.monitor_cpu_ns > 0.0, "{at}");
        }
    }

    #[test]
    fn huge_pages_split_for_partial_moves_and_move_whole_otherwise() {
        // Cori's schedulers move 4 KiB pages; on a heap of 2 MiB pages each move of part
        // of a huge page splits it (or, without splitting, waits for whole huge pages).
        for engine in ["exact", "stat"] {
            for split in [true, false] {
                let text = format!(
                    r#"
duration = "2s"
warmup = "0s"
block_size = "4KiB"
[machine]
engine = "{engine}"
page_size = "2MiB"
[workload]
rate = "1M/s"
regions = [{{ name = "cold", size = "256MiB" }}, {{ name = "hot", size = "6MiB" }}]
phases = [{{ name = "p", duration = "2s", patterns = [{{ region = "hot", kind = "hotspot", hot_fraction = 0.1 }}] }}]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{{ preset = "dram", capacity = "64MiB" }}, "cxl"]
placement = "all-slow"
policies = [{{ type = "periodic", mode = "history" }}]
window = "200ms"
migration = {{ split_huge = {split}, collapse_huge = true }}
"#
                );
                let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
                let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
                let p = &r.policies[0];
                let m = &p.migration;
                let at = format!("{engine} split={split}: {m:?}");
                let s = &p.summary;
                assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
                if split {
                    // The hot pages are one in ten of the hot region's: scattered, so
                    // promoting them cuts every one of its three huge pages.
                    assert!(m.splits >= 3, "{at}");
                    assert!(m.promoted_bytes > 0 && m.promoted_bytes < 6 << 20, "{at}");
                    assert!(s.fast_hit_ratio > 0.5, "{at}: {s:?}");
                } else {
                    // Every move asks for 4 KiB pages, none covers a whole huge page:
                    // trimmed to whole huge pages, nothing moves and all stays slow.
                    assert_eq!((m.splits, m.collapses), (0, 0), "{at}");
                    assert_eq!(m.promoted_bytes, 0, "{at}");
                    assert_eq!(s.fast_hit_ratio, 0.0, "{at}");
                }
            }
        }
    }

    #[test]
    fn memtis_splits_skewed_huge_pages() {
        // One hot 4 KiB page in every 100 of a 64 MiB region of 2 MiB pages: every huge
        // page is skewed, and a 16 MiB fast tier holds all the hot base pages but only a
        // quarter of the hot huge pages.
        for engine in ["exact", "stat"] {
            let mut fast = vec![];
            for split in [true, false] {
                let text = format!(
                    r#"
duration = "3s"
warmup = "0s"
[machine]
engine = "{engine}"
page_size = "2MiB"
[workload]
rate = "2M/s"
regions = [{{ name = "cold", size = "256MiB" }}, {{ name = "hot", size = "64MiB" }}]
phases = [{{ name = "p", duration = "3s", patterns = [{{ region = "hot", kind = "hotspot", hot_fraction = 0.01 }}] }}]
[[monitors]]
preset = "pebs-memtis"
[tiering]
tiers = [{{ preset = "dram", capacity = "16MiB" }}, "cxl"]
placement = "all-slow"
policies = [{{ type = "memtis", split = {split} }}]
migration = {{ split_huge = true }}
"#
                );
                let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
                let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
                let p = &r.policies[0];
                let at = format!("{engine} split={split}: {:?}", p.migration);
                if split {
                    assert!(p.migration.splits > 0, "{at}");
                } else {
                    assert_eq!(p.migration.splits, 0, "{at}");
                }
                fast.push(p.windows.last().unwrap().served[0] / p.windows.last().unwrap().accesses);
            }
            // Split, the hot base pages all fit; whole, a quarter of the huge pages do.
            assert!(fast[0] > 0.9, "{engine}: {fast:?}");
            assert!(fast[1] < 0.5, "{engine}: {fast:?}");
        }
    }

    #[test]
    fn colloid_beats_packing_under_an_antagonist_and_matches_it_without() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/tiering/colloid-antagonist.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        for (background, loaded) in [("105GB", true), ("0", false)] {
            let text = text.replace(
                "background = \"105GB\"",
                &format!("background = \"{background}\""),
            );
            let exp =
                parse_experiment(&text, "c.toml", path.parent().unwrap(), Format::Toml).unwrap();
            let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
            let get = |kind: &str| r.policies.iter().find(|p| p.kind == kind).unwrap().summary;
            let (hemem, colloid) = (get("hemem"), get("colloid"));
            if loaded {
                // DRAM loaded past the remote socket's latency: balancing wins, and beats
                // the oracle, which only packs.
                assert!(
                    colloid.app_ns < hemem.app_ns * 0.99,
                    "{colloid:?} {hemem:?}"
                );
                assert!(colloid.gap_to_oracle.unwrap() < 1.0);
                assert!(colloid.fast_hit_ratio < hemem.fast_hit_ratio);
            } else {
                assert!(close(colloid.app_ns, hemem.app_ns), "{colloid:?} {hemem:?}");
            }
        }
    }

    /// cori-sim's model by hand: two 2-page regions read in turn for 10 ms each (1000
    /// accesses per period at 100 K/s, 500 per page), a 2-page fast tier at 50 ns, a slow
    /// one at 150 ns, 1 us per migrated page, 3 us per period, periods of 10 ms.
    #[test]
    fn cori_periodic_schedulers_match_cori_sims_formula_by_hand() {
        let text = r#"
duration = "40ms"
warmup = "0s"
block_size = "4KiB"
[machine]
engine = "exact"
[workload]
rate = "100K/s"
regions = [{ name = "x", size = "8KiB" }, { name = "y", size = "8KiB" }]
phases = [
  { name = "x", duration = "10ms", patterns = [{ region = "x", kind = "sequential", stride = "4KiB", mode = "ro" }] },
  { name = "y", duration = "10ms", patterns = [{ region = "y", kind = "sequential", stride = "4KiB", mode = "ro" }] },
]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{ preset = "cori-fast", capacity = "8KiB" }, "cori-slow"]
placement = "all-slow"
window = "10ms"
migration = { stall_per_page = "1us", stall_per_round = "3us", cpu_per_page = "0ns" }
policies = [
  { type = "periodic", name = "history", mode = "history", period = "10ms" },
  { type = "periodic", name = "predictive", mode = "oracle", period = "10ms" },
  "static",
]
"#;
        let exp = parse_experiment(text, "cori.toml", Path::new("."), Format::Toml).unwrap();
        let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
        let get = |name: &str| r.policies.iter().find(|p| p.name == name).unwrap();
        // runtime = hits x 50 + misses x 150 + periods x 3000 + migrated pages x 1000.
        // Reactive: always one period late, so every access misses; it promotes x after
        // period 1 (2 pages) and swaps 2 + 2 pages after periods 2 and 3.
        let history = get("history");
        assert_eq!(history.migration.pages, 2 + 4 + 4);
        assert_eq!(history.migration.rounds, 4);
        assert!(close(
            history.summary.app_ns,
            4000.0 * 150.0 + 4.0 * 3000.0 + 10.0 * 1000.0
        ));
        // Predictive: the coming period's pages are fast every time.
        let predictive = get("predictive");
        assert_eq!(predictive.migration.pages, 2 + 4 + 4 + 4);
        assert!(close(
            predictive.summary.app_ns,
            4000.0 * 50.0 + 4.0 * 3000.0 + 14.0 * 1000.0
        ));
        assert!(close(get("static").summary.app_ns, 4000.0 * 150.0));
    }

    #[test]
    fn same_seed_same_numbers() {
        let a = serde_json::to_string(&run("exact", "").policies).unwrap();
        let b = serde_json::to_string(&run("exact", "").policies).unwrap();
        assert_eq!(a, b);
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
