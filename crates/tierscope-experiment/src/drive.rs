//! The one drive loop every run uses: participants (a monitor and what records its
//! snapshots, a policy and its feed, the performance model's windows, a study's probes)
//! each say when they next want to run; the loop advances the run's engine to the earliest
//! of those times and wakes, in the order they were given, every participant due then.
//! Order is the tie rule: a participant listed first runs first at equal times (the
//! performance windows close before a policy acts at the same instant).

use crate::result::Progress;
use crate::run::RunError;
use tierscope_core::{Engine, Nanos};

/// Something the drive loop wakes at its times. `C` is what the run's participants share
/// (a policy run's migration engine and windows; nothing for a monitor's run).
pub trait Participant<C> {
    /// When it next wants to run, ns (`Nanos::MAX`: not again).
    fn next_wakeup(&self) -> Nanos;

    /// Runs at `now`; the engine has been advanced to it.
    fn wake(&mut self, engine: &mut dyn Engine, shared: &mut C, now: Nanos)
        -> Result<(), RunError>;
}

/// Wakes `participants` in time order up to `end` (inclusive), reporting progress in
/// `slot` (when the run has one) and stopping on a cancel; stops early when the engine's workload has ended (a
/// real program exited). Returns with the engine at the last wake-up.
pub fn drive<C>(
    engine: &mut dyn Engine,
    participants: &mut [&mut dyn Participant<C>],
    shared: &mut C,
    end: Nanos,
    progress: &Progress,
    slot: Option<usize>,
) -> Result<(), RunError> {
    loop {
        let t = participants
            .iter()
            .map(|p| p.next_wakeup())
            .min()
            .unwrap_or(Nanos::MAX);
        if t > end || engine.finished() {
            return Ok(());
        }
        engine.advance_to(t);
        if let Some(slot) = slot {
            progress.set(slot, t);
        }
        if progress.cancelled() {
            return Err(RunError::Cancelled);
        }
        for p in participants.iter_mut() {
            if p.next_wakeup() <= t {
                p.wake(engine, shared, t)?;
            }
        }
    }
}

/// A participant that wakes every `period` from `period` on and does nothing: a run with
/// no other participant still reports progress and notices a cancel.
pub struct Ticker {
    pub period: Nanos,
    pub next: Nanos,
}

impl Ticker {
    pub fn new(period: Nanos) -> Self {
        Ticker {
            period,
            next: period,
        }
    }
}

impl<C> Participant<C> for Ticker {
    fn next_wakeup(&self) -> Nanos {
        self.next
    }

    fn wake(&mut self, _: &mut dyn Engine, _: &mut C, _: Nanos) -> Result<(), RunError> {
        self.next = self.next.saturating_add(self.period);
        Ok(())
    }
}
