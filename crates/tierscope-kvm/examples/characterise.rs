//! Characterises this host's KVM for tierscope: how ACCESSED bits are set again after the
//! host clears them (per level, with and without a flush), what each monitor operation
//! costs, and how fast the guest runs. Prints markdown for docs/models/KVM.md.
//!
//!     cargo run -p tierscope-kvm --release --example characterise

use std::time::{Duration, Instant};
use tierscope_core::workload::parse_masim;
use tierscope_core::{Level, Machine, PageSize};
use tierscope_kvm::{kvm_available, KvmEngine, KvmParams};

fn rate(spec: &str, ps: PageSize, threads: usize, warm: Duration) -> (f64, f64) {
    let w = parse_masim(spec).unwrap();
    let mut p = KvmParams::new(&w);
    p.page_size = ps;
    p.threads = threads;
    let e = KvmEngine::new(&p).unwrap();
    let t0 = Instant::now();
    std::thread::sleep(warm);
    let (n0, t1) = (e.accesses(), Instant::now());
    let first = n0 as f64 / t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(1));
    let steady = (e.accesses() - n0) as f64 / t1.elapsed().as_secs_f64();
    e.check().unwrap();
    (first, steady)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Clears the bit at `level` for random hot pages and measures when it is set again.
fn reset_trials(e: &mut KvmEngine, level: Level, base: u64, len: u64, flush: bool) -> String {
    let trials = 20;
    let timeout = Duration::from_millis(if flush { 1000 } else { 100 });
    let mut lat = vec![];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..trials {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let va = base + (x % (len / 4096)) * 4096;
        // Make sure it is set first.
        let t = Instant::now();
        while e.accessed(level, va) != Some(true) && t.elapsed() < Duration::from_millis(200) {
            std::thread::sleep(Duration::from_micros(100));
        }
        e.test_and_clear_accessed(level, va);
        if flush {
            e.host_flush();
        }
        let t0 = Instant::now();
        loop {
            if e.accessed(level, va) == Some(true) {
                lat.push(t0.elapsed().as_secs_f64() * 1e6);
                break;
            }
            if t0.elapsed() > timeout {
                break;
            }
            std::hint::spin_loop();
        }
    }
    let n = lat.len();
    let med = median(&mut lat);
    let max = lat.iter().cloned().fold(0.0, f64::max);
    if n == 0 {
        return format!("0/{trials} within {} ms", timeout.as_millis());
    }
    format!(
        "{n}/{trials} within {} ms; median {:.2} ms, max {:.2} ms",
        timeout.as_millis(),
        med / 1e3,
        max / 1e3
    )
}

fn main() {
    if let Err(e) = kvm_available() {
        println!("KVM not available: {e}");
        std::process::exit(2);
    }
    println!(
        "## Guest access rate (1 vCPU unless noted, unpaced; steady = the second after warm-up)\n"
    );
    println!("| workload | page size | first | steady |");
    println!("|---|---|---|---|");
    for (name, spec, ps, threads, warm) in [
        (
            "random reads, 8 KiB region",
            "a, 8KiB\n\np\n100000\na, 1, 4096, 1, ro\n",
            PageSize::Base4K,
            1,
            300,
        ),
        (
            "random writes, 64 MiB",
            "a, 64MiB\n\np\n100000\na, 1, 4096, 1, wo\n",
            PageSize::Base4K,
            1,
            2000,
        ),
        (
            "random writes, 64 MiB",
            "a, 64MiB\n\np\n100000\na, 1, 4096, 1, wo\n",
            PageSize::Huge2M,
            1,
            500,
        ),
        (
            "random reads, 1 GiB",
            "a, 1GiB\n\np\n100000\na, 1, 4096, 1, ro\n",
            PageSize::Huge2M,
            1,
            1000,
        ),
        (
            "sequential writes, stride 64, 64 MiB",
            "a, 64MiB\n\np\n100000\na, 0, 64, 1, wo\n",
            PageSize::Base4K,
            1,
            1000,
        ),
        (
            "random writes, 64 MiB, 2 vCPUs",
            "a, 64MiB\n\np\n100000\na, 1, 4096, 1, wo\n",
            PageSize::Huge2M,
            2,
            500,
        ),
    ] {
        let (first, steady) = rate(spec, ps, threads, Duration::from_millis(warm));
        println!(
            "| {name} | {ps} | {:.1} M/s | {:.1} M/s |",
            first / 1e6,
            steady / 1e6
        );
    }

    println!("\n## ACCESSED bits set again after the host clears them\n");
    println!("Hot set: random reads over 8 MiB at 20 M accesses/s, after 1 s of warm-up; 20 random pages per cell.\n");
    println!("| page size | level | without flush | with host flush |");
    println!("|---|---|---|---|");
    for ps in [PageSize::Base4K, PageSize::Huge2M] {
        let w = parse_masim("a, 8MiB\n\np\n100000\na, 1, 4096, 1, ro\n").unwrap();
        let mut p = KvmParams::new(&w);
        p.page_size = ps;
        p.rate = 20e6;
        let mut e = KvmEngine::new(&p).unwrap();
        std::thread::sleep(Duration::from_secs(1));
        let r = e.mappings()[0].range;
        for level in [Level::Pml4, Level::Pud, Level::Pmd, Level::Pte] {
            if level < ps.leaf_level() {
                continue;
            }
            let a = reset_trials(&mut e, level, r.start, r.len(), false);
            let b = reset_trials(&mut e, level, r.start, r.len(), true);
            println!("| {ps} | {level} | {a} | {b} |");
        }
        e.check().unwrap();
    }

    println!("\n## Cost of monitor operations (host side)\n");
    println!("Heap: 1 GiB of 4 KiB pages (960 MiB cold, 64 MiB hot: random writes at 20 M/s), dirty logging on.\n");
    let w = parse_masim("cold, 960MiB\nhot, 64MiB\n\np\n100000\nhot, 1, 4096, 1, wo\n").unwrap();
    let mut p = KvmParams::new(&w);
    p.dirty_log = true;
    p.rate = 20e6;
    let mut e = KvmEngine::new(&p).unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    let r = tierscope_core::AddrRange::new(e.mappings()[0].range.start, e.mappings()[1].range.end);
    println!("| operation | ns each | notes |");
    println!("|---|---|---|");
    for level in [Level::Pte, Level::Pmd, Level::Pud, Level::Pml4] {
        let n = 200_000u64;
        let t0 = Instant::now();
        for i in 0..n {
            let va = r.start + (i * 4096 * 7919) % r.len();
            std::hint::black_box(e.test_and_clear_accessed(level, va));
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        println!("| test-and-clear at {level} (walk from the root + lock and) | {ns:.0} | 1 GiB heap, scattered addresses |");
    }
    let n = 20_000u64;
    let t0 = Instant::now();
    for i in 0..n {
        std::hint::black_box(e.accessed(Level::Pte, r.start + (i * 4096) % r.len()));
    }
    println!(
        "| read ACCESSED at pte | {:.0} | sequential addresses |",
        t0.elapsed().as_nanos() as f64 / n as f64
    );
    let log = e.dirty_log().unwrap();
    let mut hs = vec![];
    let mut pages = 0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(10));
        let t0 = Instant::now();
        pages += log.harvest().unwrap().len();
        hs.push(t0.elapsed().as_nanos() as f64);
    }
    println!(
        "| KVM_GET_DIRTY_LOG harvest, 1 GiB slot (bitmap + decode) | {:.0} | median of 20, every 10 ms; {} pages/harvest at 20 M writes/s |",
        median(&mut hs),
        pages / 20
    );
    let mut fl = vec![];
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1000));
        let before = e.accesses();
        fl.push(e.host_flush().as_nanos() as f64);
        std::thread::sleep(Duration::from_millis(1000));
        let after = e.accesses() - before;
        println!(
            "| host flush (delete + re-create a memslot: KVM zaps its shadow tables) | {:.0} | then {:.1} M guest accesses in the next second (paced at 20 M/s: the hot 16384 pages fault again) |",
            fl.last().unwrap(),
            after as f64 / 1e6
        );
    }
    {
        // vmmload's read detection, as the pml monitor does it: the leaf tables the walker
        // wrote, then a test-and-clear of each of their entries.
        let _ = log.harvest_table_spans();
        std::thread::sleep(Duration::from_millis(50));
        e.host_flush();
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        let tables = log.harvest_table_spans().unwrap();
        let (mut examined, mut accessed) = (0u64, 0u64);
        for t in &tables {
            let entry = t.len() / 512;
            for k in 0..512 {
                examined += 1;
                accessed += u64::from(
                    e.test_and_clear_accessed(Level::Pte, t.start + k * entry) == Some(true),
                );
            }
        }
        let ns = t0.elapsed().as_nanos();
        println!("| read detection: harvest dirtied page-table pages + test-and-clear their entries | {ns} (total) | {examined} entries examined, {accessed} pages found accessed |");
    }
    let stats = e.vcpu_stats();
    let get = |n: &str| stats.iter().find(|(m, _)| m == n).map_or(0, |s| s.1);
    println!(
        "\nKVM vCPU statistics of the last run: exits {}, pf_taken {}, pf_fixed {}, insn_emulation {}, tlb_flush {}",
        get("exits"),
        get("pf_taken"),
        get("pf_fixed"),
        get("insn_emulation"),
        get("tlb_flush")
    );
}
