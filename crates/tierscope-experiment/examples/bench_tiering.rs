//! Benchmark (not a test): one tiering policy run on the statistical engine, a 1 TB
//! key-value store (memtier, Gaussian keys: experiments/tiering/memtier-gaussian-1t.toml's
//! workload) with one monitor feeding the Telescope rule. Prints the wall time.
//!
//! `cargo run --release -p tierscope-experiment --example bench_tiering -- [MONITOR] [DURATION]`
//! e.g. `-- telescope-bnd 600s` (the defaults).
use std::path::Path;
use std::time::Instant;
use tierscope_experiment::tiering_run::{jobs, run_policy};
use tierscope_experiment::{parse_experiment, Format, Progress};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let monitor = args.first().map(String::as_str).unwrap_or("telescope-bnd");
    let duration = args.get(1).map(String::as_str).unwrap_or("600s");
    let mix = args.get(2).map(String::as_str).unwrap_or("memtier");
    let text = format!(
        r#"
duration = "{duration}"
[machine]
engine = "stat"
[workload]
rate = "10M/s"
kv = {{ keys = 200000, value_size = "5MB", mix = "{mix}", distribution = "gaussian", stddev = 0.0005, duration = "{duration}" }}
[[monitors]]
preset = "{monitor}"
[tiering]
tiers = [{{ preset = "dram", capacity = "64GiB" }}, "pmem"]
placement = "all-slow"
policies = ["telescope-rule"]
window = "1s"
"#
    );
    let exp = parse_experiment(&text, "bench", Path::new("."), Format::Toml).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let job = jobs(&exp)[0];
    let progress = Progress::for_experiment(&exp);
    let t0 = Instant::now();
    let r = run_policy(&exp, job, &progress, 1).expect("run");
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "{}: {duration} simulated in {wall:.1} s; speed-up over all-slow {:.3}, {:.1} GB promoted",
        r.name,
        r.summary.speedup_over_slow,
        r.migration.promoted_bytes as f64 / 1e9
    );
}
