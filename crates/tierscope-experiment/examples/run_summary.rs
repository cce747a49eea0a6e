//! Runs an experiment file and prints each monitor's summary: a quick check of the Rust
//! side without the Python package. `cargo run --release --example run_summary -- FILE`
use std::path::Path;
use tierscope_experiment::{parse_experiment, run_experiment, Format, Progress};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run_summary EXPERIMENT.toml|EXPERIMENT.json");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("run_summary: {path}: {e}");
        std::process::exit(2);
    });
    let base = Path::new(&path).parent().unwrap_or(Path::new("."));
    // A sweep's expanded runs are easiest to save as JSON (`Experiment.to_dict()`).
    let format = if path.ends_with(".json") {
        Format::Json
    } else {
        Format::Toml
    };
    let exp = match parse_experiment(&text, &path, base, format) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let progress = Progress::for_experiment(&exp);
    let t0 = std::time::Instant::now();
    let r = run_experiment(&exp, &progress, 0).expect("run");
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{:<16} {:>6} {:>6} {:>6} {:>10} {:>12} {:>8} {:>8} {:>8}",
        "monitor", "prec", "recall", "f1", "cpu%", "bits_clr", "regions", "flushes", "conv_ms"
    );
    for m in &r.monitors {
        let s = &m.summary;
        println!(
            "{:<16} {:>6.3} {:>6.3} {:>6.3} {:>10.5} {:>12} {:>8.1} {:>8} {:>8}",
            m.name,
            s.precision,
            s.recall,
            s.f1,
            s.cpu_percent,
            s.bits_cleared,
            s.mean_nr_regions,
            s.flushes,
            s.convergence_ms
                .map_or("-".to_string(), |c| format!("{c:.0}"))
        );
    }
    if !r.policies.is_empty() {
        println!(
            "\n{:<32} {:>8} {:>8} {:>8} {:>10} {:>10} {:>12}",
            "policy", "speedup", "gap", "fast%", "promo_GB", "demo_GB", "p99_op_us"
        );
    }
    for p in &r.policies {
        let s = &p.summary;
        println!(
            "{:<32} {:>8.3} {:>8.3} {:>8.1} {:>10.2} {:>10.2} {:>12}",
            p.name,
            s.speedup_over_slow,
            s.gap_to_oracle.unwrap_or(f64::NAN),
            s.fast_hit_ratio * 100.0,
            p.migration.promoted_bytes as f64 / 1e9,
            p.migration.demoted_bytes as f64 / 1e9,
            s.op_latency_ns
                .map_or("-".to_string(), |l| format!("{:.1}", l[2] / 1e3))
        );
    }
    // TIERSCOPE_WINDOWS=name prints that monitor's per-window series.
    if let Ok(name) = std::env::var("TIERSCOPE_WINDOWS") {
        for m in r.monitors.iter().filter(|m| m.name == name) {
            for (w, s) in m.windows.iter().zip(&m.snapshots) {
                let hot: Vec<String> = s
                    .regions
                    .iter()
                    .filter(|x| x.nr_accesses >= exp.hot_threshold)
                    .map(|x| {
                        format!(
                            "{:.2}+{:.2}G:{}",
                            (x.start - r.heap.start) as f64 / (1u64 << 30) as f64,
                            (x.end - x.start) as f64 / (1u64 << 30) as f64,
                            x.nr_accesses
                        )
                    })
                    .collect();
                println!(
                    "{:>6.1}s p={:.3} r={:.3} n={:>4} {}",
                    w.end_ns as f64 / 1e9,
                    w.precision,
                    w.recall,
                    w.nr_regions,
                    hot.join(" ")
                );
            }
        }
    }
    let accesses: u64 = r.monitors.iter().map(|m| m.machine.accesses).sum();
    eprintln!(
        "wall {secs:.1}s, {accesses} accesses simulated, {:.1} M/s overall",
        accesses as f64 / secs / 1e6
    );
}
