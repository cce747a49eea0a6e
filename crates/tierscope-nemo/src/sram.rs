//! The SRAM a pipeline occupies on one controller (NEMO paper §3 "all telemetry must fit
//! within a small SRAM near the controller", §4 "Resource budget", §6.1).
//!
//! bits = T x E + C x S x W, with T translation entries of E bits, C channels each
//! holding its own S states of W bits. E is the state-index width plus a valid bit: the
//! prototype's table words are `[SRAM_LOG_DEPTH:0]` with the top bit valid
//! (nemo_pipeline_translation_unit.sv), 13 + 1 = 14 bits for 8,192 states, the paper's
//! "~14 KiB at 14 bits/entry". The prototype also replicates the table per channel; §4
//! calls that an artifact a true dual-port SRAM removes, so we count it once.

use crate::pipeline::TelemetrySpec;
use tierscope_core::FieldError;

/// Bits of one translation entry for `states` states: `ceil(log2(states))` index bits
/// plus the valid bit.
pub fn entry_bits(states: u32) -> u64 {
    let index_bits = if states <= 1 {
        0
    } else {
        32 - (states - 1).leading_zeros()
    };
    index_bits as u64 + 1
}

/// Bits `spec` occupies on a controller with `channels` channels.
pub fn pipeline_bits(spec: &TelemetrySpec, channels: usize) -> u64 {
    translation_bits(spec) + state_bits(spec, channels)
}

fn translation_bits(spec: &TelemetrySpec) -> u64 {
    spec.entries as u64 * entry_bits(spec.states)
}

fn state_bits(spec: &TelemetrySpec, channels: usize) -> u64 {
    channels as u64 * spec.states as u64 * spec.width as u64
}

/// Rejects `spec` when it does not fit in `free_bits` of a controller's `total_bits`.
/// The field named is the translation table's size when the table alone does not fit,
/// else the state count (the usual thing to shrink).
pub fn check_fit(
    spec: &TelemetrySpec,
    channels: usize,
    free_bits: u64,
    total_bits: u64,
) -> Result<(), FieldError> {
    let table = translation_bits(spec);
    let states = state_bits(spec, channels);
    if table + states <= free_bits {
        return Ok(());
    }
    let message = format!(
        "needs {} bytes of SRAM ({} entries x {} bits + {} channels x {} states x {} bits), \
         but the controller has {} of {} bytes free",
        (table + states).div_ceil(8),
        spec.entries,
        entry_bits(spec.states),
        channels,
        spec.states,
        spec.width,
        free_bits / 8,
        total_bits / 8,
    );
    let field = if table > free_bits {
        "entries"
    } else {
        "states"
    };
    Err(FieldError::new(field, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::tests::hotness;

    #[test]
    fn entry_bits_by_hand() {
        // 8192 states: 13 index bits + valid = 14 (§4, nemo_defines.sv).
        assert_eq!(entry_bits(8192), 14);
        assert_eq!(entry_bits(8193), 15);
        assert_eq!(entry_bits(2), 2);
        assert_eq!(entry_bits(1), 1);
    }

    #[test]
    fn prototype_pipeline_is_142_kib() {
        // 8192 x 14 bits = 14 KiB of table; 2 channels x 8192 x 64 bits = 128 KiB of
        // state; §4 rounds the total to "~150 KiB".
        let bits = pipeline_bits(&hotness(8192, 8192), 2);
        assert_eq!(bits, (14 + 128) * 1024 * 8);
    }

    #[test]
    fn rejection_names_the_field() {
        let spec = hotness(8192, 8192);
        let need = pipeline_bits(&spec, 2);
        assert!(check_fit(&spec, 2, need, need).is_ok());
        let err = check_fit(&spec, 2, need - 1, need).unwrap_err();
        assert_eq!(err.field, "states");
        assert!(err.message.contains("145408 bytes"), "{}", err.message); // 142 KiB
                                                                          // Less than the 14 KiB table: the table is what does not fit.
        let err = check_fit(&spec, 2, 14 * 1024 * 8 - 1, need).unwrap_err();
        assert_eq!(err.field, "entries");
    }
}
