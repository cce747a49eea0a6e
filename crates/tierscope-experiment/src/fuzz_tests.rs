//! Fuzz targets of the experiment crate's parsers (issue 28, item 5): experiment files in
//! TOML and in JSON, and sweep files. Inputs are mutations of every shipped experiment
//! and sweep (experiments/), and sweeps built from their grammar, for a bounded number
//! of cases. Every input must give an experiment (or runs) or an error of one line, never a
//! panic; an experiment that parses must turn back into a document that parses to an
//! equal experiment (docs/ARCHITECTURE.md, "Configs are the source of truth").

use crate::config::parse_document;
use crate::sweep::expand_sweep;
use crate::{parse_experiment, Format};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tierscope_core::fuzz::{mutate, EDGE_VALUES};
use tierscope_core::limits::{MAX_DURATION_NS, MAX_HEAP};
use tierscope_core::FieldError;

/// Cases per target in `cargo test` (about two seconds for the four, release);
/// `TIERSCOPE_FUZZ_CASES=N` runs N instead, for a longer search.
const CASES: u32 = 4000;

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

fn experiments_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

/// A shipped file: its directory (relative paths in it resolve there), name and text.
struct Shipped {
    dir: PathBuf,
    name: String,
    text: String,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

/// Shipped experiments (TOML) and sweeps: the sweeps are the files with `base` or
/// `bases` at the top level; application models are left out.
fn shipped() -> &'static (Vec<Shipped>, Vec<Shipped>) {
    static CORPUS: OnceLock<(Vec<Shipped>, Vec<Shipped>)> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut paths = vec![];
        walk(&experiments_dir(), &mut paths);
        paths.sort();
        let (mut exps, mut sweeps) = (vec![], vec![]);
        for p in paths {
            let text = std::fs::read_to_string(&p).unwrap();
            let s = Shipped {
                dir: p.parent().unwrap().to_path_buf(),
                name: p.display().to_string(),
                text,
            };
            let doc: toml::Table = toml::from_str(&s.text).unwrap();
            if doc.contains_key("base") || doc.contains_key("bases") {
                sweeps.push(s);
            } else if doc.contains_key("app") && !doc.contains_key("workload") {
                // A measured application model (experiments/tiering/apps/), read by
                // experiments through `app = { from = ... }`: not an experiment.
                continue;
            } else {
                exps.push(s);
            }
        }
        assert!(exps.len() > 20 && !sweeps.is_empty());
        (exps, sweeps)
    })
}

/// The shipped experiments as pretty JSON documents (one value per line).
fn shipped_json() -> &'static [Shipped] {
    static CORPUS: OnceLock<Vec<Shipped>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        shipped()
            .0
            .iter()
            .map(|s| {
                let e = parse_experiment(&s.text, &s.name, &s.dir, Format::Toml)
                    .unwrap_or_else(|e| panic!("{e}"));
                Shipped {
                    dir: s.dir.clone(),
                    name: format!("{}.json", s.name),
                    text: serde_json::to_string_pretty(&e.to_document()).unwrap(),
                }
            })
            .collect()
    })
}

fn one_line(e: &FieldError) {
    let s = e.to_string();
    assert!(!e.message.is_empty() && !s.contains('\n'), "{s:?}");
}

/// Parses `text`; an error is one line; an experiment round-trips through its document.
fn check_experiment(text: &str, s: &Shipped, format: Format) {
    match parse_experiment(text, &s.name, &s.dir, format) {
        Err(e) => one_line(&e),
        Ok(exp) => {
            // Sums in u128: a wrapped size or duration would pass a u64 check.
            let spec = &exp.workload.spec;
            let heap: u128 = spec.regions.iter().map(|r| u128::from(r.size.0)).sum();
            let pass: u128 = spec.phases.iter().map(|p| u128::from(p.duration.0)).sum();
            if exp.workload.program.is_none() {
                assert!(heap <= u128::from(MAX_HEAP), "heap {heap}:\n{text}");
            }
            assert!(
                pass <= u128::from(MAX_DURATION_NS),
                "phases {pass}:\n{text}"
            );
            assert!(exp.duration_ns <= MAX_DURATION_NS, "{text}");
            let doc = exp.to_document();
            let back = parse_document(doc.clone(), &s.name, &s.dir)
                .unwrap_or_else(|e| panic!("{e}\n{doc:#}\nfrom\n{text}"));
            if back != exp {
                let (a, b) = (format!("{exp:?}"), format!("{back:?}"));
                let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                let from = at.saturating_sub(200);
                panic!(
                    "round trip changed it at\n{}\nto\n{}\nfrom\n{text}",
                    &a[from..(at + 200).min(a.len())],
                    &b[from..(at + 200).min(b.len())]
                );
            }
        }
    }
}

fn ops() -> impl Strategy<Value = Vec<(u8, u32, u32)>> {
    prop::collection::vec(any::<(u8, u32, u32)>(), 1..6)
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(EDGE_VALUES).prop_map(str::to_string),
        prop::sample::select(
            &[
                "\"5ms\"",
                "\"10ms\"",
                "\"1M/s\"",
                "\"stat\"",
                "\"exact\"",
                "\"kvm\"",
                "\"2MiB\"",
                "1",
                "2",
                "[1, 2]",
                "[\"a\", \"b\"]",
                "[[\"exact\", \"4KiB\"], [\"stat\", \"2MiB\"]]",
                "{ from = 1, to = 3 }",
                "{ from = 0.1, to = 0.3, step = 0.1 }",
                "{ from = 1, to = 1e300 }",
                "{ from = 1, to = 3, step = 0 }",
            ][..]
        )
        .prop_map(str::to_string),
    ]
}

/// A sweep built from its grammar over an inline base: seeds, `set` entries and axes
/// (single, zipped or ranges) on paths that exist, overlap, or do not parse.
fn sweep_text() -> impl Strategy<Value = String> {
    let paths = &[
        "seed",
        "duration",
        "workload.rate",
        "workload.threads",
        "workload.regions",
        "workload.regions[0].size",
        "workload.regions[a].size",
        "monitors[damon-mod].sample",
        "monitors[0].sample",
        "monitors[1].sample",
        "monitors[nope].sample",
        "machine.engine",
        "machine.page_size",
        "cost.cpu_hz",
        "a..b",
        "[0]",
        "x[",
        "monitors[]",
        "",
    ];
    let axis = (
        prop::collection::vec(prop::sample::select(paths), 1..3),
        prop::collection::vec(value(), 0..4),
        prop::option::of(value()),
        prop::option::of("[a-z]{0,3}"),
    )
        .prop_map(|(ps, vs, range, name)| {
            let mut t = String::from("\n[[axes]]\n");
            if ps.len() == 1 {
                t.push_str(&format!("path = \"{}\"\n", ps[0]));
            } else {
                let q: Vec<String> = ps.iter().map(|p| format!("\"{p}\"")).collect();
                t.push_str(&format!("paths = [{}]\n", q.join(", ")));
            }
            if !vs.is_empty() {
                t.push_str(&format!("values = [{}]\n", vs.join(", ")));
            }
            if let Some(r) = range {
                t.push_str(&format!("range = {r}\n"));
            }
            if let Some(n) = name {
                t.push_str(&format!("name = \"{n}\"\n"));
            }
            t
        });
    (
        prop::option::of(value()),
        prop::collection::vec((prop::sample::select(paths), value()), 0..3),
        prop::collection::vec(axis, 0..4),
        any::<bool>(),
    )
        .prop_map(|(seeds, set, axes, prune)| {
            let mut t = String::new();
            if let Some(s) = seeds {
                t.push_str(&format!("seeds = {s}\n"));
            }
            t.push_str(&format!("prune = {prune}\n"));
            t.push_str(
                "[base]\nduration = \"200ms\"\n[base.machine]\nengine = \"stat\"\n\
                 [base.workload]\nrate = \"1M/s\"\n\
                 regions = [{ name = \"a\", size = \"64MiB\" }]\n\
                 phases = [{ name = \"p\", duration = \"100ms\", patterns = [{ region = \"a\", kind = \"random\" }] }]\n\
                 [[base.monitors]]\npreset = \"damon-mod\"\n[[base.monitors]]\npreset = \"telescope-bnd\"\n",
            );
            if !set.is_empty() {
                t.push_str("[set]\n");
                for (p, v) in set {
                    t.push_str(&format!("\"{p}\" = {v}\n"));
                }
            }
            for a in axes {
                t.push_str(&a);
            }
            t
        })
}

fn check_sweep(text: &str, dir: &Path, name: &str) {
    match expand_sweep(text, name, dir, Format::Toml) {
        Err(e) => one_line(&e),
        Ok(runs) => {
            let mut ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), runs.len(), "run ids are unique");
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn experiment_toml_mutations(pick in any::<prop::sample::Index>(), ops in ops()) {
        let s = pick.get(&shipped().0);
        check_experiment(&mutate(&s.text, &ops), s, Format::Toml);
    }

    #[test]
    fn experiment_json_mutations(pick in any::<prop::sample::Index>(), ops in ops()) {
        let s = pick.get(shipped_json());
        check_experiment(&mutate(&s.text, &ops), s, Format::Json);
    }

    #[test]
    fn sweep_mutations(pick in any::<prop::sample::Index>(), ops in ops()) {
        let s = pick.get(&shipped().1);
        check_sweep(&mutate(&s.text, &ops), &s.dir, &s.name);
    }

    #[test]
    fn sweep_grammar(text in sweep_text()) {
        check_sweep(&text, &experiments_dir(), "sweep.toml");
    }
}
