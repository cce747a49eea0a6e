//! Memory-controller telemetry as a machine capability ([`crate::Capability::MemTelemetry`]):
//! the driver API of NEMO (Li et al., "Finding NEMO"; paper §3.2) that monitors call, the
//! telemetry rule they register ([`TelemetrySpec`]) and the operators of Table 1 (`ops`).
//!
//! The hardware that runs the rules (controllers, pipelines, SRAM, interleaving) is
//! tierscope-nemo's; the rule and the driver calls live here so that a monitor can reach
//! them through `Machine` without knowing which engine serves them: the exact engine runs
//! every memory access through tierscope-nemo's driver, the statistical engine computes
//! the expected state of counting telemetries from its densities (docs/techniques/NEMO.md).

pub mod ops;
mod slots;
mod spec;

pub use ops::{Operand, Overflow, Predicate, ReadEffect, UpdateOp};
pub use slots::Slots;
pub use spec::{Filter, Kinds, MaskShift, Notify, TelemetrySpec, Translation, Update};

use crate::FieldError;
use std::fmt;

/// A registered telemetry (the listings' `nemo_telemetry_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TelemetryId(pub usize);

/// A telemetry's predicate held on a controller since the last drain. §3.2: the
/// interrupt "tags the corresponding pipeline", not a state, and §3.1 calls alerts hints
/// to re-check the telemetry across controllers; so it carries no state index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub telemetry: TelemetryId,
    pub controller: usize,
    /// Updates on which the predicate held since the last drain.
    pub raises: u64,
}

/// A driver call the installed telemetry cannot honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverError {
    UnknownTelemetry(TelemetryId),
    /// The key has bits the primary mask never produces, so no request could match it.
    KeyOutsideMask {
        key: u64,
        max: u64,
    },
    /// `region_idx x span + span` would pass the telemetry's states.
    RegionOutOfStates {
        region: u64,
        regions: u64,
    },
    IndexOutOfStates {
        index: u64,
        states: u64,
    },
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::UnknownTelemetry(t) => write!(f, "telemetry {} is not registered", t.0),
            DriverError::KeyOutsideMask { key, max } => {
                write!(
                    f,
                    "key {key:#x} is outside what the primary mask selects (0..={max:#x})"
                )
            }
            DriverError::RegionOutOfStates { region, regions } => {
                write!(
                    f,
                    "region index {region} is past the telemetry's {regions} regions"
                )
            }
            DriverError::IndexOutOfStates { index, states } => {
                write!(f, "state {index} is past the telemetry's {states} states")
            }
        }
    }
}

impl std::error::Error for DriverError {}

/// Checks `nemo_set_translation(t, key, region_idx)` against `spec` and returns the base
/// state index of the region, `region_idx x span` (§3.3: "the driver picks base indices
/// so different hugepages' 512-counter ranges do not overlap"). Every implementation
/// checks through here, so they reject alike.
pub fn translation_base(
    spec: &TelemetrySpec,
    key: u64,
    region_idx: u64,
) -> Result<u64, DriverError> {
    let max = spec.translation.primary.max();
    if key > max {
        return Err(DriverError::KeyOutsideMask { key, max });
    }
    check_region(spec, region_idx)?;
    Ok(region_idx * spec.span())
}

/// Checks that region `region_idx` is within `spec`'s states. Without a division: it is
/// called per key per scan, and `region < states / span` is `(region + 1) x span <=
/// states` in integers.
pub fn check_region(spec: &TelemetrySpec, region_idx: u64) -> Result<(), DriverError> {
    let end = region_idx
        .checked_add(1)
        .and_then(|r| r.checked_mul(spec.span()));
    if end.is_none_or(|end| end > spec.states as u64) {
        return Err(DriverError::RegionOutOfStates {
            region: region_idx,
            regions: spec.states as u64 / spec.span(),
        });
    }
    Ok(())
}

/// The driver API of memory-controller telemetry, with the calls the NEMO paper's
/// listings use: `nemo_register_telemetry` is [`MemTelemetry::register`],
/// `nemo_set_translation(t, key, region_idx)` is [`MemTelemetry::set_translation`]. Keys
/// are primary keys of physical addresses (`Machine::phys_addr`). Reads return the
/// merged value: the state one controller would hold had it seen every request.
pub trait MemTelemetry {
    /// Validates `spec` and installs it; errors name the spec's field.
    fn register(&mut self, spec: &TelemetrySpec) -> Result<TelemetryId, FieldError>;

    /// Removes a telemetry, freeing its pipelines.
    fn unregister(&mut self, t: TelemetryId) -> Result<(), DriverError>;

    fn spec(&self, t: TelemetryId) -> Result<&TelemetrySpec, DriverError>;

    /// Distinct region indices the telemetry's states hold: `S / span`.
    fn regions(&self, t: TelemetryId) -> Result<u64, DriverError> {
        let spec = self.spec(t)?;
        Ok(spec.states as u64 / spec.span())
    }

    /// Maps primary key `key` to region `region_idx` (see [`translation_base`]). Several
    /// keys may share a region (many-to-one, §5.3).
    fn set_translation(
        &mut self,
        t: TelemetryId,
        key: u64,
        region_idx: u64,
    ) -> Result<(), DriverError>;

    /// Empties the translation entry of `key`: its requests are dropped again.
    fn clear_translation(&mut self, t: TelemetryId, key: u64) -> Result<(), DriverError>;

    /// Reads state `index`, merged over every controller and channel, and applies the
    /// read side effect to every copy.
    fn read(&mut self, t: TelemetryId, index: u64) -> Result<u64, DriverError>;

    /// Reads the `span` states of region `region_idx` into `out` (cleared first).
    fn read_region(
        &mut self,
        t: TelemetryId,
        region_idx: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), DriverError> {
        let spec = *self.spec(t)?;
        check_region(&spec, region_idx)?;
        out.clear();
        let base = region_idx * spec.span();
        for i in base..base + spec.span() {
            out.push(self.read(t, i)?);
        }
        Ok(())
    }

    /// Reads regions `first..first + count` into `out` (cleared first), each region's
    /// `span` states after the previous one's: [`MemTelemetry::read_region`] of each in
    /// turn, in one call (a multiplexer reads thousands per scan).
    fn read_regions(
        &mut self,
        t: TelemetryId,
        first: u64,
        count: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), DriverError> {
        out.clear();
        let mut region = Vec::new();
        for r in first..first + count {
            self.read_region(t, r, &mut region)?;
            out.extend_from_slice(&region);
        }
        Ok(())
    }

    /// Maps `keys[i]` to region `first + i`, in order: [`MemTelemetry::set_translation`]
    /// of each in one call.
    fn set_translations(
        &mut self,
        t: TelemetryId,
        keys: &[u64],
        first: u64,
    ) -> Result<(), DriverError> {
        for (r, &key) in (first..).zip(keys) {
            self.set_translation(t, key, r)?;
        }
        Ok(())
    }

    /// [`MemTelemetry::clear_translation`] of each of `keys`, in order, in one call.
    fn clear_translations(&mut self, t: TelemetryId, keys: &[u64]) -> Result<(), DriverError> {
        for &key in keys {
            self.clear_translation(t, key)?;
        }
        Ok(())
    }

    /// Appends the notifications pending since the last drain, by telemetry then
    /// controller, and clears them (the interrupt handler).
    fn drain_notifications(&mut self, out: &mut Vec<Notification>);
}
