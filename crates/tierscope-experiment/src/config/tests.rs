use super::*;

const GOOD: &str = r#"
name = "t"
seed = 3
duration = "2s"

[workload]
rate = "1M/s"
regions = [{ name = "a", size = "64MiB" }]
phases = [{ name = "p", duration = "1s", patterns = [{ region = "a", kind = "random", mode = "ro" }] }]

[[monitors]]
preset = "damon-mod"

[[monitors]]
preset = "telescope-flx"
name = "flx"
sample = "10ms"
"#;

fn parse(text: &str) -> Result<Experiment, ConfigError> {
    parse_experiment(text, "exp.toml", Path::new("."), Format::Toml)
}

/// The TOML document as pretty JSON (one key per line).
fn to_json_text(toml_text: &str) -> String {
    let v: Value = toml::from_str(toml_text).unwrap();
    serde_json::to_string_pretty(&v).unwrap()
}

/// The 1-based line of the only line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "`{needle}` in\n{text}");
    lines[0]
}

#[test]
fn parses_and_expands_presets() {
    let e = parse(GOOD).unwrap();
    assert_eq!(e.duration_ns, 2 * NS_PER_S);
    assert_eq!(e.workload.rate, 1_000_000);
    assert_eq!(e.monitors[0].name, "damon-mod");
    assert_eq!(e.monitors[1].name, "flx");
    assert_eq!(e.machine.paging_levels, Some(4), "resolved");
    match &e.monitors[1].config {
        tierscope_monitors::MonitorConfig::Telescope(t) => {
            assert_eq!(t.sample.0, 10_000_000);
            assert_eq!(t.variant, tierscope_monitors::telescope::Variant::Flex);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn documents_round_trip() {
    let e = parse(GOOD).unwrap();
    let again = parse_document(e.to_document(), "other", Path::new(".")).unwrap();
    assert_eq!(again, e);
    // Every shipped experiment, whatever its engine and monitors.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut seen = 0;
    for sub in [
        "",
        "paper",
        "baselines",
        "split-hint",
        "tiering",
        "pruned-walk",
        "robustness",
        "fidelity",
    ] {
        for f in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = f.unwrap().path();
            if path.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.display().to_string();
            let e = parse_experiment(&text, &name, path.parent().unwrap(), Format::Toml)
                .unwrap_or_else(|err| panic!("{err}"));
            let json = e.to_json();
            let back = parse_experiment(&json, &name, Path::new("."), Format::Json).unwrap();
            assert_eq!(back, e, "{name}");
            seen += 1;
        }
    }
    assert!(seen > 20, "{seen} experiments");
}

#[test]
fn errors_name_file_line_and_field() {
    let bad = GOOD.replace("sample = \"10ms\"", "sampel = \"10ms\"");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.line, Some(line_of(&bad, "sampel")));
    assert!(e.message.contains("sampel"), "{e}");
    assert!(e.field.starts_with("monitors[1]"), "{e}");

    let bad = GOOD.replace("seed = 3", "seed = \"three\"");
    let e = parse(&bad).unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (Some(3), "seed"), "{e}");

    let bad = GOOD.replace("region = \"a\"", "region = \"b\"");
    let e = parse(&bad).unwrap_err();
    assert!(e.message.contains("unknown region `b`"), "{e}");
    assert_eq!(e.field, "workload.phases[0].patterns[0].region");
    assert_eq!(e.line, Some(line_of(&bad, "phases")));

    let bad = GOOD.replace("\"damon-mod\"", "\"damon-fast\"");
    let e = parse(&bad).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("exp.toml:12: monitors[0].preset: unknown preset `damon-fast`"),
        "{e}"
    );

    // A syntax error: the parser's own line.
    let e = parse("seed = 1\nname = \n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");

    // Range checks deep in a monitor name the monitor's field and its line.
    let bad = GOOD.replace("sample = \"10ms\"", "sample = \"10ms\"\nmin_nr_regions = 2");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.field, "monitors[1].min_nr_regions");
    assert_eq!(e.line, Some(line_of(&bad, "min_nr_regions")));
}

#[test]
fn json_errors_have_lines_too() {
    let text = to_json_text(GOOD).replace("\"10ms\"", "\"10 parsecs\"");
    let e = parse_experiment(&text, "exp.json", Path::new("."), Format::Json).unwrap_err();
    assert_eq!(e.field, "monitors[1].sample");
    assert_eq!(e.line, Some(line_of(&text, "parsecs")), "{e}");
}

/// Every combination of engine and monitor or option the engine cannot run is rejected
/// when parsed, naming the file, the line and the field, in TOML and in JSON alike.
#[test]
fn incompatible_combinations_are_rejected_with_file_line_and_field() {
    const BASE: &str = r#"
[machine]
engine = "ENGINE"
EXTRA_MACHINE

[workload]
regions = [{ name = "a", size = "SIZE" }]
phases = [
  { name = "p", duration = "1s", patterns = [
    { region = "a", PATTERN },
  ] },
]

[[monitors]]
MONITOR
"#;
    struct Case {
        engine: &'static str,
        machine: &'static str,
        size: &'static str,
        pattern: &'static str,
        monitor: &'static str,
        /// The key (unique in the document) at fault, and the field path.
        key: &'static str,
        field: &'static str,
        says: &'static str,
    }
    let uniform = "kind = \"random\"";
    let cases = [
        Case {
            engine: "kvm",
            machine: "",
            size: "64MiB",
            pattern: uniform,
            monitor: "preset = \"pebs-mod\"",
            key: "preset",
            field: "monitors[0].preset",
            says: "PMU",
        },
        Case {
            engine: "kvm",
            machine: "",
            size: "64MiB",
            pattern: uniform,
            monitor: "type = \"pebs\"",
            key: "\"pebs\"",
            field: "monitors[0].type",
            says: "engines with it: exact, stat",
        },
        Case {
            engine: "stat",
            machine: "",
            size: "64MiB",
            pattern: uniform,
            monitor: "type = \"pml\"",
            key: "\"pml\"",
            field: "monitors[0].type",
            says: "engines with it: exact, kvm",
        },
        Case {
            engine: "exact",
            machine: "kvm = { prefault = false }",
            size: "64MiB",
            pattern: uniform,
            monitor: "preset = \"damon-mod\"",
            key: "kvm",
            field: "machine.kvm",
            says: "only for engine = \"kvm\"",
        },
        Case {
            engine: "kvm",
            machine: "paging_levels = 5",
            size: "64MiB",
            pattern: uniform,
            monitor: "preset = \"damon-mod\"",
            key: "paging_levels",
            field: "machine.paging_levels",
            says: "4-level",
        },
        Case {
            engine: "kvm",
            machine: "",
            size: "64MiB",
            pattern: "kind = \"zipf\"",
            monitor: "preset = \"damon-mod\"",
            key: "zipf",
            field: "workload.phases[0].patterns[0].kind",
            says: "uniform",
        },
        Case {
            engine: "stat",
            machine: "paging_levels = 4",
            size: "1PiB",
            pattern: uniform,
            monitor: "preset = \"telescope-bnd\"",
            key: "paging_levels",
            field: "machine.paging_levels",
            says: "use 5",
        },
        Case {
            engine: "exact",
            machine: "kvm = { batch = 0 }",
            size: "64MiB",
            pattern: uniform,
            monitor: "preset = \"damon-mod\"",
            key: "kvm",
            field: "machine.kvm",
            says: "only for engine",
        },
    ];
    for c in &cases {
        let toml_text = BASE
            .replace("ENGINE", c.engine)
            .replace("EXTRA_MACHINE", c.machine)
            .replace("SIZE", c.size)
            .replace("PATTERN", c.pattern)
            .replace("MONITOR", c.monitor);
        let json_text = to_json_text(&toml_text);
        for (text, file, format) in [
            (&toml_text, "exp.toml", Format::Toml),
            (&json_text, "exp.json", Format::Json),
        ] {
            let e = parse_experiment(text, file, Path::new("."), format)
                .expect_err(&format!("{} / {}: accepted\n{text}", c.engine, c.field));
            assert_eq!(e.file.as_deref(), Some(file));
            assert_eq!(e.field, c.field, "{e}");
            assert_eq!(e.line, Some(line_of(text, c.key)), "{e}\n{text}");
            assert!(e.message.contains(c.says), "{e}");
        }
    }
}

#[test]
fn paging_levels_are_picked_for_the_heap() {
    // On the statistical engine: the exact one's page table for 1 PiB would not fit in
    // the host's memory (an_exact_engine_heap_past_the_hosts_memory_is_refused).
    let big = GOOD
        .replace("\"64MiB\"", "\"1PiB\"")
        .replace("[workload]", "[machine]\nengine = \"stat\"\n\n[workload]");
    assert_eq!(parse(&big).unwrap().machine.paging_levels, Some(5));
    let explicit = big.replace("[machine]", "[machine]\npaging_levels = 5");
    assert_eq!(parse(&explicit).unwrap().machine.paging_levels, Some(5));
    assert_eq!(parse(GOOD).unwrap().machine.paging_levels, Some(4));
}

#[test]
fn masim_errors_point_into_the_masim_file() {
    let dir = std::env::temp_dir().join(format!("tierscope-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w.cfg"), "a, 4096\n\np\n10\na, 1, 4096, x\n").unwrap();
    let text = "[workload]\nmasim = \"w.cfg\"\n[[monitors]]\npreset = \"damon-mod\"\n";
    let e = parse_experiment(text, "exp.toml", &dir, Format::Toml).unwrap_err();
    assert!(e.file.as_deref().unwrap().ends_with("w.cfg"), "{e}");
    assert_eq!(e.line, Some(5));
    assert_eq!(e.field, "probability", "{e}");
}

#[test]
fn density_kinds_parse_and_errors_name_the_field() {
    use tierscope_core::workload::{Density, PatternKind};
    let with = |pattern: &str| {
        GOOD.replace(
            "{ region = \"a\", kind = \"random\", mode = \"ro\" }",
            pattern,
        )
    };
    let e = parse(&with(
        "{ region = \"a\", kind = \"hotspot\", hot_fraction = 0.01 }",
    ))
    .unwrap();
    let p = &e.workload.spec.phases[0].patterns[0];
    assert_eq!(p.kind, PatternKind::Random);
    assert_eq!(p.density, Density::Hotspot { hot_fraction: 0.01 });
    let json = e.to_json();
    assert!(
        json.contains(r#""kind":"hotspot""#) && json.contains(r#""hot_fraction":0.01"#),
        "{json}"
    );
    let e = parse(&with("{ region = \"a\", kind = \"uniform\" }")).unwrap();
    assert_eq!(
        e.workload.spec.phases[0].patterns[0].density,
        Density::Uniform
    );
    let e = parse(&with(
        "{ region = \"a\", kind = \"gaussian\", sigma = 0.05 }",
    ))
    .unwrap();
    assert_eq!(
        e.workload.spec.phases[0].patterns[0].density,
        Density::Gaussian {
            mean: 0.5,
            sigma: 0.05
        }
    );
    let e = parse(&with("{ region = \"a\", kind = \"zipf\" }")).unwrap();
    assert_eq!(
        e.workload.spec.phases[0].patterns[0].density,
        Density::Zipf { exponent: 1.0 }
    );

    // Structural errors come from deserialising, with the pattern's path and line.
    let e = parse(&with("{ region = \"a\", kind = \"hotspot\" }")).unwrap_err();
    assert_eq!(e.line, Some(9), "{e}");
    assert_eq!(e.field, "workload.phases[0].patterns[0]", "{e}");
    assert!(
        e.message
            .contains("hot_fraction: kind = \"hotspot\" needs it"),
        "{e}"
    );
    let e = parse(&with("{ region = \"a\", kind = \"zipf\", sigma = 0.1 }")).unwrap_err();
    assert!(
        e.message
            .contains("sigma: not a parameter of kind = \"zipf\""),
        "{e}"
    );
    // Ranges from validation, with the pattern's path.
    let e = parse(&with(
        "{ region = \"a\", kind = \"hotspot\", hot_fraction = 1.5 }",
    ))
    .unwrap_err();
    assert!(
        e.to_string().starts_with(
            "exp.toml:9: workload.phases[0].patterns[0].hot_fraction: must be in (0, 1]"
        ),
        "{e}"
    );
}

const TIERED: &str = r#"
duration = "2s"
[workload]
regions = [{ name = "a", size = "64MiB" }]
phases = [{ name = "p", duration = "1s", patterns = [{ region = "a", kind = "random", mode = "ro" }] }]
[[monitors]]
preset = "damon-mod"
[[monitors]]
preset = "pml"
[machine]
engine = "kvm"
[tiering]
tiers = [{ preset = "dram", capacity = "20%" }, "cxl"]
policies = ["telescope-rule", "oracle", { type = "damos", monitors = ["damon-mod"], damo = "--damos_action migrate_hot 0" }]
"#;

#[test]
fn tiering_tables_parse_and_round_trip() {
    let text = TIERED
        .replace("[[monitors]]\npreset = \"pml\"\n", "")
        .replace("engine = \"kvm\"", "engine = \"stat\"");
    let e = parse(&text).unwrap();
    let t = e.tiering.as_ref().unwrap();
    assert_eq!(t.setup.tiers[0].capacity, (64 << 20) / 5 / 4096 * 4096);
    assert_eq!(
        t.setup.tiers[1].capacity,
        64 << 20,
        "the last tier holds the heap"
    );
    assert_eq!(t.setup.tiers[1].latency_ns, 380.0);
    let names: Vec<_> = t.policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["telescope-rule", "oracle", "damos"]);
    assert_eq!(t.policies[0].monitors, ["damon-mod"]);
    assert!(t.policies[1].monitors.is_empty());
    let again = parse_document(e.to_document(), "other", Path::new(".")).unwrap();
    assert_eq!(again, e);
}

#[test]
fn tier_curves_come_from_the_preset_a_table_or_the_formula() {
    let stat = TIERED
        .replace("[[monitors]]\npreset = \"pml\"\n", "")
        .replace("engine = \"kvm\"", "engine = \"stat\"");
    let tier0 = |fields: &str| {
        let text = stat.replace(
            "{ preset = \"dram\", capacity = \"20%\" }",
            &format!("{{ preset = \"dram\", capacity = \"20%\"{fields} }}"),
        );
        parse(&text).map(|e| e.tiering.unwrap().setup.tiers[0].clone())
    };
    let preset = tier0("").unwrap();
    assert_eq!(
        preset.curve,
        tierscope_core::tiers::MLC_SKYLAKE_CSIT.curve()
    );
    // 99 % of the bandwidth: the measured curve's top, not the formula's 11x.
    let top = preset.loaded_latency(0.99) / preset.latency_ns;
    assert!(top > 2.5 && top < 3.0, "{top}");
    let formula = tier0(", queueing = 0.2").unwrap();
    assert!(formula.curve.is_empty());
    assert!((formula.loaded_latency(0.5) - 1.2 * formula.latency_ns).abs() < 1e-9);
    let own = tier0(", curve = [[0.5, 2.0]]").unwrap();
    assert_eq!(own.loaded_latency(0.25), 1.5 * own.latency_ns);
    let err = tier0(", curve = [[0.5, 2.0], [0.9, 1.5]]").unwrap_err();
    assert_eq!(err.field, "tiering.tiers[0].curve", "{err}");
    assert!(err.message.contains("never fall"), "{err}");
}

#[test]
fn app_from_reads_a_measured_model_and_inline_fields_win() {
    let dir = std::env::temp_dir().join(format!("tierscope-app-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("apps")).unwrap();
    std::fs::write(
        dir.join("apps/m.toml"),
        "# measured\n[app]\ncompute_ns = 3.5\nmlp = 8\nline_bytes = 64\n",
    )
    .unwrap();
    let stat = TIERED
        .replace("[[monitors]]\npreset = \"pml\"\n", "")
        .replace("engine = \"kvm\"", "engine = \"stat\"");
    let with = |app: &str| {
        let text = format!("{stat}app = {app}\n");
        parse_experiment(&text, "exp.toml", &dir, Format::Toml)
    };
    let e = with(r#"{ from = "apps/m.toml", mlp = 4 }"#).unwrap();
    let app = e.tiering.unwrap().app;
    assert_eq!((app.compute_ns, app.mlp, app.line_bytes), (3.5, 4.0, 64.0));
    let e = with(r#"{ from = "apps/m.toml" }"#).unwrap();
    assert_eq!(e.tiering.unwrap().app.mlp, 8.0);
    let err = with(r#"{ from = "apps/none.toml" }"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tiering.app.from") && err.contains("none.toml"),
        "{err}"
    );
    std::fs::write(dir.join("apps/bad.toml"), "[app]\nmlp = 0.5\n").unwrap();
    let err = with(r#"{ from = "apps/bad.toml" }"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("mlp >= 1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_tiering_is_rejected_with_file_line_and_field() {
    // (replace this, with that), the unique key at fault, the field path, the message.
    const STAT: (&str, &str) = ("engine = \"kvm\"", "engine = \"stat\"");
    const NO_PML: (&str, &str) = ("[[monitors]]\npreset = \"pml\"\n", "");
    let (stat, no_pml) = (STAT, NO_PML);
    type Edits<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(Edits, &str, &str, &str)] = &[
        (&[no_pml], "[tiering]", "tiering", "no memory tiers"),
        // A DAMOS scheme that could never match: an age beyond the 2 s run.
        (
            &[
                stat,
                no_pml,
                ("migrate_hot 0\"", "migrate_hot 0 --damos_age 10s max\""),
            ],
            "policies",
            "tiering.policies[2].damo",
            "scheme 0 (--damos_age): a min age of 50 aggregation intervals of `damon-mod` (200ms each) is beyond the run (10 intervals)",
        ),
        (
            &[
                stat,
                no_pml,
                ("migrate_hot 0\"", "migrate_hot 0 --damos_access_rate 5% 1%\""),
            ],
            "policies",
            "tiering.policies[2].damo",
            "scheme 0 (--damos_access_rate): min 5% is above max 1%",
        ),
        (
            &[
                stat,
                no_pml,
                (
                    "\"telescope-rule\", \"oracle\"",
                    "\"hemem-ish\", \"oracle\"",
                ),
            ],
            "policies",
            "tiering.policies[0]",
            "not a policy",
        ),
        (
            &[
                stat,
                no_pml,
                ("\"cxl\"]", "{ preset = \"cxl\", capacity = \"1MB\" }]"),
            ],
            "tiers =",
            "tiering.tiers",
            "less than the workload's heap",
        ),
        (
            &[
                stat,
                no_pml,
                ("monitors = [\"damon-mod\"]", "monitors = [\"damon\"]"),
            ],
            "monitors = [\"damon\"]",
            "tiering.policies[2].monitors",
            "no monitor is called `damon`",
        ),
        (
            &[stat, no_pml, ("migrate_hot 0", "migrate_hot")],
            "damo =",
            "tiering.policies[2].damo",
            "needs the target node id",
        ),
        (
            &[stat, no_pml, ("migrate_hot 0", "migrate_hot 5")],
            "damo =",
            "tiering.policies[2].damo",
            "scheme 0 (--damos_action): node 5 does not exist",
        ),
        (
            &[stat, no_pml, ("type = \"damos\", monitors = [\"damon-mod\"], damo = \"--damos_action migrate_hot 0\"", "type = \"hemem\", monitors = [\"damon-mod\"]")],
            "monitors = [\"damon-mod\"]",
            "tiering.policies[2].monitors",
            "`hemem` acts on sampled accesses (one per sampling period), and `damon-mod` (a \
             damon monitor) emits access checks per region and window (presets that do: \
             pebs-mod",
        ),
        (
            &[stat, no_pml, ("type = \"damos\", monitors = [\"damon-mod\"], damo = \"--damos_action migrate_hot 0\"", "type = \"tpp\", monitors = [\"damon-mod\"]")],
            "monitors = [\"damon-mod\"]",
            "tiering.policies[2].monitors",
            "`tpp` acts on NUMA hint faults per window, and `damon-mod` (a damon monitor) \
             emits access checks per region and window (presets that do: numa-hint)",
        ),
        (
            &[stat, no_pml, ("type = \"damos\", monitors = [\"damon-mod\"], damo = \"--damos_action migrate_hot 0\"", "type = \"tpp\", demote_watermark = 1.5")],
            "demote_watermark",
            "tiering.policies[2].demote_watermark",
            "must be in [0, 1)",
        ),
        (
            &[stat, no_pml, ("preset = \"dram\"", "preset = \"hbm\"")],
            "\"hbm\"",
            "tiering.tiers[0].preset",
            "unknown tier `hbm`",
        ),
    ];
    for (edits, key, field, says) in cases {
        let mut text = TIERED.to_string();
        for (from, to) in *edits {
            assert!(text.contains(from), "{from}");
            text = text.replacen(from, to, 1);
        }
        let e = parse(&text).unwrap_err();
        assert_eq!(e.field, *field, "{e}");
        assert!(e.message.contains(says), "{e}");
        assert_eq!(e.file.as_deref(), Some("exp.toml"));
        // The line of the key at fault, or of its table.
        let want = line_of(&text, key);
        let got = e.line.expect("a line");
        assert!(
            got == want
                || text
                    .lines()
                    .nth(got - 1)
                    .unwrap()
                    .contains(field.rsplit('.').next().unwrap().split('[').next().unwrap()),
            "{field}: line {got}, key on {want}\n{text}"
        );
        let json = to_json_text(&text);
        let je = parse_experiment(&json, "exp.json", Path::new("."), Format::Json).unwrap_err();
        assert_eq!(je.field, *field);
        assert!(je.line.is_some(), "{je}");
    }
}

#[test]
fn nemo_tables_must_cover_the_heap() {
    let text = |entries: &str| {
        format!(
            r#"
[machine]
engine = "stat"
[workload]
regions = [{{ name = "a", size = "20GiB" }}]
phases = [{{ name = "p", duration = "1s", patterns = [{{ region = "a", kind = "random" }}] }}]
[[monitors]]
preset = "nemo-hotset"
{entries}
"#
        )
    };
    // 8192 entries of 2 MiB cover 16 GiB: a 20 GiB heap needs at least 10240 (the table
    // takes powers of two: 16384).
    let e = parse(&text("")).unwrap_err();
    assert_eq!(e.field, "monitors[0].entries", "{e}");
    assert!(e.message.contains("set entries to 16384 or more"), "{e}");
    // The key is missing: the error points at the monitor's table.
    assert_eq!(e.line, Some(line_of(&text(""), "[[monitors]]")));
    assert!(parse(&text("entries = 16384")).is_ok());
}

#[test]
fn an_llc_is_for_the_exact_engine_and_has_a_valid_shape() {
    let text = |engine: &str, llc: &str| {
        format!(
            r#"
[machine]
engine = "{engine}"
llc = {llc}
[workload]
regions = [{{ name = "a", size = "1GiB" }}]
phases = [{{ name = "p", duration = "1s", patterns = [{{ region = "a", kind = "random" }}] }}]
[[monitors]]
preset = "nemo-hotset"
"#
        )
    };
    let good = r#"{ size = "32MiB", ways = 16 }"#;
    let exp = parse(&text("exact", good)).unwrap();
    assert_eq!(exp.machine.sim().llc.unwrap().ways, 16);
    let e = parse(&text("stat", good)).unwrap_err();
    assert_eq!(e.field, "machine.llc", "{e}");
    let e = parse(&text("exact", r#"{ size = "3MiB", ways = 16 }"#)).unwrap_err();
    assert_eq!(e.field, "machine.llc.size", "{e}");
}

#[test]
fn host_threads_is_checked_and_left_out_of_documents_when_one() {
    let text = |machine: &str| {
        format!(
            r#"
[machine]
{machine}
[workload]
threads = 2
regions = [{{ name = "a", size = "1GiB" }}]
phases = [{{ name = "p", duration = "1s", patterns = [{{ region = "a", kind = "random" }}] }}]
[[monitors]]
preset = "damon-mod"
"#
        )
    };
    let exp = parse(&text("host_threads = 2")).unwrap();
    assert_eq!(exp.machine.sim().host_threads, 2);
    let again = parse_document(exp.to_document(), "other", Path::new(".")).unwrap();
    assert_eq!(again.machine.host_threads, 2);
    for bad in ["host_threads = 0", "host_threads = 65"] {
        let e = parse(&text(bad)).unwrap_err();
        assert_eq!(e.field, "machine.host_threads", "{e}");
        assert!(e.message.contains("expected 1 to 64"), "{e}");
    }
    let e = parse(&text("engine = \"stat\"\nhost_threads = 2")).unwrap_err();
    assert_eq!(e.field, "machine.host_threads", "{e}");
    // The default is not written out (documents and sweep ids stay as they were).
    let doc = parse(&text("")).unwrap().to_document();
    assert!(!format!("{doc:?}").contains("host_threads"));
}

/// Issue 28: inputs that were silently changed, or broke the run, are refused with the
/// file, the line and the field.
#[test]
fn silently_wrong_inputs_are_refused_with_their_line() {
    let with_density = |params: &str| {
        GOOD.replace(
            "kind = \"random\", mode = \"ro\"",
            &format!("kind = \"gaussian\", {params}"),
        )
    };
    // `sigma = nan` ran with the default sigma, `exponent = inf` with the default exponent
    // (a JSON value holds no nan: it became null, read as absent).
    for text in [
        with_density("sigma = nan"),
        GOOD.replace(
            "kind = \"random\", mode = \"ro\"",
            "kind = \"zipf\", exponent = inf",
        ),
        format!("{GOOD}\n[cost]\nclear = -inf\n"),
    ] {
        let e = parse(&text).unwrap_err();
        let line = text
            .lines()
            .position(|l| l.contains("nan") || l.contains("inf"))
            .unwrap()
            + 1;
        assert_eq!(
            (e.file.as_deref(), e.line),
            (Some("exp.toml"), Some(line)),
            "{e}"
        );
        assert!(e.message.contains("nan and inf are refused"), "{e}");
    }
    // Negative costs, and a zero clock (a traceback after the run wrote its outputs).
    for (cost, field) in [
        ("entry_read = -5", "cost.entry_read"),
        ("cpu_hz = 0", "cost.cpu_hz"),
        ("cpu_hz = -2.1e9", "cost.cpu_hz"),
    ] {
        let text = format!("{GOOD}\n[cost]\n{cost}\n");
        let e = parse(&text).unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert_eq!(e.line, Some(line_of(&text, cost)), "{e}");
    }
    // A key given twice in JSON: the last one won.
    let json = to_json_text(GOOD).replacen("\"seed\": 3,", "\"seed\": 3,\n  \"seed\": 4,", 1);
    let e = parse_experiment(&json, "exp.json", Path::new("."), Format::Json).unwrap_err();
    assert_eq!(e.line, Some(line_of(&json, "\"seed\": 4")), "{e}");
    assert!(e.message.contains("duplicate key `seed`"), "{e}");
    // Durations and rates past their limits.
    let e = parse(&GOOD.replace("duration = \"2s\"", "duration = \"721h\"")).unwrap_err();
    assert_eq!((e.field.as_str(), e.line), ("duration", Some(4)), "{e}");
    let e = parse(&GOOD.replace("rate = \"1M/s\"", "rate = \"11G/s\"")).unwrap_err();
    assert_eq!(e.field, "workload.rate", "{e}");
    let e = parse(&GOOD.replace("duration = \"1s\"", "duration = \"18446744073709551615ms\""))
        .unwrap_err();
    assert_eq!(e.line, Some(line_of(GOOD, "phases")), "{e}");
    assert!(e.message.contains("out of range"), "{e}");
    assert!(parse(&GOOD.replace("duration = \"2s\"", "duration = \"720h\"")).is_ok());
}

/// Issue 28: an exact-engine heap larger than the host's memory aborted (two 8 PiB
/// regions, 256 TiB) or ran for minutes (64 TiB); it is refused when parsed.
#[test]
fn an_exact_engine_heap_past_the_hosts_memory_is_refused() {
    if tierscope_core::limits::host_available_memory().is_none() {
        return;
    }
    let text = GOOD
        .replace(
            "regions = [{ name = \"a\", size = \"64MiB\" }]",
            "regions = [{ name = \"a\", size = \"8PiB\" }, { name = \"b\", size = \"8PiB\" }]",
        )
        .replace("[workload]", "[machine]\npaging_levels = 5\n\n[workload]");
    let e = parse(&text).unwrap_err();
    assert_eq!(e.field, "workload", "{e}");
    assert_eq!(e.line, Some(line_of(&text, "[workload]")), "{e}");
    assert!(e.message.contains("MemAvailable"), "{e}");
    // The statistical engine runs it.
    assert!(
        parse(&text.replace("paging_levels = 5", "paging_levels = 5\nengine = \"stat\"")).is_ok()
    );
}

/// Found by the experiment fuzz target (tests/fuzz.rs): `monitors = []` ran a policy on
/// no monitor while its document, which leaves an empty list out, ran it on every one;
/// a name given twice ran it twice under one name.
#[test]
fn a_policys_monitors_are_a_non_empty_list_of_distinct_names() {
    let text = TIERED
        .replace("[[monitors]]\npreset = \"pml\"\n", "")
        .replace("engine = \"kvm\"", "engine = \"stat\"");
    for (list, says) in [
        ("[]", "the list is empty"),
        (
            "[\"damon-mod\", \"damon-mod\"]",
            "`damon-mod` is named twice",
        ),
    ] {
        let bad = text.replace("monitors = [\"damon-mod\"]", &format!("monitors = {list}"));
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.field, "tiering.policies[2].monitors", "{e}");
        assert_eq!(e.line, Some(line_of(&bad, "policies =")), "{e}");
        assert!(e.message.contains(says), "{e}");
    }
}
