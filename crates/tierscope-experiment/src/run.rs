//! Runs an experiment: every monitor on its own engine fed the identical access stream,
//! monitors in parallel, each run deterministic for the experiment's seed.

use crate::config::Experiment;
use crate::evaluate;
use crate::result::{MonitorRun, Progress, RunResult};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, Mapping};
use tierscope_sim::WorkloadParams;

/// Why a run did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The watcher asked to stop.
    Cancelled,
    /// The engine could not be built or failed.
    Engine(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Cancelled => f.write_str("run cancelled"),
            RunError::Engine(m) => f.write_str(m),
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
    let n = exp.monitors.len();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads = if max_threads == 0 { cores } else { max_threads }.clamp(1, n);
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<OneRun, RunError>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = run_monitor(exp, i, progress);
                if r.is_err() {
                    progress.cancel();
                }
                slots.lock().expect("no panics while holding the lock")[i] = Some(r);
            });
        }
    });
    let mut runs = vec![];
    for slot in slots.into_inner().expect("threads joined") {
        runs.push(slot.expect("every monitor ran")?);
    }
    let heap = runs[0].heap;
    let mappings = runs[0].mappings.clone();
    Ok(RunResult {
        duration_ns: exp.duration_ns,
        block_size: exp.block_size,
        heap,
        mappings,
        monitors: runs.into_iter().map(|r| r.run).collect(),
    })
}

fn run_monitor(exp: &Experiment, index: usize, progress: &Progress) -> Result<OneRun, RunError> {
    let entry = &exp.monitors[index];
    let params = WorkloadParams {
        spec: &exp.workload.spec,
        rate: exp.workload.rate,
        threads: exp.workload.threads,
        seed: exp.seed,
        block_size: exp.block_size,
        truth_threshold: exp.truth_threshold,
    };
    let mut engine =
        tierscope_sim::build_engine(&exp.machine, &params).map_err(RunError::Engine)?;
    let mut monitor = tierscope_monitors::build(
        &entry.config,
        Rng::for_stream(exp.seed, &format!("monitor/{}", entry.name)),
    );
    let mut snapshots = vec![];
    let mut truth = vec![];
    let mut window_cycles = vec![];
    let mut cycles_before = 0.0;
    loop {
        let t = monitor.next_wakeup();
        if t > exp.duration_ns {
            break;
        }
        engine.advance_to(t);
        progress.set(index, t);
        if progress.cancelled() {
            return Err(RunError::Cancelled);
        }
        if let Some(snapshot) = monitor.wake(engine.as_machine()) {
            truth.push(engine.take_truth());
            let cycles = exp.cost.cycles(engine.as_machine().cost());
            window_cycles.push(cycles - cycles_before);
            cycles_before = cycles;
            snapshots.push(snapshot);
        }
    }
    engine.advance_to(exp.duration_ns);
    progress.set(index, exp.duration_ns);

    let block_shift = exp.block_size.trailing_zeros();
    let windows = evaluate::windows(
        &snapshots,
        &truth,
        &window_cycles,
        block_shift,
        exp.hot_threshold,
    );
    let cost = *engine.as_machine().cost();
    let summary = evaluate::summarize(&windows, &cost, &exp.cost, exp.duration_ns, exp.warmup_ns);
    let heap = engine.heap();
    let mappings = engine.as_machine().mappings().to_vec();
    Ok(OneRun {
        run: MonitorRun {
            name: entry.name.clone(),
            kind: entry.config.kind(),
            intervals: monitor.intervals(),
            snapshots,
            truth,
            windows,
            summary,
            cost,
            machine: engine.stats(),
        },
        heap,
        mappings,
    })
}
