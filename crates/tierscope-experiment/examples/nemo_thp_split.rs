//! NEMO's THP split-candidate use case on an experiment file:
//! `cargo run --release -p tierscope-experiment --example nemo_thp_split -- FILE [FAST_SHARE...]`
//! (FAST_SHARE: a fast tier's share of the heap; default 1/3 and 1/9, i.e. 1:2 and 1:8).

use std::path::Path;
use tierscope_experiment::nemo_thp::{run, ThpSplitOptions};
use tierscope_experiment::{parse_experiment, Format};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: nemo_thp_split FILE [FAST_SHARE]");
    let text = std::fs::read_to_string(path).expect("readable file");
    let exp = parse_experiment(&text, path, Path::new("."), Format::Toml).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut opts = ThpSplitOptions::default();
    if args.len() > 2 {
        opts.fast_shares = args[2..]
            .iter()
            .map(|s| s.parse().expect("a number"))
            .collect();
    }
    let rows = run(&exp, &opts).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    println!("share  technique    candidates  95% found (s)  found  exact  false  cpu %");
    for r in rows {
        let t95 = r
            .found_95_s
            .map_or("never".to_string(), |s| format!("{s:.0}"));
        println!(
            "{:.3}  {:<12} {:>10}  {:>13}  {:>5.3}  {:>5.3}  {:>5}  {:>5.2}",
            r.fast_share,
            r.technique,
            r.candidates,
            t95,
            r.found_end,
            r.exact_end,
            r.false_candidates,
            r.cpu_percent
        );
        println!("  buckets 0..20: {:?}", r.buckets);
    }
}
