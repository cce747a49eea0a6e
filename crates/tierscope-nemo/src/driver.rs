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
use crate::llc::Llc;
use crate::ops::width_mask;
use crate::pipeline::{Request, TelemetrySpec};
use crate::sram;
use tierscope_core::memtel::Slots;
pub use tierscope_core::memtel::{DriverError, MemTelemetry, Notification, TelemetryId};
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

    /// Whether `specs`, registered in this order, would all fit: the checks `register`
    /// makes on each controller (every controller gets every pipeline, so one stands for
    /// all), without installing anything. Configs use it to reject a rule at parse time;
    /// errors name the spec's field (`entries` or `states` for SRAM, `pipelines` for the
    /// count).
    pub fn check_fits(&self, specs: &[TelemetrySpec]) -> Result<(), FieldError> {
        let channels = self.interleave.channels();
        let total = self.sram_bytes * 8;
        let mut used = 0;
        for (n, spec) in specs.iter().enumerate() {
            spec.validate()?;
            if n >= self.max_pipelines {
                return Err(FieldError::new(
                    "pipelines",
                    format!(
                        "{} telemetries need {} pipelines, a controller has {}",
                        specs.len(),
                        specs.len(),
                        self.max_pipelines
                    ),
                ));
            }
            sram::check_fit(spec, channels, total - used, total)?;
            used += sram::pipeline_bits(spec, channels);
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct Driver {
    interleave: Interleave,
    controllers: Vec<Controller>,
    /// Each telemetry's pipeline position on every controller (the driver installs the
    /// same pipelines everywhere, so the positions agree).
    telemetries: Slots<usize>,
    /// One value per controller and channel while merging a read.
    copies: Vec<u64>,
    /// The last-level cache in front of the controllers: only its misses reach them.
    llc: Option<Llc>,
}

impl Driver {
    pub fn new(config: NemoConfig) -> Self {
        let il = config.interleave;
        Driver {
            interleave: il,
            controllers: (0..il.controllers())
                .map(|_| Controller::new(il.channels(), config.sram_bytes, config.max_pipelines))
                .collect(),
            telemetries: Slots::default(),
            copies: Vec::with_capacity(il.controllers() * il.channels()),
            llc: None,
        }
    }

    /// Puts `llc` in front of the controllers (None: every request reaches them).
    pub fn set_llc(&mut self, llc: Option<Llc>) {
        self.llc = llc;
    }

    pub fn llc(&self) -> Option<&Llc> {
        self.llc.as_ref()
    }

    /// A memory request reaching the controllers: the hardware side, not a driver call.
    /// It goes to the one controller and channel that serve its address, where every
    /// pipeline sees it. No allocation.
    #[inline]
    pub fn access(&mut self, req: &Request) {
        if let Some(llc) = &mut self.llc {
            if llc.access(req.addr) {
                return;
            }
        }
        let route = self.interleave.route(req.addr);
        self.controllers[route.controller].observe(req, route.channel);
    }

    /// Telemetries registered now: with none, the engine skips the driver entirely.
    pub fn registered(&self) -> usize {
        self.telemetries.iter().count()
    }

    /// SRAM in use on `controller`, in bytes.
    pub fn sram_used(&self, controller: usize) -> u64 {
        self.controllers[controller].used_bytes()
    }
}

impl MemTelemetry for Driver {
    /// Validates `spec` and programs the same pipeline on every controller (§3.2:
    /// "allocates available pipelines on each relevant MC"; with fine interleaving every
    /// controller is relevant). Nothing is installed if any controller lacks room.
    fn register(&mut self, spec: &TelemetrySpec) -> Result<TelemetryId, FieldError> {
        spec.validate()?;
        for (i, c) in self.controllers.iter().enumerate() {
            c.check(spec)
                .map_err(|e| e.under(&format!("controllers[{i}]")))?;
        }
        let mut slot = 0;
        for c in &mut self.controllers {
            slot = c.install(spec);
        }
        Ok(self.telemetries.install(*spec, slot))
    }

    /// Removes a telemetry from every controller, freeing its pipelines and SRAM.
    fn unregister(&mut self, t: TelemetryId) -> Result<(), DriverError> {
        let (spec, gone) = self.telemetries.remove(t)?;
        for c in &mut self.controllers {
            c.remove(gone, &spec);
        }
        for (_, slot) in self.telemetries.states_mut() {
            if *slot > gone {
                *slot -= 1;
            }
        }
        Ok(())
    }

    fn spec(&self, t: TelemetryId) -> Result<&TelemetrySpec, DriverError> {
        Ok(self.telemetries.get(t)?.0)
    }

    /// Maps primary key `key` to region `region_idx`, whose states are
    /// `region_idx x span .. + span` (§3.3: "the driver picks base indices so different
    /// hugepages' 512-counter ranges do not overlap"), on every controller. Several keys
    /// may share a region (many-to-one, §5.3).
    fn set_translation(
        &mut self,
        t: TelemetryId,
        key: u64,
        region_idx: u64,
    ) -> Result<(), DriverError> {
        let (base, &mut slot) = self.telemetries.with_translation(t, key, region_idx)?;
        let base = base as u32;
        for c in &mut self.controllers {
            c.pipeline_mut(slot).set_entry(key, Some(base));
        }
        Ok(())
    }

    /// Empties the translation entry of `key`: its requests are dropped again.
    fn clear_translation(&mut self, t: TelemetryId, key: u64) -> Result<(), DriverError> {
        let (_, &mut slot) = self.telemetries.with_key(t, key)?;
        for c in &mut self.controllers {
            c.pipeline_mut(slot).set_entry(key, None);
        }
        Ok(())
    }

    /// Reads state `index` from every controller and channel, applying the read side
    /// effect to each copy (it runs per controller, as the hardware runs it after each
    /// load from its telemetry region), and returns the merged value.
    fn read(&mut self, t: TelemetryId, index: u64) -> Result<u64, DriverError> {
        let (&spec, &mut slot) = self.telemetries.with_index(t, index)?;
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

    /// Appends the notifications pending since the last drain, by telemetry then
    /// controller, and clears them.
    fn drain_notifications(&mut self, out: &mut Vec<Notification>) {
        for (telemetry, _, &slot) in self.telemetries.iter() {
            for (controller, c) in self.controllers.iter_mut().enumerate() {
                let raises = c.pipeline_mut(slot).take_raised();
                if raises > 0 {
                    out.push(Notification {
                        telemetry,
                        controller,
                        raises,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Operand, Predicate, ReadEffect, UpdateOp};
    use crate::pipeline::tests::hotness;
    use crate::pipeline::{MaskShift, Notify};

    const MIB2: u64 = 2 << 20;

    fn four_by_two() -> Driver {
        Driver::new(NemoConfig {
            interleave: Interleave::new(4, 2, 64).unwrap(),
            sram_bytes: 1 << 20,
            max_pipelines: 8,
        })
    }

    fn line(page: u64, line: u64, write: bool) -> Request {
        Request {
            addr: page * MIB2 + line * 64,
            write,
            bytes: 64,
        }
    }

    #[test]
    fn add_merges_to_the_total_over_controllers_and_channels() {
        let mut d = four_by_two();
        let t = d.register(&hotness(8192, 8192)).unwrap();
        d.set_translation(t, 3, 0).unwrap();
        d.set_translation(t, 4, 1).unwrap();
        // Lines 0..100 of page 3 once each, lines 0..7 of page 4 three times each:
        // with 64 B interleaving they spread over all 4 x 2 copies.
        for l in 0..100 {
            d.access(&line(3, l, l % 3 == 0));
        }
        for _ in 0..3 {
            for l in 0..7 {
                d.access(&line(4, l, false));
            }
        }
        d.access(&line(5, 0, false)); // no translation: dropped
        assert_eq!(d.read(t, 0).unwrap(), 100);
        assert_eq!(d.read(t, 1).unwrap(), 21); // 3 x 7
                                               // Reset on read: the next read sees only new traffic.
        assert_eq!(d.read(t, 0).unwrap(), 0);
        d.access(&line(3, 9, true));
        assert_eq!(d.read(t, 0).unwrap(), 1);
    }

    #[test]
    fn xor_and_shift_merge_across_controllers() {
        let mut d = four_by_two();
        let mut spec = hotness(8192, 8192);
        spec.update.op = UpdateOp::Xor;
        spec.update.operand = Operand::Const(0b101);
        let x = d.register(&spec).unwrap();
        spec.update.op = UpdateOp::Shr;
        spec.update.operand = Operand::Const(1);
        spec.read_effect = ReadEffect::Reset(1 << 20);
        let s = d.register(&spec).unwrap();
        d.set_translation(x, 0, 0).unwrap();
        d.set_translation(s, 0, 0).unwrap();
        // 13 requests over several controllers: XOR 13 times by 0b101 -> 0b101 (odd);
        // right shift 13 times from 2^20 -> 2^7.
        for l in 0..13 {
            d.access(&line(0, l * 5, false));
        }
        assert_eq!(d.read(x, 0).unwrap(), 0b101);
        assert_eq!(d.read(s, 0).unwrap(), 1 << 7);
        assert_eq!(d.read(s, 0).unwrap(), 1 << 20); // reset on every copy
    }

    #[test]
    fn many_keys_to_one_state_with_a_bandwidth_notification() {
        // Listing 3: every hugepage of a tenant maps to the tenant's state; add the
        // request's bytes; notify at >= the cap. 2 controllers interleaved at 4 KiB.
        let mut d = Driver::new(NemoConfig {
            interleave: Interleave::new(2, 1, 4096).unwrap(),
            sram_bytes: 1 << 20,
            max_pipelines: 8,
        });
        let mut spec = hotness(8192, 64);
        spec.update.operand = Operand::RequestBytes;
        spec.notify = Some(Notify {
            predicate: Predicate::Ge,
            operand: 4096,
        });
        let t = d.register(&spec).unwrap();
        for page in [10, 11, 12] {
            d.set_translation(t, page, 0).unwrap(); // tenant 0
        }
        d.set_translation(t, 20, 1).unwrap(); // tenant 1
                                              // Tenant 0: 96 lines of 64 B in the first 4 KiB of pages 10, 11, 12 -> all on
                                              // controller 0 (chunk = addr / 4096 is even), 96 x 64 = 6144 B. The state reaches
                                              // 4096 at the 64th request and stays >= 4096 for requests 64..96: 33 raises.
        for page in [10, 11, 12] {
            for l in 0..32 {
                d.access(&line(page, l, true));
            }
        }
        // Tenant 1: 10 lines on controller 1 (offset 4096: odd chunk), 640 B: no raise.
        for l in 64..74 {
            d.access(&line(20, l, false));
        }
        let mut out = Vec::new();
        d.drain_notifications(&mut out);
        assert_eq!(
            out,
            vec![Notification {
                telemetry: t,
                controller: 0,
                raises: 33
            }]
        );
        assert_eq!(d.read(t, 0).unwrap(), 6144);
        assert_eq!(d.read(t, 1).unwrap(), 640);
        out.clear();
        d.drain_notifications(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn translation_errors() {
        let mut d = four_by_two();
        let mut spec = hotness(8192, 8192);
        spec.translation.sub = Some(MaskShift::bits(12, 21));
        let t = d.register(&spec).unwrap();
        // 8192 states / 512 per hugepage = 16 regions.
        assert_eq!(d.regions(t).unwrap(), 16);
        assert!(d.set_translation(t, 8191, 15).is_ok());
        assert_eq!(
            d.set_translation(t, 7, 16),
            Err(DriverError::RegionOutOfStates {
                region: 16,
                regions: 16
            })
        );
        // Key 8192 needs bit 34 of the address, which the mask bits 21..34 drop.
        assert_eq!(
            d.set_translation(t, 8192, 0),
            Err(DriverError::KeyOutsideMask {
                key: 8192,
                max: 8191
            })
        );
        assert_eq!(
            d.read(t, 8192),
            Err(DriverError::IndexOutOfStates {
                index: 8192,
                states: 8192
            })
        );
        d.unregister(t).unwrap();
        assert_eq!(d.read(t, 0), Err(DriverError::UnknownTelemetry(t)));
    }

    #[test]
    fn sram_and_pipelines_bound_registration() {
        let mut d = Driver::new(NemoConfig::prototype());
        let proto = hotness(8192, 8192);
        let ids: Vec<_> = (0..8).map(|_| d.register(&proto).unwrap()).collect();
        // 8 x 142 KiB fill the prototype's SRAM exactly.
        assert_eq!(d.sram_used(0), 8 * 142 * 1024);
        let err = d.register(&hotness(8192, 16)).unwrap_err();
        assert_eq!(err.field, "controllers[0].pipelines");
        // Two freed pipelines (284 KiB) make room for one with twice the states:
        // 8192 x 15 bits + 2 x 16384 x 64 bits = 15 KiB + 256 KiB = 271 KiB.
        d.unregister(ids[0]).unwrap();
        d.unregister(ids[1]).unwrap();
        let big = d.register(&hotness(8192, 16384)).unwrap();
        assert_eq!(d.sram_used(0), 6 * 142 * 1024 + 271 * 1024);
        d.unregister(big).unwrap();
        // 8192 x 16 bits + 2 x 24576 x 64 bits = 16 KiB + 384 KiB = 400 KiB > 284 KiB.
        let err = d.register(&hotness(8192, 24576)).unwrap_err();
        assert_eq!(err.field, "controllers[0].states");
        // Nothing half-installed; the remaining telemetries still count after the slots
        // moved.
        assert_eq!(d.sram_used(0), 6 * 142 * 1024);
        d.set_translation(ids[7], 2, 5).unwrap();
        d.access(&line(2, 0, false));
        assert_eq!(d.read(ids[7], 5).unwrap(), 1);
        assert_eq!(d.read(ids[6], 5).unwrap(), 0);
    }

    #[test]
    fn check_fits_agrees_with_registering() {
        // Each list is registered on a fresh prototype until one fails; `check_fits` must
        // accept exactly the lists that register whole, and name the same field.
        let shapes = [
            (8192, 8192),
            (8192, 16384),
            (16384, 8192),
            (1 << 19, 8192),
            (8192, 100_000),
        ];
        for a in shapes {
            for b in shapes {
                for n in 1..=9 {
                    let specs: Vec<_> = (0..n)
                        .map(|i| {
                            if i % 2 == 0 {
                                hotness(a.0, a.1)
                            } else {
                                hotness(b.0, b.1)
                            }
                        })
                        .map(|mut s| {
                            s.translation.primary =
                                MaskShift::bits(21, 21 + s.entries.trailing_zeros());
                            s
                        })
                        .collect();
                    let mut d = Driver::new(NemoConfig::prototype());
                    let registered = specs.iter().try_for_each(|s| d.register(s).map(|_| ()));
                    let checked = NemoConfig::prototype().check_fits(&specs);
                    match (registered, checked) {
                        (Ok(()), Ok(())) => {}
                        (Err(r), Err(c)) => {
                            assert_eq!(r.field, format!("controllers[0].{}", c.field))
                        }
                        (r, c) => panic!("{a:?} {b:?} x{n}: register {r:?}, check_fits {c:?}"),
                    }
                }
            }
        }
        // By hand: 8 prototype pipelines fill the SRAM exactly, a 9th has no pipeline.
        let eight = vec![hotness(8192, 8192); 8];
        assert!(NemoConfig::prototype().check_fits(&eight).is_ok());
        let nine = vec![hotness(8192, 8192); 9];
        assert_eq!(
            NemoConfig::prototype().check_fits(&nine).unwrap_err().field,
            "pipelines"
        );
    }

    #[test]
    fn bad_rules_are_rejected_before_any_controller() {
        let mut d = four_by_two();
        let err = d.register(&hotness(4096, 8192)).unwrap_err();
        assert_eq!(err.field, "translation.primary.mask");
        assert_eq!(d.sram_used(0), 0);
    }
}
