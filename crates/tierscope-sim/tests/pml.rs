//! Simulated PML on the exact engine against an oracle computed from the access stream
//! alone (no TLB, no page table): per drain window, the 4 KiB pages stored to at least
//! once, and the last-level page tables over every page accessed (the drain invalidates
//! the cached translations, so the first access to each page afterwards walks, and with
//! EPT A/D on the walker's load of a table entry dirties that table). VM exits: a log
//! attempt that finds the 512-entry log full exits, so a window logging `n` entries from
//! an empty log takes `ceil(n / 512) - 1` of them.

use std::collections::BTreeSet;
use tierscope_core::rng::Rng;
use tierscope_core::workload::parse_masim;
use tierscope_core::{AddrRange, Engine, Machine, PageSize};
use tierscope_sim::config::SimMachine;
use tierscope_sim::exact::ExactEngine;
use tierscope_sim::layout::lay_out;
use tierscope_sim::pml::PML_ENTRIES;
use tierscope_sim::stream::AccessStream;
use tierscope_sim::WorkloadParams;

const RATE: u64 = 1_000_000;
const WINDOW_NS: u64 = 4_000_000;

struct Window {
    written: BTreeSet<u64>,
    tables: BTreeSet<AddrRange>,
}

/// The oracle's windows: the threads' streams regenerated and cut at the window ends.
fn oracle(
    spec: &tierscope_core::workload::WorkloadSpec,
    page: PageSize,
    threads: u32,
    seed: u64,
    windows: u64,
) -> Vec<Window> {
    let cfg = SimMachine::default();
    let layout = lay_out(spec, cfg.paging, page).unwrap();
    let mut streams: Vec<AccessStream> = (0..threads)
        .map(|t| {
            AccessStream::new(
                spec,
                &layout.region_starts,
                RATE,
                Rng::for_stream(seed, &format!("workload/thread{t}")),
            )
        })
        .collect();
    let span = |va: u64, shift: u32| {
        let s = va >> shift << shift;
        AddrRange::new(s, s + (1 << shift))
    };
    (1..=windows)
        .map(|k| {
            let mut w = Window {
                written: BTreeSet::new(),
                tables: BTreeSet::new(),
            };
            for s in &mut streams {
                let target = s.count_at(k * WINDOW_NS);
                s.run(target, |va, store| {
                    if store {
                        w.written.insert(va >> 12 << 12);
                    }
                    match page {
                        // The PTE table mapping the page.
                        PageSize::Base4K => w.tables.insert(span(va, 21)),
                        // The PMD table holding the 2 MiB leaf.
                        _ => w.tables.insert(span(va, 30)),
                    };
                });
            }
            w
        })
        .collect()
}

fn check(masim: &str, page: PageSize, threads: u32, seed: u64, windows: u64) -> u64 {
    let spec = parse_masim(masim).unwrap();
    let params = WorkloadParams {
        spec: &spec,
        rate: RATE,
        threads,
        seed,
        block_size: 2 << 20,
        truth_threshold: 1,
    };
    let cfg = SimMachine {
        page_size: page,
        ..SimMachine::default()
    };
    let mut e = ExactEngine::new(&cfg, &params).unwrap();
    // Start logging: the first drain is empty.
    let (mut written, mut tables) = (vec![], vec![]);
    let log = e.write_log().unwrap();
    log.drain_written(&mut written);
    log.drain_tables(&mut tables);
    assert!(written.is_empty() && tables.is_empty());
    let want = oracle(&spec, page, threads, seed, windows);
    let mut exits_want = 0;
    for (k, w) in want.iter().enumerate() {
        e.advance_to((k as u64 + 1) * WINDOW_NS);
        written.clear();
        tables.clear();
        let log = e.write_log().unwrap();
        log.drain_written(&mut written);
        log.drain_tables(&mut tables);
        let got: Vec<u64> = w.written.iter().copied().collect();
        assert_eq!(written, got, "window {k}: written pages");
        let got: Vec<AddrRange> = w.tables.iter().copied().collect();
        assert_eq!(tables, got, "window {k}: page tables");
        let n = (w.written.len() + w.tables.len()) as u64;
        exits_want += n.div_ceil(PML_ENTRIES as u64).saturating_sub(1);
    }
    assert_eq!(
        e.cost().get(&tierscope_sim::pml::PML_EXITS),
        exits_want,
        "{masim}"
    );
    // One INVEPT per window, before the guest ran again.
    assert_eq!(e.cost().flushes_full, windows);
    exits_want
}

#[test]
fn random_stores_and_loads_overflow_the_log() {
    // 64 MiB = 16384 pages, 4000 accesses per window, half stores: ~2000 pages and ~32
    // tables per window, so several exits per window.
    let spec = "a, 64MiB\n\np\n1000\na, 1, 4096, 1, rw\n";
    for seed in [1, 2, 3] {
        let exits = check(spec, PageSize::Base4K, 1, seed, 6);
        assert!(exits >= 6 * 3, "seed {seed}: {exits} exits");
    }
}

#[test]
fn two_threads_and_a_sequential_pattern() {
    let spec = "hot, 8MiB\ncold, 256MiB\n\np1\n5\nhot, 1, 4096, 3, wo\ncold, 0, 4096, 1, ro\n\np2\n5\ncold, 1, 4096, 1, rw\n";
    for seed in [4, 5] {
        check(spec, PageSize::Base4K, 2, seed, 5);
    }
}

#[test]
fn loads_only_log_tables_but_no_data_page() {
    let spec = "a, 16MiB\n\np\n1000\na, 1, 4096, 1, ro\n";
    assert_eq!(check(spec, PageSize::Base4K, 1, 7, 3), 0);
}

#[test]
fn huge_pages_log_their_pmd_table_and_4k_data_pages() {
    let spec = "a, 64MiB\n\np\n1000\na, 1, 4096, 1, rw\n";
    check(spec, PageSize::Huge2M, 1, 8, 4);
}

#[test]
fn written_truth_counts_stores_only() {
    let spec = parse_masim("a, 64MiB\nb, 64MiB\n\np\n1000\na, 1, 4096, 1, ro\nb, 1, 4096, 1, wo\n")
        .unwrap();
    let params = WorkloadParams {
        spec: &spec,
        rate: RATE,
        threads: 1,
        seed: 3,
        block_size: 2 << 20,
        truth_threshold: 1,
    };
    let layout = lay_out(&spec, SimMachine::default().paging, PageSize::Base4K).unwrap();
    let b = layout.regions()[1];
    let mut e = ExactEngine::new(&SimMachine::default(), &params).unwrap();
    e.set_written_truth();
    e.advance_to(2 * WINDOW_NS);
    let hot = e.take_truth();
    assert!(!hot.is_empty());
    for (s, end) in hot {
        assert!(
            s << 21 >= b.start && end << 21 <= b.end,
            "only region b is stored to"
        );
    }
}
