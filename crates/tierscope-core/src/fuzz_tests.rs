//! Fuzz targets of the core's parsers (issue 28, item 5): MASIM configs, quantities with
//! units, lackey traces and the binary trace format. Each draws structured inputs and
//! mutations of the shipped examples (experiments/*.cfg) for a bounded number of cases,
//! and checks that every input gives a value or an error of one line, never a panic; and
//! that what parses also validates, lays out its derived values and re-reads without one.

use crate::fuzz::{mutate, EDGE_VALUES};
use crate::units::{parse_duration, parse_rate, parse_size};
use crate::workload::parse_masim;
use crate::workload::trace::{LackeyOptions, Trace, MAGIC, VERSION};
use crate::FieldError;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// Cases per target in `cargo test` (the five targets take well under a second together,
/// release); `TIERSCOPE_FUZZ_CASES=N` runs N instead, for a longer search.
const CASES: u32 = 10_000;

fn config() -> Config {
    let (cases, seed) = crate::fuzz::search(CASES);
    Config {
        cases,
        // Failures found are kept as named tests, not in files beside the sources.
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    }
}

fn shipped_masim() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(read_shipped_masim)
}

fn read_shipped_masim() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cfg"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no MASIM config in experiments/");
    out
}

/// An error is one line with something to say.
fn one_line(e: &FieldError) {
    let s = e.to_string();
    assert!(!e.message.is_empty() && !s.contains('\n'), "{s:?}");
}

/// Parses a MASIM text; what parses must validate or fail to, and its sums must not
/// overflow.
fn check_masim(text: &str) {
    match parse_masim(text) {
        Err(e) => one_line(&e),
        Ok(w) => {
            let _ = (w.total_size(), w.phases_duration());
            if let Err(e) = w.validate() {
                one_line(&e);
            }
        }
    }
}

fn ops() -> impl Strategy<Value = Vec<(u8, u32, u32)>> {
    prop::collection::vec(any::<(u8, u32, u32)>(), 1..6)
}

fn token(list: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(list).prop_map(str::to_string),
        1 => prop::sample::select(EDGE_VALUES).prop_map(|s| s.trim_matches('"').to_string()),
        1 => any::<u64>().prop_map(|v| v.to_string()),
    ]
}

/// A MASIM text built from its grammar: regions, then phases of patterns, with names,
/// sizes, durations, strides and weights drawn from valid, edge and random values.
fn masim_text() -> impl Strategy<Value = String> {
    let names = &["a", "b", "hot", "cold", "a a", ""];
    let region = (
        prop::sample::select(names),
        token(&["4096", "1GiB", "64MiB", "2MiB", "1PiB", "64PiB", "1.5KiB"]),
    )
        .prop_map(|(n, s)| format!("{n}, {s}"));
    let pattern = (
        prop::sample::select(names),
        token(&["0", "1", "random", "sequential", "2"]),
        token(&["4096", "0", "8", "1GiB"]),
        token(&["1", "0", "50"]),
        prop::sample::select(&["", ", ro", ", wo", ", rw", ", rx", ", ro, x"][..]),
    )
        .prop_map(|(r, k, s, w, m)| format!("{r}, {k}, {s}, {w}{m}"));
    let phase = (
        prop::sample::select(&["p", "phase one", "#x"][..]),
        token(&["10", "1000", "2592000000", "2592000001", "0"]),
        prop::collection::vec(pattern, 0..4),
    )
        .prop_map(|(n, d, ps)| format!("{n}\n{d}\n{}", ps.join("\n")));
    (
        prop::collection::vec(region, 0..5),
        prop::collection::vec(phase, 0..4),
        prop::sample::select(&["\n\n", "\n", "\n\n\n", "\r\n\r\n"][..]),
    )
        .prop_map(|(rs, ps, sep)| {
            let mut t = rs.join("\n");
            for p in ps {
                t.push_str(sep);
                t.push_str(&p);
            }
            t
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn masim_grammar(text in masim_text()) {
        check_masim(&text);
    }

    #[test]
    fn masim_mutations(pick in any::<prop::sample::Index>(), ops in ops()) {
        let text = mutate(pick.get::<String>(shipped_masim()), &ops);
        check_masim(&text);
    }

    #[test]
    fn quantities(text in prop_oneof![
        prop::sample::select(EDGE_VALUES).prop_map(|s| s.trim_matches('"').to_string()),
        "[0-9_.]{0,30}[a-zA-Z/µ]{0,4}",
        ".{0,12}",
    ]) {
        for r in [parse_size(&text), parse_duration(&text), parse_rate(&text)] {
            if let Err(e) = r {
                prop_assert!(!e.0.is_empty() && !e.0.contains('\n'));
            }
        }
    }

    #[test]
    fn lackey_lines(lines in prop::collection::vec(prop_oneof![
        (prop::sample::select(&[" L ", " S ", " M ", "I  ", " X ", "\u{e9} ", "L", " L"][..]),
         prop_oneof!["[0-9a-f]{1,16}", "[0-9a-zA-Z]{0,20}"],
         prop::sample::select(&[",8", ",1", ",", ",x", ",99999999999", ""][..]))
            .prop_map(|(k, a, s)| format!("{k}{a}{s}")),
        "# phase [a-z ]{0,8}".prop_map(|s| s.to_string()),
        prop::sample::select(&["==1== x", "--1-- y", "", "#", "   "][..]).prop_map(str::to_string),
        ".{0,20}",
    ], 0..30), instructions in any::<bool>()) {
        let text = lines.join("\n");
        match Trace::read_lackey(text.as_bytes(), "t", LackeyOptions { instructions }) {
            Err(e) => one_line(&e),
            Ok(t) => {
                // What a trace workload derives from it: its spec, its placement.
                for rate in [1, 1_000_000, u64::MAX] {
                    let spec = t.spec(rate);
                    if spec.validate().is_ok() {
                        let starts: Vec<u64> =
                            (0..spec.regions.len() as u64).map(|i| i << 40).collect();
                        prop_assert_eq!(t.placed(&starts).len(), t.records.len());
                    }
                }
            }
        }
    }

    #[test]
    fn binary_traces(
        records in prop::collection::vec(any::<u64>(), 0..20),
        markers in prop::collection::vec((any::<u64>(), "[a-z]{0,5}"), 0..4),
        ops in prop::collection::vec((6u8..8, any::<u32>(), any::<u32>()), 0..4),
        header in prop::option::of((any::<u32>(), any::<u32>(), any::<u64>())),
    ) {
        let t = Trace { records, markers };
        let mut bytes = vec![];
        t.write_binary(&mut bytes).unwrap();
        if let Some((version, nmarkers, n)) = header {
            // A header of its own: any version, counts, record count.
            bytes = MAGIC.to_vec();
            bytes.extend(version.min(VERSION + 1).to_le_bytes());
            bytes.extend(nmarkers.to_le_bytes());
            bytes.extend(n.to_le_bytes());
            bytes.extend(&t.records.iter().flat_map(|r| r.to_le_bytes()).collect::<Vec<_>>());
        }
        for &(kind, a, b) in &ops {
            let at = a as usize % (bytes.len() + 1);
            match kind {
                6 if at < bytes.len() => bytes[at] = b as u8,
                _ => bytes.truncate(at),
            }
        }
        match Trace::read_binary(bytes.as_slice(), "t.bin") {
            Err(e) => one_line(&e),
            Ok(back) => {
                let _ = back.spec(1_000_000);
                let _ = back.page_stats(None);
            }
        }
    }
}
