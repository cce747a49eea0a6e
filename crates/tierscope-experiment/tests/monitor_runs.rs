//! Whole experiments with monitors only: huge pages reported at the PMD, the pruned walk
//! exact where translations stay cached, and the application slowdown charged for flush
//! walks and PMU interrupts.

use std::path::Path;
use tierscope_experiment::{
    parse_experiment, run_experiment, Experiment, Format, Progress, RunResult,
};

/// `hot` random loads in a heap of 1 GiB + `hot` + 1 GiB, at 2 M accesses/s for 3 s.
fn run(page_size: &str, hot: &str, monitors: &str) -> (Experiment, RunResult) {
    let text = format!(
        r#"
duration = "3s"
warmup = "1s"
[machine]
page_size = "{page_size}"
[workload]
rate = "2M/s"
regions = [
{{ name = "cold_top", size = "1GiB" }},
{{ name = "hot", size = "{hot}" }},
{{ name = "cold_bottom", size = "1GiB" }},
]
phases = [{{ name = "p", duration = "3s", patterns = [{{ region = "hot", kind = "random", mode = "ro" }}] }}]
{monitors}"#
    );
    let exp = parse_experiment(&text, "test", Path::new("."), Format::Toml).unwrap();
    let r = run_experiment(&exp, &Progress::new(exp.monitors.len(), exp.duration_ns), 0).unwrap();
    (exp, r)
}

#[test]
fn huge_pages_are_profiled_and_reported_at_the_pmd() {
    let monitors = r#"
[[monitors]]
preset = "scan-agg"
[[monitors]]
preset = "damon-mod"
[[monitors]]
preset = "telescope-bnd"
"#;
    // 4 GiB of 2 MiB pages: more than the STLB's 1536 entries reach, so translations
    // turn over and re-set the cleared bits (a hot set the STLB holds stays "cold"
    // without flushes: docs/results/BASELINES.md, the flush question).
    let (_, r) = run("2MiB", "4GiB", monitors);
    for m in &r.monitors {
        let s = &m.summary;
        assert!(
            s.precision >= 0.9 && s.recall >= 0.9,
            "{}: {} / {}",
            m.name,
            s.precision,
            s.recall
        );
        assert!(m.cost.bits_cleared > 0, "{}: PMD bits were read", m.name);
    }
    // The scan's regions on the heap are whole 2 MiB pages, and a pass clears one
    // entry per 2 MiB page of the heap (plus the 4 KiB pages of the other mappings).
    let scan = &r.monitors[0];
    let huge = |a: u64| a.is_multiple_of(2 << 20);
    for s in &scan.snapshots {
        for reg in s.regions.iter().filter(|x| r.heap.contains(x.start)) {
            assert!(huge(reg.start) && huge(reg.end), "{reg:?}");
        }
    }
    let leaves: u64 = r
        .mappings
        .iter()
        .map(|m| m.range.len() / m.page_size.bytes())
        .sum();
    assert_eq!(leaves, 6 * 512 + (28 << 20) / 4096);
    let passes = scan.snapshots.len() as u64 + 1;
    assert!(
        scan.cost.clear_ops >= passes * leaves && scan.cost.clear_ops < (passes + 1) * leaves,
        "{} clears, {passes} passes of {leaves}",
        scan.cost.clear_ops
    );
}

#[test]
fn pruned_walk_is_exact_where_translations_stay_cached() {
    let monitors = r#"
[[monitors]]
preset = "pruned-walk"
"#;
    // Hot sets whose translations the caches keep: 20 PDEs under a 32-entry PDE
    // cache, and 32 huge pages under a 1536-entry STLB. Without a flush their bits
    // would never be set again; the walk's flush makes every window exact (after the
    // start-up window, which reports the hot set's 1 GiB entries whole).
    for (page, hot) in [("4KiB", "40MiB"), ("2MiB", "64MiB")] {
        let (_, r) = run(page, hot, monitors);
        let m = &r.monitors[0];
        assert!(m.windows.len() > 5, "{page}");
        for w in m.windows.iter().skip(5) {
            assert_eq!((w.precision, w.recall), (1.0, 1.0), "{page}: {w:?}");
        }
        assert!(m.cost.flushes_full > 0 && m.cost.bits_cleared > 0, "{page}");
    }
}

#[test]
fn app_slowdown_charges_flush_walks_and_pmu_interrupts() {
    let monitors = r#"
[[monitors]]
preset = "telescope-bnd"
name = "none"
flush = "none"
[[monitors]]
preset = "telescope-bnd"
name = "all"
flush = "all"
[[monitors]]
preset = "pebs-agg"
"#;
    let (exp, r) = run("4KiB", "16MiB", monitors);
    let (none, all, pebs) = (&r.monitors[0], &r.monitors[1], &r.monitors[2]);
    // Clearing without flushing leaves the walks exactly as without a monitor.
    assert_eq!(none.impact.extra_walks, 0);
    assert_eq!(none.impact.shootdowns, 0.0);
    assert!(all.impact.extra_walks > 0 && all.impact.shootdowns > 0.0);
    assert!(all.summary.app_slowdown > none.summary.app_slowdown);
    // PEBS: every interrupt's cycles, as a share of the workload's time.
    let interrupts = pebs.cost.get(&tierscope_monitors::pebs::PMU_INTERRUPTS);
    let want = interrupts as f64 * exp.cost.pmu_interrupt
        / (exp.cost.cpu_hz * exp.duration_ns as f64 * 1e-9);
    assert!((pebs.impact.pmu - want).abs() < 1e-12);
    // About 10 kHz for 3 s once the period has adapted.
    assert!((27_000..=31_000).contains(&interrupts), "{}", interrupts);
}
