//! `[tiering.neighbour]`: a second tenant on the machine (the noisy neighbour of NEMO's
//! §5.3). It runs its own workload on an engine of its own (its cores, its page tables),
//! one buffer walked at `rate` requests per second of its CPU time, in on/off phases; its
//! traffic loads one of the tiers the experiment's workload (the victim) uses, so the
//! victim's windows see it as that tier's background. A throttling policy caps it with a
//! CPU quota: the tenant's clock is its CPU time, which advances by the quota in force
//! times the wall time of its on-phases.

use serde::{Deserialize, Serialize};
use tierscope_core::limits::MAX_DURATION_NS;
use tierscope_core::tiers::TierSpec;
use tierscope_core::units::{Duration, Rate, Size, NS_PER_MS};
use tierscope_core::workload::{
    AccessMode, Density, PatternKind, PatternSpec, PhaseSpec, RegionSpec, WorkloadSpec,
};
use tierscope_core::FieldError;

/// The neighbour tenant, as written and validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neighbour {
    #[serde(default = "default_name")]
    pub name: String,
    /// Its buffer.
    pub size: Size,
    /// Its 64-byte requests per second of CPU time (at a full core).
    pub rate: Rate,
    /// How it walks the buffer: "sequential" (streaming, the paper's) or "random".
    #[serde(default = "default_kind")]
    pub kind: PatternKind,
    /// Loads, stores (the paper's non-temporal stores) or both.
    #[serde(default = "default_mode")]
    pub mode: AccessMode,
    /// The tier its buffer sits on, by name (default: the slowest).
    #[serde(default)]
    pub tier: Option<String>,
    /// Its on/off shape: busy `on`, asleep `off`, the first on-phase starting at `offset`
    /// into the cycle (default: drawn from the seed).
    pub on: Duration,
    #[serde(default)]
    pub off: Duration,
    #[serde(default)]
    pub offset: Option<Duration>,
    /// The time step at which its clock follows the quota.
    #[serde(default = "default_step")]
    pub step: Duration,
}

fn default_name() -> String {
    "neighbour".into()
}
fn default_kind() -> PatternKind {
    PatternKind::Sequential
}
fn default_mode() -> AccessMode {
    AccessMode::Wo
}
fn default_step() -> Duration {
    Duration(NS_PER_MS)
}

impl Neighbour {
    /// Checks it against the experiment's tiers.
    pub fn validate(&self, tiers: &[TierSpec]) -> Result<(), FieldError> {
        self.tier_index(tiers)?;
        if self.rate.0 == 0 {
            return Err(FieldError::new("rate", "must be positive"));
        }
        if self.on.0 == 0 {
            return Err(FieldError::new("on", "must be positive"));
        }
        if self.step.0 == 0 {
            return Err(FieldError::new("step", "must be positive"));
        }
        if let Some(o) = self.offset {
            if o.0 >= self.cycle_ns() {
                return Err(FieldError::new(
                    "offset",
                    format!(
                        "must be below on + off ({} ns), got {} ns",
                        self.cycle_ns(),
                        o.0
                    ),
                ));
            }
        }
        self.spec().validate()
    }

    /// The index of the tier its buffer sits on.
    pub fn tier_index(&self, tiers: &[TierSpec]) -> Result<usize, FieldError> {
        match &self.tier {
            None => Ok(tiers.len() - 1),
            Some(name) => tiers.iter().position(|t| &t.name == name).ok_or_else(|| {
                let names: Vec<&str> = tiers.iter().map(|t| t.name.as_str()).collect();
                FieldError::new(
                    "tier",
                    format!("no tier is called `{name}` (tiers: {})", names.join(", ")),
                )
            }),
        }
    }

    pub fn cycle_ns(&self) -> u64 {
        self.on.0 + self.off.0
    }

    /// Its workload: one region, one endless phase walking it.
    pub fn spec(&self) -> WorkloadSpec {
        WorkloadSpec {
            regions: vec![RegionSpec {
                name: self.name.clone(),
                size: self.size,
            }],
            phases: vec![PhaseSpec {
                name: "busy".into(),
                duration: Duration(MAX_DURATION_NS),
                patterns: vec![PatternSpec {
                    region: self.name.clone(),
                    kind: self.kind,
                    density: Density::Uniform,
                    stride: Size(64),
                    weight: 1,
                    mode: self.mode,
                }],
            }],
        }
    }
}
