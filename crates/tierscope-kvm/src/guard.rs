//! Guards against silently wrong results (docs/models/KVM.md): a run on the kvm engine is marked
//! invalid when the guest or the monitor's windows fell short of what was asked beyond the
//! tolerances below, or when the monitor clears ACCESSED bits without flushing on a host
//! that does not set them again without a flush ([`crate::probe`]). An invalid run keeps
//! its precision and recall; the flag and its reason travel with them.

use crate::probe::AccessedProbe;
use serde::Serialize;
use tierscope_core::machine::RealTimeReport;

/// A run is invalid when its slowest vCPU reached less than this share of the requested
/// rate (accesses per second per vCPU, over the windows scored).
pub const MIN_RATE_SHARE: f64 = 0.5;
/// A window is stretched when its real length is more than this many times its nominal
/// length (the time the monitor asked to sleep in it).
pub const MAX_STRETCH: f64 = 1.5;
/// A run is invalid when more than this share of its scored windows are stretched.
pub const MAX_STRETCHED_SHARE: f64 = 0.1;

/// What a kvm run achieved against what it was asked, and the verdict
/// (metrics.json: each monitor's `kvm`, and its `valid` and `invalid_reason`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RealCheck {
    /// False when a guard below failed; the scores are kept all the same.
    pub valid: bool,
    /// Why not valid: one line per failed guard, joined by "; ", with the numbers.
    pub invalid_reason: Option<String>,
    /// Accesses per second per vCPU asked for (0: unpaced, no rate guard).
    pub rate_requested: f64,
    /// Accesses per second each vCPU did over the windows checked (empty where they are
    /// not counted: a real program).
    pub rate_achieved: Vec<f64>,
    /// The slowest vCPU's rate over the requested rate (`None` when unpaced).
    pub rate_share: Option<f64>,
    /// The windows checked: those the scores use (starting at or after the warm-up; all
    /// of them when none does).
    pub windows_checked: u32,
    /// Of those, windows longer than [`MAX_STRETCH`] times their nominal length.
    pub windows_stretched: u32,
    /// Mean real and nominal window length, ms.
    pub window_ms: f64,
    pub window_nominal_ms: f64,
    /// The largest real / nominal ratio of a checked window.
    pub window_stretch_max: f64,
    /// The probe's answer for this host ([`crate::probe`]): whether cleared ACCESSED
    /// bits are set again without a flush (`None`: the probe could not tell).
    pub accessed_rearm: Option<bool>,
    /// The probe's one line (its numbers, or why it could not tell).
    pub accessed_probe: Option<String>,
    /// The monitor clears page-table bits without flushing (or its flushes are not
    /// executed) on a host that the probe found does not set them again: it sees each
    /// page accessed about once.
    pub probe_affects: bool,
}

/// The checks of one monitor's run from its engine's report. `warmup_ns` selects the
/// windows the scores use; `clears_without_flush`: the monitor cleared ACCESSED bits and
/// no flush of its reached the host; `probe`: [`crate::accessed_probe`]'s answer.
pub fn check(
    report: &RealTimeReport,
    warmup_ns: u64,
    clears_without_flush: bool,
    probe: Option<&Result<AccessedProbe, String>>,
) -> RealCheck {
    let after: Vec<_> = report
        .windows
        .iter()
        .filter(|w| w.start_ns >= warmup_ns)
        .collect();
    let windows = if after.is_empty() {
        report.windows.iter().collect()
    } else {
        after
    };
    let real_ns: u64 = windows.iter().map(|w| w.end_ns - w.start_ns).sum();
    let nominal_ns: u64 = windows.iter().map(|w| w.nominal_ns).sum();
    let n = windows.len();
    let mut reasons = vec![];

    let threads = report.threads;
    let rate_achieved: Vec<f64> = (0..threads)
        .map(|v| {
            let done: u64 = windows
                .iter()
                .map(|w| w.accesses.get(v).copied().unwrap_or(0))
                .sum();
            if real_ns == 0 {
                0.0
            } else {
                done as f64 / (real_ns as f64 * 1e-9)
            }
        })
        .collect();
    let requested = report.rate_requested;
    let rate_share = (requested > 0.0 && real_ns > 0 && threads > 0)
        .then(|| rate_achieved.iter().copied().fold(f64::INFINITY, f64::min) / requested);
    if let Some(share) = rate_share.filter(|&s| s < MIN_RATE_SHARE) {
        reasons.push(format!(
            "the guest reached {} accesses/s per vCPU (slowest of {threads}), {:.1} % of the \
             {}/s asked (below {:.0} %)",
            si(share * requested),
            100.0 * share,
            si(requested),
            100.0 * MIN_RATE_SHARE
        ));
    }

    let stretch = |w: &&tierscope_core::machine::RealWindow| {
        (w.nominal_ns > 0).then(|| (w.end_ns - w.start_ns) as f64 / w.nominal_ns as f64)
    };
    let ratios: Vec<f64> = windows.iter().filter_map(stretch).collect();
    let stretched = ratios.iter().filter(|&&r| r > MAX_STRETCH).count();
    let stretch_max = ratios.iter().copied().fold(0.0, f64::max);
    let mean_ms = |ns: u64| {
        if n == 0 {
            0.0
        } else {
            ns as f64 * 1e-6 / n as f64
        }
    };
    if !ratios.is_empty() && stretched as f64 > MAX_STRETCHED_SHARE * ratios.len() as f64 {
        reasons.push(format!(
            "{stretched} of {} windows lasted more than {MAX_STRETCH}x their nominal length \
             (mean {:.1} ms for {:.1} ms nominal, up to {stretch_max:.2}x; allowed: {:.0} %)",
            ratios.len(),
            mean_ms(real_ns),
            mean_ms(nominal_ns),
            100.0 * MAX_STRETCHED_SHARE
        ));
    }

    let accessed_rearm = match probe {
        Some(Ok(p)) => Some(p.rearms_without_flush()),
        _ => None,
    };
    let probe_affects = clears_without_flush && accessed_rearm == Some(false);
    if probe_affects {
        let p = probe
            .and_then(|p| p.as_ref().ok())
            .expect("the probe answered");
        reasons.push(format!(
            "this host does not set cleared ACCESSED bits again without a flush ({}/{} in \
             the probe) and this monitor clears them without flushing: it sees each page \
             accessed about once",
            p.rearmed, p.pages
        ));
    }

    RealCheck {
        valid: reasons.is_empty(),
        invalid_reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        rate_requested: requested,
        rate_achieved,
        rate_share,
        windows_checked: n as u32,
        windows_stretched: stretched as u32,
        window_ms: mean_ms(real_ns),
        window_nominal_ms: mean_ms(nominal_ns),
        window_stretch_max: stretch_max,
        accessed_rearm,
        accessed_probe: probe.map(|p| match p {
            Ok(p) => p.line(),
            Err(e) => format!("could not tell: {e}"),
        }),
        probe_affects,
    }
}

/// `12.3 M`-style: three significant digits with an SI prefix.
fn si(x: f64) -> String {
    let (v, p) = if x >= 1e9 {
        (x / 1e9, " G")
    } else if x >= 1e6 {
        (x / 1e6, " M")
    } else if x >= 1e3 {
        (x / 1e3, " k")
    } else {
        (x, "")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{p}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::machine::RealWindow;

    const MS: u64 = 1_000_000;

    /// `n` windows of 100 ms nominal, each lasting `real_ms`, with `per_window` accesses
    /// on each of two vCPUs.
    fn report(rate: f64, n: u64, real_ms: u64, per_window: u64) -> RealTimeReport {
        RealTimeReport {
            rate_requested: rate,
            threads: 2,
            windows: (0..n)
                .map(|i| RealWindow {
                    start_ns: i * real_ms * MS,
                    end_ns: (i + 1) * real_ms * MS,
                    nominal_ns: 100 * MS,
                    accesses: vec![per_window, per_window],
                })
                .collect(),
        }
    }

    #[test]
    fn a_run_that_kept_up_is_valid() {
        // 10 M/s for 100 ms = 1 M accesses per window.
        let c = check(&report(10e6, 10, 100, 1_000_000), 0, false, None);
        assert!(c.valid, "{c:?}");
        assert_eq!(c.invalid_reason, None);
        assert!((c.rate_share.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!((c.windows_checked, c.windows_stretched), (10, 0));
        assert!((c.window_ms - 100.0).abs() < 1e-9 && (c.window_stretch_max - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_slow_guest_makes_the_run_invalid_at_half_the_rate() {
        // 49 % of 10 M/s: invalid; 51 %: valid.
        let c = check(&report(10e6, 10, 100, 490_000), 0, false, None);
        assert!(!c.valid);
        let reason = c.invalid_reason.unwrap();
        assert!(
            reason.contains("4.90 M accesses/s") && reason.contains("49.0 %"),
            "{reason}"
        );
        assert!(check(&report(10e6, 10, 100, 510_000), 0, false, None).valid);
        // Unpaced: no rate to fall short of.
        let c = check(&report(0.0, 10, 100, 1), 0, false, None);
        assert!(c.valid && c.rate_share.is_none());
        assert!((c.rate_achieved[0] - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_program_has_no_rate_but_its_windows_are_checked() {
        let mut r = report(0.0, 10, 200, 0);
        r.threads = 0;
        for w in &mut r.windows {
            w.accesses.clear();
        }
        let c = check(&r, 0, false, None);
        assert!(c.rate_achieved.is_empty() && c.rate_share.is_none());
        assert!(!c.valid && c.windows_stretched == 10, "{c:?}");
    }

    #[test]
    fn stretched_windows_make_the_run_invalid_past_a_tenth() {
        // Windows of 160 ms for 100 ms asked: invalid.
        let c = check(&report(1e6, 10, 160, 160_000), 0, false, None);
        assert!(!c.valid && c.windows_stretched == 10, "{c:?}");
        assert!(c.invalid_reason.unwrap().contains("10 of 10 windows"));
        // 140 ms: within the tolerance.
        assert!(check(&report(1e6, 10, 140, 140_000), 0, false, None).valid);
        // One stretched window of ten is allowed, two are not.
        let mut r = report(1e6, 10, 100, 100_000);
        r.windows[3].nominal_ns = 50 * MS;
        assert!(check(&r, 0, false, None).valid);
        r.windows[7].nominal_ns = 50 * MS;
        assert!(!check(&r, 0, false, None).valid);
        // Windows before the warm-up are not checked.
        assert!(check(&r, 800 * MS, false, None).valid);
    }

    #[test]
    fn the_probe_marks_monitors_that_clear_without_flushing() {
        let no = AccessedProbe {
            pages: 64,
            rearmed: 1,
            passes: 3,
            wait_ns: 10 * MS,
            after_flush: Some(63),
            took_ns: 200 * MS,
        };
        let yes = AccessedProbe {
            rearmed: 64,
            after_flush: None,
            ..no.clone()
        };
        let r = report(10e6, 10, 100, 1_000_000);
        let c = check(&r, 0, true, Some(&Ok(no.clone())));
        assert!(!c.valid && c.probe_affects && c.accessed_rearm == Some(false));
        assert!(c.invalid_reason.unwrap().contains("1/64"));
        assert!(c.accessed_probe.unwrap().contains("does not set"));
        // A monitor that flushes, a host that re-sets, a probe that could not tell.
        assert!(check(&r, 0, false, Some(&Ok(no))).valid);
        let c = check(&r, 0, true, Some(&Ok(yes)));
        assert!(c.valid && c.accessed_rearm == Some(true));
        let c = check(&r, 0, true, Some(&Err("no".into())));
        assert!(c.valid && c.accessed_rearm.is_none());
    }

    #[test]
    fn si_prefixes() {
        assert_eq!(si(10e9), "10.0 G");
        assert_eq!(si(123_456.0), "123 k");
        assert_eq!(si(4.9e6), "4.90 M");
        assert_eq!(si(7.0), "7.00");
    }
}
