//! Whole experiments with memory tiers and policies, on the exact and statistical
//! engines: the invariants every policy run keeps (between all-fast and all-slow, no better
//! than the oracle, accesses accounted), and each policy doing what its paper says on a
//! workload built for it.

use std::path::Path;
use tierscope_experiment::{parse_experiment, run_experiment, Format, Progress, RunResult};

/// Random loads on a 64 MiB hot region between two cold GiBs; a 256 MiB fast tier
/// that starts out holding the first cold GiB's beginning.
fn run(engine: &str, extra_policies: &str) -> RunResult {
    run_with(
        engine,
        "damon-mod\"\n[[monitors]]\npreset = \"telescope-bnd",
        extra_policies,
    )
}

/// `run` with other monitors (presets, joined by the caller) and policies.
fn run_with(engine: &str, monitors: &str, extra_policies: &str) -> RunResult {
    let text = format!(
        r#"
duration = "3s"
warmup = "0s"
[machine]
engine = "{engine}"
[workload]
rate = "2M/s"
regions = [
{{ name = "cold_top", size = "1GiB" }},
{{ name = "hot", size = "64MiB" }},
{{ name = "cold_bottom", size = "1GiB" }},
]
phases = [{{ name = "p", duration = "3s", patterns = [{{ region = "hot", kind = "random", mode = "rw" }}] }}]
[[monitors]]
preset = "{monitors}"
[tiering]
tiers = [{{ preset = "dram", capacity = "256MiB" }}, "cxl"]
policies = ["telescope-rule", "oracle", "static"{extra_policies}]
"#
    );
    let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
    run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn invariants_hold_on_both_engines() {
    for engine in ["exact", "stat"] {
        let r = run(
            engine,
            r#", { type = "damos", damo = "--damos_action migrate_hot 0 --damos_access_rate 10% max --damos_age min max --damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_age 600ms max" }"#,
        );
        let names: Vec<&str> = r.policies.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "telescope-rule@damon-mod",
                "telescope-rule@telescope-bnd",
                "oracle",
                "static",
                "damos@damon-mod",
                "damos@telescope-bnd"
            ],
            "{engine}"
        );
        let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
        for p in &r.policies {
            let s = &p.summary;
            let at = format!("{engine} {}", p.name);
            // Accesses by tier sum to all accesses: 2 M/s for 3 s.
            let total: f64 = p.windows.iter().map(|w| w.accesses).sum();
            assert!((total - 6e6).abs() < 1.0, "{at}: {total}");
            for w in &p.windows {
                assert!(close(w.served.iter().sum::<f64>(), w.accesses), "{at}");
            }
            // Between all-fast and all-slow, and no better than the oracle.
            assert!(s.app_ns >= s.all_fast_ns * (1.0 - 1e-9), "{at}");
            assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
            assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
            // Bytes migrated are whole pages.
            let m = &p.migration;
            assert_eq!(m.promoted_bytes + m.demoted_bytes, m.pages * 4096, "{at}");
        }
        // The hot set fits: the oracle is all-fast.
        assert!(
            close(oracle.summary.app_ns, oracle.summary.all_fast_ns),
            "{engine}"
        );
        assert_eq!(oracle.migration.pages, 0, "the oracle's moves are free");
        // First touch put the cold top in the fast tier: never migrating is all-slow.
        let fixed = r.policies.iter().find(|p| p.kind == "static").unwrap();
        assert!(
            close(fixed.summary.app_ns, fixed.summary.all_slow_ns),
            "{engine}"
        );
        // Telemetry-driven policies move the hot region up and end up serving it fast.
        for p in r.policies.iter().filter(|p| p.monitor.is_some()) {
            let last = p.windows.last().unwrap();
            assert!(last.served[0] / last.accesses > 0.95, "{engine} {}", p.name);
            assert!(
                p.migration.promoted_bytes >= 64 << 20,
                "{engine} {}",
                p.name
            );
            assert!(
                p.summary.speedup_over_slow > 1.5,
                "{engine} {}: {:?}",
                p.name,
                p.summary
            );
            let gap = p.summary.gap_to_oracle.unwrap();
            // Detection takes windows (DAMOS also waits for cold regions to age before
            // making room), during which the oracle is already fast.
            assert!((1.0..2.0).contains(&gap), "{engine} {}: {gap}", p.name);
        }
    }
}

#[test]
fn invariants_hold_for_ycsb_mixes_on_both_engines() {
    // A, D and E with scattered, newest-first and scanned keys over 80 MB of items and
    // a 32 MiB fast tier.
    for kv in [
        r#"mix = "ycsb-a", distribution = "scrambled-zipfian""#,
        r#"mix = "ycsb-d", distribution = "latest", insert_steps = 4"#,
        r#"mix = "ycsb-e", distribution = "scrambled-zipfian", max_scan = 20"#,
    ] {
        for engine in ["exact", "stat"] {
            let text = format!(
                r#"
duration = "2s"
warmup = "0s"
[machine]
engine = "{engine}"
[workload]
rate = "2M/s"
kv = {{ keys = 20000, value_size = "4000B", {kv}, duration = "2s" }}
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{{ preset = "dram", capacity = "32MiB" }}, "cxl"]
policies = ["telescope-rule", "oracle", "static"]
"#
            );
            let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
            let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
            let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
            for p in &r.policies {
                let s = &p.summary;
                let at = format!("{engine} {kv} {}", p.name);
                let total: f64 = p.windows.iter().map(|w| w.accesses).sum();
                assert!((total - 4e6).abs() < 1.0, "{at}: {total}");
                for w in &p.windows {
                    assert!(close(w.served.iter().sum::<f64>(), w.accesses), "{at}");
                }
                assert!(s.app_ns >= s.all_fast_ns * (1.0 - 1e-9), "{at}");
                assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
                assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
                let m = &p.migration;
                assert_eq!(m.promoted_bytes + m.demoted_bytes, m.pages * 4096, "{at}");
            }
            // Skewed keys: the oracle gains over all-slow with a fast tier of 40 %.
            assert!(oracle.summary.speedup_over_slow > 1.1, "{engine} {kv}");
        }
    }
}

#[test]
fn pebs_policies_promote_the_hot_region() {
    for engine in ["exact", "stat"] {
        let r = run_with(engine, "pebs-hemem", r#", "hemem", "memtis""#);
        let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
        for kind in ["hemem", "memtis"] {
            let p = r.policies.iter().find(|p| p.kind == kind).unwrap();
            let at = format!("{engine} {}", p.name);
            assert_eq!(p.monitor.as_deref(), Some("pebs-hemem"));
            let s = &p.summary;
            assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
            assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
            let last = p.windows.last().unwrap();
            assert!(last.served[0] / last.accesses > 0.9, "{at}: {last:?}");
            let m = &p.migration;
            assert_eq!(m.promoted_bytes + m.demoted_bytes, m.pages * 4096, "{at}");
        }
    }
}

#[test]
fn hemem_on_nemo_counts_promotes_the_hot_region() {
    // HeMem-NEMO (§5.1): the same policy fed by memory-controller counts scaled to
    // PEBS samples, on both engines.
    for engine in ["exact", "stat"] {
        let r = run_with(engine, "nemo-hotset", r#", "hemem""#);
        let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
        let p = r.policies.iter().find(|p| p.kind == "hemem").unwrap();
        let at = format!("{engine} {}", p.name);
        assert_eq!(p.monitor.as_deref(), Some("nemo-hotset"), "{at}");
        let s = &p.summary;
        assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
        assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
        let last = p.windows.last().unwrap();
        assert!(last.served[0] / last.accesses > 0.9, "{at}: {last:?}");
        // Reads and reprogramming are charged, and stay a small share of a core.
        assert!(s.monitor_cpu_ns > 0.0, "{at}");
    }
}

#[test]
fn tpp_promotes_on_hint_faults_and_keeps_its_watermark() {
    for engine in ["exact", "stat"] {
        // Scan a GiB every half second, hot within 100 ms: the hot region is in the
        // second or third batch of the first lap.
        let r = run_with(
            engine,
            "numa-hint\"\nscan_size = \"1GiB\"\nscan_period = \"500ms\"\nhot_threshold = \"100ms",
            r#", "tpp""#,
        );
        let names: Vec<&str> = r.policies.iter().map(|p| p.name.as_str()).collect();
        // telescope-rule can use any monitor of accesses; TPP only hint faults.
        assert!(names.contains(&"tpp@numa-hint"), "{names:?}");
        let oracle = r.policies.iter().find(|p| p.kind == "oracle").unwrap();
        let p = r.policies.iter().find(|p| p.kind == "tpp").unwrap();
        let at = format!("{engine} {}", p.name);
        let s = &p.summary;
        assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
        assert!(s.app_ns >= oracle.summary.app_ns * (1.0 - 1e-9), "{at}");
        let last = p.windows.last().unwrap();
        assert!(last.served[0] / last.accesses > 0.95, "{at}: {last:?}");
        // The 256 MiB fast tier started full (first touch): room for 64 MiB and the
        // 2 % reserve came from demotions, and it ends at most 98 % full (to the page).
        let m = &p.migration;
        assert!(m.promoted_bytes >= 64 << 20, "{at}: {m:?}");
        assert!(m.demoted_bytes >= m.promoted_bytes, "{at}: {m:?}");
        let cap = 256u64 << 20;
        assert!(
            last.placed[0] <= cap - cap / 50 + 4096,
            "{at}: {:?}",
            last.placed
        );
        // The hint faults cost CPU on the workload's cores.
        assert!(s.monitor_cpu_ns > 0.0, "{at}");
    }
}

#[test]
fn huge_pages_split_for_partial_moves_and_move_whole_otherwise() {
    // Cori's schedulers move 4 KiB pages; on a heap of 2 MiB pages each move of part
    // of a huge page splits it (or, without splitting, waits for whole huge pages).
    for engine in ["exact", "stat"] {
        for split in [true, false] {
            let text = format!(
                r#"
duration = "2s"
warmup = "0s"
block_size = "4KiB"
[machine]
engine = "{engine}"
page_size = "2MiB"
[workload]
rate = "1M/s"
regions = [{{ name = "cold", size = "256MiB" }}, {{ name = "hot", size = "6MiB" }}]
phases = [{{ name = "p", duration = "2s", patterns = [{{ region = "hot", kind = "hotspot", hot_fraction = 0.1 }}] }}]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{{ preset = "dram", capacity = "64MiB" }}, "cxl"]
placement = "all-slow"
policies = [{{ type = "periodic", mode = "history" }}]
window = "200ms"
migration = {{ split_huge = {split}, collapse_huge = true }}
"#
            );
            let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
            let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
            let p = &r.policies[0];
            let m = &p.migration;
            let at = format!("{engine} split={split}: {m:?}");
            let s = &p.summary;
            assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}");
            if split {
                // The hot pages are one in ten of the hot region's: scattered, so
                // promoting them cuts every one of its three huge pages.
                assert!(m.splits >= 3, "{at}");
                assert!(m.promoted_bytes > 0 && m.promoted_bytes < 6 << 20, "{at}");
                assert!(s.fast_hit_ratio > 0.5, "{at}: {s:?}");
            } else {
                // Every move asks for 4 KiB pages, none covers a whole huge page:
                // trimmed to whole huge pages, nothing moves and all stays slow.
                assert_eq!((m.splits, m.collapses), (0, 0), "{at}");
                assert_eq!(m.promoted_bytes, 0, "{at}");
                assert_eq!(s.fast_hit_ratio, 0.0, "{at}");
            }
        }
    }
}

#[test]
fn memtis_splits_skewed_huge_pages() {
    // One hot 4 KiB page in every 100 of a 64 MiB region of 2 MiB pages: every huge
    // page is skewed, and a 16 MiB fast tier holds all the hot base pages but only a
    // quarter of the hot huge pages.
    for engine in ["exact", "stat"] {
        let mut fast = vec![];
        for split in [true, false] {
            let text = format!(
                r#"
duration = "3s"
warmup = "0s"
[machine]
engine = "{engine}"
page_size = "2MiB"
[workload]
rate = "2M/s"
regions = [{{ name = "cold", size = "256MiB" }}, {{ name = "hot", size = "64MiB" }}]
phases = [{{ name = "p", duration = "3s", patterns = [{{ region = "hot", kind = "hotspot", hot_fraction = 0.01 }}] }}]
[[monitors]]
preset = "pebs-memtis"
[tiering]
tiers = [{{ preset = "dram", capacity = "16MiB" }}, "cxl"]
placement = "all-slow"
policies = [{{ type = "memtis", split = {split} }}]
migration = {{ split_huge = true }}
"#
            );
            let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
            let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
            let p = &r.policies[0];
            let at = format!("{engine} split={split}: {:?}", p.migration);
            if split {
                assert!(p.migration.splits > 0, "{at}");
            } else {
                assert_eq!(p.migration.splits, 0, "{at}");
            }
            fast.push(p.windows.last().unwrap().served[0] / p.windows.last().unwrap().accesses);
        }
        // Split, the hot base pages all fit; whole, a quarter of the huge pages do.
        assert!(fast[0] > 0.9, "{engine}: {fast:?}");
        assert!(fast[1] < 0.5, "{engine}: {fast:?}");
    }
}

#[test]
fn colloid_beats_packing_under_an_antagonist_and_matches_it_without() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/tiering/colloid-antagonist.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    for (background, loaded) in [("105GB", true), ("0", false)] {
        let text = text.replace(
            "background = \"105GB\"",
            &format!("background = \"{background}\""),
        );
        let exp = parse_experiment(&text, "c.toml", path.parent().unwrap(), Format::Toml).unwrap();
        let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
        let get = |kind: &str| r.policies.iter().find(|p| p.kind == kind).unwrap().summary;
        let (hemem, colloid) = (get("hemem"), get("colloid"));
        if loaded {
            // DRAM loaded past the remote socket's latency: balancing wins, and beats
            // the oracle, which only packs.
            assert!(
                colloid.app_ns < hemem.app_ns * 0.99,
                "{colloid:?} {hemem:?}"
            );
            assert!(colloid.gap_to_oracle.unwrap() < 1.0);
            assert!(colloid.fast_hit_ratio < hemem.fast_hit_ratio);
        } else {
            assert!(close(colloid.app_ns, hemem.app_ns), "{colloid:?} {hemem:?}");
        }
    }
}

/// cori-sim's model by hand: two 2-page regions read in turn for 10 ms each (1000
/// accesses per period at 100 K/s, 500 per page), a 2-page fast tier at 50 ns, a slow
/// one at 150 ns, 1 us per migrated page, 3 us per period, periods of 10 ms.
#[test]
fn cori_periodic_schedulers_match_cori_sims_formula_by_hand() {
    let text = r#"
duration = "40ms"
warmup = "0s"
block_size = "4KiB"
[machine]
engine = "exact"
[workload]
rate = "100K/s"
regions = [{ name = "x", size = "8KiB" }, { name = "y", size = "8KiB" }]
phases = [
  { name = "x", duration = "10ms", patterns = [{ region = "x", kind = "sequential", stride = "4KiB", mode = "ro" }] },
  { name = "y", duration = "10ms", patterns = [{ region = "y", kind = "sequential", stride = "4KiB", mode = "ro" }] },
]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{ preset = "cori-fast", capacity = "8KiB" }, "cori-slow"]
placement = "all-slow"
window = "10ms"
migration = { stall_per_page = "1us", stall_per_round = "3us", cpu_per_page = "0ns" }
policies = [
  { type = "periodic", name = "history", mode = "history", period = "10ms" },
  { type = "periodic", name = "predictive", mode = "oracle", period = "10ms" },
  "static",
]
"#;
    let exp = parse_experiment(text, "cori.toml", Path::new("."), Format::Toml).unwrap();
    let r = run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap();
    let get = |name: &str| r.policies.iter().find(|p| p.name == name).unwrap();
    // runtime = hits x 50 + misses x 150 + periods x 3000 + migrated pages x 1000.
    // Reactive: always one period late, so every access misses; it promotes x after
    // period 1 (2 pages) and swaps 2 + 2 pages after periods 2 and 3.
    let history = get("history");
    assert_eq!(history.migration.pages, 2 + 4 + 4);
    assert_eq!(history.migration.rounds, 4);
    assert!(close(
        history.summary.app_ns,
        4000.0 * 150.0 + 4.0 * 3000.0 + 10.0 * 1000.0
    ));
    // Predictive: the coming period's pages are fast every time.
    let predictive = get("predictive");
    assert_eq!(predictive.migration.pages, 2 + 4 + 4 + 4);
    assert!(close(
        predictive.summary.app_ns,
        4000.0 * 50.0 + 4.0 * 3000.0 + 14.0 * 1000.0
    ));
    assert!(close(get("static").summary.app_ns, 4000.0 * 150.0));
}

#[test]
fn same_seed_same_numbers() {
    let a = serde_json::to_string(&run("exact", "").policies).unwrap();
    let b = serde_json::to_string(&run("exact", "").policies).unwrap();
    assert_eq!(a, b);
}
