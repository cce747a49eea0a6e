//! Benchmark (not a test): how fast the statistical engine simulates a tiered terabyte
//! key-value store, per monitor x policy, in simulated seconds per second of CPU time.
//!
//! The workload is experiments/tiering/memtier-gaussian-1t.toml's (memtier, Gaussian keys
//! with a standard deviation of 100 keys, 5 MB values, 10 M accesses/s, DRAM + PMEM, data
//! first on PMEM); 5 TB has five times the keys. Each case is one policy run (engine,
//! monitor, policy, migration, performance model) on one thread.
//!
//! ```text
//! cargo run --release -p tierscope-experiment --example bench_speed
//!     the table: every case at 1 TB and 5 TB, 60 s, 600 s and 2400 s simulated
//! ... --example bench_speed -- table [SIZES] [DURATIONS] [MONITOR,...]
//!     e.g. `table 1TB 60s,600s damon-mod,pebs-agg`
//! ... --example bench_speed -- one MONITOR POLICY SIZE DURATION [SEED]
//!     one case (to time as a whole process, e.g. against another build; a seed other
//!     than the experiments' default to compare outcomes)
//! ... --example bench_speed -- ycsb MONITOR POLICY SIZE DURATION [SEED]
//!     one case on experiments/tiering/ycsb-hotspot-2t.toml's workload instead (YCSB-B,
//!     hotspot keys: 99 % of the operations on 1 % of the data, 2 MB values, 500 K keys
//!     per TB): a hot range of tens of GB, which the Telescope rule splits
//! ```
//!
//! A row prints simulated seconds per CPU second (the thread's own CPU time, which other
//! processes on a shared machine disturb less than the wall time) at each duration, and
//! `growth`: the CPU time of the longest duration over the one before it (2400 s / 600 s:
//! 4.0 is linear).
use std::path::Path;
use std::time::Instant;
use tierscope_experiment::tiering_run::{jobs, run_policy};
use tierscope_experiment::{parse_experiment, Format, Progress};

/// Every monitor with a policy it can feed: the Telescope rule for access checks, HeMem
/// for samples and counts, TPP for hint faults. `PRESET:MODE` is DAMON or Telescope with
/// `sampling = "MODE"`: their defaults estimate each region's samples of an aggregation
/// window at once, `:each` reads every sample.
const CASES: &[(&str, &str)] = &[
    ("damon-mod", "telescope-rule"),
    ("damon-agg", "telescope-rule"),
    ("damon-mod:each", "telescope-rule"),
    ("damon-agg:each", "telescope-rule"),
    ("telescope-bnd", "telescope-rule"),
    ("telescope-flx", "telescope-rule"),
    ("telescope-bnd:each", "telescope-rule"),
    ("telescope-flx:each", "telescope-rule"),
    ("split-hint", "telescope-rule"),
    ("pruned-walk", "telescope-rule"),
    ("pebs-agg", "hemem"),
    ("nemo-hotset", "hemem"),
    ("numa-hint", "tpp"),
];

/// The key-value workload of a case.
#[derive(Clone, Copy)]
enum Workload {
    /// memtier-gaussian-1t.toml's: 5 MB values, Gaussian keys.
    Memtier,
    /// ycsb-hotspot-2t.toml's: 2 MB values, YCSB-B on hotspot keys.
    Ycsb,
}

/// The experiment of one case: `terabytes` TB of the workload's values.
fn experiment(
    workload: Workload,
    monitor: &str,
    policy: &str,
    terabytes: u64,
    duration: &str,
    seed: &str,
) -> String {
    let (keys, value_size) = match workload {
        Workload::Memtier => (200_000 * terabytes, 5_000_000),
        Workload::Ycsb => (500_000 * terabytes, 2_000_000),
    };
    let kv = match workload {
        // A standard deviation of 100 keys, as memtier-gaussian-1t.toml.
        Workload::Memtier => format!(
            r#"kv = {{ keys = {keys}, value_size = "5MB", mix = "memtier", distribution = "gaussian", stddev = {}, duration = "{duration}" }}"#,
            100.0 / keys as f64
        ),
        Workload::Ycsb => format!(
            r#"kv = {{ keys = {keys}, value_size = "2MB", mix = "ycsb-b", distribution = "hotspot", hot_data = 0.01, hot_ops = 0.99, duration = "{duration}" }}"#
        ),
    };
    // NEMO's translation entries index 2 MiB pages directly: enough for the heap.
    let (monitor, variant) = monitor.split_once(':').unwrap_or((monitor, ""));
    let extra = if !variant.is_empty() {
        format!("sampling = \"{variant}\"")
    } else if monitor.starts_with("nemo") {
        let pages = (keys * value_size).div_ceil(2 << 20);
        format!("entries = {}", pages.next_power_of_two())
    } else {
        String::new()
    };
    let seed = if seed.is_empty() {
        String::new()
    } else {
        format!("seed = {seed}")
    };
    format!(
        r#"
duration = "{duration}"
{seed}
[machine]
engine = "stat"
[workload]
rate = "10M/s"
{kv}
[[monitors]]
preset = "{monitor}"
{extra}
[tiering]
tiers = [{{ preset = "dram", capacity = "64GiB" }}, "pmem"]
placement = "all-slow"
policies = ["{policy}"]
window = "1s"
"#
    )
}

/// This thread's CPU time in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Runs one case; returns (CPU seconds, wall seconds, summary line), or why the case
/// cannot run (NEMO's translation table covers at most 2 TiB).
fn run(
    workload: Workload,
    monitor: &str,
    policy: &str,
    terabytes: u64,
    duration: &str,
    seed: &str,
) -> Result<(f64, f64, String), String> {
    let text = experiment(workload, monitor, policy, terabytes, duration, seed);
    let exp = parse_experiment(&text, "bench", Path::new("."), Format::Toml)
        .map_err(|e| e.to_string())?;
    let job = jobs(&exp)[0];
    let progress = Progress::for_experiment(&exp);
    let (c0, t0) = (thread_cpu(), Instant::now());
    let r = run_policy(&exp, job, &progress, 1).expect("run");
    let (cpu, wall) = (thread_cpu() - c0, t0.elapsed().as_secs_f64());
    let line = format!(
        "{}: speed-up over all-slow {:.4}, {:.1} GB promoted",
        r.name,
        r.summary.speedup_over_slow,
        r.migration.promoted_bytes as f64 / 1e9
    );
    Ok((cpu, wall, line))
}

fn terabytes(size: &str) -> u64 {
    size.trim_end_matches("TB").parse().unwrap_or_else(|_| {
        eprintln!("bad size {size:?}: 1TB, 5TB, ...");
        std::process::exit(2)
    })
}

fn seconds(d: &str) -> f64 {
    d.trim_end_matches('s').parse().unwrap_or_else(|_| {
        eprintln!("bad duration {d:?}: 60s, 600s, ...");
        std::process::exit(2)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.into());
    let one = match args.first().map(String::as_str) {
        Some("one") => Some(Workload::Memtier),
        Some("ycsb") => Some(Workload::Ycsb),
        _ => None,
    };
    if let Some(workload) = one {
        let (monitor, policy, size, duration) = (arg(1, ""), arg(2, ""), arg(3, ""), arg(4, ""));
        let (cpu, wall, line) = run(
            workload,
            &monitor,
            &policy,
            terabytes(&size),
            &duration,
            &arg(5, ""),
        )
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
        println!(
            "{line}; {size}, {duration} simulated: {cpu:.2} s CPU, {wall:.2} s wall, {:.1} simulated s per CPU s",
            seconds(&duration) / cpu
        );
        return;
    }
    let sizes = arg(1, "1TB,5TB");
    let durations = arg(2, "60s,600s,2400s");
    let only = arg(3, "");
    let durations: Vec<&str> = durations.split(',').collect();
    print!("| monitor | policy | heap |");
    for d in &durations {
        print!(" {d}: sim s / CPU s |");
    }
    println!(" growth {} |", growth_label(&durations));
    println!("|---|---|---|{}---|", "---|".repeat(durations.len()));
    for size in sizes.split(',') {
        for &(monitor, policy) in CASES {
            if !only.is_empty() && !only.split(',').any(|m| m == monitor) {
                continue;
            }
            print!("| {monitor} | {policy} | {size} |");
            let mut cpus = vec![];
            for d in &durations {
                match run(Workload::Memtier, monitor, policy, terabytes(size), d, "") {
                    Ok((cpu, _, _)) => {
                        print!(" {:.0} |", seconds(d) / cpu);
                        cpus.push(cpu);
                    }
                    Err(e) => {
                        print!(" - |");
                        eprintln!("{monitor} at {size}: {e}");
                    }
                }
                use std::io::Write;
                std::io::stdout().flush().ok();
            }
            if cpus.len() < durations.len() {
                cpus.clear();
            }
            let g = match cpus.as_slice() {
                [.., a, b] => format!("{:.2}", b / a),
                _ => "-".into(),
            };
            println!(" {g} |");
        }
    }
}

fn growth_label(durations: &[&str]) -> String {
    match durations {
        [.., a, b] => format!("{a} -> {b}"),
        _ => String::new(),
    }
}
