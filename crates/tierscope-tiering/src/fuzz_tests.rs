//! Fuzz target of damo command lines (`[tiering]` `damos` policies' `damo = "..."`;
//! issue 28, item 5): token sequences from damo's options, their arguments and edge
//! values, for a bounded number of cases. Every line must give schemes or an error of
//! one line, never a panic; schemes must pass or fail the policy's check without one and
//! survive their own serialisation unchanged.

use crate::policy::damos::{parse_damo, DamosConfig, Scheme};
use crate::PolicyTechnique;
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

const WORDS: &[&str] = &[
    "--damos_action",
    "--damos_action",
    "migrate_hot",
    "migrate_cold",
    "pageout",
    "--damos_access_rate",
    "--damos_sz_region",
    "--damos_age",
    "--damos_quota_interval",
    "--damos_quota_space",
    "--damos_quota_goal",
    "node_mem_used_bp",
    "node_mem_free_bp",
    "--damos_filter",
    "--damos_apply_interval",
    "--damos_quotas",
    "--damos_scheme",
    "--damos_wmarks",
    "allow",
    "reject",
    "none",
    "anon",
    "target",
    "samples",
    "min",
    "max",
    "0",
    "1",
    "7",
    "255",
    "256",
    "5%",
    "99.7%",
    "100%",
    "101%",
    "-5%",
    "nan%",
    "inf",
    "1e30",
    "1s",
    "200MB",
    "4KiB",
    "--",
    "-",
    "%",
];

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(WORDS).prop_map(str::to_string),
        1 => prop::sample::select(EDGE_VALUES).prop_map(|s| s.trim_matches('"').to_string()),
        1 => "[ -~]{0,6}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damo_lines(
        start in prop::sample::select(&["--damos_action migrate_hot 0", "--damos_action migrate_cold 1", ""][..]),
        tokens in prop::collection::vec(token(), 0..14),
        tiers in 1usize..4,
    ) {
        // Most lines start with an action, so that the options after it are read.
        let line = format!("{start} {}", tokens.join(" "));
        match parse_damo(&line) {
            Err(m) => prop_assert!(!m.is_empty() && !m.contains('\n'), "{m:?}"),
            Ok(schemes) => {
                let cfg = DamosConfig { damo: Some(line.clone()), ..Default::default() };
                if let Err(e) = cfg.check(tiers) {
                    prop_assert!(!e.to_string().contains('\n'));
                }
                let doc = serde_json::to_value(&schemes).unwrap();
                let back: Vec<Scheme> = serde_json::from_value(doc.clone())
                    .unwrap_or_else(|e| panic!("{e}: {doc}"));
                prop_assert_eq!(back, schemes);
            }
        }
    }
}
