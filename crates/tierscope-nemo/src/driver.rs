//! The NEMO driver (paper §3.2) and the controllers it drives, with the calls the
//! paper's listings use: `nemo_register_telemetry` is [`Driver::register`],
//! `nemo_set_translation(t, key, region_idx)` is [`Driver::set_translation`]; reads merge
//! every controller's and channel's copy by the update's combine rule (`ops.rs`).
//!
//! Notifications are a drained queue, not callbacks: the simulator is single-threaded and
//! deterministic, a monitor acts only when it wakes (the `Monitor` trait), and a callback
//! would have to borrow the monitor from inside the per-request path. Each controller's
//! pipeline holds a pending count, like an interrupt line that stays raised until
//! serviced; [`Driver::drain_notifications`] is the interrupt handler, and when the
//! caller drains sets the notification latency it models.

use crate::controller::Controller;
use crate::interleave::Interleave;
use crate::ops::width_mask;
use crate::pipeline::{Request, TelemetrySpec};
use std::fmt;
use tierscope_core::FieldError;

/// The machine's NEMO hardware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NemoConfig {
    pub interleave: Interleave,
    /// Telemetry SRAM per controller, translation tables and states together.
    pub sram_bytes: u64,
    /// Pipelines per controller.
    pub max_pipelines: usize,
}

impl NemoConfig {
    /// The FPGA prototype (§4): one controller with 2 channels chosen by cache-line
    /// parity, up to 8 pipelines (the code's `MAX_PIPELINES`, and the 8 of §5.2), and
    /// SRAM for 8 prototype pipelines of 8,192 entries and 2 x 8,192 64-bit states
    /// (8 x 142 KiB = 1,136 KiB; §4 says "~1.2 MiB").
    pub fn prototype() -> Self {
        NemoConfig {
            interleave: Interleave::new(1, 2, 64).expect("valid prototype shape"),
            sram_bytes: 8 * (14 + 128) * 1024,
            max_pipelines: 8,
        }
    }
}

/// A registered telemetry (the listings' `nemo_telemetry_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TelemetryId(usize);

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

#[derive(Debug, Clone)]
struct Installed {
    spec: TelemetrySpec,
    /// The pipeline's position on every controller (the driver installs the same
    /// pipelines everywhere, so the positions agree).
    slot: usize,
}

#[derive(Debug, Clone)]
pub struct Driver {
    interleave: Interleave,
    controllers: Vec<Controller>,
    telemetries: Vec<Option<Installed>>,
    /// One value per controller and channel while merging a read.
    copies: Vec<u64>,
}

impl Driver {
    pub fn new(config: NemoConfig) -> Self {
        let il = config.interleave;
        Driver {
            interleave: il,
            controllers: (0..il.controllers())
                .map(|_| Controller::new(il.channels(), config.sram_bytes, config.max_pipelines))
                .collect(),
            telemetries: Vec::new(),
            copies: Vec::with_capacity(il.controllers() * il.channels()),
        }
    }

    /// Validates `spec` and programs the same pipeline on every controller (§3.2:
    /// "allocates available pipelines on each relevant MC"; with fine interleaving every
    /// controller is relevant). Nothing is installed if any controller lacks room.
    pub fn register(&mut self, spec: &TelemetrySpec) -> Result<TelemetryId, FieldError> {
        spec.validate()?;
        for (i, c) in self.controllers.iter().enumerate() {
            c.check(spec)
                .map_err(|e| e.under(&format!("controllers[{i}]")))?;
        }
        let mut slot = 0;
        for c in &mut self.controllers {
            slot = c.install(spec);
        }
        self.telemetries.push(Some(Installed { spec: *spec, slot }));
        Ok(TelemetryId(self.telemetries.len() - 1))
    }

    /// Removes a telemetry from every controller, freeing its pipelines and SRAM.
    pub fn unregister(&mut self, t: TelemetryId) -> Result<(), DriverError> {
        let gone = self.installed(t)?.clone();
        for c in &mut self.controllers {
            c.remove(gone.slot, &gone.spec);
        }
        self.telemetries[t.0] = None;
        for other in self.telemetries.iter_mut().flatten() {
            if other.slot > gone.slot {
                other.slot -= 1;
            }
        }
        Ok(())
    }

    pub fn spec(&self, t: TelemetryId) -> Result<&TelemetrySpec, DriverError> {
        Ok(&self.installed(t)?.spec)
    }

    /// Distinct region indices the telemetry's states hold: `S / span`.
    pub fn regions(&self, t: TelemetryId) -> Result<u64, DriverError> {
        let spec = &self.installed(t)?.spec;
        Ok(spec.states as u64 / spec.span())
    }

    /// Maps primary key `key` to region `region_idx`, whose states are
    /// `region_idx x span .. + span` (§3.3: "the driver picks base indices so different
    /// hugepages' 512-counter ranges do not overlap"), on every controller. Several keys
    /// may share a region (many-to-one, §5.3).
    pub fn set_translation(
        &mut self,
        t: TelemetryId,
        key: u64,
        region_idx: u64,
    ) -> Result<(), DriverError> {
        let installed = self.installed(t)?;
        let spec = installed.spec;
        let slot = installed.slot;
        let max = spec.translation.primary.max();
        if key > max {
            return Err(DriverError::KeyOutsideMask { key, max });
        }
        let regions = spec.states as u64 / spec.span();
        if region_idx >= regions {
            return Err(DriverError::RegionOutOfStates {
                region: region_idx,
                regions,
            });
        }
        let base = (region_idx * spec.span()) as u32;
        for c in &mut self.controllers {
            c.pipeline_mut(slot).set_entry(key, Some(base));
        }
        Ok(())
    }

    /// Empties the translation entry of `key`: its requests are dropped again.
    pub fn clear_translation(&mut self, t: TelemetryId, key: u64) -> Result<(), DriverError> {
        let installed = self.installed(t)?;
        let max = installed.spec.translation.primary.max();
        if key > max {
            return Err(DriverError::KeyOutsideMask { key, max });
        }
        let slot = installed.slot;
        for c in &mut self.controllers {
            c.pipeline_mut(slot).set_entry(key, None);
        }
        Ok(())
    }

    /// A memory request reaching the controllers: the hardware side, not a driver call.
    /// It goes to the one controller and channel that serve its address, where every
    /// pipeline sees it. No allocation.
    #[inline]
    pub fn access(&mut self, req: &Request) {
        let route = self.interleave.route(req.addr);
        self.controllers[route.controller].observe(req, route.channel);
    }

    /// Reads state `index` from every controller and channel, applying the read side
    /// effect to each copy (it runs per controller, as the hardware runs it after each
    /// load from its telemetry region), and returns the merged value.
    pub fn read(&mut self, t: TelemetryId, index: u64) -> Result<u64, DriverError> {
        let installed = self.installed(t)?;
        let spec = installed.spec;
        let slot = installed.slot;
        if index >= spec.states as u64 {
            return Err(DriverError::IndexOutOfStates {
                index,
                states: spec.states as u64,
            });
        }
        self.copies.clear();
        for c in &mut self.controllers {
            let p = c.pipeline_mut(slot);
            for ch in 0..p.channels() {
                self.copies.push(p.read(ch, index as usize));
            }
        }
        Ok(spec.update.op.merge(
            spec.initial(),
            &self.copies,
            width_mask(spec.width),
            spec.update.overflow,
        ))
    }

    /// Reads the `span` states of region `region_idx` into `out` (cleared first).
    pub fn read_region(
        &mut self,
        t: TelemetryId,
        region_idx: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), DriverError> {
        let spec = self.installed(t)?.spec;
        let regions = spec.states as u64 / spec.span();
        if region_idx >= regions {
            return Err(DriverError::RegionOutOfStates {
                region: region_idx,
                regions,
            });
        }
        out.clear();
        let base = region_idx * spec.span();
        for i in base..base + spec.span() {
            out.push(self.read(t, i)?);
        }
        Ok(())
    }

    /// Appends the notifications pending since the last drain, by telemetry then
    /// controller, and clears them.
    pub fn drain_notifications(&mut self, out: &mut Vec<Notification>) {
        for (id, installed) in self.telemetries.iter().enumerate() {
            let Some(installed) = installed else { continue };
            for (controller, c) in self.controllers.iter_mut().enumerate() {
                let raises = c.pipeline_mut(installed.slot).take_raised();
                if raises > 0 {
                    out.push(Notification {
                        telemetry: TelemetryId(id),
                        controller,
                        raises,
                    });
                }
            }
        }
    }

    /// SRAM in use on `controller`, in bytes.
    pub fn sram_used(&self, controller: usize) -> u64 {
        self.controllers[controller].used_bytes()
    }

    fn installed(&self, t: TelemetryId) -> Result<&Installed, DriverError> {
        self.telemetries
            .get(t.0)
            .and_then(Option::as_ref)
            .ok_or(DriverError::UnknownTelemetry(t))
    }
}
