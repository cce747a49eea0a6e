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
use tierscope_sim::stat::cleared::ClearedTable;
use tierscope_sim::stat::entries::Cleared;

const LOOKUPS: usize = 300;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keys: usize = args
        .first()
        .map(|s| s.parse().unwrap())
        .unwrap_or(3_000_000);
    let rounds: usize = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(300);
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
            let map = table.slot_map().expect("a full table");
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
