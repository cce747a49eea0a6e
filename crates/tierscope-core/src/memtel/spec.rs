//! A telemetry rule (NEMO paper §3.2, "Telemetry installation": filter, translation,
//! update, notify, read side effect; Table 1) and its validation. It lives in core, not
//! in tierscope-nemo, because it is the argument of the [`super::MemTelemetry`]
//! capability every machine with memory-controller telemetry offers; the hardware that
//! runs it is tierscope-nemo's `Pipeline`.

use super::ops::{width_mask, Operand, Overflow, Predicate, ReadEffect, UpdateOp};
use crate::{AddrRange, FieldError};

/// Which request kinds a telemetry counts (Table 1: "Request type (R/W/All)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    Read,
    Write,
    Both,
}

impl Kinds {
    /// Bit 0 admits reads, bit 1 writes, so the filter is one AND on the request's kind.
    pub const fn bits(self) -> u8 {
        match self {
            Kinds::Read => 0b01,
            Kinds::Write => 0b10,
            Kinds::Both => 0b11,
        }
    }
}

/// The request filter (§3.2 item 1): kind and physical address range. The prototype
/// checks `start <= addr < end` before the key lookup (§4; nemo_pipeline_filter_and_flatmap.sv).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    pub kinds: Kinds,
    pub range: AddrRange,
}

/// Address bits selected by `mask`, shifted right by `shift`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskShift {
    pub mask: u64,
    pub shift: u32,
}

impl MaskShift {
    /// The mask of address bits `[lo, hi)`, shifted by `lo`: the usual way to select an
    /// aligned power-of-two region number (`bits(21, 34)`: the 2 MiB page number within
    /// 16 GiB).
    pub const fn bits(lo: u32, hi: u32) -> Self {
        MaskShift {
            mask: width_mask(hi) & !width_mask(lo),
            shift: lo,
        }
    }

    #[inline]
    pub const fn extract(&self, addr: u64) -> u64 {
        (addr & self.mask) >> self.shift
    }

    /// The largest value `extract` can return.
    pub const fn max(&self) -> u64 {
        self.mask >> self.shift
    }
}

/// The translation rule (§3.1 "Match stage"): the primary key and the optional sub-region
/// offset (`None` is the paper's "secondary mask set to zero").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translation {
    pub primary: MaskShift,
    pub sub: Option<MaskShift>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    pub op: UpdateOp,
    pub operand: Operand,
    pub overflow: Overflow,
}

impl Update {
    /// Add 1 per request, wrapping: the access counter of Listings 1 and 2.
    pub const COUNT: Update = Update {
        op: UpdateOp::Add,
        operand: Operand::Const(1),
        overflow: Overflow::Wrap,
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notify {
    pub predicate: Predicate,
    pub operand: u64,
}

/// A telemetry rule and the pipeline resources it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelemetrySpec {
    pub filter: Filter,
    pub translation: Translation,
    pub update: Update,
    /// `None` is the listings' `NEMO_OP_NOOP`.
    pub notify: Option<Notify>,
    pub read_effect: ReadEffect,
    /// Translation table entries `T` (8192 in the prototype, §4).
    pub entries: u32,
    /// States `S` per channel (8192 in the prototype, §4).
    pub states: u32,
    /// State width `W` in bits (64 in the prototype, §4; §6.1 discusses 8 to 32).
    pub width: u32,
}

impl TelemetrySpec {
    /// The value every state starts at and returns to: the reset value when the read
    /// effect is a reset, else 0 (hardware SRAM starts cleared; the prototype's read
    /// resets to 0).
    pub fn initial(&self) -> u64 {
        match self.read_effect {
            ReadEffect::Reset(v) => v,
            _ => 0,
        }
    }

    /// States one translation entry covers: the number of sub-regions (1 without).
    pub fn span(&self) -> u64 {
        self.translation.sub.map_or(1, |s| s.max() + 1)
    }

    /// Checks the rule on its own; the SRAM fit is the controller's (`sram.rs`).
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.filter.range.is_empty() {
            return Err(FieldError::new("filter.range", "is empty"));
        }
        if !(1..=64).contains(&self.width) {
            return Err(FieldError::new(
                "width",
                format!("must be 1 to 64 bits, got {}", self.width),
            ));
        }
        if self.entries == 0 {
            return Err(FieldError::new("entries", "must be at least 1"));
        }
        if self.states == 0 {
            return Err(FieldError::new("states", "must be at least 1"));
        }
        let primary = self.translation.primary;
        if primary.shift >= 64 || primary.mask == 0 {
            return Err(FieldError::new(
                "translation.primary",
                "needs a non-zero mask and a shift below 64",
            ));
        }
        // The table is direct-mapped (the prototype indexes it with the key's low bits,
        // nemo_pipeline_translation_unit.sv), so every key the mask can produce must
        // have an entry.
        if primary.max() >= self.entries as u64 {
            return Err(FieldError::new(
                "translation.primary.mask",
                format!(
                    "selects keys up to {}, but the table has {} entries",
                    primary.max(),
                    self.entries
                ),
            ));
        }
        if let Some(sub) = self.translation.sub {
            if sub.shift >= 64 || sub.mask == 0 {
                return Err(FieldError::new(
                    "translation.sub",
                    "needs a non-zero mask and a shift below 64 (omit it for no sub-regions)",
                ));
            }
            // §3.1: the offset selects "a sub-region within the request's primary region".
            if sub.mask >> primary.shift != 0 {
                return Err(FieldError::new(
                    "translation.sub.mask",
                    format!(
                        "selects bits at or above the primary shift {}",
                        primary.shift
                    ),
                ));
            }
            if sub.max() >= self.states as u64 {
                return Err(FieldError::new(
                    "translation.sub.mask",
                    format!(
                        "gives {} sub-regions, more than the {} states",
                        sub.max() + 1,
                        self.states
                    ),
                ));
            }
        }
        let mask = width_mask(self.width);
        let shift = matches!(self.update.op, UpdateOp::Shl | UpdateOp::Shr);
        if self.update.overflow == Overflow::Saturate
            && !matches!(self.update.op, UpdateOp::Add | UpdateOp::Sub)
        {
            return Err(FieldError::new(
                "update.overflow",
                "saturation applies to add and sub only",
            ));
        }
        if shift {
            // A shifted state keeps meaning only as a power-of-two fraction of its
            // start, which the merge rule needs (ops.rs); a start of 0 never moves.
            match self.read_effect {
                ReadEffect::Reset(v) if v.is_power_of_two() && v <= mask => {}
                _ => {
                    return Err(FieldError::new(
                        "read_effect",
                        "a shift telemetry needs a reset to a power of two that fits the width",
                    ))
                }
            }
        }
        match self.read_effect {
            ReadEffect::Reset(v) if v > mask => Err(FieldError::new(
                "read_effect",
                format!("reset value {v} does not fit {} bits", self.width),
            )),
            _ => Ok(()),
        }
    }
}
