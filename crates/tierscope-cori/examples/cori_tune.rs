//! The acceptance evaluation of Cori's Tuner against the paper's baselines (Doudali et
//! al., IPDPS 2021, Figure 5a) on the generated workloads, for both schedulers.
//!
//! cargo run --release -p tierscope-cori --example cori_tune -- OUT.csv [--scales 1]
//!     [--seeds 1] [--random-seeds 10] [--timestep 1000] [--curves CURVES.csv]
//!
//! For every workload, scale, seed and scheduler: the exhaustive best over the baselines'
//! grid (`timestep, 2 timestep, ..., runtime / 2`), Cori's choice under its stopping
//! rules and its gap to that best, and the trials Cori's candidate order, base-left,
//! base-right and base-random (mean over `--random-seeds` orders) need to get within 3 %
//! of the best. The table goes to stdout and, the same, to OUT.csv; `--curves` writes every
//! period's runtime. Bad flags exit 2.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tierscope_cori::tuner::{
    base_grid, base_left, base_right, exhaustive, mean_trials_to_within, trials_to_within, tune,
    Stop,
};
use tierscope_cori::workloads::Workload;
use tierscope_cori::{
    candidate_periods, dominant_reuse, run, Edges, ModelConfig, ReuseHistogram, Scheduler, Trace,
    CORI_BUCKET,
};

/// "within 3 % of the exhaustive best": the paper's measure of a good period.
const WITHIN: f64 = 3.0;
/// Cori's stopping rules, fixed before any evaluation (docs/techniques/CORI.md, "The Tuner"): stop
/// when a trial is within 3 % of the best before it (no significant variation), or after
/// two trials in a row without a new best.
const CORI_STOPS: [Stop; 2] = [Stop::WithinBest(WITHIN), Stop::NoGain(2)];

struct Args {
    csv: PathBuf,
    scales: Vec<u64>,
    seeds: Vec<u64>,
    random_seeds: u64,
    timestep: u64,
    curves: Option<PathBuf>,
}

fn list(flag: &str, v: &str) -> Result<Vec<u64>, String> {
    v.split(',')
        .map(|x| x.trim().parse().map_err(|e| format!("{flag}: `{x}`: {e}")))
        .collect()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        csv: PathBuf::new(),
        scales: vec![1],
        seeds: vec![1],
        random_seeds: 10,
        timestep: CORI_BUCKET,
        curves: None,
    };
    let mut csv = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--scales" => a.scales = list("--scales", &value()?)?,
            "--seeds" => a.seeds = list("--seeds", &value()?)?,
            "--random-seeds" => {
                a.random_seeds = value()?
                    .parse()
                    .map_err(|e| format!("--random-seeds: {e}"))?
            }
            "--timestep" => {
                a.timestep = value()?.parse().map_err(|e| format!("--timestep: {e}"))?
            }
            "--curves" => a.curves = Some(PathBuf::from(value()?)),
            _ if csv.is_none() && !flag.starts_with("--") => csv = Some(PathBuf::from(&flag)),
            _ => return Err(format!("unexpected argument `{flag}`")),
        }
    }
    a.csv = csv.ok_or("usage: cori_tune OUT.csv [--scales 1,2] [--seeds 1,2] [--random-seeds N] [--timestep N] [--curves PATH]")?;
    if a.scales.contains(&0) {
        return Err("--scales: a scale is at least 1".into());
    }
    if a.random_seeds < 10 {
        return Err("--random-seeds: at least 10, the mean is over seeds".into());
    }
    if a.timestep == 0 {
        return Err("--timestep: at least 1 request".into());
    }
    Ok(a)
}

const HEADER: [&str; 18] = [
    "workload",
    "scale",
    "seed",
    "scheduler",
    "requests",
    "pages",
    "dr",
    "candidates",
    "grid",
    "best_period",
    "best_vs_fast_pct",
    "cori_period",
    "cori_gap_pct",
    "cori_trials",
    "cori_to_3pct",
    "left_to_3pct",
    "right_to_3pct",
    "random_to_3pct",
];

/// One evaluated case, as the table's cells.
fn evaluate(
    w: Workload,
    scale: u64,
    seed: u64,
    trace: &Trace,
    args: &Args,
    curves: &mut String,
) -> Result<Vec<Vec<String>>, String> {
    let n = trace.len() as u64;
    let bars = ReuseHistogram::new(trace, CORI_BUCKET, Edges::CoriSim).cori_bars();
    let dr = dominant_reuse(&bars);
    let candidates = dr.map_or(vec![], |dr| candidate_periods(dr, n));
    let grid = base_grid(args.timestep, n);
    let random_seeds: Vec<u64> = (0..args.random_seeds).collect();
    let mut rows = vec![];
    for scheduler in Scheduler::ALL {
        let config = ModelConfig::cori_sim(scheduler);
        // Every period either side tries, each modelled once.
        let mut runtime: BTreeMap<u64, f64> = BTreeMap::new();
        let mut all_fast = 0.0;
        for &p in grid.iter().chain(&candidates) {
            if let std::collections::btree_map::Entry::Vacant(e) = runtime.entry(p) {
                let s = run(trace, &config, p).map_err(|e| e.to_string())?;
                all_fast = s.all_fast_ns;
                e.insert(s.runtime_ns);
            }
        }
        let cost = |p: u64| runtime[&p];
        for (&p, &r) in &runtime {
            let _ = writeln!(
                curves,
                "{},{scale},{seed},{},{p},{r:.0},{},{}",
                w.name(),
                scheduler.name(),
                grid.binary_search(&p).is_ok(),
                candidates.contains(&p)
            );
        }
        let (_, best) = exhaustive(&grid, cost);
        let Some(best) = best else {
            return Err(format!("{}: no grid period fits in {n} requests", w.name()));
        };
        let gap = |r: f64| format!("{:.2}", 100.0 * (r / best.runtime - 1.0));
        let trials = |t: Option<usize>| t.map_or("never".to_string(), |t| t.to_string());
        let cori = tune(&candidates, cost, &CORI_STOPS);
        let (cori_period, cori_gap) = match cori.chosen {
            Some(c) => (c.period.to_string(), gap(c.runtime)),
            None => ("-".into(), "-".into()),
        };
        rows.push(vec![
            w.name().to_string(),
            scale.to_string(),
            seed.to_string(),
            scheduler.name().to_string(),
            n.to_string(),
            trace.num_pages().to_string(),
            dr.map_or("-".into(), |d| d.to_string()),
            candidates.len().to_string(),
            grid.len().to_string(),
            best.period.to_string(),
            format!("{:.2}", 100.0 * (best.runtime / all_fast - 1.0)),
            cori_period,
            cori_gap,
            cori.trials.len().to_string(),
            trials(trials_to_within(&candidates, cost, best.runtime, WITHIN)),
            trials(trials_to_within(
                &base_left(&grid),
                cost,
                best.runtime,
                WITHIN,
            )),
            trials(trials_to_within(
                &base_right(&grid),
                cost,
                best.runtime,
                WITHIN,
            )),
            mean_trials_to_within(&grid, cost, best.runtime, WITHIN, &random_seeds)
                .map_or("never".into(), |m| format!("{m:.1}")),
        ]);
    }
    Ok(rows)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut rows: Vec<Vec<String>> = vec![];
    let mut curves =
        String::from("workload,scale,seed,scheduler,period,runtime_ns,on_grid,candidate\n");
    let t_all = Instant::now();
    for &scale in &args.scales {
        for &seed in &args.seeds {
            for w in Workload::ALL {
                let t0 = Instant::now();
                let trace = match w.generate(seed, scale) {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("error: --scales: {e}");
                        return ExitCode::from(2);
                    }
                };
                match evaluate(w, scale, seed, &trace, &args, &mut curves) {
                    Ok(r) => rows.extend(r),
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                }
                eprintln!(
                    "{} scale {scale} seed {seed}: {:.2} s",
                    w.name(),
                    t0.elapsed().as_secs_f64()
                );
            }
        }
    }
    eprintln!("all: {:.1} s", t_all.elapsed().as_secs_f64());

    let widths: Vec<usize> = (0..HEADER.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([HEADER[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("{}", line(&HEADER));
    let mut csv = HEADER.join(",") + "\n";
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        println!("{}", line(&cells));
        csv += &r.join(",");
        csv += "\n";
    }
    if let Err(e) = std::fs::write(&args.csv, csv) {
        eprintln!("error: {}: {e}", args.csv.display());
        return ExitCode::from(2);
    }
    if let Some(path) = &args.curves {
        if let Err(e) = std::fs::write(path, curves) {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
