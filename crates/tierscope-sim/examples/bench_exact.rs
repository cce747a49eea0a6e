//! Benchmark (not a test): simulated accesses per second of the exact engine, one thread,
//! random loads over the whole heap. Prints the median of several timed slices.
//!
//! `cargo run --release -p tierscope-sim --example bench_exact -- [HEAP] [PAGE] [REPEATS] [SLICE_S] [tiers] [threads=N] [host=N]`
//! e.g. `-- 64GiB 4KiB 5`. `threads=N`: N workload threads (each random over the whole
//! heap; the rate printed is per workload thread), `host=N`: on up to N host threads. With `tiers`, a second engine with memory tiers (DRAM holding
//! a quarter of the heap, then CXL) runs the same slices in turn with the first, and the
//! per-slice ratio of their rates is reported (the cost of counting each access's tier). A short slice (e.g. 0.1) suits `valgrind --tool=callgrind`,
//! whose instruction counts do not depend on the machine's load.
use std::time::Instant;
use tierscope_core::tiers::{tier_preset, InitialPlacement, TierSetup, TierTraffic};
use tierscope_core::units::{parse_size, NS_PER_S};
use tierscope_core::workload::parse_masim;
use tierscope_core::{Engine, Machine, PageSize};
use tierscope_sim::config::SimMachine;
use tierscope_sim::exact::ExactEngine;
use tierscope_sim::WorkloadParams;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let heap = args.first().map(String::as_str).unwrap_or("64GiB");
    let page = PageSize::parse(args.get(1).map(String::as_str).unwrap_or("4KiB")).unwrap();
    let repeats: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(5);
    let slice_s: f64 = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(1.0);
    let slice_ns = (slice_s * NS_PER_S as f64) as u64;
    let bytes = parse_size(heap).expect("a size");
    let spec = parse_masim(&format!(
        "heap, {bytes}\n\np\n1000000\nheap, 1, 4096, 1, ro\n"
    ))
    .unwrap();
    let option = |key: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(key))
            .map_or(1, |v| v.parse::<u32>().expect("a number"))
    };
    let (threads, host_threads) = (option("threads="), option("host="));
    let config = SimMachine {
        page_size: page,
        host_threads,
        ..SimMachine::default()
    };
    let params = WorkloadParams {
        spec: &spec,
        rate: 10_000_000,
        threads,
        seed: 1,
        block_size: 2 << 20,
        truth_threshold: 1,
    };
    let t0 = Instant::now();
    let mut engine = ExactEngine::new(&config, &params).unwrap();
    eprintln!(
        "setup {:.2}s, page tables {} MiB",
        t0.elapsed().as_secs_f64(),
        engine.page_table_bytes() >> 20
    );
    let mut tiered = args.iter().any(|a| a == "tiers").then(|| {
        let mut e = ExactEngine::new(&config, &params).unwrap();
        let tier = |name: &str, capacity| tier_preset(name).unwrap().spec(capacity);
        e.set_tiers(&TierSetup {
            tiers: vec![tier("dram", bytes / 4), tier("cxl", bytes)],
            initial: InitialPlacement::Interleaved,
        });
        e
    });
    // Warm up one slice, then time slices (in turn with the tiered engine, if any).
    let mut t = slice_ns;
    engine.advance_to(t);
    if let Some(e) = &mut tiered {
        e.advance_to(t);
    }
    let mut rates = vec![];
    let mut ratios = vec![];
    let mut traffic = [TierTraffic::default(); 2];
    for _ in 0..repeats {
        let start = Instant::now();
        t += slice_ns;
        engine.advance_to(t);
        engine.take_truth();
        let rate = slice_s * 1e7 / start.elapsed().as_secs_f64();
        rates.push(rate);
        if let Some(e) = &mut tiered {
            let start = Instant::now();
            e.advance_to(t);
            e.take_truth();
            e.tiers().unwrap().take_traffic(&mut traffic);
            ratios.push(rate / (slice_s * 1e7 / start.elapsed().as_secs_f64()));
        }
    }
    if !ratios.is_empty() {
        ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let served: f64 = traffic.iter().map(TierTraffic::total).sum();
        println!(
            "with tiers: time per access x{:.3} median (min {:.3}, max {:.3}); {:.1}% served by dram",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1],
            100.0 * traffic[0].total() / served
        );
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = rates[rates.len() / 2];
    let s = engine.stats();
    let per = if threads > 1 {
        format!(" per workload thread ({threads} threads, host_threads {host_threads})")
    } else {
        String::new()
    };
    println!(
        "heap {heap} page {page}: median {:.1} M accesses/s{per} (min {:.1}, max {:.1}); TLB L1 hit {:.1}%, walks {:.1}%",
        median / 1e6,
        rates[0] / 1e6,
        rates[rates.len() - 1] / 1e6,
        100.0 * s.tlb_l1_hits as f64 / s.accesses as f64,
        100.0 * s.walks as f64 / s.accesses as f64
    );
}
