//! Experiment files (TOML, or JSON from the Python API and sweeps): parsing, preset
//! expansion, validation. Every check names the field path; [`parse_experiment`] adds the
//! file and the line from the parser's positions ([`source_map`]).
//!
//! The document is first read into a JSON value whatever its format, so that one code path
//! ([`parse_document`]) validates files, dicts and the documents a sweep generates, and an
//! [`Experiment`] turns back into a document that parses to itself
//! ([`Experiment::to_document`]).

pub mod limits;
pub mod machine;
pub mod monitors;
pub mod neighbour;
pub mod source_map;
mod strict;
pub mod tiering;

pub use machine::{EngineKind, MachineConfig};
pub use monitors::MonitorEntry;
pub use neighbour::Neighbour;
pub use tiering::{PolicyEntry, Tiering};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use source_map::SourceMap;
use std::path::{Path, PathBuf};
use tierscope_core::units::{Duration, Rate, Size, NS_PER_S};
use tierscope_core::workload::{GupsSpec, KvSpec, PhaseSpec, RegionSpec, WorkloadSpec};
use tierscope_core::{CostModel, FieldError};
use tierscope_monitors::MonitorConfig;

/// An experiment that cannot be used: file, line where known, field, message.
pub type ConfigError = FieldError;

/// The `[workload]` table: a MASIM file or inline regions and phases, plus how fast the
/// workload runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    masim: Option<PathBuf>,
    regions: Option<Vec<RegionSpec>>,
    phases: Option<Vec<PhaseSpec>>,
    kv: Option<KvSpec>,
    gups: Option<GupsSpec>,
    /// A recorded memory trace replayed at `rate` (engine `exact`; docs/models/TRACES.md).
    trace: Option<TraceFile>,
    /// A real program and its arguments (engine `kvm`; docs/models/PROGRAMS.md).
    program: Option<Vec<String>>,
    /// The program's environment, `NAME=value` each (empty by default).
    env: Option<Vec<String>>,
    /// The program's memory window (image, heap, mmaps, stack); default 1 GiB.
    memory: Option<Size>,
    /// The program's working directory, its `/` (relative to this file's folder); default
    /// a fresh temporary directory removed after the run.
    workdir: Option<PathBuf>,
    /// Files the program may read: a path relative to this file's folder (the program
    /// sees it at that path), or `{ file = "...", name = "..." }`.
    inputs: Option<Vec<InputFile>>,
    /// Memory accesses per application operation (set by `kv`; throughput in operations
    /// per second divides by it).
    accesses_per_op: Option<f64>,
    #[serde(default = "default_rate")]
    rate: Rate,
    #[serde(default = "default_threads")]
    threads: u32,
}

/// `[workload] trace = {...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceFile {
    path: PathBuf,
    /// `lackey` (valgrind's `--trace-mem=yes` output) or `binary` (docs/models/TRACES.md).
    format: TraceFormat,
    /// Replay lackey's instruction fetches as loads too.
    #[serde(default)]
    instructions: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    Lackey,
    Binary,
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
    monitors: Vec<Map<String, Value>>,
    tiering: Option<Value>,
}

/// The workload an experiment runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub spec: WorkloadSpec,
    /// Accesses per simulated second, per thread.
    pub rate: u64,
    pub threads: u32,
    /// Memory accesses per application operation, when the workload has operations.
    pub accesses_per_op: Option<f64>,
    /// A real program instead of a synthetic workload (`spec` then holds one region, its
    /// memory window, and no phases).
    pub program: Option<Program>,
    /// A recorded trace replayed instead of patterns (`spec` then holds its placement and
    /// its marker phases).
    pub trace: Option<TraceWorkload>,
}

/// A trace an experiment replays on the exact engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceWorkload {
    pub path: PathBuf,
    pub format: TraceFormat,
    pub instructions: bool,
    #[serde(skip)]
    pub trace: std::sync::Arc<tierscope_core::workload::trace::Trace>,
}

/// An entry of `[workload] inputs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum InputFile {
    /// A path relative to the experiment's folder, seen by the program at that path.
    Path(String),
    /// A host file (relative to the experiment's folder, or absolute) and the path the
    /// program names it by.
    Named(NamedInput),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedInput {
    file: PathBuf,
    name: String,
}

/// A file a program may read (docs/models/PROGRAMS.md, confinement).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgramInput {
    /// The host file, resolved against the experiment file's folder.
    pub file: PathBuf,
    /// The path the program opens it by, relative to its root.
    pub name: String,
}

/// A real program an experiment runs on the kvm engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// The executable, resolved against the experiment file's folder.
    pub path: PathBuf,
    /// `argv`, `argv[0]` as written.
    pub args: Vec<String>,
    pub env: Vec<String>,
    pub memory: u64,
    /// The working directory (resolved), or `None` for a fresh temporary one.
    pub workdir: Option<PathBuf>,
    pub inputs: Vec<ProgramInput>,
}

/// Without a `duration`, a program runs until it exits or for this long.
const PROGRAM_DEFAULT_LIMIT_NS: u64 = 3600 * NS_PER_S;

/// A complete, validated experiment.
#[derive(Debug, Clone, PartialEq)]
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
    /// `paging_levels` resolved.
    pub machine: MachineConfig,
    pub cost: CostModel,
    pub workload: Workload,
    pub monitors: Vec<MonitorEntry>,
    /// Memory tiers and the policies acting on the monitors' telemetry.
    pub tiering: Option<Tiering>,
}

impl Experiment {
    /// The experiment as a document in the file format, every default filled in and
    /// presets expanded: it parses back to an equal experiment.
    pub fn to_document(&self) -> Value {
        let mut workload = match &self.workload.program {
            Some(p) => serde_json::json!({
                "program": p.args.iter().enumerate().map(|(i, a)| if i == 0 {
                    p.path.display().to_string()
                } else {
                    a.clone()
                }).collect::<Vec<_>>(),
                "env": p.env,
                "memory": Size(p.memory),
                "workdir": p.workdir,
                "inputs": p.inputs,
            }),
            None => match &self.workload.trace {
                Some(t) => serde_json::json!({ "trace": t }),
                None => serde_json::to_value(&self.workload.spec).expect("specs serialise"),
            },
        };
        workload["rate"] = Value::from(self.workload.rate);
        workload["threads"] = Value::from(self.workload.threads);
        if let Some(a) = self.workload.accesses_per_op {
            workload["accesses_per_op"] = Value::from(a);
        }
        let mut doc = serde_json::json!({
            "name": self.name,
            "seed": self.seed,
            "duration": Duration(self.duration_ns),
            "warmup": Duration(self.warmup_ns),
            "hot_threshold": self.hot_threshold,
            "truth_threshold": self.truth_threshold,
            "block_size": Size(self.block_size),
            "machine": self.machine,
            "cost": self.cost,
            "workload": workload,
            "monitors": self.monitors.iter().map(MonitorEntry::to_table).collect::<Vec<_>>(),
        });
        if let Some(t) = &self.tiering {
            doc["tiering"] = t.to_document();
        }
        doc
    }

    pub fn to_json(&self) -> String {
        self.to_document().to_string()
    }
}

/// The input format of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// Reads `text` into a document, with the map of where its fields are.
pub fn read_document(
    text: &str,
    source: &str,
    format: Format,
) -> Result<(Value, SourceMap), ConfigError> {
    let syntax = |line: Option<usize>, message: String| {
        FieldError::new("", message).in_file(source).at_line(line)
    };
    match format {
        Format::Toml => {
            let doc: Value = toml::from_str::<strict::Strict>(text)
                .map(|s| s.0)
                .map_err(|e| {
                    let line = e
                        .span()
                        .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
                    syntax(line, e.message().trim().replace('\n', " "))
                })?;
            Ok((doc, SourceMap::toml(text)))
        }
        Format::Json => {
            let doc: Value = serde_json::from_str::<strict::Strict>(text)
                .map(|s| s.0)
                .map_err(|e| {
                    let line = (e.line() > 0).then_some(e.line());
                    syntax(line, e.to_string())
                })?;
            Ok((doc, SourceMap::json(text)))
        }
    }
}

/// Parses and validates an experiment. `source` names it in errors; relative paths in it
/// (the MASIM file) are resolved against `base_dir`.
pub fn parse_experiment(
    text: &str,
    source: &str,
    base_dir: &Path,
    format: Format,
) -> Result<Experiment, ConfigError> {
    let (doc, map) = read_document(text, source, format)?;
    parse_document(doc, source, base_dir).map_err(|e| locate(e, source, &map))
}

/// Gives an error of `source` its file and line (errors that already name another file,
/// a MASIM config, keep theirs).
pub fn locate(e: FieldError, source: &str, map: &SourceMap) -> FieldError {
    if e.file.is_some() {
        return e;
    }
    let line = map.line(&e.field);
    e.in_file(source).at_line(line)
}

/// Validates a document in the file format (as read from a file, a dict or a sweep).
/// Errors name the field path; the file and line are the caller's to add ([`locate`]),
/// except for errors inside a MASIM file, which carry that file and line. `source` names
/// the experiment when the document has no `name`.
pub fn parse_document(doc: Value, source: &str, base_dir: &Path) -> Result<Experiment, FieldError> {
    let file: ExperimentFile = serde_path_to_error::deserialize(doc).map_err(FieldError::from)?;
    let mut machine = file.machine;
    if file.block_size.0 < 4096 || !file.block_size.0.is_power_of_two() {
        return Err(FieldError::new(
            "block_size",
            format!(
                "must be a power of two of at least 4KiB, got {} bytes",
                file.block_size.0
            ),
        ));
    }
    for (field, v) in [
        ("hot_threshold", file.hot_threshold),
        ("truth_threshold", file.truth_threshold),
    ] {
        if v == 0 {
            return Err(FieldError::new(field, "must be at least 1"));
        }
    }
    file.cost.validate().map_err(|e| e.under("cost"))?;

    let w = file.workload;
    let program = program(&w, base_dir, machine.engine)?;
    let trace = trace(&w, base_dir, machine.engine)?;
    let generators = w.kv.is_some() as u8
        + w.gups.is_some() as u8
        + program.is_some() as u8
        + trace.is_some() as u8;
    let mut accesses_per_op = w.accesses_per_op;
    let spec = match (&w.masim, &w.regions, &w.phases) {
        (None, None, None) if program.is_some() && generators == 1 => WorkloadSpec {
            regions: vec![RegionSpec {
                name: "program".into(),
                size: Size(program.as_ref().expect("a program").memory),
            }],
            phases: vec![],
        },
        (None, None, None) if trace.is_some() && generators == 1 => {
            trace.as_ref().expect("a trace").trace.spec(w.rate.0)
        }
        (None, None, None) if generators == 1 => {
            if let Some(kv) = &w.kv {
                kv.validate().map_err(|e| e.under("workload.kv"))?;
                let per_op = *accesses_per_op.get_or_insert(kv.accesses_per_op());
                // Inserts per second fix how many keys a run adds (rate and threads are
                // range-checked below; zero gives the one-key minimum per step).
                kv.to_spec(w.rate.0 as f64 * f64::from(w.threads) / per_op)
            } else {
                let g = w.gups.as_ref().expect("one generator");
                g.validate().map_err(|e| e.under("workload.gups"))?;
                // One update loads and stores its word.
                accesses_per_op = accesses_per_op.or(Some(2.0));
                g.to_spec()
            }
        }
        (Some(path), None, None) if generators == 0 => {
            let path = if path.is_absolute() {
                path.clone()
            } else {
                base_dir.join(path)
            };
            WorkloadSpec::from_masim_file(&path)?
        }
        (None, Some(regions), Some(phases)) if generators == 0 => WorkloadSpec {
            regions: regions.clone(),
            phases: phases.clone(),
        },
        _ => {
            return Err(FieldError::new(
                "workload",
                "give one of `masim = \"FILE\"`, both `regions` and `phases`, `kv = {...}`, \
                 `gups = {...}`, `trace = {...}` or `program = [\"PATH\", ARGS...]`",
            ))
        }
    };
    if program.is_none() {
        spec.validate().map_err(|e| e.under("workload"))?;
        machine
            .engine
            .check_workload(&spec)
            .map_err(|e| e.under("workload"))?;
    }
    machine.resolve(&spec).map_err(|e| e.under("machine"))?;
    limits::check_exact_memory(
        &machine,
        &spec,
        file.block_size.0,
        trace.as_ref().map_or(0, |t| t.trace.records.len() as u64),
    )?;
    if w.rate.0 == 0 {
        return Err(FieldError::new("workload.rate", "must be positive"));
    }
    if accesses_per_op.is_some_and(|a| !(a.is_finite() && a >= 1.0)) {
        return Err(FieldError::new(
            "workload.accesses_per_op",
            "must be at least 1",
        ));
    }
    if w.threads == 0 || w.threads > 64 {
        return Err(FieldError::new(
            "workload.threads",
            format!("expected 1 to 64, got {}", w.threads),
        ));
    }

    if file.monitors.is_empty() {
        return Err(FieldError::new(
            "monitors",
            "at least one monitor is needed",
        ));
    }
    let mut entries: Vec<MonitorEntry> = vec![];
    for (i, table) in file.monitors.iter().enumerate() {
        let at = format!("monitors[{i}]");
        let entry = monitors::expand(table).map_err(|e| e.under(&at))?;
        monitors::check_engine(&entry.config, table, machine.engine).map_err(|e| e.under(&at))?;
        if entries.iter().any(|m| m.name == entry.name) {
            return Err(FieldError::new(
                format!("{at}.name"),
                format!("`{}` is used twice (names must be unique)", entry.name),
            ));
        }
        let covered = match &entry.config {
            MonitorConfig::Nemo(c) => Some((u64::from(c.entries) << 21, 2u64 << 20, c.entries)),
            MonitorConfig::NemoRule(c) => Some((c.covered(), c.region.0, c.entries)),
            _ => None,
        };
        if let Some((covered, region, table)) = covered {
            // Keys are physical region numbers indexing the translation table
            // directly, so the table bounds the memory a pipeline can see; rotating
            // address windows through the filter is not modelled.
            let sim = machine.sim();
            let heap = tierscope_sim::layout::lay_out(&spec, sim.paging, sim.page_size)
                .map_err(|m| FieldError::new("workload", m))?
                .heap;
            if heap.len() > covered {
                return Err(FieldError::new(
                    format!("{at}.entries"),
                    format!(
                        "{table} translation entries cover {} MiB of {} KiB regions, and the \
                         heap is {} MiB: set entries to {} or more (keys index the table \
                         directly)",
                        covered >> 20,
                        region >> 10,
                        heap.len() >> 20,
                        heap.len().div_ceil(region).next_power_of_two()
                    ),
                ));
            }
        }
        if let (MonitorConfig::NemoRule(c), EngineKind::Stat) = (&entry.config, machine.engine) {
            let spec = c.spec().map_err(|e| e.under(&at))?;
            tierscope_sim::stat::nemo::check_supported(&spec).map_err(|mut e| {
                if e.field == "update.op" {
                    e.field = "op".into();
                }
                e.under(&at)
            })?;
        }
        entries.push(entry);
    }

    let duration_ns = file.duration.map(|d| d.0).unwrap_or(if program.is_some() {
        PROGRAM_DEFAULT_LIMIT_NS
    } else {
        spec.phases_duration()
    });
    let tiering = match file.tiering {
        Some(v) => {
            let sim = machine.sim();
            let heap = tierscope_sim::layout::lay_out(&spec, sim.paging, sim.page_size)
                .map_err(|m| FieldError::new("workload", m))?
                .heap;
            Some(
                tiering::parse(
                    v,
                    machine.engine,
                    heap.len(),
                    &entries,
                    duration_ns,
                    base_dir,
                )
                .map_err(|e| e.under("tiering"))?,
            )
        }
        None => None,
    };

    if let Some((nb, _)) = tiering.as_ref().and_then(|t| t.neighbour.as_ref()) {
        // The neighbour runs an exact engine of its own too.
        limits::check_exact_memory(&machine, &nb.spec(), file.block_size.0, 0).map_err(|e| {
            FieldError::new(
                "tiering.neighbour.size",
                format!("the neighbour's {}", e.message),
            )
        })?;
    }
    if duration_ns == 0 {
        return Err(FieldError::new("duration", "must be positive"));
    }
    limits::check_times(duration_ns, file.warmup.0, w.rate.0)?;
    if let Some(t) = &tiering {
        limits::check_policy_windows(duration_ns, t.window_ns)?;
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
        machine,
        cost: file.cost,
        workload: Workload {
            spec,
            rate: w.rate.0,
            threads: w.threads,
            accesses_per_op,
            program,
            trace,
        },
        monitors: entries,
        tiering,
    })
}

#[cfg(test)]
mod tests;

/// The `program` of `[workload]`, checked: engine kvm, an existing file, a window size.
fn program(
    w: &WorkloadFile,
    base_dir: &Path,
    engine: EngineKind,
) -> Result<Option<Program>, FieldError> {
    let Some(argv) = &w.program else {
        let given = [
            ("workload.env", w.env.is_some()),
            ("workload.memory", w.memory.is_some()),
            ("workload.workdir", w.workdir.is_some()),
            ("workload.inputs", w.inputs.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(_, set)| *set) {
            return Err(FieldError::new(*field, "only with `program = [...]`"));
        }
        return Ok(None);
    };
    let Some(first) = argv.first() else {
        return Err(FieldError::new(
            "workload.program",
            "expected [\"PATH\", ARGS...], got an empty list",
        ));
    };
    if engine != EngineKind::Kvm {
        return Err(FieldError::new(
            "workload.program",
            "a real program runs on engine = \"kvm\" only (for the exact engine, record a trace)",
        ));
    }
    let path = Path::new(first);
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base_dir.join(path)
    };
    if !path.is_file() {
        return Err(FieldError::new(
            "workload.program",
            format!("{} is not a file", path.display()),
        ));
    }
    let memory = w.memory.map_or(1 << 30, |m| m.0);
    if !(16 << 20..=1 << 40).contains(&memory) {
        return Err(FieldError::new(
            "workload.memory",
            format!("expected 16MiB to 1TiB, got {memory} bytes"),
        ));
    }
    // The window is backed lazily, but a program may touch all of it: no more than the
    // host could give.
    if let Some(avail) = tierscope_core::limits::host_available_memory() {
        let usable = tierscope_core::limits::usable_memory(avail);
        if memory > usable {
            return Err(FieldError::new(
                "workload.memory",
                format!(
                    "{} is more than this host can give a program ({}: 3/4 of its available \
                     memory)",
                    tierscope_core::limits::human_bytes(memory),
                    tierscope_core::limits::human_bytes(usable)
                ),
            ));
        }
    }
    let env = w.env.clone().unwrap_or_default();
    if let Some(bad) = env.iter().find(|e| !e.contains('=')) {
        return Err(FieldError::new(
            "workload.env",
            format!("expected NAME=value, got `{bad}`"),
        ));
    }
    let workdir = match &w.workdir {
        None => None,
        Some(d) => {
            let d = base_dir.join(d);
            if !d.is_dir() {
                return Err(FieldError::new(
                    "workload.workdir",
                    format!("{} is not a directory", d.display()),
                ));
            }
            Some(d)
        }
    };
    let inputs = w
        .inputs
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, input)| program_input(input, base_dir).map_err(|e| e.under(&format!("[{i}]"))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.under("workload.inputs"))?;
    Ok(Some(Program {
        path,
        args: argv.clone(),
        env,
        memory,
        workdir,
        inputs,
    }))
}

/// One entry of `inputs`: an existing file, named by a path that stays inside the
/// program's root.
fn program_input(input: &InputFile, base_dir: &Path) -> Result<ProgramInput, FieldError> {
    let (file, name) = match input {
        InputFile::Path(p) => {
            let outside = Path::new(p).is_absolute()
                || Path::new(p).components().any(|c| c.as_os_str() == "..");
            if outside {
                return Err(FieldError::new(
                    "",
                    format!(
                        "`{p}`: a path inside this file's folder (for another file, write \
                         {{ file = \"{p}\", name = \"NAME\" }})"
                    ),
                ));
            }
            (base_dir.join(p), p.clone())
        }
        InputFile::Named(n) => (base_dir.join(&n.file), n.name.clone()),
    };
    let names_nothing = name
        .split('/')
        .all(|c| c.is_empty() || c == "." || c == "..");
    if names_nothing || name.contains('\0') {
        return Err(FieldError::new("name", format!("`{name}` names no file")));
    }
    if !file.is_file() {
        return Err(FieldError::new(
            "",
            format!("{} is not a file", file.display()),
        ));
    }
    Ok(ProgramInput { file, name })
}

/// The `trace` of `[workload]`, read: engine exact, a readable trace file.
fn trace(
    w: &WorkloadFile,
    base_dir: &Path,
    engine: EngineKind,
) -> Result<Option<TraceWorkload>, FieldError> {
    use tierscope_core::workload::trace::{LackeyOptions, Trace};
    let Some(t) = &w.trace else {
        return Ok(None);
    };
    if engine != EngineKind::Exact {
        return Err(FieldError::new(
            "workload.trace",
            "a trace replays on engine = \"exact\" only",
        ));
    }
    if w.threads != 1 {
        return Err(FieldError::new(
            "workload.threads",
            "a trace replays as one thread",
        ));
    }
    let path = if t.path.is_absolute() {
        t.path.clone()
    } else {
        base_dir.join(&t.path)
    };
    let shown = path.display().to_string();
    if let Err(e) = std::fs::metadata(&path) {
        return Err(FieldError::new(
            "workload.trace.path",
            format!("{shown}: {e}"),
        ));
    }
    // At most MAX_TRACE_FILE bytes and MAX_TRACE_ACCESSES accesses (docs/reference/EXPERIMENTS.md).
    let trace = match t.format {
        TraceFormat::Lackey => Trace::read_lackey_file(
            &path,
            &shown,
            LackeyOptions {
                instructions: t.instructions,
            },
        )?,
        TraceFormat::Binary => Trace::read_binary_file(&path, &shown)?,
    };
    Ok(Some(TraceWorkload {
        path,
        format: t.format,
        instructions: t.instructions,
        trace: std::sync::Arc::new(trace),
    }))
}
