//! Experiment files (TOML, or JSON from the Python API): parsing, preset expansion,
//! validation. Errors carry the file, the line where known, and the field.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use tierscope_core::units::{Duration, Rate, Size, NS_PER_S};
use tierscope_core::workload::{Density, PhaseSpec, RegionSpec, WorkloadSpec};
use tierscope_core::CostModel;
use tierscope_monitors::config::MonitorConfig;
use tierscope_sim::config::MachineConfig;

/// An experiment file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The `[workload]` table: a MASIM file or inline regions and phases, plus how fast the
/// workload runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    masim: Option<PathBuf>,
    regions: Option<Vec<RegionSpec>>,
    phases: Option<Vec<PhaseSpec>>,
    #[serde(default = "default_rate")]
    rate: Rate,
    #[serde(default = "default_threads")]
    threads: u32,
}

fn default_rate() -> Rate {
    Rate(10_000_000)
}
fn default_threads() -> u32 {
    1
}
fn default_seed() -> u64 {
    1
}
fn default_warmup() -> Duration {
    Duration(NS_PER_S)
}
fn default_one() -> u32 {
    1
}
fn default_block() -> Size {
    Size(2 << 20)
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: Option<String>,
    #[serde(default = "default_seed")]
    seed: u64,
    duration: Option<Duration>,
    #[serde(default = "default_warmup")]
    warmup: Duration,
    #[serde(default = "default_one")]
    hot_threshold: u32,
    #[serde(default = "default_one")]
    truth_threshold: u32,
    #[serde(default = "default_block")]
    block_size: Size,
    #[serde(default)]
    machine: MachineConfig,
    #[serde(default)]
    cost: CostModel,
    workload: WorkloadFile,
    monitors: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// The workload an experiment runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub spec: WorkloadSpec,
    /// Accesses per simulated second, per thread.
    pub rate: u64,
    pub threads: u32,
    /// Where the spec came from: a MASIM file path, or "inline".
    pub source: String,
}

/// One monitor of an experiment, presets expanded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorEntry {
    pub name: String,
    pub config: MonitorConfig,
}

/// A complete, validated experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    pub name: String,
    pub seed: u64,
    /// Simulated nanoseconds the run lasts.
    pub duration_ns: u64,
    /// Windows ending before this are excluded from the means.
    pub warmup_ns: u64,
    /// A region with `nr_accesses >= hot_threshold` is reported hot.
    pub hot_threshold: u32,
    /// A block with at least this many accesses in a window is truly hot.
    pub truth_threshold: u32,
    /// Granularity of precision and recall, bytes.
    pub block_size: u64,
    pub machine: MachineConfig,
    pub cost: CostModel,
    pub workload: Workload,
    pub monitors: Vec<MonitorEntry>,
}

impl Experiment {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("experiments serialise")
    }
}

/// The input format of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The 1-based line of the `index`-th `[[monitors]]` header, for errors about a monitor.
fn monitor_line(text: &str, index: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[monitors]]"))
        .nth(index)
        .map(|(i, _)| i + 1)
}

/// The 1-based line where a top-level table (e.g. `[workload]`) starts.
fn table_line(text: &str, table: &str) -> Option<usize> {
    let header = format!("[{table}]");
    text.lines()
        .position(|l| l.trim_start().starts_with(&header))
        .map(|i| i + 1)
}

/// Parses and validates an experiment. `source` names it in errors; relative paths in it
/// (the MASIM file) are resolved against `base_dir`.
pub fn parse_experiment(
    text: &str,
    source: &str,
    base_dir: &Path,
    format: Format,
) -> Result<Experiment, ConfigError> {
    let err = |line: Option<usize>, message: String| ConfigError {
        file: source.to_string(),
        line,
        message,
    };
    let file: ExperimentFile = match format {
        Format::Toml => toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of_offset(text, s.start));
            err(line, e.message().trim().replace('\n', " "))
        })?,
        Format::Json => serde_json::from_str(text).map_err(|e| {
            let line = (e.line() > 0).then_some(e.line());
            err(line, e.to_string())
        })?,
    };
    let workload_line = table_line(text, "workload");

    file.machine
        .validate()
        .map_err(|m| err(table_line(text, "machine"), m))?;
    if file.block_size.0 < 4096 || !file.block_size.0.is_power_of_two() {
        return Err(err(
            None,
            format!(
                "block_size: must be a power of two of at least 4KiB, got {} bytes",
                file.block_size.0
            ),
        ));
    }
    if file.hot_threshold == 0 || file.truth_threshold == 0 {
        return Err(err(
            None,
            "hot_threshold and truth_threshold: must be at least 1".into(),
        ));
    }

    let w = file.workload;
    let (spec, source_name) = match (&w.masim, &w.regions, &w.phases) {
        (Some(path), None, None) => {
            let path = if path.is_absolute() {
                path.clone()
            } else {
                base_dir.join(path)
            };
            let spec = WorkloadSpec::from_masim_file(&path).map_err(|e| ConfigError {
                file: e.file.clone().unwrap_or_else(|| source.to_string()),
                line: e.line,
                message: format!("{}: {}", e.field, e.message),
            })?;
            (spec, path.display().to_string())
        }
        (None, Some(regions), Some(phases)) => (
            WorkloadSpec {
                regions: regions.clone(),
                phases: phases.clone(),
            },
            "inline".to_string(),
        ),
        _ => {
            return Err(err(
                workload_line,
                "workload: give either `masim = \"FILE\"` or both `regions` and `phases`".into(),
            ))
        }
    };
    spec.validate().map_err(|e| {
        err(
            workload_line,
            format!("workload.{}: {}", e.field, e.message),
        )
    })?;
    if file.machine.engine == tierscope_sim::config::EngineKind::Kvm {
        // The KVM guest's generator knows masim's uniform and sequential patterns only.
        for (p, phase) in spec.phases.iter().enumerate() {
            if let Some(i) = phase
                .patterns
                .iter()
                .position(|pat| pat.density != Density::Uniform)
            {
                return Err(err(
                    workload_line,
                    format!(
                        "workload.phases[{p}].patterns[{i}].kind: the kvm engine runs random \
                         (uniform) and sequential patterns only; use engine exact or stat"
                    ),
                ));
            }
        }
    }
    if w.rate.0 == 0 {
        return Err(err(workload_line, "workload.rate: must be positive".into()));
    }
    if w.threads == 0 || w.threads > 64 {
        return Err(err(
            workload_line,
            format!("workload.threads: expected 1 to 64, got {}", w.threads),
        ));
    }

    if file.monitors.is_empty() {
        return Err(err(None, "monitors: at least one monitor is needed".into()));
    }
    let mut monitors: Vec<MonitorEntry> = vec![];
    for (i, table) in file.monitors.iter().enumerate() {
        let line = monitor_line(text, i);
        let entry = expand_monitor(table).map_err(|m| err(line, format!("monitors[{i}]: {m}")))?;
        if monitors.iter().any(|m| m.name == entry.name) {
            return Err(err(
                line,
                format!(
                    "monitors[{i}].name: `{}` is used twice (names must be unique)",
                    entry.name
                ),
            ));
        }
        if matches!(entry.config, MonitorConfig::Pml(_))
            && file.machine.engine != tierscope_sim::config::EngineKind::Kvm
        {
            return Err(err(
                line,
                format!(
                    "monitors[{i}].type: `pml` reads KVM's dirty log and needs \
                     `engine = \"kvm\"` in [machine] (engine is `{}`)",
                    serde_json::to_value(file.machine.engine)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
            ));
        }
        monitors.push(entry);
    }

    let duration_ns = file.duration.map(|d| d.0).unwrap_or(spec.phases_duration());
    if duration_ns == 0 {
        return Err(err(None, "duration: must be positive".into()));
    }
    Ok(Experiment {
        name: file.name.unwrap_or_else(|| {
            Path::new(source)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "experiment".into())
        }),
        seed: file.seed,
        duration_ns,
        warmup_ns: file.warmup.0,
        hot_threshold: file.hot_threshold,
        truth_threshold: file.truth_threshold,
        block_size: file.block_size.0,
        machine: file.machine,
        cost: file.cost,
        workload: Workload {
            spec,
            rate: w.rate.0,
            threads: w.threads,
            source: source_name,
        },
        monitors,
    })
}

/// Turns one `[[monitors]]` table into a monitor: `preset` (optional) gives the starting
/// configuration, `type` and the other keys set or override fields, `name` defaults to the
/// preset or the type.
fn expand_monitor(
    table: &serde_json::Map<String, serde_json::Value>,
) -> Result<MonitorEntry, String> {
    let mut table = table.clone();
    let name = match table.remove("name") {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s),
        Some(other) => return Err(format!("name: expected a non-empty string, got {other}")),
        None => None,
    };
    let preset = match table.remove("preset") {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(other) => return Err(format!("preset: expected a string, got {other}")),
        None => None,
    };
    let mut merged = match &preset {
        Some(p) => {
            let config = MonitorConfig::preset(p).ok_or_else(|| {
                format!(
                    "preset: unknown preset `{p}` (expected one of {})",
                    MonitorConfig::PRESETS.join(", ")
                )
            })?;
            match serde_json::to_value(config).expect("configs serialise") {
                serde_json::Value::Object(m) => m,
                _ => unreachable!("monitor configs serialise to tables"),
            }
        }
        None => serde_json::Map::new(),
    };
    if let (Some(_), Some(t)) = (&preset, table.get("type")) {
        if merged.get("type") != Some(t) {
            return Err(format!(
                "type: {t} contradicts preset `{}`",
                preset.as_deref().unwrap_or_default()
            ));
        }
    }
    if preset.is_none() && !table.contains_key("type") {
        return Err(format!(
            "give `preset` (one of {}) or `type` (damon or telescope)",
            MonitorConfig::PRESETS.join(", ")
        ));
    }
    for (k, v) in table {
        merged.insert(k, v);
    }
    let config: MonitorConfig =
        serde_json::from_value(serde_json::Value::Object(merged)).map_err(|e| e.to_string())?;
    config.validate()?;
    let name = name.or(preset).unwrap_or_else(|| config.kind().to_string());
    Ok(MonitorEntry { name, config })
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn parses_and_expands_presets() {
        let e = parse(GOOD).unwrap();
        assert_eq!(e.duration_ns, 2 * NS_PER_S);
        assert_eq!(e.workload.rate, 1_000_000);
        assert_eq!(e.monitors[0].name, "damon-mod");
        assert_eq!(e.monitors[1].name, "flx");
        match &e.monitors[1].config {
            MonitorConfig::Telescope(t) => {
                assert_eq!(t.sample.0, 10_000_000);
                assert_eq!(t.variant, tierscope_monitors::config::Variant::Flex);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_line_and_field() {
        let bad = GOOD.replace("sample = \"10ms\"", "sampel = \"10ms\"");
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.line, Some(14));
        assert!(
            e.message.contains("monitors[1]") && e.message.contains("sampel"),
            "{e}"
        );

        let bad = GOOD.replace("seed = 3", "seed = \"three\"");
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");

        let bad = GOOD.replace("region = \"a\"", "region = \"b\"");
        let e = parse(&bad).unwrap_err();
        assert!(e.message.contains("unknown region `b`"), "{e}");
        assert_eq!(e.line, Some(6));

        let bad = GOOD.replace("\"damon-mod\"", "\"damon-fast\"");
        let e = parse(&bad).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("exp.toml:11: monitors[0]: preset"),
            "{e}"
        );
    }

    #[test]
    fn pml_and_machine_kvm_need_the_kvm_engine() {
        let pml = GOOD.replace("preset = \"damon-mod\"", "preset = \"pml\"");
        let e = parse(&pml).unwrap_err();
        assert_eq!(e.line, Some(11), "{e}");
        assert!(
            e.message.contains("pml") && e.message.contains("engine = \"kvm\""),
            "{e}"
        );
        let kvm = "[machine]\nengine = \"kvm\"\n[machine.kvm]\nprefault = false\n\n[workload]";
        let e = parse(&pml.replace("[workload]", kvm)).unwrap();
        assert!(!e.machine.kvm_options().prefault);
        assert!(e.machine.kvm_options().execute_flushes);
        assert_eq!(e.monitors[0].config.kind(), "pml");
        let exact = kvm.replace("\"kvm\"", "\"exact\"");
        let e = parse(&GOOD.replace("[workload]", &exact)).unwrap_err();
        assert!(e.message.contains("machine.kvm"), "{e}");
    }

    #[test]
    fn masim_errors_point_into_the_masim_file() {
        let dir = std::env::temp_dir().join(format!("tierscope-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("w.cfg"), "a, 4096\n\np\n10\na, 1, 4096, x\n").unwrap();
        let text = "[workload]\nmasim = \"w.cfg\"\n[[monitors]]\npreset = \"damon-mod\"\n";
        let e = parse_experiment(text, "exp.toml", &dir, Format::Toml).unwrap_err();
        assert!(e.file.ends_with("w.cfg"), "{e}");
        assert_eq!(e.line, Some(5));
        assert!(e.message.starts_with("probability"), "{e}");
    }

    #[test]
    fn density_kinds_parse_and_errors_name_the_field() {
        use tierscope_core::workload::PatternKind;
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
        // The normalized form of a random pattern has no density keys.
        assert!(
            e.to_json().contains(
                r#"{"region":"a","kind":"random","stride":"4KiB","weight":1,"mode":"wo"}"#
            ),
            "{}",
            e.to_json()
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

        // Structural errors come from parsing, with the pattern's line and the field.
        let e = parse(&with("{ region = \"a\", kind = \"hotspot\" }")).unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
        assert!(
            e.message
                .contains("hot_fraction: kind = \"hotspot\" needs it"),
            "{e}"
        );
        let e = parse(&with("{ region = \"a\", kind = \"zipf\", sigma = 0.1 }")).unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
        assert!(
            e.message
                .contains("sigma: not a parameter of kind = \"zipf\""),
            "{e}"
        );
        let e = parse(&with("{ region = \"a\", kind = \"random\", exponent = 2 }")).unwrap_err();
        assert!(e.message.contains("exponent: not a parameter"), "{e}");
        // Ranges from validation, with the pattern's path.
        let e = parse(&with(
            "{ region = \"a\", kind = \"hotspot\", hot_fraction = 1.5 }",
        ))
        .unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert!(
            e.to_string().starts_with(
                "exp.toml:6: workload.phases[0].patterns[0].hot_fraction: must be in (0, 1]"
            ),
            "{e}"
        );
        let e = parse(&with(
            "{ region = \"a\", kind = \"gaussian\", mean = -0.5 }",
        ))
        .unwrap_err();
        assert!(
            e.message.starts_with("workload.phases[0].patterns[0].mean"),
            "{e}"
        );
        // The KVM guest draws uniform offsets only.
        let kvm = with("{ region = \"a\", kind = \"zipf\" }")
            .replace("[workload]", "[machine]\nengine = \"kvm\"\n\n[workload]");
        let e = parse(&kvm).unwrap_err();
        assert!(
            e.message.contains("workload.phases[0].patterns[0].kind") && e.message.contains("kvm"),
            "{e}"
        );
    }
}
