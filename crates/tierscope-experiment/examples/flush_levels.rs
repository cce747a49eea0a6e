//! The flush question, level by level: how many accesses does an ACCESSED bit miss when it
//! is cleared without a flush, and what do flushes cost?
//!
//! On the exact engine, with the experiment's workload and machine (its monitors are
//! ignored): every 5 ms, check the probes cleared 5 ms earlier against the ground truth
//! (4 KiB blocks accessed in those 5 ms), then draw `PROBES` new addresses uniformly in the
//! region named "hot" and test-and-clear the entry at `level` covering each: the probe of
//! DAMON (the leaf) and of Telescope (upper levels). With `flush`, one full flush follows
//! the clears of a round (Telescope's and DAMON-with-flush's batched flush: more than 33
//! pages). A probe is *unseen* when the truth says its span was accessed and its bit is
//! still clear.
//!
//! `cargo run --release --example flush_levels -- EXPERIMENT.toml [PROBES]`
use std::path::Path;
use tierscope_core::rng::Rng;
use tierscope_core::{CostCounters, Flush, Level, MachineStats};
use tierscope_experiment::impact::{app_slowdown, ImpactModel};
use tierscope_experiment::{parse_experiment, Format};
use tierscope_sim::WorkloadParams;

const ROUND_NS: u64 = 5_000_000;

struct Outcome {
    accessed: u64,
    unseen: u64,
    stats: MachineStats,
    cost: CostCounters,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: flush_levels EXPERIMENT.toml [PROBES]");
    let probes: usize = args
        .next()
        .map_or(256, |p| p.parse().expect("PROBES: a number"));
    let text = std::fs::read_to_string(&path).expect("readable file");
    let base = Path::new(&path).parent().unwrap_or(Path::new("."));
    let exp = match parse_experiment(&text, &path, base, Format::Toml) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let params = WorkloadParams {
        spec: &exp.workload.spec,
        rate: exp.workload.rate,
        threads: exp.workload.threads,
        seed: exp.seed,
        block_size: 4096,
        truth_threshold: 1,
    };
    let leaf = exp.machine.page_size.leaf_level();
    let levels: Vec<Level> = Level::ALL
        .into_iter()
        .filter(|&l| l >= leaf && l <= exp.machine.paging().root())
        .collect();
    let secs = exp.duration_ns as f64 * 1e-9;
    println!(
        "| level | flush | probes accessed (truth) | unseen | unseen % | flushes/s | extra walks/s | app slowdown % (walks + shootdowns) | flush cycles, % of a core |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for level in levels {
        let mut baseline: Option<MachineStats> = None;
        for flush in [false, true] {
            let o = run(&exp, &params, level, flush, probes);
            if !flush {
                baseline = Some(o.stats);
            }
            let imp = app_slowdown(
                &ImpactModel::default(),
                &exp.cost,
                &o.cost,
                &o.stats,
                baseline.as_ref(),
                exp.workload.threads,
                exp.duration_ns,
            );
            let flushes = o.cost.flushes_full + o.cost.flushes_page;
            let flush_cycles = o.cost.flushes_full as f64 * exp.cost.flush_full
                + o.cost.flushes_page as f64 * exp.cost.flush_page;
            println!(
                "| {} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.4} | {:.4} |",
                level.name(),
                if flush { "after clear" } else { "none" },
                o.accessed,
                o.unseen,
                100.0 * o.unseen as f64 / o.accessed.max(1) as f64,
                flushes as f64 / secs,
                imp.extra_walks as f64 / secs,
                100.0 * (imp.walks + imp.shootdowns),
                100.0 * flush_cycles / (exp.cost.cpu_hz * secs),
            );
        }
    }
}

fn run(
    exp: &tierscope_experiment::Experiment,
    params: &WorkloadParams,
    level: Level,
    flush: bool,
    probes: usize,
) -> Outcome {
    let mut engine = tierscope_sim::build_engine(
        tierscope_sim::SimEngine::Exact,
        &exp.machine.sim(),
        params,
        None,
        false,
    )
    .expect("engine");
    let hot = engine
        .as_machine()
        .mappings()
        .iter()
        .find(|m| m.name == "heap:hot")
        .expect("the workload has a region named \"hot\"")
        .range;
    let mut rng = Rng::for_stream(exp.seed, &format!("flush-levels/{}", level.name()));
    let mut current: Vec<u64> = vec![];
    let (mut accessed, mut unseen) = (0, 0);
    let mut t = 0;
    while t + ROUND_NS <= exp.duration_ns {
        t += ROUND_NS;
        engine.advance_to(t);
        let truth = engine.take_truth();
        let m = engine.as_machine();
        for &e in &current {
            let (first, last) = (e >> 12, (e + level.span()) >> 12);
            let i = truth.partition_point(|&(_, end)| end <= first);
            let touched = truth.get(i).is_some_and(|&(start, _)| start < last);
            if touched {
                accessed += 1;
                if !m.accessed(level, e).unwrap_or(false) {
                    unseen += 1;
                }
            }
        }
        current.clear();
        for _ in 0..probes {
            current.push(level.align_down(rng.range(hot.start, hot.end)));
        }
        current.sort_unstable();
        current.dedup();
        for &e in &current {
            m.test_and_clear_accessed(level, e);
        }
        if flush {
            m.flush(Flush::All);
        }
    }
    Outcome {
        accessed,
        unseen,
        stats: engine.stats(),
        cost: *engine.as_machine().cost(),
    }
}
