//! What a real-time run achieved against what it was asked (docs/models/KVM.md, "Guards
//! against silently wrong results"): each truth window's real length, its nominal length
//! (the time the runner asked to sleep in it) and the accesses each vCPU did in it.

use tierscope_core::machine::RealWindow;

/// Records the windows of one engine's run: [`WindowClock::asked`] and
/// [`WindowClock::returned`] around every `advance_to`, [`WindowClock::close`] at every
/// `take_truth`.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowClock {
    /// When the previous `advance_to` returned (real ns since the engine started).
    last_return: u64,
    /// Time asked for so far in the open window.
    nominal: u64,
    /// The open window's start.
    start: u64,
    /// Each vCPU's accesses when the open window started.
    accesses_at_start: Vec<u64>,
    windows: Vec<RealWindow>,
}

impl WindowClock {
    pub(crate) fn new(threads: usize) -> Self {
        WindowClock {
            accesses_at_start: vec![0; threads],
            ..Default::default()
        }
    }

    /// `advance_to(t)` was called: the runner asks for the time from the previous return
    /// until `t` (nothing when `t` has passed already).
    pub(crate) fn asked(&mut self, t: u64) {
        self.nominal += t.saturating_sub(self.last_return);
    }

    /// `advance_to` returned at `now`.
    pub(crate) fn returned(&mut self, now: u64) {
        self.last_return = now;
    }

    /// The truth window closed at `now`, each vCPU having done `accesses` in all.
    pub(crate) fn close(&mut self, now: u64, accesses: Vec<u64>) {
        let done = accesses
            .iter()
            .zip(&self.accesses_at_start)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        self.windows.push(RealWindow {
            start_ns: self.start,
            end_ns: now,
            nominal_ns: self.nominal,
            accesses: done,
        });
        self.start = now;
        self.nominal = 0;
        self.accesses_at_start = accesses;
    }

    pub(crate) fn windows(&self) -> &[RealWindow] {
        &self.windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_sums_the_time_asked_and_counts_its_own_accesses() {
        let mut c = WindowClock::new(2);
        // A monitor that asks, at each wake-up, for the next 5 ms later; every wake-up
        // comes 1 ms late and takes 1 ms.
        let ms = 1_000_000;
        let (mut woke, mut now) = (0, 0);
        for k in 1..=4 {
            c.asked(woke + 5 * ms);
            woke += 6 * ms;
            c.returned(woke);
            now = woke + ms;
            if k == 2 {
                c.close(now, vec![100, 10]);
            }
        }
        c.close(now, vec![250, 30]);
        // An advance_to to a time already passed asks for nothing.
        c.asked(woke - 1);
        c.returned(now);
        c.close(now + 1, vec![250, 30]);
        let w = c.windows();
        assert_eq!(w.len(), 3);
        assert_eq!(
            (w[0].start_ns, w[0].end_ns, w[0].nominal_ns),
            (0, 13 * ms, 10 * ms)
        );
        assert_eq!(w[0].accesses, vec![100, 10]);
        assert_eq!(
            (w[1].start_ns, w[1].end_ns, w[1].nominal_ns),
            (13 * ms, 25 * ms, 10 * ms)
        );
        assert_eq!(w[1].accesses, vec![150, 20]);
        assert_eq!((w[2].nominal_ns, w[2].accesses.clone()), (0, vec![0, 0]));
    }
}
