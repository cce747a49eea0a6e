//! One match-update-notify pipeline (NEMO paper §3.1, Figure 2), programmed by a
//! telemetry rule (`TelemetrySpec`, which lives in `tierscope_core::memtel` as the
//! argument of the machines' memory-telemetry capability, and is re-exported here).
//!
//! Match: a request passes the filter (read/write kind, physical address range), its
//! primary key `(addr & primary.mask) >> primary.shift` indexes a direct-mapped
//! translation table of `entries` slots; an empty slot drops the request ("if the key is
//! missing or invalid, NEMO drops the request"); a valid slot gives a base index, to
//! which the sub-region offset `(addr & sub.mask) >> sub.shift` is added. Update: the
//! state at that index, in the copy of the channel that served the request, becomes
//! `state op operand`. Notify: the predicate is evaluated on the updated state and a
//! hit raises the pipeline's interrupt.

use crate::ops::{width_mask, Operand, Overflow, ReadEffect, UpdateOp};
pub use tierscope_core::memtel::{
    Filter, Kinds, MaskShift, Notify, TelemetrySpec, Translation, Update,
};
use tierscope_core::AddrRange;

/// A memory request as the controller sees its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Physical address.
    pub addr: u64,
    pub write: bool,
    /// Bytes moved (64 for a cache line).
    pub bytes: u32,
}

/// An empty translation slot: the prototype's cleared valid bit.
const INVALID: u32 = u32::MAX;

/// One pipeline as programmed on one controller: its translation table and one state
/// array per channel ("each channel in each pipeline owns some telemetry state SRAM
/// banks", §3.1; the prototype's per-channel 8,192 x 64-bit arrays, §4).
#[derive(Debug, Clone)]
pub struct Pipeline {
    kinds: u8,
    range: AddrRange,
    primary: MaskShift,
    sub: MaskShift,
    table: Vec<u32>,
    op: UpdateOp,
    overflow: Overflow,
    /// The operand is `operand_const + (bytes & operand_bytes)`: one of the two is zero,
    /// so the per-request path picks the operand without a branch.
    operand_const: u64,
    operand_bytes: u64,
    notify: Option<Notify>,
    read_effect: ReadEffect,
    mask: u64,
    states_per_channel: usize,
    /// Channel-major: channel `c`'s state `i` is at `c * states_per_channel + i`.
    states: Vec<u64>,
    /// Predicate hits since the driver last took them (the pending interrupt).
    raised: u64,
}

impl Pipeline {
    /// A pipeline for a validated `spec` on a controller with `channels` channels, every
    /// state at the spec's initial value and every translation slot empty.
    pub fn new(spec: &TelemetrySpec, channels: usize) -> Self {
        let (operand_const, operand_bytes) = match spec.update.operand {
            Operand::Const(k) => (k, 0),
            Operand::RequestBytes => (0, u64::MAX),
        };
        Pipeline {
            kinds: spec.filter.kinds.bits(),
            range: spec.filter.range,
            primary: spec.translation.primary,
            // A zero mask always yields offset 0: "no subdivision" needs no branch.
            sub: spec
                .translation
                .sub
                .unwrap_or(MaskShift { mask: 0, shift: 0 }),
            table: vec![INVALID; spec.entries as usize],
            op: spec.update.op,
            overflow: spec.update.overflow,
            operand_const,
            operand_bytes,
            notify: spec.notify,
            read_effect: spec.read_effect,
            mask: width_mask(spec.width),
            states_per_channel: spec.states as usize,
            states: vec![spec.initial(); channels * spec.states as usize],
            raised: 0,
        }
    }

    /// The per-request path: filter, translate, update, notify. No allocation.
    #[inline]
    pub fn observe(&mut self, req: &Request, channel: usize) {
        let kind = 1u8 << (req.write as u8);
        if self.kinds & kind == 0 || !self.range.contains(req.addr) {
            return;
        }
        // In range by validation: the mask cannot produce a key past the table.
        let base = self.table[self.primary.extract(req.addr) as usize];
        if base == INVALID {
            return;
        }
        // In range by the driver's check that base + span <= states.
        let index =
            channel * self.states_per_channel + base as usize + self.sub.extract(req.addr) as usize;
        let k = self.operand_const + (req.bytes as u64 & self.operand_bytes);
        let state = &mut self.states[index];
        *state = self.op.apply(*state, k, self.mask, self.overflow);
        if let Some(n) = self.notify {
            self.raised += n.predicate.holds(*state, n.operand) as u64;
        }
    }

    /// Programs translation slot `key` to `base`, or empties it with `None`.
    pub fn set_entry(&mut self, key: u64, base: Option<u32>) {
        self.table[key as usize] = base.unwrap_or(INVALID);
    }

    pub fn channels(&self) -> usize {
        self.states.len() / self.states_per_channel
    }

    /// Channel `channel`'s copy of state `index`.
    pub fn state(&self, channel: usize, index: usize) -> u64 {
        self.states[channel * self.states_per_channel + index]
    }

    /// Returns channel `channel`'s copy of state `index` and applies the read side
    /// effect to it, as a load from the controller's telemetry region does (§3.1).
    pub fn read(&mut self, channel: usize, index: usize) -> u64 {
        let state = &mut self.states[channel * self.states_per_channel + index];
        let value = *state;
        *state = match self.read_effect {
            ReadEffect::None => value,
            ReadEffect::Op(op, k) => op.apply(value, k, self.mask, self.overflow),
            ReadEffect::Reset(v) => v,
        };
        value
    }

    /// Takes the predicate hits raised since the last call.
    pub fn take_raised(&mut self) -> u64 {
        std::mem::take(&mut self.raised)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::Predicate;

    const MIB2: u64 = 2 << 20;

    /// Listing 2's hugepage hotness rule over 16 GiB: one counter per 2 MiB page.
    pub(crate) fn hotness(entries: u32, states: u32) -> TelemetrySpec {
        TelemetrySpec {
            filter: Filter {
                kinds: Kinds::Both,
                range: AddrRange::new(0, 16 << 30),
            },
            translation: Translation {
                primary: MaskShift::bits(21, 34),
                sub: None,
            },
            update: Update {
                op: UpdateOp::Add,
                operand: Operand::Const(1),
                overflow: Overflow::Wrap,
            },
            notify: None,
            read_effect: ReadEffect::Reset(0),
            entries,
            states,
            width: 64,
        }
    }

    fn req(addr: u64, write: bool) -> Request {
        Request {
            addr,
            write,
            bytes: 64,
        }
    }

    #[test]
    fn translation_without_sub_regions() {
        let spec = hotness(8192, 8192);
        spec.validate().unwrap();
        let mut p = Pipeline::new(&spec, 1);
        // Hugepage 5 (0xa00000..0xc00000) -> state 2; hugepage 7 -> state 0.
        p.set_entry(5, Some(2));
        p.set_entry(7, Some(0));
        p.observe(&req(5 * MIB2, false), 0);
        p.observe(&req(5 * MIB2 + MIB2 - 1, true), 0);
        p.observe(&req(7 * MIB2 + 4096, false), 0);
        p.observe(&req(6 * MIB2, false), 0); // key 6 has no entry: dropped
        assert_eq!((p.state(0, 0), p.state(0, 1), p.state(0, 2)), (1, 0, 2));
    }

    #[test]
    fn translation_with_sub_regions() {
        // Listing 1: primary 2 MiB page, sub-region 4 KiB basepage (bits 12..21 -> 0..511).
        let mut spec = hotness(8192, 8192);
        spec.translation.sub = Some(MaskShift::bits(12, 21));
        spec.validate().unwrap();
        assert_eq!(spec.span(), 512);
        let mut p = Pipeline::new(&spec, 1);
        // Region index 3 -> base 3 * 512 = 1536, for hugepage key 9.
        p.set_entry(9, Some(1536));
        // Basepage 0, 1 and 511 of hugepage 9:
        p.observe(&req(9 * MIB2, false), 0); // 1536 + 0
        p.observe(&req(9 * MIB2 + 4096 + 8, false), 0); // 1536 + 1
        p.observe(&req(9 * MIB2 + 4096 + 64, true), 0); // 1536 + 1
        p.observe(&req(9 * MIB2 + 511 * 4096, false), 0); // 1536 + 511 = 2047
        assert_eq!(p.state(0, 1536), 1);
        assert_eq!(p.state(0, 1537), 2);
        assert_eq!(p.state(0, 2047), 1);
        assert_eq!(p.state(0, 1538), 0);
        assert_eq!(p.state(0, 2048), 0);
    }

    #[test]
    fn filters_by_kind_and_range() {
        let mut spec = hotness(8192, 8192);
        spec.filter = Filter {
            kinds: Kinds::Write,
            range: AddrRange::new(4 * MIB2 + 4096, 5 * MIB2),
        };
        let mut p = Pipeline::new(&spec, 1);
        p.set_entry(4, Some(0));
        p.observe(&req(4 * MIB2 + 8192, false), 0); // a read: dropped
        p.observe(&req(4 * MIB2, true), 0); // below the range start: dropped
        p.observe(&req(4 * MIB2 + 4096, true), 0); // the range start: counted
        p.observe(&req(5 * MIB2 - 64, true), 0); // last line in range: counted
        assert_eq!(p.state(0, 0), 2);
        spec.filter.kinds = Kinds::Read;
        let mut p = Pipeline::new(&spec, 1);
        p.set_entry(4, Some(0));
        p.observe(&req(4 * MIB2 + 8192, true), 0);
        p.observe(&req(4 * MIB2 + 8192, false), 0);
        assert_eq!(p.state(0, 0), 1);
    }

    #[test]
    fn channels_keep_separate_copies_and_operand_can_be_request_bytes() {
        let mut spec = hotness(8192, 8192);
        spec.update.operand = Operand::RequestBytes;
        let mut p = Pipeline::new(&spec, 2);
        p.set_entry(0, Some(4));
        p.observe(
            &Request {
                addr: 0,
                write: false,
                bytes: 64,
            },
            0,
        );
        p.observe(
            &Request {
                addr: 64,
                write: true,
                bytes: 128,
            },
            1,
        );
        p.observe(
            &Request {
                addr: 128,
                write: true,
                bytes: 64,
            },
            1,
        );
        assert_eq!((p.state(0, 4), p.state(1, 4)), (64, 192));
    }

    #[test]
    fn notify_counts_every_update_where_the_predicate_holds() {
        let mut spec = hotness(8192, 8192);
        spec.notify = Some(Notify {
            predicate: Predicate::Ge,
            operand: 3,
        });
        let mut p = Pipeline::new(&spec, 1);
        p.set_entry(0, Some(0));
        // States after each of 5 updates: 1 2 3 4 5 -> >= 3 holds 3 times.
        for _ in 0..5 {
            p.observe(&req(0, false), 0);
        }
        assert_eq!(p.take_raised(), 3);
        assert_eq!(p.take_raised(), 0);
    }

    #[test]
    fn read_side_effects() {
        let mut spec = hotness(8192, 8192);
        spec.read_effect = ReadEffect::Op(UpdateOp::Shr, 1);
        let mut p = Pipeline::new(&spec, 1);
        p.set_entry(0, Some(0));
        for _ in 0..6 {
            p.observe(&req(0, false), 0);
        }
        assert_eq!(p.read(0, 0), 6);
        assert_eq!(p.read(0, 0), 3); // halved by the previous read
        spec.read_effect = ReadEffect::Reset(10);
        let mut p = Pipeline::new(&spec, 1);
        p.set_entry(0, Some(0));
        p.observe(&req(0, false), 0);
        assert_eq!(p.read(0, 0), 11); // started at the reset value 10
        assert_eq!(p.read(0, 0), 10);
        spec.read_effect = ReadEffect::None;
        let mut p = Pipeline::new(&spec, 1);
        p.set_entry(0, Some(0));
        p.observe(&req(0, false), 0);
        assert_eq!((p.read(0, 0), p.read(0, 0)), (1, 1));
    }

    #[test]
    fn bad_rules_name_their_field() {
        let field = |f: &dyn Fn(&mut TelemetrySpec)| {
            let mut spec = hotness(8192, 8192);
            f(&mut spec);
            spec.validate().unwrap_err().field
        };
        // bits 21..35 give 16384 keys for 8192 entries.
        assert_eq!(
            field(&|s| s.translation.primary = MaskShift::bits(21, 35)),
            "translation.primary.mask"
        );
        assert_eq!(
            field(&|s| s.translation.sub = Some(MaskShift::bits(12, 22))),
            "translation.sub.mask"
        );
        let sub_too_big = |s: &mut TelemetrySpec| {
            s.states = 256;
            s.translation.sub = Some(MaskShift::bits(12, 21));
        };
        assert_eq!(field(&sub_too_big), "translation.sub.mask");
        assert_eq!(field(&|s| s.width = 0), "width");
        assert_eq!(field(&|s| s.width = 65), "width");
        assert_eq!(
            field(&|s| s.filter.range = AddrRange::new(5, 5)),
            "filter.range"
        );
        assert_eq!(field(&|s| s.update.op = UpdateOp::Shr), "read_effect");
        let shr_reset_3 = |s: &mut TelemetrySpec| {
            s.update.op = UpdateOp::Shr;
            s.read_effect = ReadEffect::Reset(3);
        };
        assert_eq!(field(&shr_reset_3), "read_effect");
        let xor_saturate = |s: &mut TelemetrySpec| {
            s.update.op = UpdateOp::Xor;
            s.update.overflow = Overflow::Saturate;
        };
        assert_eq!(field(&xor_saturate), "update.overflow");
        let reset_too_wide = |s: &mut TelemetrySpec| {
            s.width = 8;
            s.read_effect = ReadEffect::Reset(256);
        };
        assert_eq!(field(&reset_too_wide), "read_effect");
    }
}
