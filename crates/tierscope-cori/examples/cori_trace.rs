//! Cori on one trace in cori-sim's format: the dominant reuse, the candidate periods and
//! cori-sim's modelled runtime at each, for both schedulers.
//!
//! cargo run --release -p tierscope-cori --example cori_trace -- TRACE [--quantum 20]
//!     [--bucket 1000] [--fast-ratio 0.2]
//!
//! Bad input (file, line, flag) exits 2, as every tierscope command does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tierscope_cori::{
    candidate_periods, dominant_reuse, run, Edges, ModelConfig, ReuseHistogram, Scheduler, Trace,
    CORI_BUCKET,
};

struct Args {
    trace: PathBuf,
    quantum: u32,
    bucket: u64,
    fast_ratio: f64,
}

fn parse_args() -> Result<Args, String> {
    let defaults = ModelConfig::cori_sim(Scheduler::History);
    let mut trace = None;
    let mut quantum = defaults.count_quantum;
    let mut bucket = CORI_BUCKET;
    let mut fast_ratio = defaults.fast_ratio;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--quantum" => {
                quantum = value("--quantum")?
                    .parse()
                    .map_err(|e| format!("--quantum: {e}"))?
            }
            "--bucket" => {
                bucket = value("--bucket")?
                    .parse()
                    .map_err(|e| format!("--bucket: {e}"))?;
                if bucket == 0 {
                    return Err("--bucket: must be at least 1 request".into());
                }
            }
            "--fast-ratio" => {
                fast_ratio = value("--fast-ratio")?
                    .parse()
                    .map_err(|e| format!("--fast-ratio: {e}"))?
            }
            _ if trace.is_none() && !a.starts_with("--") => trace = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument `{a}`")),
        }
    }
    Ok(Args {
        trace: trace
            .ok_or("usage: cori_trace TRACE [--quantum N] [--bucket N] [--fast-ratio R]")?,
        quantum,
        bucket,
        fast_ratio,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let t0 = Instant::now();
    let trace = match Trace::from_file(&args.trace) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let n = trace.len() as u64;
    println!(
        "trace: {} requests, {} pages (read in {:.2} s)",
        n,
        trace.num_pages(),
        t0.elapsed().as_secs_f64()
    );

    let t0 = Instant::now();
    let bars = ReuseHistogram::new(&trace, args.bucket, Edges::CoriSim).cori_bars();
    println!(
        "reuse histogram: {} bars of {}-request buckets ({:.3} s)",
        bars.len(),
        args.bucket,
        t0.elapsed().as_secs_f64()
    );
    let Some(dr) = dominant_reuse(&bars) else {
        println!("no bar above 2 repeats per page: no dominant reuse, no candidate periods");
        return ExitCode::SUCCESS;
    };
    let candidates = candidate_periods(dr, n);
    println!("dominant reuse: {dr} requests");
    println!("candidate periods (requests): {candidates:?}");

    println!(
        "{:>10} {:>9} {:>8} {:>8} {:>10} {:>16} {:>9} {:>12}",
        "period",
        "scheduler",
        "periods",
        "hits %",
        "migrated",
        "runtime ns",
        "vs fast",
        "requests/s"
    );
    for &period in &candidates {
        for scheduler in Scheduler::ALL {
            let config = ModelConfig {
                fast_ratio: args.fast_ratio,
                count_quantum: args.quantum,
                ..ModelConfig::cori_sim(scheduler)
            };
            let t0 = Instant::now();
            let s = match run(&trace, &config, period) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let secs = t0.elapsed().as_secs_f64();
            println!(
                "{:>10} {:>9} {:>8} {:>8.2} {:>10} {:>16.0} {:>8.2}% {:>12.3e}",
                period,
                scheduler.name(),
                s.periods,
                100.0 * s.fast_hits as f64 / n as f64,
                s.migrated_pages,
                s.runtime_ns,
                100.0 * (s.runtime_ns / s.all_fast_ns - 1.0),
                n as f64 / secs
            );
        }
    }
    ExitCode::SUCCESS
}
