//! The probability that an ACCESSED bit cleared at a random moment is found set one
//! interval later, on both engines, in the multi-phase benchmark's third phase: two hot
//! regions accessed at random, one 131072-access batch at a time, so the thread keeps
//! switching between them (docs/models/FIDELITY.md, "Root causes of the two stat-vs-exact gaps").
//! This is what DAMON observes per sample, without DAMON's adaptive regions around it.
//!
//! `cargo run --release -p tierscope-sim --example switch_probe -- HOT LEVEL DELAY_MS SEEDS SECONDS [one]`
//! e.g. `-- 10GiB pte 1 32 2`: the default experiment's 10 GiB hot regions, PTEs, read
//! 1 ms after the clear (DAMON-AGG), seeds 1-32, 2 simulated seconds of probes per seed.
//! With `one`, only `hot_a` is accessed (no switches: the steady state alone).
//!
//! Each round clears the entry at LEVEL (pte, pmd, pud) over 256 random addresses of
//! `hot_a`, runs the workload DELAY_MS, and reads them back; rounds follow each other for
//! SECONDS. Per engine it prints the mean over seeds of each seed's fraction found set,
//! with its standard error (seeds are independent; rounds within a seed share the batch
//! schedule), and Welch's t of the difference.
use tierscope_core::rng::Rng;
use tierscope_core::units::parse_size;
use tierscope_core::workload::parse_masim;
use tierscope_core::Level;
use tierscope_sim::config::SimMachine;
use tierscope_sim::{build_engine, SimEngine, WorkloadParams};

const MS: u64 = 1_000_000;
const PER_ROUND: usize = 256;

fn fraction_set(
    engine: SimEngine,
    spec: &str,
    level: Level,
    delay_ms: u64,
    seed: u64,
    secs: f64,
) -> f64 {
    let spec = parse_masim(spec).expect("a valid spec");
    let params = WorkloadParams {
        spec: &spec,
        rate: 10_000_000,
        threads: 1,
        seed,
        block_size: 2 << 20,
        truth_threshold: 1,
    };
    let mut e = build_engine(engine, &SimMachine::default(), &params, None, false).unwrap();
    let hot = e
        .as_machine()
        .mappings()
        .iter()
        .find(|m| m.name == "heap:hot_a")
        .expect("hot_a is mapped")
        .range;
    let mut rng = Rng::for_stream(seed, "switch_probe");
    let mut t = 200 * MS;
    e.advance_to(t);
    let (mut reads, mut set) = (0u64, 0u64);
    let end = t + (secs * 1e9) as u64;
    while t < end {
        let m = e.as_machine();
        let vas: Vec<u64> = (0..PER_ROUND)
            .map(|_| rng.range(hot.start, hot.end))
            .collect();
        for &va in &vas {
            m.test_and_clear_accessed(level, va).expect("mapped");
        }
        t += delay_ms * MS;
        e.advance_to(t);
        let m = e.as_machine();
        for &va in &vas {
            reads += 1;
            set += m.accessed(level, va).expect("mapped") as u64;
        }
        // Keep the truth from growing without bound.
        e.take_truth();
    }
    set as f64 / reads as f64
}

fn mean_se(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
    (m, (v / n).sqrt())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hot = args.first().map(String::as_str).unwrap_or("10GiB");
    let level = match args.get(1).map(String::as_str).unwrap_or("pte") {
        "pte" => Level::Pte,
        "pmd" => Level::Pmd,
        "pud" => Level::Pud,
        other => panic!("level {other}: pte, pmd or pud"),
    };
    let delay_ms: u64 = args.get(2).map_or(1, |s| s.parse().expect("a delay in ms"));
    let seeds: u64 = args.get(3).map_or(32, |s| s.parse().expect("a seed count"));
    let secs: f64 = args.get(4).map_or(2.0, |s| s.parse().expect("seconds"));
    let one = args.get(5).map(String::as_str) == Some("one");
    let bytes = parse_size(hot).expect("a size");
    // The default experiment's layout (experiments/multiphase-64g.cfg) with hot regions of
    // `hot` bytes, in its third phase (or its first with `one`).
    let second = if one { "" } else { "hot_c, 1, 4096, 1, ro\n" };
    let spec = format!(
        "cold_top, 8GiB\nhot_c, {bytes}\ncold_2, 8GiB\nhot_b, {bytes}\ncold_1, 8GiB\n\
         hot_a, {bytes}\ncold_bottom, 10GiB\n\nphase\n1000000\n\
         hot_a, 1, 4096, 1, ro\n{second}"
    );
    let mut per_engine = vec![];
    for (name, engine) in [("exact", SimEngine::Exact), ("stat", SimEngine::Stat)] {
        let f: Vec<f64> = (1..=seeds)
            .map(|s| fraction_set(engine, &spec, level, delay_ms, s, secs))
            .collect();
        let (m, se) = mean_se(&f);
        println!("{name:>5}: {m:.6} ± {se:.6} (seeds 1-{seeds})");
        per_engine.push((m, se));
    }
    let ((a, sa), (b, sb)) = (per_engine[0], per_engine[1]);
    println!(
        "stat / exact {:.4}, Welch t {:.2} ({hot} hot regions{}, {level:?}, {delay_ms} ms)",
        b / a,
        (b - a) / sa.hypot(sb),
        if one { ", hot_a only" } else { "" }
    );
}
