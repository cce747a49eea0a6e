//! No migration: the initial placement stays (the first-touch reference a policy must
//! beat).

use super::{Policy, View};
use crate::migration::Move;
use tierscope_core::{Nanos, Snapshot};

pub struct Fixed;

impl Policy for Fixed {
    fn observe(&mut self, _: &Snapshot) {}

    fn next_action(&self) -> Nanos {
        Nanos::MAX
    }

    fn act(&mut self, _: &View, _: &mut Vec<Move>) {}
}
