//! Benchmark (not a test): how much a prefetch of the cleared-entry table's slots saves on
//! this machine. A table of KEYS random keys; rounds of 300 lookups of random keys (a
//! monitor's pass), each round after the caches were flushed by writing 64 MiB, in four
//! ways: plain lookups; every key prefetched first (`ClearedTable::prefetch`, as
//! `warm_accessed` does); prefetched, then 20 us of waiting before the lookups (only the
//! lookups timed: what is left once every prefetch had time to land); the same keys
//! looked up a second time (all cached). Prints the median time per lookup of each.
//!
//! `cargo run --release -p tierscope-sim --example bench_prefetch -- [KEYS] [ROUNDS]`
//! (default 3000000 keys, 300 rounds).
use std::time::{Duration, Instant};
use tierscope_core::rng::Rng;
use tierscope_sim::stat::cleared::{ClearedTable, PREFETCH_MIN_KEYS};
use tierscope_sim::stat::entries::Cleared;

const LOOKUPS: usize = 300;

/// The `i`th argument as a count of at least 1, `default` when absent; a bad one ends the
/// program with one line and exit code 2.
fn count_arg(args: &[String], i: usize, name: &str, default: usize) -> usize {
    let Some(s) = args.get(i) else {
        return default;
    };
    match s.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => {
            eprintln!("bench_prefetch: {name} must be a whole number above 0, got {s:?}");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keys = count_arg(&args, 0, "KEYS", 3_000_000);
    let rounds = count_arg(&args, 1, "ROUNDS", 300);
    let mut rng = Rng::new(4);
    let mut table = ClearedTable::default();
    let all: Vec<u64> = (0..keys).map(|_| rng.next_u64() >> 8).collect();
    for (i, &k) in all.iter().enumerate() {
        let c = Cleared {
            since: i as u64,
            seq: 0,
            worst: 0.0,
            fresh: 0,
        };
        table.insert(k, c);
    }
    let mut flush = vec![0u64; 8 << 20];
    let names = ["plain", "prefetched", "prefetched, 20 us later", "cached"];
    let mut times: Vec<Vec<Duration>> = vec![vec![]; names.len()];
    let mut sum = 0u64;
    for _ in 0..rounds {
        for (way, t) in times.iter_mut().enumerate() {
            for (i, w) in flush.iter_mut().enumerate().step_by(8) {
                *w = w.wrapping_add(i as u64);
            }
            let pick: Vec<u64> = (0..LOOKUPS)
                .map(|_| all[rng.below(keys as u64) as usize])
                .collect();
            let Some(map) = table.slot_map() else {
                eprintln!("bench_prefetch: KEYS must be at least {PREFETCH_MIN_KEYS} (smaller tables are not prefetched)");
                std::process::exit(2);
            };
            let start = Instant::now();
            let mut from = start;
            match way {
                1 => pick.iter().for_each(|&k| ClearedTable::prefetch(map, k)),
                2 => {
                    pick.iter().for_each(|&k| ClearedTable::prefetch(map, k));
                    while start.elapsed() < Duration::from_micros(20) {}
                    from = Instant::now();
                }
                3 => {
                    for &k in &pick {
                        sum += table.get(k).map_or(0, |c| c.since & 1);
                    }
                    from = Instant::now();
                }
                _ => {}
            }
            for &k in &pick {
                sum += table.get(k).map_or(0, |c| c.since & 1);
            }
            t.push(from.elapsed());
        }
    }
    println!("{keys} keys, {rounds} rounds of {LOOKUPS} lookups (checksum {sum})");
    for (name, mut t) in names.iter().zip(times) {
        t.sort_unstable();
        let ns = t[t.len() / 2].as_nanos() as f64 / LOOKUPS as f64;
        println!("{name:>24}: {ns:.1} ns per lookup (median round)");
    }
    std::hint::black_box(&flush);
}
