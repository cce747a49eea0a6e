//! MEMTIS fed by NEMO (MEMTIS-NEMO, NEMO paper §5.2, Figure 6) beside MEMTIS on PEBS, on
//! both engines: every run between all-slow and all-fast, the huge-page-only runs no
//! better than the oracle (which moves huge pages whole), NEMO's splits putting the hot
//! base pages on the fast tier, and the same seed giving the same runs.

use std::path::Path;
use tierscope_experiment::{parse_experiment, run_experiment, Format, Progress, RunResult};

/// One hot 4 KiB page in every 100 of a 64 MiB region of 2 MiB pages (every huge page
/// skewed) beside 256 MiB of cold ones; a 16 MiB fast tier holds all the hot base pages
/// but a quarter of the hot huge pages. NEMO sweeps the 160 huge pages in 2 windows.
fn run(engine: &str) -> RunResult {
    let text = format!(
        r#"
duration = "4s"
warmup = "0s"
[machine]
engine = "{engine}"
page_size = "2MiB"
[workload]
rate = "2M/s"
regions = [{{ name = "cold", size = "256MiB" }}, {{ name = "hot", size = "64MiB" }}]
phases = [{{ name = "p", duration = "4s", patterns = [{{ region = "hot", kind = "hotspot", hot_fraction = 0.01 }}] }}]
[[monitors]]
preset = "pebs-memtis"
[[monitors]]
preset = "nemo-memtis"
[tiering]
tiers = [{{ preset = "dram", capacity = "16MiB" }}, "cxl"]
placement = "all-slow"
migration = {{ split_huge = true }}
policies = ["memtis", {{ type = "memtis", name = "hugeonly", split = false }}, "oracle"]
"#
    );
    let exp = parse_experiment(&text, "t.toml", Path::new("."), Format::Toml).unwrap();
    run_experiment(&exp, &Progress::for_experiment(&exp), 0).unwrap()
}

#[test]
fn memtis_on_nemo_splits_and_stays_within_the_bounds_on_both_engines() {
    for engine in ["exact", "stat"] {
        let r = run(engine);
        let names: Vec<&str> = r.policies.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "memtis@pebs-memtis",
                "memtis@nemo-memtis",
                "hugeonly@pebs-memtis",
                "hugeonly@nemo-memtis",
                "oracle"
            ],
            "{engine}"
        );
        let oracle = r.policies[4].summary;
        for p in &r.policies[..4] {
            let (s, at) = (p.summary, format!("{engine} {}", p.name));
            assert!(s.app_ns <= s.all_slow_ns * (1.0 + 1e-9), "{at}: {s:?}");
            assert!(s.app_ns >= s.all_fast_ns * (1.0 - 1e-9), "{at}: {s:?}");
            if p.name.starts_with("hugeonly") {
                assert_eq!(p.migration.splits, 0, "{at}");
                assert!(s.app_ns >= oracle.app_ns * (1.0 - 1e-9), "{at}: {s:?}");
            }
        }
        // Split on NEMO's base-page counts, the hot base pages end on the fast tier and
        // beat the oracle's whole huge pages; whole, a quarter of the hot ones fit.
        let nemo = &r.policies[1];
        let last = nemo.windows.last().unwrap();
        assert!(nemo.migration.splits > 0, "{engine}: {:?}", nemo.migration);
        assert!(last.served[0] / last.accesses > 0.9, "{engine}: {last:?}");
        assert!(nemo.summary.app_ns < oracle.app_ns, "{engine}");
        let whole = r.policies[3].windows.last().unwrap();
        assert!(
            whole.served[0] / whole.accesses < 0.5,
            "{engine}: {whole:?}"
        );
        // NEMO reads counters, PEBS takes samples: NEMO's CPU is the lower here.
        assert!(nemo.summary.monitor_cpu_ns < r.policies[0].summary.monitor_cpu_ns);
    }
}

#[test]
fn memtis_on_nemo_is_reproducible() {
    let (a, b) = (run("stat"), run("stat"));
    for (x, y) in a.policies.iter().zip(&b.policies) {
        assert_eq!(
            x.summary.app_ns.to_bits(),
            y.summary.app_ns.to_bits(),
            "{}",
            x.name
        );
        assert_eq!(x.migration, y.migration, "{}", x.name);
    }
}

#[test]
fn the_shipped_memtis_nemo_experiments_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/nemo");
    for file in ["memtis-split-1to8.toml", "memtis-split-exact.toml"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let exp = parse_experiment(&text, file, &dir, Format::Toml).unwrap();
        assert_eq!(exp.monitors.len(), 2, "{file}");
    }
}
