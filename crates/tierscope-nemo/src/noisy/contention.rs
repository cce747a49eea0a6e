//! The contention model: how much of each tenant's demand the device serves, and the
//! victim's memory latency distribution at the resulting load. MODELLED, not measured.
//!
//! Serving: when the tenants together ask for more than the device's bandwidth times
//! `MAX_UTILISATION`, everyone's demand is scaled down by the same factor (a saturated
//! controller serves requests in arrival order, so shares follow demand).
//!
//! Latency: a request's latency is the device's idle latency plus a queueing wait `W`
//! with M/M/1's waiting-time law, `P(W > t) = u exp(-t (1 - u) / s)` (a request waits
//! with probability `u`, then an exponential time), with `s = k x idle` so that the mean,
//! `idle (1 + k u / (1 - u))`, is exactly the tier curve every other model here uses
//! (`TierSpec::loaded_latency`, docs/models/TIERING.md; `k` is that curve's `queueing`). The
//! percentiles therefore come from one documented assumption (the exponential tail) on
//! top of the project's loaded-latency curve, with no constant of their own.

use tierscope_core::tiers::{TierSpec, MAX_UTILISATION};

#[derive(Debug, Clone, PartialEq)]
pub struct Contention {
    pub device: TierSpec,
}

impl Contention {
    /// Serves `offered` (bytes/s per tenant) into `served`; returns the utilisation.
    pub fn serve(&self, offered: &[f64], served: &mut [f64]) -> f64 {
        let total: f64 = offered.iter().sum();
        let room = self.device.bandwidth * MAX_UTILISATION;
        let scale = if total > room { room / total } else { 1.0 };
        for (s, &o) in served.iter_mut().zip(offered) {
            *s = o * scale;
        }
        (total * scale / self.device.bandwidth).min(MAX_UTILISATION)
    }

    /// Mean wait's time scale `s` of the exponential tail.
    fn scale(&self) -> f64 {
        self.device.queueing * self.device.latency_ns
    }

    /// `P(latency > x)` at utilisation `u`, `x` in ns.
    #[inline]
    pub fn exceed(&self, u: f64, x: f64) -> f64 {
        let idle = self.device.latency_ns;
        if x < idle {
            return 1.0;
        }
        let s = self.scale();
        if u <= 0.0 || s <= 0.0 {
            return 0.0;
        }
        u * (-(x - idle) * (1.0 - u) / s).exp()
    }

    /// The `p` quantile of the latency at utilisation `u`, ns.
    pub fn quantile(&self, u: f64, p: f64) -> f64 {
        let idle = self.device.latency_ns;
        let s = self.scale();
        if u <= 1.0 - p || s <= 0.0 {
            idle
        } else {
            idle + s / (1.0 - u) * (u / (1.0 - p)).ln()
        }
    }
}

/// The victim's latency over a run: a mixture of the per-step laws, each weighted by
/// the victim's requests in that step. Quantiles by bisection on the mixture's CDF.
#[derive(Debug, Clone, Default)]
pub struct LatencyMix {
    steps: Vec<(f64, f64)>,
}

impl LatencyMix {
    pub fn with_capacity(n: usize) -> Self {
        LatencyMix {
            steps: Vec::with_capacity(n),
        }
    }

    /// A step at utilisation `u` carrying `weight` of the victim's requests.
    pub fn push(&mut self, u: f64, weight: f64) {
        if weight > 0.0 {
            self.steps.push((u, weight));
        }
    }

    /// The smallest `x` with `P(latency <= x) >= p` over the mixture (to 1e-6 ns).
    pub fn quantile(&self, c: &Contention, p: f64) -> f64 {
        let total: f64 = self.steps.iter().map(|s| s.1).sum();
        if total == 0.0 {
            return f64::NAN;
        }
        let exceed = |x: f64| -> f64 {
            self.steps
                .iter()
                .map(|&(u, w)| w * c.exceed(u, x))
                .sum::<f64>()
                / total
        };
        let mut lo = c.device.latency_ns;
        if exceed(lo) <= 1.0 - p {
            return lo;
        }
        // No step's own quantile is beyond the worst one's, so neither is the mixture's.
        let mut hi = self
            .steps
            .iter()
            .map(|&(u, _)| c.quantile(u, p))
            .fold(lo, f64::max);
        while hi - lo > 1e-6 {
            let mid = 0.5 * (lo + hi);
            if exceed(mid) <= 1.0 - p {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> Contention {
        Contention {
            device: TierSpec {
                name: "d".into(),
                capacity: 1 << 30,
                latency_ns: 100.0,
                bandwidth: 10.0,
                queueing: 0.1,
                curve: Vec::new(),
                background: 0.0,
            },
        }
    }

    #[test]
    fn serving_scales_everyone_down_only_past_the_room() {
        let c = device();
        let mut s = [0.0; 2];
        assert!((c.serve(&[2.0, 3.0], &mut s) - 0.5).abs() < 1e-12);
        assert_eq!(s, [2.0, 3.0]);
        // 20 asked of a room of 9.9: both scaled by 9.9 / 20.
        let u = c.serve(&[5.0, 15.0], &mut s);
        assert!((u - 0.99).abs() < 1e-12);
        assert!((s[0] - 2.475).abs() < 1e-12 && (s[1] - 7.425).abs() < 1e-12);
    }

    #[test]
    fn quantiles_by_hand_and_mean_is_the_tier_curve() {
        let c = device();
        // u = 0.5: half the requests wait; p50 is the idle latency, p99 is
        // 100 + 10 / 0.5 x ln(0.5 / 0.01) = 100 + 20 ln 50.
        assert_eq!(c.quantile(0.5, 0.5), 100.0);
        assert!((c.quantile(0.5, 0.99) - (100.0 + 20.0 * 50f64.ln())).abs() < 1e-9);
        assert!((c.exceed(0.5, c.quantile(0.5, 0.99)) - 0.01).abs() < 1e-12);
        // The mean, integrated numerically from the tail, is the loaded-latency curve.
        for u in [0.1, 0.5, 0.9] {
            let (dx, mut mean) = (0.01, 100.0);
            let mut x = 100.0;
            while x < 100.0 + 10.0 * 60.0 / (1.0 - u) {
                mean += c.exceed(u, x + dx / 2.0) * dx;
                x += dx;
            }
            let curve = c.device.loaded_latency(u);
            assert!(
                (mean - curve).abs() < 1e-3 * curve,
                "u {u}: {mean} vs {curve}"
            );
        }
    }

    #[test]
    fn mixture_quantile_by_hand() {
        let c = device();
        let mut m = LatencyMix::default();
        // One step alone: its own quantile.
        m.push(0.9, 1.0);
        assert!((m.quantile(&c, 0.99) - c.quantile(0.9, 0.99)).abs() < 1e-5);
        // Add an idle step of 9x the weight: P(L > x) = 0.1 x 0.9 e^{-0.01 (x - 100)}
        // = 0.01 at x = 100 + 100 ln 9.
        let mut m = LatencyMix::default();
        m.push(0.9, 1.0);
        m.push(0.0, 9.0);
        assert!((m.quantile(&c, 0.99) - (100.0 + 100.0 * 9f64.ln())).abs() < 1e-5);
        assert_eq!(m.quantile(&c, 0.5), 100.0);
    }
}
