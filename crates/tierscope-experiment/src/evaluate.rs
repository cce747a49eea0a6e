//! Snapshots against the truth: precision and recall at block granularity.

use crate::result::{Summary, WindowMetrics};
use tierscope_core::workload::WorkloadSpec;
use tierscope_core::{BlockIntervals, CostCounters, CostModel, Snapshot};

/// The blocks reported hot: every block that a region with `nr_accesses >= hot_threshold`
/// overlaps, as sorted disjoint intervals of block numbers.
pub fn reported_blocks(
    snapshot: &Snapshot,
    block_shift: u32,
    hot_threshold: u32,
) -> BlockIntervals {
    let mut out: BlockIntervals = vec![];
    for r in &snapshot.regions {
        if r.nr_accesses < hot_threshold || r.end <= r.start {
            continue;
        }
        let first = r.start >> block_shift;
        let last = ((r.end - 1) >> block_shift) + 1;
        match out.last_mut() {
            Some(prev) if prev.1 >= first => prev.1 = prev.1.max(last),
            _ => out.push((first, last)),
        }
    }
    out
}

/// Total length of sorted disjoint intervals.
pub fn total(intervals: &[(u64, u64)]) -> u64 {
    intervals.iter().map(|(a, b)| b - a).sum()
}

/// Length of the intersection of two sorted disjoint interval lists.
pub fn intersection(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if lo < hi {
            sum += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

/// Precision and recall of one window. Conventions: nothing truly hot and nothing reported
/// is a perfect window; nothing reported while something is hot has precision 0 (the
/// monitor found nothing), as the Telescope paper plots it.
pub fn precision_recall(reported: &[(u64, u64)], truth: &[(u64, u64)]) -> (f64, f64) {
    let (r, t) = (total(reported), total(truth));
    let hit = intersection(reported, truth);
    let precision = if r == 0 {
        if t == 0 {
            1.0
        } else {
            0.0
        }
    } else {
        hit as f64 / r as f64
    };
    let recall = if t == 0 { 1.0 } else { hit as f64 / t as f64 };
    (precision, recall)
}

pub fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// Per-window metrics for one monitor.
pub fn windows(
    snapshots: &[Snapshot],
    truth: &[BlockIntervals],
    window_cycles: &[f64],
    block_shift: u32,
    hot_threshold: u32,
) -> Vec<WindowMetrics> {
    snapshots
        .iter()
        .zip(truth)
        .zip(window_cycles)
        .map(|((s, t), &cycles)| {
            let reported = reported_blocks(s, block_shift, hot_threshold);
            let (precision, recall) = precision_recall(&reported, t);
            WindowMetrics {
                start_ns: s.start,
                end_ns: s.end,
                precision,
                recall,
                f1: f1(precision, recall),
                reported_hot_bytes: total(&reported) << block_shift,
                true_hot_bytes: total(t) << block_shift,
                nr_regions: s.regions.len() as u32,
                cycles,
            }
        })
        .collect()
}

/// Precision and recall a window needs, both, for a monitor to have converged.
pub const CONVERGED: f64 = 0.9;

/// When the workload's phase changes, within `(warmup_ns, duration_ns)`: every phase
/// boundary, the phases repeating in a cycle (a one-phase workload never changes).
pub fn phase_changes(spec: &WorkloadSpec, warmup_ns: u64, duration_ns: u64) -> Vec<u64> {
    let cycle = spec.phases_duration();
    if spec.phases.len() < 2 || cycle == 0 {
        return vec![];
    }
    let mut out = vec![];
    let mut t = 0u64;
    'cycles: loop {
        for p in &spec.phases {
            t += p.duration.0;
            if t >= duration_ns {
                break 'cycles;
            }
            if t > warmup_ns {
                out.push(t);
            }
        }
    }
    out
}

/// How long good windows must last for a monitor to count as converged.
pub const SETTLED_NS: u64 = 1_000_000_000;

/// How long the monitor took to converge after each phase change: from the change to the
/// end of the first window of a run of windows with precision and recall of at least
/// [`CONVERGED`] that lasts [`SETTLED_NS`] (or to the next change). A change never
/// converged from counts as its whole phase. Returns the mean in ms and how many changes
/// converged.
pub fn convergence(windows: &[WindowMetrics], changes: &[u64], duration_ns: u64) -> (f64, u32) {
    let mut sum_ns = 0u64;
    let mut converged = 0;
    for (i, &change) in changes.iter().enumerate() {
        let next = changes.get(i + 1).copied().unwrap_or(duration_ns);
        let phase = windows
            .iter()
            .filter(|w| w.end_ns > change && w.end_ns <= next);
        let mut run: Option<&WindowMetrics> = None;
        let mut found = None;
        for w in phase {
            if w.precision < CONVERGED || w.recall < CONVERGED {
                run = None;
                continue;
            }
            let first = *run.get_or_insert(w);
            if w.end_ns - first.start_ns >= SETTLED_NS || w.end_ns + SETTLED_NS > next {
                found = Some(first.end_ns);
                break;
            }
        }
        match found {
            Some(end) => {
                sum_ns += end - change;
                converged += 1;
            }
            None => sum_ns += next - change,
        }
    }
    let mean_ms = sum_ns as f64 / changes.len().max(1) as f64 / 1e6;
    (mean_ms, converged)
}

/// Means over windows starting after `warmup_ns` (all windows when none does), weighted by
/// the windows' lengths (adaptive monitors' windows differ), with costs; convergence after
/// the `changes` of phase.
pub fn summarize(
    windows: &[WindowMetrics],
    cost: &CostCounters,
    model: &CostModel,
    duration_ns: u64,
    warmup_ns: u64,
    changes: &[u64],
) -> Summary {
    let after: Vec<&WindowMetrics> = windows.iter().filter(|w| w.start_ns >= warmup_ns).collect();
    let used: Vec<&WindowMetrics> = if after.is_empty() {
        windows.iter().collect()
    } else {
        after
    };
    let weight = |w: &WindowMetrics| (w.end_ns - w.start_ns).max(1) as f64;
    let total_weight: f64 = used.iter().map(|w| weight(w)).sum::<f64>().max(1.0);
    let mean = |f: &dyn Fn(&WindowMetrics) -> f64| {
        used.iter().map(|w| weight(w) * f(w)).sum::<f64>() / total_weight
    };
    let (convergence_ms, converged) = convergence(windows, changes, duration_ns);
    Summary {
        precision: mean(&|w| w.precision),
        recall: mean(&|w| w.recall),
        f1: mean(&|w| w.f1),
        cycles: model.cycles(cost),
        cpu_percent: model.cpu_percent(cost, duration_ns),
        bits_cleared: cost.bits_cleared,
        entries_read: cost.entries_read,
        clear_ops: cost.clear_ops,
        flushes: cost.flushes_page + cost.flushes_full,
        regions_split: cost.regions_split,
        regions_merged: cost.regions_merged,
        windows_evaluated: used.len() as u32,
        mean_nr_regions: mean(&|w| w.nr_regions as f64),
        // Filled in by the runner once the baseline is known (crate::impact).
        app_slowdown: 0.0,
        convergence_ms: (!changes.is_empty()).then_some(convergence_ms),
        phase_changes: changes.len() as u32,
        phase_changes_converged: converged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tierscope_core::RegionReport;

    fn snap(regions: &[(u64, u64, u32)]) -> Snapshot {
        Snapshot {
            start: 0,
            end: 1,
            regions: regions
                .iter()
                .map(|&(start, end, nr_accesses)| RegionReport {
                    start,
                    end,
                    nr_accesses,
                    age: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn blocks_touched_by_hot_regions_count() {
        let mb2 = 2 << 20;
        // A hot region ending one page into block 2 marks block 2 too.
        let s = snap(&[(0, mb2, 0), (mb2, 2 * mb2 + 4096, 3), (3 * mb2, 4 * mb2, 1)]);
        assert_eq!(reported_blocks(&s, 21, 1), vec![(1, 4)]);
        assert_eq!(reported_blocks(&s, 21, 2), vec![(1, 3)]);
    }

    #[test]
    fn phase_changes_repeat_with_the_cycle_after_the_warm_up() {
        let spec = tierscope_core::workload::parse_masim(
            "a, 1GiB\nb, 1GiB\n\np1\n1000\na, 1, 4096, 1\n\np2\n3000\nb, 1, 4096, 1\n",
        )
        .unwrap();
        let s = 1_000_000_000;
        // Phases of 1 s and 3 s: boundaries at 1, 4, 5, 8, 9 s; the warm-up hides 1 s and
        // a boundary at the end of the run is no change.
        assert_eq!(phase_changes(&spec, s, 9 * s), vec![4 * s, 5 * s, 8 * s]);
        let one =
            tierscope_core::workload::parse_masim("a, 1GiB\n\np\n1000\na, 1, 4096, 1\n").unwrap();
        assert!(phase_changes(&one, 0, 9 * s).is_empty());
    }

    fn window(start_ms: u64, end_ms: u64, quality: f64) -> WindowMetrics {
        WindowMetrics {
            start_ns: start_ms * 1_000_000,
            end_ns: end_ms * 1_000_000,
            precision: quality,
            recall: 1.0,
            f1: f1(quality, 1.0),
            reported_hot_bytes: 0,
            true_hot_bytes: 0,
            nr_regions: 1,
            cycles: 0.0,
        }
    }

    #[test]
    fn convergence_waits_for_a_lasting_run_of_good_windows() {
        let ms = 1_000_000;
        // Change at 1000 ms: a good window at 1200 is broken by a bad one, the lasting run
        // starts with the window ending at 1800. The second change (3000 ms) never
        // converges before the run ends at 4000 and counts as its whole phase.
        let q = [0.5, 0.95, 0.5, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95];
        let mut w: Vec<WindowMetrics> = (0..10)
            .map(|i| window(1000 + 200 * i, 1200 + 200 * i, q[i as usize]))
            .collect();
        w.extend((0..5).map(|i| window(3000 + 200 * i, 3200 + 200 * i, 0.2)));
        let (mean_ms, converged) = convergence(&w, &[1000 * ms, 3000 * ms], 4000 * ms);
        assert_eq!(converged, 1);
        assert_eq!(mean_ms, (800.0 + 1000.0) / 2.0);
    }

    #[test]
    fn means_are_weighted_by_window_length() {
        let w = [window(0, 100, 0.0), window(100, 400, 1.0)];
        let s = summarize(
            &w,
            &CostCounters::default(),
            &CostModel::default(),
            1,
            0,
            &[],
        );
        assert_eq!(s.precision, 0.75);
        assert_eq!((s.convergence_ms, s.phase_changes), (None, 0));
    }

    #[test]
    fn precision_recall_conventions() {
        assert_eq!(precision_recall(&[], &[]), (1.0, 1.0));
        assert_eq!(precision_recall(&[], &[(0, 4)]), (0.0, 0.0));
        assert_eq!(precision_recall(&[(0, 4)], &[(2, 6)]), (0.5, 0.5));
        assert_eq!(precision_recall(&[(0, 8)], &[(2, 6)]), (0.5, 1.0));
    }

    fn to_intervals(mut blocks: Vec<u64>) -> Vec<(u64, u64)> {
        blocks.sort_unstable();
        blocks.dedup();
        let mut out: Vec<(u64, u64)> = vec![];
        for b in blocks {
            match out.last_mut() {
                Some(p) if p.1 == b => p.1 += 1,
                _ => out.push((b, b + 1)),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn intersection_matches_sets(a in proptest::collection::vec(0u64..200, 0..60),
                                     b in proptest::collection::vec(0u64..200, 0..60)) {
            let sa: std::collections::BTreeSet<u64> = a.iter().copied().collect();
            let sb: std::collections::BTreeSet<u64> = b.iter().copied().collect();
            let expect = sa.intersection(&sb).count() as u64;
            prop_assert_eq!(intersection(&to_intervals(a), &to_intervals(b)), expect);
        }
    }
}
