//! The application performance model: how long the application takes to issue a window's
//! accesses, given which tier served each and how loaded the tiers were.
//!
//! The access stream is fixed (trace-driven, as in cori-sim): placement changes how long
//! the accesses take, never which accesses happen. For one window with `n_i` accesses
//! served by tier `i` and `m_i` bytes of migration copies on it, the application's time
//! `T` solves
//!
//! ```text
//! T = N * compute + sum_i n_i * L_i(u_i) / mlp,    u_i = (n_i * line + m_i) / (B_i * T)
//! ```
//!
//! (plus `background_i / B_i` when other tenants load the tier) with `L_i` the tier's
//! loaded-latency curve ([`TierSpec::loaded_latency`]), `B_i` its bandwidth, `line` the bytes one access moves (a cache line) and `mlp` the accesses in
//! flight at once. The right side falls as `T` grows (less load, lower latency), so the
//! fixed point is unique; it is found by bisection. A window whose traffic exceeds a
//! tier's bandwidth is stretched until it fits (`u_i < 1`). docs/models/TIERING.md gives each
//! constant's source.

use tierscope_core::tiers::{TierSpec, TierTraffic, MAX_UTILISATION};

/// The application's side of the model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppModel {
    /// Bytes one access moves between memory and the caches.
    pub line_bytes: f64,
    /// Memory-level parallelism: accesses in flight at once (1: dependent loads, the
    /// pointer chasing of a key-value lookup; GUPS-like updates overlap more).
    pub mlp: f64,
    /// CPU time between two accesses, ns.
    pub compute_ns: f64,
}

impl Default for AppModel {
    fn default() -> Self {
        // cori-sim's model: every access waits its full latency, nothing overlaps.
        AppModel {
            line_bytes: 64.0,
            mlp: 1.0,
            compute_ns: 0.0,
        }
    }
}

/// The model's answer for one window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WindowPerf {
    /// Application time to issue the window's accesses, ns.
    pub time_ns: f64,
    /// Per tier: utilisation and loaded latency (ns) at the fixed point.
    pub utilisation: Vec<f64>,
    pub latency_ns: Vec<f64>,
}

/// Time of a window whose per-tier traffic is `traffic`, with `copy_bytes` per tier of
/// migration copies competing for bandwidth.
pub fn window_time(
    app: &AppModel,
    tiers: &[TierSpec],
    traffic: &[TierTraffic],
    copy_bytes: &[f64],
) -> WindowPerf {
    let n: f64 = traffic.iter().map(TierTraffic::total).sum();
    let bytes: Vec<f64> = traffic
        .iter()
        .zip(copy_bytes)
        .map(|(t, &c)| t.total() * app.line_bytes + c)
        .collect();
    let f = |t: f64| {
        let mut sum = n * app.compute_ns;
        for (i, spec) in tiers.iter().enumerate() {
            let u = bytes[i] / (spec.bandwidth * 1e-9 * t) + spec.background / spec.bandwidth;
            sum += traffic[i].total() * spec.loaded_latency(u) / app.mlp;
        }
        sum
    };
    // Below `lo` some tier would carry more than its bandwidth allows.
    // (Validation keeps a tier's background below its bandwidth times MAX_UTILISATION.)
    let lo = tiers
        .iter()
        .zip(&bytes)
        .map(|(s, &b)| b / ((s.bandwidth * MAX_UTILISATION - s.background) * 1e-9))
        .fold(0.0f64, f64::max);
    let time = if n == 0.0 && lo == 0.0 {
        0.0
    } else {
        // f falls as t grows, so t >= f(t) holds from hi = max(t0, f(t0)) on.
        let t0 = lo.max(f64::MIN_POSITIVE);
        let hi = t0.max(f(t0));
        if hi <= t0 {
            t0
        } else {
            let (mut a, mut b) = (t0, hi);
            for _ in 0..100 {
                let m = 0.5 * (a + b);
                if m >= f(m) {
                    b = m;
                } else {
                    a = m;
                }
                if b - a <= 1e-12 * b {
                    break;
                }
            }
            b
        }
    };
    let utilisation: Vec<f64> = tiers
        .iter()
        .zip(&bytes)
        .map(|(s, &b)| {
            let own = if time > 0.0 {
                b / (s.bandwidth * 1e-9 * time)
            } else {
                0.0
            };
            own + s.background / s.bandwidth
        })
        .collect();
    let latency_ns = tiers
        .iter()
        .zip(&utilisation)
        .map(|(s, &u)| s.loaded_latency(u))
        .collect();
    WindowPerf {
        time_ns: time,
        utilisation,
        latency_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(latency_ns: f64, bandwidth: f64, queueing: f64) -> TierSpec {
        TierSpec {
            name: "t".into(),
            capacity: u64::MAX,
            latency_ns,
            bandwidth,
            queueing,
            curve: Vec::new(),
            background: 0.0,
        }
    }

    fn traffic(reads: &[f64]) -> Vec<TierTraffic> {
        reads
            .iter()
            .map(|&r| TierTraffic {
                reads: r,
                writes: 0.0,
            })
            .collect()
    }

    #[test]
    fn unloaded_tiers_give_hits_times_latencies() {
        // cori-sim's runtime without queueing: hits x 50 ns + misses x 150 ns.
        let tiers = [tier(50.0, 10e9, 0.0), tier(150.0, 3.7e9, 0.0)];
        let w = window_time(
            &AppModel::default(),
            &tiers,
            &traffic(&[800.0, 200.0]),
            &[0.0, 0.0],
        );
        assert!((w.time_ns - (800.0 * 50.0 + 200.0 * 150.0)).abs() < 1e-6);
    }

    #[test]
    fn compute_and_mlp_enter_linearly() {
        let tiers = [tier(100.0, 1e12, 0.0)];
        let app = AppModel {
            line_bytes: 64.0,
            mlp: 4.0,
            compute_ns: 10.0,
        };
        let w = window_time(&app, &tiers, &traffic(&[1000.0]), &[0.0]);
        assert!((w.time_ns - 1000.0 * (10.0 + 100.0 / 4.0)).abs() < 1e-6);
    }

    #[test]
    fn fixed_point_matches_hand_solution_with_queueing() {
        // One tier, k = 1: T = n L0 (1 + u/(1-u)) = n L0 / (1-u), u = n 64 / (B T).
        // So T (1 - u) = n L0  =>  T = n L0 + n 64 / B.
        let (n, l0, b) = (1000.0, 100.0, 1e9);
        let w = window_time(
            &AppModel::default(),
            &[tier(l0, b, 1.0)],
            &traffic(&[n]),
            &[0.0],
        );
        let want = n * l0 + n * 64.0 / (b * 1e-9);
        assert!((w.time_ns - want).abs() / want < 1e-9, "{w:?} vs {want}");
    }

    #[test]
    fn saturated_tier_stretches_the_window_to_its_bandwidth() {
        // High MLP: latency alone would finish in 1 us, but 1 GB/s carries only 64 KB.
        let app = AppModel {
            mlp: 1000.0,
            ..AppModel::default()
        };
        let w = window_time(
            &app,
            &[tier(100.0, 1e9, 0.1)],
            &traffic(&[10_000.0]),
            &[0.0],
        );
        let floor = 10_000.0 * 64.0 / 1.0; // ns at 1 byte/ns
        assert!(w.time_ns >= floor && w.time_ns < floor * 1.1, "{w:?}");
        assert!(w.utilisation[0] <= MAX_UTILISATION + 1e-9);
    }

    #[test]
    fn copies_load_the_tier_and_slow_the_window() {
        let tiers = [tier(100.0, 1e9, 0.1)];
        let quiet = window_time(&AppModel::default(), &tiers, &traffic(&[1000.0]), &[0.0]);
        let busy = window_time(&AppModel::default(), &tiers, &traffic(&[1000.0]), &[50e3]);
        assert!(busy.time_ns > quiet.time_ns);
        assert!(busy.utilisation[0] > quiet.utilisation[0]);
    }

    #[test]
    fn background_traffic_loads_the_tier() {
        // k = 1, background b: T (1 - u) = n L0 with u = n 64 / (B T) + b / B, so
        // T = (n L0 + n 64 / B) / (1 - b / B).
        let (n, l0, bw) = (1000.0, 100.0, 1e9);
        let mut t = tier(l0, bw, 1.0);
        t.background = 0.5e9;
        let w = window_time(&AppModel::default(), &[t], &traffic(&[n]), &[0.0]);
        let want = (n * l0 + n * 64.0 / (bw * 1e-9)) / 0.5;
        assert!((w.time_ns - want).abs() / want < 1e-9, "{w:?} vs {want}");
    }

    #[test]
    fn empty_window_takes_no_time() {
        let w = window_time(
            &AppModel::default(),
            &[tier(1.0, 1.0, 0.1)],
            &traffic(&[0.0]),
            &[0.0],
        );
        assert_eq!(w.time_ns, 0.0);
    }
}
