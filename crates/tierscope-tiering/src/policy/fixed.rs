//! No migration: the initial placement stays (the first-touch reference a policy must
//! beat).

use super::{Policy, View};
use crate::migration::Move;
use crate::registry::{PolicyContext, PolicyTechnique};
use tierscope_core::{FieldError, Nanos, PolicyInput, Snapshot};

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticConfig {}

impl PolicyTechnique for StaticConfig {
    const HELP: &'static str = "the initial placement, never migrated";

    fn by_name() -> Option<Self> {
        Some(StaticConfig {})
    }

    fn input(&self) -> PolicyInput {
        PolicyInput::Nothing
    }

    fn check(&self, _tiers: usize) -> Result<(), FieldError> {
        Ok(())
    }

    fn policy(&self, _: &PolicyContext) -> Box<dyn Policy> {
        Box::new(Fixed)
    }
}

pub struct Fixed;

impl Policy for Fixed {
    fn observe(&mut self, _: &Snapshot) {}

    fn next_action(&self) -> Nanos {
        Nanos::MAX
    }

    fn act(&mut self, _: &View, _: &mut Vec<Move>) {}
}
