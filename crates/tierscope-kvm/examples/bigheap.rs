//! The acceptance shape: a 16 GiB heap with a 1 GiB hot region. Reports engine
//! start-up time, the guest's warm-up and steady access rate, and truth sizes.
//!
//!     cargo run -p tierscope-kvm --release --example bigheap [4k|2m] [rate]

use std::time::Instant;
use tierscope_core::workload::parse_masim;
use tierscope_core::{Engine, PageSize};
use tierscope_kvm::{kvm_available, KvmEngine, KvmParams};

fn main() {
    if let Err(e) = kvm_available() {
        println!("KVM not available: {e}");
        std::process::exit(2);
    }
    let args: Vec<String> = std::env::args().collect();
    let ps = match args.get(1).map(String::as_str) {
        Some("2m") => PageSize::Huge2M,
        _ => PageSize::Base4K,
    };
    let rate: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let w = parse_masim("cold, 15GiB\nhot, 1GiB\n\np\n100000\nhot, 1, 4096, 1, wo\n").unwrap();
    let mut p = KvmParams::new(&w);
    p.page_size = ps;
    p.rate = rate;
    let t0 = Instant::now();
    let mut e = KvmEngine::new(&p).unwrap();
    println!("{ps}: engine up in {:?}", t0.elapsed());
    let mut last = 0;
    let secs: u64 = std::env::var("SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    for s in 1..=secs {
        e.advance_to(s * 1_000_000_000);
        let n = e.accesses();
        let truth: u64 = e.take_truth().iter().map(|(a, b)| b - a).sum();
        println!(
            "t={s}s: {:.1} M accesses/s, {truth} hot 2 MiB blocks (hot region = 512)",
            (n - last) as f64 / 1e6,
        );
        last = n;
    }
    let t1 = Instant::now();
    drop(e);
    println!("teardown {:?}", t1.elapsed());
}
