//! The driver bookkeeping every [`MemTelemetry`](super::MemTelemetry) keeps, in one place:
//! installed telemetries by id, each with its spec and the engine's own state for it, and
//! the checks of the driver calls' arguments (an unknown id, a key outside the primary
//! mask, a state index past the telemetry's states). The exact engine's driver keeps the
//! controllers' pipeline slot there, the statistical engine its expected counts.

use super::{translation_base, DriverError, TelemetryId, TelemetrySpec};

#[derive(Debug, Clone)]
pub struct Slots<T> {
    installed: Vec<Option<(TelemetrySpec, T)>>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { installed: vec![] }
    }
}

impl<T> Slots<T> {
    /// Installs a telemetry (its spec already validated); ids are never reused.
    pub fn install(&mut self, spec: TelemetrySpec, state: T) -> TelemetryId {
        self.installed.push(Some((spec, state)));
        TelemetryId(self.installed.len() - 1)
    }

    /// Removes telemetry `t`, returning what it held.
    pub fn remove(&mut self, t: TelemetryId) -> Result<(TelemetrySpec, T), DriverError> {
        self.get(t)?;
        Ok(self.installed[t.0].take().expect("checked"))
    }

    pub fn get(&self, t: TelemetryId) -> Result<(&TelemetrySpec, &T), DriverError> {
        self.installed
            .get(t.0)
            .and_then(Option::as_ref)
            .map(|(s, x)| (s, x))
            .ok_or(DriverError::UnknownTelemetry(t))
    }

    pub fn get_mut(&mut self, t: TelemetryId) -> Result<(&TelemetrySpec, &mut T), DriverError> {
        self.installed
            .get_mut(t.0)
            .and_then(Option::as_mut)
            .map(|(s, x)| (&*s, x))
            .ok_or(DriverError::UnknownTelemetry(t))
    }

    /// Telemetry `t`, with `key` checked against its primary mask (for clearing an entry).
    pub fn with_key(
        &mut self,
        t: TelemetryId,
        key: u64,
    ) -> Result<(&TelemetrySpec, &mut T), DriverError> {
        let (spec, state) = self.get_mut(t)?;
        let max = spec.translation.primary.max();
        if key > max {
            return Err(DriverError::KeyOutsideMask { key, max });
        }
        Ok((spec, state))
    }

    /// Telemetry `t` and the base state index of region `region_idx` for `key` (checked
    /// by [`translation_base`]), for setting an entry.
    pub fn with_translation(
        &mut self,
        t: TelemetryId,
        key: u64,
        region_idx: u64,
    ) -> Result<(u64, &mut T), DriverError> {
        let (spec, state) = self.get_mut(t)?;
        let base = translation_base(spec, key, region_idx)?;
        Ok((base, state))
    }

    /// Telemetry `t`, with state `index` checked against its states (for a read).
    pub fn with_index(
        &mut self,
        t: TelemetryId,
        index: u64,
    ) -> Result<(&TelemetrySpec, &mut T), DriverError> {
        let (spec, state) = self.get_mut(t)?;
        if index >= spec.states as u64 {
            return Err(DriverError::IndexOutOfStates {
                index,
                states: spec.states as u64,
            });
        }
        Ok((spec, state))
    }

    /// Whether any telemetry is installed.
    pub fn any(&self) -> bool {
        self.installed.iter().any(Option::is_some)
    }

    /// The installed telemetries with their ids, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (TelemetryId, &TelemetrySpec, &T)> {
        self.installed
            .iter()
            .enumerate()
            .filter_map(|(i, x)| x.as_ref().map(|(s, t)| (TelemetryId(i), s, t)))
    }

    /// The installed telemetries' own states, mutably, in id order.
    pub fn states_mut(&mut self) -> impl Iterator<Item = (&TelemetrySpec, &mut T)> {
        self.installed.iter_mut().flatten().map(|(s, t)| (&*s, t))
    }
}
