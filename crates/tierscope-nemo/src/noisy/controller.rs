//! The user-space QoS controller of §5.3: it receives bandwidth samples of the noisy
//! neighbour, keeps an exponentially weighted moving average, and moves the
//! neighbour's cgroup CPU quota proportionally to the gap to the target bandwidth,
//! damped by a learning rate; a quota written takes effect after the cgroup's actuation
//! latency (§5.3: "~10 ms").
//!
//! The update, per sample `b` (bytes/s):
//!
//! ```text
//! e  <- a b + (1 - a) e                       (EWMA; e starts at 0)
//! q* =  q x target / e   (1 when e = 0)       (the quota that would meet the target if
//!                                              bandwidth is proportional to CPU quota)
//! q  <- clamp(q + g (q* - q), q_min, 1)       (learning rate g)
//! ```
//!
//! `q* - q = q (target - e) / e`: the step is proportional to the gap, with the plant's
//! gain (bandwidth per unit of quota, `e / q`) divided out so one gain works at any
//! demand. The paper gives neither `a` nor `g`; docs/techniques/NEMO.md gives our readings.

use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControllerParams {
    /// Target bandwidth, bytes/s (§5.3: a 1 GiB/s cap).
    pub target: f64,
    /// EWMA weight of the newest sample, in (0, 1].
    pub ewma: f64,
    /// Learning rate, in (0, 1].
    pub gain: f64,
    /// Seconds from writing a quota to its effect.
    pub actuation_s: f64,
    /// Smallest quota, as a share of one core (cgroup v2's `cpu.max` floor is 1 ms per
    /// 100 ms period).
    pub min_quota: f64,
    /// Write no new quota while the last one has not taken effect: samples taken during
    /// the actuation latency still show the old quota, and acting on them again and
    /// again (10 times per actuation at 1 ms sampling) makes the loop oscillate. The
    /// EWMA keeps taking samples meanwhile.
    pub hold_while_actuating: bool,
}

#[derive(Debug, Clone)]
pub struct QuotaController {
    p: ControllerParams,
    ewma: f64,
    /// The latest quota written.
    decided: f64,
    /// The quota in force.
    applied: f64,
    /// Written quotas waiting for their actuation: (due time, quota).
    pending: VecDeque<(f64, f64)>,
    pub samples: u64,
    pub writes: u64,
}

impl QuotaController {
    /// `max_pending` bounds the quotas in flight (the samples one actuation latency can
    /// hold), so the queue never grows on the hot path.
    pub fn new(p: ControllerParams, max_pending: usize) -> Self {
        QuotaController {
            p,
            ewma: 0.0,
            decided: 1.0,
            applied: 1.0,
            pending: VecDeque::with_capacity(max_pending),
            samples: 0,
            writes: 0,
        }
    }

    /// A bandwidth sample at time `now` (s). Returns true when it lowers the quota: the
    /// controller has detected the neighbour over its target.
    pub fn observe(&mut self, now: f64, bandwidth: f64) -> bool {
        self.samples += 1;
        let p = &self.p;
        self.ewma = p.ewma * bandwidth + (1.0 - p.ewma) * self.ewma;
        if p.hold_while_actuating && self.pending.back().is_some_and(|&(due, _)| due > now) {
            return false;
        }
        let q = self.decided;
        let ideal = if self.ewma > 0.0 {
            (q * p.target / self.ewma).min(1.0)
        } else {
            1.0
        };
        let next = (q + p.gain * (ideal - q)).clamp(p.min_quota, 1.0);
        if next == q {
            return false;
        }
        self.decided = next;
        self.writes += 1;
        self.pending.push_back((now + p.actuation_s, next));
        next < q
    }

    /// The quota in force at `now`: every write due by then has taken effect.
    pub fn applied_at(&mut self, now: f64) -> f64 {
        while let Some(&(due, q)) = self.pending.front() {
            if due > now {
                break;
            }
            self.applied = q;
            self.pending.pop_front();
        }
        self.applied
    }

    pub fn ewma(&self) -> f64 {
        self.ewma
    }

    pub fn decided(&self) -> f64 {
        self.decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ControllerParams {
        ControllerParams {
            target: 1.0,
            ewma: 0.5,
            gain: 0.5,
            actuation_s: 0.010,
            min_quota: 0.01,
            hold_while_actuating: false,
        }
    }

    #[test]
    fn step_response_by_hand() {
        let mut c = QuotaController::new(params(), 8);
        // A step to 4x the target at t = 0, sampled every 1 ms.
        // 1: e = 2,   q* = 1 x 1/2 = 0.5,      q = 1 + 0.5 (0.5 - 1) = 0.75
        assert!(c.observe(0.001, 4.0));
        assert_eq!((c.ewma(), c.decided()), (2.0, 0.75));
        // 2: e = 3,   q* = 0.75 / 3 = 0.25,    q = 0.75 + 0.5 (0.25 - 0.75) = 0.5
        assert!(c.observe(0.002, 4.0));
        assert_eq!((c.ewma(), c.decided()), (3.0, 0.5));
        // 3: e = 3.5, q* = 0.5 / 3.5 = 1/7,    q = 0.5 + 0.5 (1/7 - 0.5) = 9/28
        assert!(c.observe(0.003, 4.0));
        assert!((c.decided() - 9.0 / 28.0).abs() < 1e-15);
        // Nothing has taken effect before 10 ms of actuation.
        assert_eq!(c.applied_at(0.0109), 1.0);
        assert_eq!(c.applied_at(0.011), 0.75);
        assert_eq!(c.applied_at(0.0125), 0.5);
        assert!((c.applied_at(1.0) - 9.0 / 28.0).abs() < 1e-15);
        assert_eq!(c.writes, 3);
    }

    #[test]
    fn holding_writes_while_actuating() {
        let mut c = QuotaController::new(
            ControllerParams {
                hold_while_actuating: true,
                ..params()
            },
            8,
        );
        // As in the step response: the first sample writes 0.75 (due at 11 ms); the next
        // two fall in the actuation latency and only move the EWMA (3, then 3.5).
        assert!(c.observe(0.001, 4.0));
        assert!(!c.observe(0.002, 4.0));
        assert!(!c.observe(0.003, 4.0));
        assert_eq!((c.ewma(), c.decided(), c.writes), (3.5, 0.75, 1));
        // At 11 ms the write has landed: e = 3.75, q* = 0.75 / 3.75 = 0.2,
        // q = 0.75 + 0.5 (0.2 - 0.75) = 0.475.
        assert!(c.observe(0.011, 4.0));
        assert!((c.decided() - 0.475).abs() < 1e-15);
    }

    #[test]
    fn quota_recovers_when_the_neighbour_sleeps_and_is_clamped() {
        let mut c = QuotaController::new(params(), 64);
        for i in 0..40 {
            c.observe(i as f64 * 1e-3, 1e6);
        }
        assert_eq!(c.decided(), 0.01, "floored at min_quota");
        // Sleeping: e halves each sample and q* = q / e passes q once e < 1: after 19
        // samples e = 1e6 / 2^19 = 1.9 still holds q; the 20th gives e = 0.954 and
        // q = 0.01 + 0.5 (0.01 / 0.954 - 0.01) = 0.01024.
        for i in 40..59 {
            c.observe(i as f64 * 1e-3, 0.0);
        }
        assert_eq!(c.decided(), 0.01);
        assert!(!c.observe(0.059, 0.0));
        assert!((c.decided() - 0.01024).abs() < 1e-5, "{}", c.decided());
        // Then q* is capped at 1 and q closes half its gap to 1 per sample.
        for i in 60..120 {
            c.observe(i as f64 * 1e-3, 0.0);
        }
        assert!(c.decided() > 0.999 && c.decided() <= 1.0, "{}", c.decided());
        // At the target exactly nothing changes: no write.
        let mut c = QuotaController::new(params(), 4);
        c.observe(0.0, 2.0); // e = 1, q* = 1 = q
        assert_eq!((c.decided(), c.writes), (1.0, 0));
    }
}
