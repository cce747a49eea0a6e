//! Sweeps as data: a base experiment, fixed overrides, axes of values at config paths and
//! seeds, expanded into experiments with stable ids. Pure: no file is written and nothing
//! runs; executors (the CLI's repro and validate, later a process pool) take the list.
//!
//! ```toml
//! base = "experiments/default.toml"        # or an inline [base] table, or
//! # bases = { a = "a.toml", b = "b.toml" }  # named bases, in name order: the outermost axis
//! seeds = [1, 2, 3]                        # or { from = 1, to = 200 }
//! keep_monitors = ["telescope-bnd"]        # optional: only these monitors of the base
//! prune = false                            # drop what a run's engine cannot run
//! [set]                                    # fixed overrides, path = value
//! "workload.rate" = "5M/s"
//! [[axes]]
//! path = "monitors[telescope-bnd].sample"  # a list item by index or by name
//! values = ["5ms", "10ms"]
//! [[axes]]
//! paths = ["machine.engine", "machine.page_size"]   # zipped: one value per path
//! values = [["exact", "4KiB"], ["stat", "2MiB"]]
//! [[axes]]
//! path = "workload.threads"
//! range = { from = 1, to = 4 }              # numbers: from, to (inclusive), step
//! # labels = ["one", ...]                   # optional: names for values in ids
//! ```
//! Runs are the cartesian product of the axes (the first outermost), seeds innermost. A
//! run's id is `name=value` per axis and `seed=N`, joined by `,` (`"run"` with neither):
//! the same sweep always gives the same ids, whatever machine expands it.

use crate::config::{self, monitors, EngineKind, Experiment, Format};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tierscope_core::error::join_path;
use tierscope_core::limits::{read_text_limited, MAX_CONFIG_FILE, MAX_SWEEP_RUNS};
use tierscope_core::FieldError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    #[serde(default)]
    base: Option<Base>,
    /// Several bases by name, in name order (the outermost axis, `base`).
    #[serde(default)]
    bases: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    seeds: Option<Seeds>,
    #[serde(default)]
    keep_monitors: Option<Vec<String>>,
    #[serde(default)]
    prune: bool,
    #[serde(default)]
    set: Map<String, Value>,
    #[serde(default)]
    axes: Vec<AxisFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Base {
    File(PathBuf),
    Inline(Map<String, Value>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Seeds {
    List(Vec<u64>),
    Range { from: u64, to: u64 },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AxisFile {
    /// How the axis is named in run ids and result columns (default: the last segment of
    /// its path, or of each zipped path joined by `+`).
    name: Option<String>,
    path: Option<String>,
    paths: Option<Vec<String>>,
    #[serde(default)]
    values: Vec<Value>,
    /// One label per value, standing for it in run ids and parameters (for values too
    /// large to name a run, such as a whole list of regions).
    labels: Option<Vec<String>>,
    /// Numbers from `from` to `to` (inclusive) in steps of `step` (one path only).
    range: Option<RangeFile>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeFile {
    from: f64,
    to: f64,
    #[serde(default = "one")]
    step: f64,
}

fn one() -> f64 {
    1.0
}

/// The values of a range: integers when `from` and `step` are, else floats rounded to 12
/// decimals. The last value is `to` when a whole number of steps reaches it (within 1e-9
/// of a step).
fn range_values(r: RangeFile) -> Result<Vec<Value>, FieldError> {
    if !(r.step > 0.0 && r.step.is_finite() && r.from.is_finite() && r.to.is_finite()) {
        return Err(FieldError::new("range.step", "must be positive and finite"));
    }
    if r.to < r.from {
        return Err(FieldError::new(
            "range.to",
            format!("is below from ({} < {})", r.to, r.from),
        ));
    }
    let n = ((r.to - r.from) / r.step + 1e-9).floor() as u64 + 1;
    if n > 100_000 {
        return Err(FieldError::new(
            "range",
            format!("{n} values: more than 100000 steps"),
        ));
    }
    let ints = r.from.fract() == 0.0 && r.step.fract() == 0.0;
    Ok((0..n)
        .map(|i| {
            let x = r.from + i as f64 * r.step;
            if ints {
                Value::from(x as i64)
            } else {
                // Steps such as 0.1 accumulate binary rounding: keep 12 decimals.
                Value::from((x * 1e12).round() / 1e12)
            }
        })
        .collect())
}

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRun {
    /// Stable and unique within the sweep; safe as a directory name.
    pub id: String,
    /// The swept values, `(axis name, value)`, seed last when seeds are given.
    pub params: Vec<(String, Value)>,
    /// Monitors `prune` dropped from this run (the engine lacks their hardware).
    pub dropped: Vec<String>,
    pub experiment: Experiment,
}

/// Expands a sweep file. `source` names it in errors; a relative base path is resolved
/// against `base_dir`.
pub fn expand_sweep(
    text: &str,
    source: &str,
    base_dir: &Path,
    format: Format,
) -> Result<Vec<SweepRun>, FieldError> {
    expand_sweep_overridden(text, source, base_dir, format, &[])
}

/// Where command-line overrides are named in errors.
pub const OVERRIDE_SOURCE: &str = "command line";

/// As `expand_sweep`, with command-line overrides `(PATH, VALUE)` (`--set PATH=VALUE`)
/// applied to every run after the sweep's `set` and before its axes, each VALUE typed by
/// the config (`typed_value`). An axis or `seeds` setting what an override sets is
/// refused; an error in an overridden field names the override.
pub fn expand_sweep_overridden(
    text: &str,
    source: &str,
    base_dir: &Path,
    format: Format,
    overrides: &[(String, String)],
) -> Result<Vec<SweepRun>, FieldError> {
    let (doc, map) = config::read_document(text, source, format)?;
    let at_sweep = |e: FieldError| config::locate(e, source, &map);
    let sweep: SweepFile = serde_path_to_error::deserialize(doc)
        .map_err(FieldError::from)
        .map_err(at_sweep)?;
    // The base documents (one, or several by name), and where their own errors point.
    let bases: Vec<BaseDoc> = match (&sweep.base, &sweep.bases) {
        (Some(b), None) => vec![load_base(None, b, source, base_dir).map_err(at_sweep)?],
        (None, Some(named)) if !named.is_empty() => named
            .iter()
            .map(|(name, v)| {
                let b: Base = serde_json::from_value(v.clone()).map_err(|e| {
                    at_sweep(FieldError::new(format!("bases.{name}"), e.to_string()))
                })?;
                load_base(Some(name.clone()), &b, source, base_dir).map_err(|e| {
                    at_sweep(FieldError {
                        field: format!("bases.{name}"),
                        ..e
                    })
                })
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(at_sweep(FieldError::new(
                "base",
                "give `base` (one experiment) or `bases` (several, by name)",
            )))
        }
    };
    let axes = sweep
        .axes
        .iter()
        .enumerate()
        .map(|(i, a)| Axis::new(a).map_err(|e| at_sweep(e.under(&format!("axes[{i}]")))))
        .collect::<Result<Vec<_>, _>>()?;
    let seeds: Option<Vec<u64>> = match &sweep.seeds {
        None => None,
        Some(Seeds::List(v)) if v.is_empty() => {
            return Err(at_sweep(FieldError::new("seeds", "the list is empty")))
        }
        Some(Seeds::List(v)) => Some(v.clone()),
        Some(Seeds::Range { from, to }) if from > to => {
            return Err(at_sweep(FieldError::new(
                "seeds",
                format!("from ({from}) is after to ({to})"),
            )))
        }
        Some(Seeds::Range { from, to }) => {
            // Counted before any is made: 1..1e9 exhausted the host's memory.
            let n = (to - from).saturating_add(1);
            if n > MAX_SWEEP_RUNS as u64 {
                return Err(at_sweep(FieldError::new(
                    "seeds",
                    format!("{n} seeds: more than the limit of {MAX_SWEEP_RUNS} runs"),
                )));
            }
            Some((*from..=*to).collect())
        }
    };
    if seeds.as_ref().is_some_and(|s| s.len() > MAX_SWEEP_RUNS) {
        return Err(at_sweep(FieldError::new(
            "seeds",
            format!("more than the limit of {MAX_SWEEP_RUNS} seeds"),
        )));
    }
    // Runs counted before any is made, multiplied checked.
    let total = axes
        .iter()
        .map(|a| a.values.len())
        .chain([bases.len(), seeds.as_ref().map_or(1, Vec::len)])
        .try_fold(1usize, |n, k| n.checked_mul(k))
        .filter(|&n| n <= MAX_SWEEP_RUNS);
    if total.is_none() {
        return Err(at_sweep(FieldError::new(
            "axes",
            format!("the bases, axes and seeds make more than the limit of {MAX_SWEEP_RUNS} runs"),
        )));
    }

    let mut runs: Vec<SweepRun> = vec![];
    let mut ids: HashSet<String> = HashSet::new();
    let combos: usize = axes.iter().map(|a| a.values.len()).product();
    for b in &bases {
        let BaseDoc {
            name: base_name,
            doc: base,
            source: base_source,
            map: base_map,
            dir: base_dir,
        } = b;
        // The base's normalized document (every default filled in), to type overrides of
        // fields the base leaves out; none when the base does not parse by itself.
        let normalized = if overrides.is_empty() {
            None
        } else {
            config::parse_document(base.clone(), base_source, base_dir)
                .ok()
                .map(|e| e.to_document())
        };
        for combo in 0..combos {
            // Mixed radix, the first axis outermost.
            let mut rest = combo;
            let mut picks = vec![0; axes.len()];
            for (k, a) in axes.iter().enumerate().rev() {
                picks[k] = rest % a.values.len();
                rest /= a.values.len();
            }
            for seed in seeds
                .clone()
                .map_or(vec![None], |s| s.into_iter().map(Some).collect())
            {
                let mut doc = base.clone();
                let mut origin: Vec<(String, String)> = vec![];
                for (path, v) in &sweep.set {
                    let resolved = set_path(&mut doc, path, v.clone())
                        .map_err(|m| at_sweep(FieldError::new(join_path("set", path), m)))?;
                    origin.push((resolved, join_path("set", path)));
                }
                // Command-line overrides: (resolved path, as written).
                let mut overridden: Vec<(String, String)> = vec![];
                for (path, text) in overrides {
                    let value = typed_value(&doc, normalized.as_ref(), path, text);
                    let resolved = set_path(&mut doc, path, value).map_err(|m| {
                        FieldError::new(format!("--set {path}"), m).in_file(OVERRIDE_SOURCE)
                    })?;
                    overridden.push((resolved, format!("{path}={text}")));
                }
                let mut params = vec![];
                if let Some(n) = base_name {
                    params.push(("base".to_string(), Value::String(n.clone())));
                }
                // Where each axis wrote, to refuse two writing the same place.
                let mut swept: Vec<(String, usize, &str)> = vec![];
                for (k, a) in axes.iter().enumerate() {
                    let row = &a.values[picks[k]];
                    for (path, v) in a.paths.iter().zip(row) {
                        let resolved = set_path(&mut doc, path, v.clone()).map_err(|m| {
                            at_sweep(FieldError::new(
                                format!("axes[{k}].values[{}]", picks[k]),
                                m,
                            ))
                        })?;
                        if let Some((other, j, as_written)) =
                            swept.iter().find(|(p, _, _)| overlap(p, &resolved))
                        {
                            let which = if *j == k {
                                "this axis also sets".to_string()
                            } else {
                                format!("axes[{j}] also sets")
                            };
                            return Err(at_sweep(FieldError::new(
                                format!("axes[{k}]"),
                                format!(
                                    "`{path}` sets `{resolved}`, which {which} (`{as_written}`, \
                                     `{other}`): a run would use one value while its row names \
                                     both; sweep one path once"
                                ),
                            )));
                        }
                        if seed.is_some() && overlap("seed", &resolved) {
                            return Err(at_sweep(FieldError::new(
                                format!("axes[{k}]"),
                                format!(
                                    "`{path}` sets the seed, which `seeds` also sets: give \
                                     one of them"
                                ),
                            )));
                        }
                        if let Some((_, given)) =
                            overridden.iter().find(|(p, _)| overlap(p, &resolved))
                        {
                            return Err(at_sweep(FieldError::new(
                                format!("axes[{k}]"),
                                format!(
                                    "`{path}` is swept, and the command line sets it (--set \
                                     {given}): give one of them"
                                ),
                            )));
                        }
                        swept.push((resolved.clone(), k, path));
                        origin.push((resolved, format!("axes[{k}]")));
                    }
                    params.push((a.name.clone(), a.param(picks[k])));
                }
                if let Some((_, given)) = overridden
                    .iter()
                    .find(|(p, _)| seed.is_some() && overlap("seed", p))
                {
                    return Err(at_sweep(FieldError::new(
                        "seeds",
                        format!("the command line sets the seed (--set {given}): give one of them"),
                    )));
                }
                if let Some(s) = seed {
                    doc["seed"] = Value::from(s);
                    params.push(("seed".into(), Value::from(s)));
                }
                if let Some(keep) = &sweep.keep_monitors {
                    keep_monitors(&mut doc, keep)
                        .map_err(|m| at_sweep(FieldError::new("keep_monitors", m)))?;
                }
                let dropped = if sweep.prune { prune(&mut doc) } else { vec![] };
                let id = run_id(&params);
                let experiment =
                    config::parse_document(doc, base_source, base_dir).map_err(|e| {
                        // An error in a field the sweep set points at the sweep; any other at the
                        // base file.
                        let set_by = origin
                            .iter()
                            .rev()
                            .find(|(p, _)| e.field == *p || e.field.starts_with(&format!("{p}.")));
                        // The run is named when the sweep has several.
                        let e = if params.is_empty() {
                            e
                        } else {
                            FieldError {
                                message: format!("run `{id}`: {}", e.message),
                                ..e
                            }
                        };
                        // An error in an overridden field, or in the table holding an
                        // override about its key (an unknown field).
                        let by_override = overridden.iter().rev().find(|(p, _)| {
                            let key = p.rsplit(['.', '[']).next().unwrap_or(p);
                            e.field == *p
                                || e.field.starts_with(&format!("{p}."))
                                || (overlap(p, &e.field) && e.message.contains(&format!("`{key}`")))
                        });
                        if let Some((_, given)) = by_override {
                            return FieldError {
                                file: None,
                                line: None,
                                field: format!("--set {given}"),
                                message: format!("{}: {}", e.field, e.message),
                            }
                            .in_file(OVERRIDE_SOURCE);
                        }
                        match (set_by, &base_map) {
                            (Some((_, at)), _) => {
                                let line = map.line(at);
                                FieldError { file: None, ..e }.in_file(source).at_line(line)
                            }
                            (None, Some(m)) => config::locate(e, base_source, m),
                            (None, None) => config::locate(e, source, &map),
                        }
                    })?;
                if !ids.insert(id.clone()) {
                    return Err(at_sweep(FieldError::new(
                        "axes",
                        format!(
                            "two runs would have the id `{id}` (give the axes distinct values \
                         or names)"
                        ),
                    )));
                }
                runs.push(SweepRun {
                    id,
                    params,
                    dropped,
                    experiment,
                });
            }
        }
    }
    Ok(runs)
}

/// Whether setting one of the resolved paths `a` and `b` changes the other: the same
/// path, or one inside the other (`workload.regions` and `workload.regions[0].size`).
fn overlap(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    inside(a, b) || inside(b, a)
}

/// A base experiment document: its name (with `bases`), where it came from, and the map
/// of its lines when it is a file.
struct BaseDoc {
    name: Option<String>,
    doc: Value,
    source: String,
    map: Option<config::source_map::SourceMap>,
    dir: PathBuf,
}

fn load_base(
    name: Option<String>,
    base: &Base,
    source: &str,
    base_dir: &Path,
) -> Result<BaseDoc, FieldError> {
    Ok(match base {
        Base::Inline(m) => BaseDoc {
            name,
            doc: Value::Object(m.clone()),
            source: source.to_string(),
            map: None,
            dir: base_dir.to_path_buf(),
        },
        Base::File(p) => {
            let path = if p.is_absolute() {
                p.clone()
            } else {
                base_dir.join(p)
            };
            let file = path.display().to_string();
            let text = read_text_limited(&path, MAX_CONFIG_FILE, "base experiment")
                .map_err(|e| FieldError::new("base", e.to_string()))?;
            let fmt = if path.extension().is_some_and(|x| x == "json") {
                Format::Json
            } else {
                Format::Toml
            };
            let (doc, m) = config::read_document(&text, &file, fmt)?;
            let dir = path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| base_dir.to_path_buf());
            BaseDoc {
                name,
                doc,
                source: file,
                map: Some(m),
                dir,
            }
        }
    })
}

/// An axis, checked: its paths and one row of values per step.
struct Axis {
    name: String,
    paths: Vec<String>,
    values: Vec<Vec<Value>>,
    labels: Option<Vec<String>>,
}

impl Axis {
    fn new(a: &AxisFile) -> Result<Axis, FieldError> {
        let paths = match (&a.path, &a.paths) {
            (Some(p), None) => vec![p.clone()],
            (None, Some(ps)) if !ps.is_empty() => ps.clone(),
            _ => {
                return Err(FieldError::new(
                    "path",
                    "give `path` (one config path) or `paths` (zipped, one value each)",
                ))
            }
        };
        let listed = match (&a.range, a.values.is_empty()) {
            (Some(_), false) => {
                return Err(FieldError::new(
                    "range",
                    "give `values` or `range`, not both",
                ))
            }
            (Some(_), true) if paths.len() > 1 => {
                return Err(FieldError::new(
                    "range",
                    "a range sets one path (not zipped)",
                ))
            }
            (Some(r), true) => range_values(*r)?,
            (None, true) => return Err(FieldError::new("values", "the list is empty")),
            (None, false) => a.values.clone(),
        };
        let values: Vec<Vec<Value>> = if paths.len() == 1 {
            listed.iter().map(|v| vec![v.clone()]).collect()
        } else {
            listed
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::Array(row) if row.len() == paths.len() => Ok(row.clone()),
                    _ => Err(FieldError::new(
                        format!("values[{i}]"),
                        format!("expected a list of {} values, one per path", paths.len()),
                    )),
                })
                .collect::<Result<_, _>>()?
        };
        let last = |p: &str| {
            p.rsplit(['.', '['])
                .next()
                .unwrap_or(p)
                .trim_end_matches(']')
                .to_string()
        };
        let name = a
            .name
            .clone()
            .unwrap_or_else(|| paths.iter().map(|p| last(p)).collect::<Vec<_>>().join("+"));
        if let Some(l) = &a.labels {
            if l.len() != values.len() {
                return Err(FieldError::new(
                    "labels",
                    format!("{} labels for {} values", l.len(), values.len()),
                ));
            }
            if let Some(d) = l.iter().enumerate().find(|(i, x)| l[..*i].contains(x)) {
                return Err(FieldError::new(
                    format!("labels[{}]", d.0),
                    format!("`{}` is used twice", d.1),
                ));
            }
        }
        Ok(Axis {
            name,
            paths,
            values,
            labels: a.labels.clone(),
        })
    }

    /// The value of step `i` as a parameter: its label, the value, or the list of zipped
    /// values.
    fn param(&self, i: usize) -> Value {
        if let Some(l) = &self.labels {
            return Value::String(l[i].clone());
        }
        match self.values[i].as_slice() {
            [v] => v.clone(),
            row => Value::Array(row.to_vec()),
        }
    }
}

/// A value as it appears in an id: strings bare, the rest as compact JSON, zipped values
/// joined by `+`; anything but letters, digits and `._-+` becomes `_`.
fn id_value(v: &Value) -> String {
    let raw = match v {
        Value::String(s) => s.clone(),
        Value::Array(row) => row.iter().map(id_value).collect::<Vec<_>>().join("+"),
        other => other.to_string(),
    };
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn run_id(params: &[(String, Value)]) -> String {
    if params.is_empty() {
        return "run".into();
    }
    params
        .iter()
        .map(|(k, v)| format!("{}={}", id_value(&Value::String(k.clone())), id_value(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// One step of a config path: a table key, or a list item by index or by name.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
    Named(&'a str),
}

fn steps(path: &str) -> Result<Vec<Step<'_>>, String> {
    let mut out = vec![];
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() && out.is_empty() {
            return Err(format!("`{path}`: a path starts with a key"));
        }
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| format!("`{path}`: `[` without `]`"))?;
            let inner = &r[..end];
            out.push(match inner.parse::<usize>() {
                Ok(i) => Step::Index(i),
                Err(_) if !inner.is_empty() => Step::Named(inner),
                Err(_) => return Err(format!("`{path}`: empty `[]`")),
            });
            rest = &r[end + 1..];
        }
        if !rest.is_empty() {
            return Err(format!("`{path}`: unexpected `{rest}`"));
        }
    }
    Ok(out)
}

/// Sets `path` in `doc` to `value`, creating missing tables on the way. List items must
/// exist; `[name]` picks the item whose `name` (or, without one, `preset`) is `name`.
/// Returns the path with list items by index (as errors name fields).
pub fn set_path(doc: &mut Value, path: &str, value: Value) -> Result<String, String> {
    let steps = steps(path)?;
    let mut cur = doc;
    let mut resolved = String::new();
    for (k, step) in steps.iter().enumerate() {
        let last = k + 1 == steps.len();
        cur = match step {
            Step::Key(key) => {
                let Value::Object(m) = cur else {
                    return Err(format!("`{path}`: `{key}` is not inside a table"));
                };
                resolved = join_path(&resolved, key);
                if last {
                    m.insert((*key).to_string(), value);
                    return Ok(resolved);
                }
                m.entry(*key).or_insert_with(|| Value::Object(Map::new()))
            }
            Step::Index(i) => {
                let Value::Array(items) = cur else {
                    return Err(format!("`{path}`: [{i}] is not inside a list"));
                };
                let n = items.len();
                resolved = format!("{resolved}[{i}]");
                items
                    .get_mut(*i)
                    .ok_or_else(|| format!("`{path}`: item [{i}] of a list of {n}"))?
            }
            Step::Named(name) => {
                let Value::Array(items) = cur else {
                    return Err(format!("`{path}`: [{name}] is not inside a list"));
                };
                let i = items
                    .iter()
                    .position(|item| item_name(item) == Some(name))
                    .ok_or_else(|| format!("`{path}`: no item named `{name}`"))?;
                resolved = format!("{resolved}[{i}]");
                &mut items[i]
            }
        };
        if last {
            *cur = value;
            return Ok(resolved);
        }
    }
    Ok(resolved)
}

/// The value at `path` in `doc`, if there is one.
fn get_path<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = doc;
    for step in steps(path).ok()? {
        cur = match step {
            Step::Key(k) => cur.get(k)?,
            Step::Index(i) => cur.get(i)?,
            Step::Named(n) => cur
                .as_array()?
                .iter()
                .find(|item| item_name(item) == Some(n))?,
        };
    }
    Some(cur)
}

/// The value of a command-line override `PATH=TEXT`, typed by the config: where the
/// experiment (as written, else with its defaults filled in) holds a string at PATH, the
/// text itself, unless the text is an inline table (`{ type = "x", k = 1 }`: a list item
/// written as a name, such as a policy or a tier, given its settings); otherwise the text read as a TOML value (`3` an integer, `0.5` a float,
/// `true` a boolean, `[1, 2]` a list, `{ a = 1 }` a table, `"x"` a string), and text that
/// is no TOML value (`100ms`, `stat`) a string. The parser then checks it as it checks
/// the file, naming the field.
pub fn typed_value(doc: &Value, normalized: Option<&Value>, path: &str, text: &str) -> Value {
    let current = get_path(doc, path).or_else(|| normalized.and_then(|n| get_path(n, path)));
    let table = text.trim_start().starts_with('{');
    if matches!(current, Some(Value::String(_))) && !table {
        return Value::String(text.to_string());
    }
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or_else(|| Value::String(text.to_string()))
}

/// The name a list item goes by: `name`, else `preset`, else `type`; an item written as
/// a string (`"telescope-rule"`, `"pmem"`) is its own name.
fn item_name(item: &Value) -> Option<&str> {
    if let Value::String(s) = item {
        return Some(s);
    }
    ["name", "preset", "type"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_str))
}

fn keep_monitors(doc: &mut Value, keep: &[String]) -> Result<(), String> {
    let Some(Value::Array(items)) = doc.get_mut("monitors") else {
        return Err("the base experiment has no monitors".into());
    };
    if let Some(missing) = keep
        .iter()
        .find(|k| !items.iter().any(|i| item_name(i) == Some(k.as_str())))
    {
        return Err(format!("the base experiment has no monitor `{missing}`"));
    }
    items.retain(|i| item_name(i).is_some_and(|n| keep.iter().any(|k| k == n)));
    Ok(())
}

/// Drops what the document's engine cannot run: `[machine.kvm]` off the kvm engine, and
/// the monitors needing hardware the engine lacks. Returns the dropped monitors' names.
fn prune(doc: &mut Value) -> Vec<String> {
    let engine: EngineKind = doc
        .get("machine")
        .and_then(|m| m.get("engine"))
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    if engine != EngineKind::Kvm {
        if let Some(Value::Object(m)) = doc.get_mut("machine") {
            m.remove("kvm");
        }
    }
    let mut dropped = vec![];
    if let Some(Value::Array(items)) = doc.get_mut("monitors") {
        items.retain(|item| {
            let Value::Object(table) = item else {
                return true;
            };
            // Tables that do not parse are kept, for the parser to report.
            let Ok(entry) = monitors::expand(table) else {
                return true;
            };
            let ok = entry
                .config
                .requires()
                .missing_from(engine.capabilities())
                .is_empty();
            if !ok {
                dropped.push(entry.name);
            }
            ok
        });
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "b"
[workload]
rate = "1M/s"
regions = [{ name = "a", size = "64MiB" }]
phases = [{ name = "p", duration = "1s", patterns = [{ region = "a", kind = "random" }] }]
[[monitors]]
preset = "damon-mod"
[[monitors]]
preset = "telescope-bnd"
name = "bnd"
"#;

    fn expand(sweep: &str) -> Result<Vec<SweepRun>, FieldError> {
        let text = format!(
            "{sweep}\n[base]\n{}",
            BASE.replace("[workload]", "[base.workload]")
                .replace("[[monitors]]", "[[base.monitors]]")
        );
        expand_sweep(&text, "sweep.toml", Path::new("."), Format::Toml)
    }

    #[test]
    fn axes_multiply_seeds_innermost_with_stable_ids() {
        let runs = expand(
            r#"
seeds = { from = 1, to = 2 }
[[axes]]
path = "monitors[bnd].sample"
values = ["5ms", "10ms"]
[[axes]]
paths = ["workload.rate", "machine.page_size"]
name = "shape"
values = [["1M/s", "4KiB"], ["2M/s", "2MiB"]]
"#,
        )
        .unwrap();
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "sample=5ms,shape=1M_s+4KiB,seed=1",
                "sample=5ms,shape=1M_s+4KiB,seed=2",
                "sample=5ms,shape=2M_s+2MiB,seed=1",
                "sample=5ms,shape=2M_s+2MiB,seed=2",
                "sample=10ms,shape=1M_s+4KiB,seed=1",
                "sample=10ms,shape=1M_s+4KiB,seed=2",
                "sample=10ms,shape=2M_s+2MiB,seed=1",
                "sample=10ms,shape=2M_s+2MiB,seed=2",
            ]
        );
        let r = &runs[7];
        assert_eq!(r.experiment.seed, 2);
        assert_eq!(r.experiment.workload.rate, 2_000_000);
        assert_eq!(
            r.experiment.machine.page_size,
            tierscope_core::PageSize::Huge2M
        );
        match &r.experiment.monitors[1].config {
            tierscope_monitors::MonitorConfig::Telescope(t) => assert_eq!(t.sample.0, 10_000_000),
            other => panic!("{other:?}"),
        }
        // Pure: the same sweep, the same runs.
        assert_eq!(
            runs,
            expand(
                r#"
seeds = { from = 1, to = 2 }
[[axes]]
path = "monitors[bnd].sample"
values = ["5ms", "10ms"]
[[axes]]
paths = ["workload.rate", "machine.page_size"]
name = "shape"
values = [["1M/s", "4KiB"], ["2M/s", "2MiB"]]
"#
            )
            .unwrap()
        );
    }

    #[test]
    fn engine_axis_prunes_what_the_engine_cannot_run() {
        let sweep = r#"
prune = true
keep_monitors = ["bnd", "pebs-mod"]
[[axes]]
path = "machine.engine"
values = ["stat", "kvm"]
"#;
        let text = BASE.replace(
            "name = \"bnd\"",
            "name = \"bnd\"\n[[monitors]]\npreset = \"pebs-mod\"\n[[monitors]]\npreset = \"pml\"",
        );
        let runs = expand_sweep(
            &format!(
                "{sweep}\n[base]\n{}",
                text.replace("[workload]", "[base.workload]")
                    .replace("[[monitors]]", "[[base.monitors]]")
            ),
            "s.toml",
            Path::new("."),
            Format::Toml,
        )
        .unwrap();
        let names = |r: &SweepRun| {
            r.experiment
                .monitors
                .iter()
                .map(|m| m.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&runs[0]), ["bnd", "pebs-mod"]);
        assert!(runs[0].dropped.is_empty());
        assert_eq!(names(&runs[1]), ["bnd"]);
        assert_eq!(runs[1].dropped, ["pebs-mod"]);
        assert_eq!(runs[1].id, "engine=kvm");
    }

    #[test]
    fn named_bases_are_the_outermost_axis() {
        let dir = std::env::temp_dir().join(format!("tierscope-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("one.toml"), BASE).unwrap();
        std::fs::write(dir.join("two.toml"), BASE.replace("64MiB", "128MiB")).unwrap();
        let text = "seeds = [1, 2]\nbases = { one = \"one.toml\", two = \"two.toml\" }\n";
        let runs = expand_sweep(text, "s.toml", &dir, Format::Toml).unwrap();
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "base=one,seed=1",
                "base=one,seed=2",
                "base=two,seed=1",
                "base=two,seed=2"
            ]
        );
        assert_eq!(runs[3].experiment.workload.spec.total_size(), 128 << 20);
        let e = expand_sweep(
            "bases = { one = \"nope.toml\" }\n",
            "s.toml",
            &dir,
            Format::Toml,
        )
        .unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("bases.one", Some(1)), "{e}");
        let e = expand_sweep("seeds = [1]\n", "s.toml", &dir, Format::Toml).unwrap_err();
        assert!(e.message.contains("give `base`"), "{e}");
    }

    #[test]
    fn errors_point_at_the_axis_or_the_base() {
        let e = expand("[[axes]]\npath = \"monitors[bnd].sample\"\nvalues = [\"5 parsecs\"]\n")
            .unwrap_err();
        assert_eq!(e.file.as_deref(), Some("sweep.toml"));
        assert_eq!(e.line, Some(1), "{e}");
        assert!(e.message.starts_with("run `sample=5_parsecs`"), "{e}");
        let e = expand("[[axes]]\npath = \"monitors[nope].sample\"\nvalues = [1]\n").unwrap_err();
        assert!(e.message.contains("no item named `nope`"), "{e}");
        let e = expand("seeds = []\n").unwrap_err();
        assert_eq!(e.field, "seeds");
        let e = expand("[[axes]]\npath = \"seed\"\nvalues = [1, 1]\n").unwrap_err();
        assert!(
            e.message.contains("two runs would have the id `seed=1`"),
            "{e}"
        );
        assert_eq!(expand("").unwrap()[0].id, "run");
    }

    #[test]
    fn labels_name_large_values() {
        let sweep = "[[axes]]\npath = \"workload.regions\"\nname = \"layout\"\nlabels = [\"small\", \"big\"]\nvalues = [[{ name = \"a\", size = \"64MiB\" }], [{ name = \"a\", size = \"1GiB\" }]]\n";
        let runs = expand(sweep).unwrap();
        assert_eq!(runs[1].id, "layout=big");
        assert_eq!(runs[1].params[0].1, Value::String("big".into()));
        assert_eq!(runs[1].experiment.workload.spec.total_size(), 1 << 30);
        let e = expand(&sweep.replace("\"big\"", "\"small\"")).unwrap_err();
        assert_eq!(e.field, "axes[0].labels[1]", "{e}");
    }

    #[test]
    fn ranges_give_numbers() {
        let runs = expand("[[axes]]\npath = \"workload.threads\"\nrange = { from = 1, to = 4 }\n")
            .unwrap();
        let t: Vec<u32> = runs.iter().map(|r| r.experiment.workload.threads).collect();
        assert_eq!(t, [1, 2, 3, 4]);
        assert_eq!(runs[0].id, "threads=1");
        let runs = expand(
            "[[axes]]\npath = \"monitors[bnd].flex_threshold.pud\"\nrange = { from = 0.05, to = 0.25, step = 0.1 }\n",
        )
        .unwrap();
        let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["pud=0.05", "pud=0.15", "pud=0.25"]);
        let e = expand("[[axes]]\npath = \"seed\"\nrange = { from = 3, to = 1 }\n").unwrap_err();
        assert_eq!(e.field, "axes[0].range.to", "{e}");
        let e = expand("[[axes]]\npath = \"seed\"\nvalues = [1]\nrange = { from = 1, to = 2 }\n")
            .unwrap_err();
        assert!(e.message.contains("not both"), "{e}");
    }

    /// Issue 28: seeds 1..1e9 exhausted the host's memory on --dry-run; runs are counted
    /// (checked) before any is made.
    #[test]
    fn seeds_and_runs_are_capped_before_expanding() {
        let e = expand("seeds = { from = 1, to = 1000000000 }\n").unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("seeds", Some(1)), "{e}");
        assert!(e.message.contains("limit of 100000"), "{e}");
        let e = expand("seeds = { from = 0, to = 18446744073709551615 }\n").unwrap_err();
        assert_eq!(e.field, "seeds", "{e}");
        let axis = "[[axes]]\npath = \"workload.rate\"\nrange = { from = 1, to = 100000 }\n";
        let e = expand(&format!("{axis}{}", axis.replace("workload.rate", "seed"))).unwrap_err();
        assert_eq!(e.field, "axes", "{e}");
        let e = expand(&format!("seeds = [1, 2]\n{axis}")).unwrap_err();
        assert_eq!(e.field, "axes", "{e}");
    }

    /// Issue 28: two axes on one path gave rows naming one value while the run used
    /// the other.
    #[test]
    fn two_axes_on_one_path_are_refused() {
        let e = expand(
            "[[axes]]\npath = \"monitors[bnd].sample\"\nvalues = [\"5ms\", \"10ms\"]\n\n[[axes]]\npath = \"monitors[1].sample\"\nvalues = [\"20ms\"]\n",
        )
        .unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("axes[1]", Some(5)), "{e}");
        assert!(e.message.contains("axes[0] also sets"), "{e}");
        // A table and a field inside it, zipped paths, and the seed with `seeds`.
        let e = expand(
            "[[axes]]\npath = \"workload.regions\"\nlabels = [\"x\"]\nvalues = [[{ name = \"a\", size = \"64MiB\" }]]\n[[axes]]\npath = \"workload.regions[0].size\"\nvalues = [\"1GiB\"]\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "axes[1]", "{e}");
        let e = expand(
            "[[axes]]\npaths = [\"workload.rate\", \"workload.rate\"]\nvalues = [[\"1M/s\", \"2M/s\"]]\n",
        )
        .unwrap_err();
        assert!(e.message.contains("this axis also sets"), "{e}");
        let e = expand("seeds = [1]\n[[axes]]\npath = \"seed\"\nvalues = [1, 2]\n").unwrap_err();
        assert!(e.message.contains("`seeds` also sets"), "{e}");
        // Neighbouring paths are fine.
        assert_eq!(
            expand(
                "[[axes]]\npath = \"workload.rate\"\nvalues = [\"1M/s\"]\n[[axes]]\npath = \"workload.rates\"\nvalues = [1]\n"
            )
            .unwrap_err()
            .field,
            "workload.rates",
            "an unknown field, not an overlap"
        );
    }

    #[test]
    fn command_line_overrides_are_typed_by_the_config() {
        let sets = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(p, v)| (p.to_string(), v.to_string()))
                .collect()
        };
        let text = format!(
            "[base]\n{}",
            BASE.replace("[workload]", "[base.workload]")
                .replace("[[monitors]]", "[[base.monitors]]")
        );
        let go = |o: &[(String, String)]| {
            expand_sweep_overridden(&text, "sweep.toml", Path::new("."), Format::Toml, o)
        };
        // `seed` is a number (filled in by default), `aggr` a string, `name` a string even
        // when it looks like a number.
        let runs = go(&sets(&[
            ("seed", "3"),
            ("monitors[0].aggr", "100ms"),
            ("monitors[bnd].sample", "20ms"),
            ("name", "42"),
        ]))
        .unwrap();
        let e = &runs[0].experiment;
        assert_eq!((e.seed, e.name.as_str()), (3, "42"));
        let doc = e.to_document();
        assert_eq!(doc["monitors"][0]["aggr"], "100ms");
        assert_eq!(doc["monitors"][1]["sample"], "20ms");
        // A bad value or path is one line naming the override.
        let e = go(&sets(&[("seed", "three")])).unwrap_err();
        assert_eq!(e.file.as_deref(), Some(OVERRIDE_SOURCE));
        assert_eq!(e.field, "--set seed=three", "{e}");
        assert!(e.message.starts_with("seed: "), "{e}");
        let e = go(&sets(&[("monitors[7].aggr", "1s")])).unwrap_err();
        assert_eq!(e.field, "--set monitors[7].aggr", "{e}");
        assert!(e.message.contains("item [7] of a list of 2"), "{e}");
        let e = go(&sets(&[("monitors[0].agr", "1s")])).unwrap_err();
        assert_eq!(e.field, "--set monitors[0].agr=1s", "{e}");
        // An item written as a string is found by that string, and an inline table
        // replaces it (the string stays a string otherwise).
        let with_policies =
            format!("{text}[base.tiering]\npolicies = [\"telescope-rule\", \"static\"]\n");
        let doc: Value =
            serde_json::to_value(toml::from_str::<toml::Table>(&with_policies).unwrap()).unwrap();
        let base = &doc["base"];
        let path = "tiering.policies[telescope-rule]";
        let v = typed_value(
            base,
            None,
            path,
            "{ type = \"telescope-rule\", split_large = false }",
        );
        assert_eq!(v["split_large"], false, "{v}");
        assert_eq!(typed_value(base, None, path, "static"), "static");
        let mut changed = base.clone();
        assert_eq!(
            set_path(&mut changed, path, v).unwrap(),
            "tiering.policies[0]"
        );
        assert_eq!(changed["tiering"]["policies"][0]["type"], "telescope-rule");
        assert_eq!(changed["tiering"]["policies"][1], "static");
        // An axis on an overridden path is refused.
        let swept = format!("[[axes]]\npath = \"seed\"\nvalues = [1, 2]\n{text}");
        let e = expand_sweep_overridden(
            &swept,
            "sweep.toml",
            Path::new("."),
            Format::Toml,
            &sets(&[("seed", "3")]),
        )
        .unwrap_err();
        assert!(e.message.contains("the command line sets it"), "{e}");
    }
}
