//! Runs an experiment: every monitor on its own engine fed the identical access stream,
//! monitors in parallel, each run deterministic for the experiment's seed.

use crate::config::Experiment;
use crate::drive::{drive, Participant, Ticker};
use crate::evaluate;
use crate::impact::{self, ImpactModel};
use crate::result::{MonitorRun, Progress, RunResult};
use crate::tiering_run::PolicyRun;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tierscope_core::limits::{human_bytes, MAX_KEPT_BYTES};
use tierscope_core::{
    AddrRange, BlockIntervals, Capabilities, Engine, FieldError, MachineStats, Mapping, Monitor,
    Nanos, Snapshot,
};
use tierscope_monitors::Truth;

/// Why a run did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The watcher asked to stop.
    Cancelled,
    /// The engine could not be built or failed.
    Engine(String),
    /// The engine cannot run on this host (no /dev/kvm, a missing capability): one line.
    Unavailable(String),
    /// The run reached a limit of docs/reference/EXPERIMENTS.md ("Limits") that depends on how it
    /// unfolds (the per-window data a monitor's run keeps): bad input, like a
    /// `ConfigError`, naming the field to change.
    Limit(FieldError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Cancelled => f.write_str("run cancelled"),
            RunError::Engine(m) => f.write_str(m),
            RunError::Unavailable(m) => write!(f, "the kvm engine cannot run here: {m}"),
            RunError::Limit(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {}

struct OneRun {
    run: MonitorRun,
    heap: AddrRange,
    mappings: Vec<Mapping>,
}

/// Runs all monitors of `exp`, using up to `max_threads` threads (0: one per core).
pub fn run_experiment(
    exp: &Experiment,
    progress: &Progress,
    max_threads: usize,
) -> Result<RunResult, RunError> {
    run_experiment_kept(exp, progress, max_threads, MAX_KEPT_BYTES)
}

/// [`run_experiment`] with each monitor's run keeping at most `kept_limit` bytes of
/// per-window data (tests use a small one).
pub fn run_experiment_kept(
    exp: &Experiment,
    progress: &Progress,
    max_threads: usize,
    kept_limit: u64,
) -> Result<RunResult, RunError> {
    let n = exp.monitors.len();
    // A run of the same access stream with no monitor, to count the walks flushes add
    // (only needed when some monitor flushes: otherwise the walks are identical).
    // A real machine (kvm) runs in real time and counts no walks: no baseline, and one
    // monitor at a time (each VM would take the other's cores).
    crate::build::check_available(exp)?;
    let real = exp.machine.engine.is_real();
    let baseline_job = !real && exp.monitors.iter().any(|m| m.config.flushes());
    let policy_jobs = crate::tiering_run::jobs(exp);
    let first_policy = n + baseline_job as usize;
    let jobs = first_policy + policy_jobs.len();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads = if real {
        1
    } else if max_threads == 0 {
        cores
    } else {
        max_threads
    }
    .clamp(1, jobs)
    // Exact engines as many at once as the host's memory holds (results do not depend on
    // the number of threads).
    .min(crate::config::limits::engines_fitting(exp));
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<OneRun, RunError>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    let baseline: Mutex<Option<Result<MachineStats, RunError>>> = Mutex::new(None);
    let policy_slots: Mutex<Vec<Option<Result<PolicyRun, RunError>>>> =
        Mutex::new(policy_jobs.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    break;
                }
                if i >= first_policy {
                    let k = i - first_policy;
                    let r = crate::tiering_run::run_policy(exp, policy_jobs[k], progress, n + k);
                    if r.is_err() {
                        progress.cancel();
                    }
                    policy_slots
                        .lock()
                        .expect("no panics while holding the lock")[k] = Some(r);
                    continue;
                }
                if i == n {
                    let r = run_baseline(exp, progress);
                    if r.is_err() {
                        progress.cancel();
                    }
                    *baseline.lock().expect("no panics while holding the lock") = Some(r);
                    continue;
                }
                let r = run_monitor(exp, i, progress, kept_limit);
                if r.is_err() {
                    progress.cancel();
                }
                slots.lock().expect("no panics while holding the lock")[i] = Some(r);
            });
        }
    });
    let baseline = baseline.into_inner().expect("threads joined").transpose()?;
    let mut runs = vec![];
    for slot in slots.into_inner().expect("threads joined") {
        runs.push(slot.expect("every monitor ran")?);
    }
    let model = ImpactModel::default();
    for r in &mut runs {
        let m = &mut r.run;
        m.impact = impact::app_slowdown(
            &model,
            &exp.cost,
            &m.cost,
            &m.machine,
            baseline.as_ref(),
            exp.workload.threads,
            exp.duration_ns,
        );
        m.summary.app_slowdown = m.impact.total;
    }
    let mut policies = vec![];
    for slot in policy_slots.into_inner().expect("threads joined") {
        policies.push(slot.expect("every policy ran")?);
    }
    crate::tiering_run::set_oracle_gaps(&mut policies);
    let heap = runs[0].heap;
    let mappings = runs[0].mappings.clone();
    Ok(RunResult {
        duration_ns: exp.duration_ns,
        block_size: exp.block_size,
        heap,
        mappings,
        monitors: runs.into_iter().map(|r| r.run).collect(),
        policies,
    })
}

/// The workload alone: the machine counters of the identical access stream, unmonitored.
fn run_baseline(exp: &Experiment, progress: &Progress) -> Result<MachineStats, RunError> {
    let mut engine = crate::build::engine(exp, Capabilities::NONE, Truth::Accessed)?;
    // In steps, so that a cancel is noticed.
    let mut ticker = Ticker::new(100_000_000);
    let mut parts: [&mut dyn Participant<()>; 1] = [&mut ticker];
    drive(
        engine.as_mut(),
        &mut parts,
        &mut (),
        exp.duration_ns,
        progress,
        None,
    )?;
    engine.advance_to(exp.duration_ns);
    Ok(engine.stats())
}

/// A monitor's run: the monitor wakes at its times; each snapshot is kept with the
/// window's truth and the cycles the monitor spent in it.
struct Recorder<'a> {
    exp: &'a Experiment,
    name: &'a str,
    monitor: Box<dyn Monitor>,
    snapshots: Vec<Snapshot>,
    truth: Vec<BlockIntervals>,
    window_cycles: Vec<f64>,
    cycles_before: f64,
    /// Real CPU time of the wake-ups, on a real machine only: simulated runs stay
    /// byte-for-byte reproducible.
    monitor_cpu_ns: Option<u64>,
    /// What the run keeps per window for its outputs grows with the run: bounded.
    kept: u64,
    kept_limit: u64,
}

impl Participant<()> for Recorder<'_> {
    fn next_wakeup(&self) -> Nanos {
        self.monitor.next_wakeup()
    }

    fn wake(&mut self, engine: &mut dyn Engine, _: &mut (), now: Nanos) -> Result<(), RunError> {
        let cpu0 = self.monitor_cpu_ns.map(|_| thread_cpu_ns());
        let woke = self.monitor.wake(engine.as_machine());
        if let (Some(total), Some(cpu0)) = (&mut self.monitor_cpu_ns, cpu0) {
            *total += thread_cpu_ns().saturating_sub(cpu0);
        }
        if let Some(snapshot) = woke {
            self.truth.push(engine.take_truth());
            self.kept += window_bytes(&snapshot, self.truth.last().map_or(0, Vec::len));
            if self.kept > self.kept_limit {
                return Err(kept_error(self.exp, self.name, now, self.kept_limit));
            }
            let cycles = self.exp.cost.cycles(engine.as_machine().cost());
            self.window_cycles.push(cycles - self.cycles_before);
            self.cycles_before = cycles;
            self.snapshots.push(snapshot);
        }
        Ok(())
    }
}

fn run_monitor(
    exp: &Experiment,
    index: usize,
    progress: &Progress,
    kept_limit: u64,
) -> Result<OneRun, RunError> {
    let entry = &exp.monitors[index];
    let (mut engine, monitor) = crate::build::monitor(exp, index)?;
    let real = exp.machine.engine.is_real();
    let mut rec = Recorder {
        exp,
        name: &entry.name,
        monitor,
        snapshots: vec![],
        truth: vec![],
        window_cycles: vec![],
        cycles_before: 0.0,
        monitor_cpu_ns: real.then_some(0),
        kept: 0,
        kept_limit,
    };
    let mut parts: [&mut dyn Participant<()>; 1] = [&mut rec];
    drive(
        engine.as_mut(),
        &mut parts,
        &mut (),
        exp.duration_ns,
        progress,
        Some(index),
    )?;
    let Recorder {
        monitor,
        snapshots,
        truth,
        window_cycles,
        monitor_cpu_ns,
        ..
    } = rec;
    let monitor_cpu_ns = monitor_cpu_ns.unwrap_or(0);
    engine.advance_to(exp.duration_ns);
    progress.set(index, exp.duration_ns);
    // A real program ends when it exits: its run lasts that long.
    let duration_ns = exp.duration_ns.min(engine.as_machine().now().max(1));
    let program = engine.end_report().map_err(RunError::Engine)?;
    let program_status = program.as_ref().and_then(|p| p.status);
    let program = program.map(|p| p.line);

    let block_shift = exp.block_size.trailing_zeros();
    let windows = evaluate::windows(
        &snapshots,
        &truth,
        &window_cycles,
        block_shift,
        exp.hot_threshold,
    );
    let cost = *engine.as_machine().cost();
    let kvm = crate::build::real_check(exp, index, engine.as_ref(), &cost);
    let changes = evaluate::phase_changes(&exp.workload.spec, exp.warmup_ns, exp.duration_ns);
    let summary = evaluate::summarize(
        &windows,
        &cost,
        &exp.cost,
        duration_ns,
        exp.warmup_ns,
        &changes,
    );
    let heap = engine.heap();
    let mappings = engine.as_machine().mappings().to_vec();
    Ok(OneRun {
        run: MonitorRun {
            name: entry.name.clone(),
            kind: entry.config.kind(),
            feed: entry.config.emits(),
            intervals: monitor.intervals(),
            snapshots,
            truth,
            windows,
            summary,
            cost,
            machine: engine.stats(),
            impact: Default::default(),
            monitor_cpu_ns,
            program,
            program_status,
            kvm,
        },
        heap,
        mappings,
    })
}

/// Bytes one window keeps until the run's end: its snapshot and regions, its truth
/// intervals, its cycles and its row of the window series.
fn window_bytes(snapshot: &tierscope_core::Snapshot, truth_intervals: usize) -> u64 {
    use std::mem::size_of;
    (size_of::<tierscope_core::Snapshot>()
        + snapshot.regions.len() * size_of::<tierscope_core::RegionReport>()
        + size_of::<tierscope_core::BlockIntervals>()
        + truth_intervals * size_of::<(u64, u64)>()
        + size_of::<f64>()
        + size_of::<crate::result::WindowMetrics>()) as u64
}

/// The error of a monitor's run whose kept windows passed `limit` bytes at `t`.
fn kept_error(exp: &Experiment, monitor: &str, t: u64, limit: u64) -> RunError {
    RunError::Limit(FieldError::new(
        "duration",
        format!(
            "monitor `{monitor}` kept more than {} of per-window data (snapshots, truth) for \
             the outputs by {:.1} s of the run's {:.1} s, the limit of one monitor's run \
             (docs/reference/EXPERIMENTS.md, \"Limits\"): shorten duration, or lengthen the \
             monitor's windows",
            human_bytes(limit),
            t as f64 * 1e-9,
            exp.duration_ns as f64 * 1e-9
        ),
    ))
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_experiment, Format};
    use std::path::Path;

    /// Issue 28: a 1000-day stat run grew by megabytes a second (every window's snapshot
    /// and truth are kept for the outputs) until the host ran out of memory. Its duration
    /// is now refused when parsed, and what a run keeps is bounded while it runs.
    #[test]
    fn a_run_keeping_too_much_per_window_stops_with_a_limit_error() {
        let text = r#"
duration = "720h"
[machine]
engine = "stat"
[workload]
rate = "10M/s"
regions = [{ name = "a", size = "64GiB" }]
phases = [{ name = "p", duration = "10s", patterns = [{ region = "a", kind = "random" }] }]
[[monitors]]
preset = "damon-mod"
"#;
        let e = parse_experiment(
            &text.replace("720h", "24000h"),
            "long.toml",
            Path::new("."),
            Format::Toml,
        )
        .unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("duration", Some(2)), "{e}");
        let exp = parse_experiment(text, "long.toml", Path::new("."), Format::Toml).unwrap();
        let t = std::time::Instant::now();
        let r = run_experiment_kept(&exp, &Progress::new(1, exp.duration_ns), 1, 1 << 20);
        let Err(RunError::Limit(e)) = r else {
            panic!("{:?}", r.err())
        };
        assert_eq!(e.field, "duration");
        assert!(
            e.message.contains("damon-mod") && e.message.contains("1.0 MiB"),
            "{e}"
        );
        assert!(t.elapsed().as_secs() < 60);
    }
}
