//! Fuzz target of cori-sim's trace format (`tierscope tune --trace`; issue 28, item 5):
//! lines of addresses in every notation Python's `int(x, 0)` reads, and edge and random
//! text, for a bounded number of cases. Every text must give a trace or an error of one
//! line naming its line, never a panic; a trace has one request per line.

use crate::Trace;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use tierscope_core::fuzz::EDGE_VALUES;

/// Cases in `cargo test` (well under a second, release); `TIERSCOPE_FUZZ_CASES=N` and
/// `TIERSCOPE_FUZZ_SEED=N` search further.
const CASES: u32 = 10_000;

fn config() -> Config {
    let (cases, seed) = tierscope_core::fuzz::search(CASES);
    Config {
        cases,
        // Failures found are kept as named tests, not in files beside the sources.
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    }
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (
            prop::sample::select(&["", "0x", "0X", "0o", "0b", "+", "-", "0x_", " ", "\t"][..]),
            "[0-9a-fA-F_]{0,20}",
            prop::sample::select(&["", " R", " W 8", "\r", "  ", "_"][..]),
        )
            .prop_map(|(p, d, s)| format!("{p}{d}{s}")),
        1 => prop::sample::select(EDGE_VALUES).prop_map(|s| s.trim_matches('"').to_string()),
        1 => ".{0,12}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cori_traces(lines in prop::collection::vec(line(), 0..20), end in any::<bool>()) {
        let mut text = lines.join("\n");
        if end {
            text.push('\n');
        }
        match Trace::parse(&text) {
            Err(e) => {
                let s = e.to_string();
                prop_assert!(!e.message.is_empty() && !s.contains('\n'), "{s:?}");
            }
            Ok(t) => {
                prop_assert_eq!(t.len(), text.lines().count());
                prop_assert!(t.ids().iter().all(|&i| (i as usize) < t.num_pages()));
            }
        }
    }
}
