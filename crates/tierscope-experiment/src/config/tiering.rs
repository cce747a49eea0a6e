//! The `[tiering]` table: the machine's memory tiers, the initial placement, the policies
//! (each run once per monitor it can use, plus the references), migration limits and the
//! application model.

use super::machine::EngineKind;
use super::monitors::MonitorEntry;
use super::neighbour::Neighbour;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use tierscope_core::tiers::{
    curve_error, tier_preset, InitialPlacement, TierSetup, TierSpec, MAX_TIERS, TIER_PRESETS,
};
use tierscope_core::units::{parse_size, Duration, Size};
use tierscope_core::{Capability, FeedKind, FieldError, PolicyInput};
use tierscope_tiering::{AppModel, MigrationConfig, PolicyConfig};

const POLICIES: &[(&str, &str)] = PolicyConfig::POLICIES;

/// One tier as written: a preset name, or a table (a preset and overrides, or every field).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum TierEntry {
    Preset(String),
    Table(TierTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierTable {
    preset: Option<String>,
    name: Option<String>,
    /// A size, or a share of the heap such as "20%".
    capacity: Option<Value>,
    latency_ns: Option<f64>,
    /// Bytes per second.
    bandwidth: Option<f64>,
    queueing: Option<f64>,
    /// A loaded-latency curve, `[[utilisation, latency / idle], ...]`; setting `queueing`
    /// instead replaces a preset's curve by the formula.
    curve: Option<Vec<[f64; 2]>>,
    /// Bytes per second of other tenants' traffic (a size per second, e.g. "40GB").
    background: Option<Size>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TieringFile {
    tiers: Vec<TierEntry>,
    #[serde(default)]
    placement: InitialPlacement,
    policies: Vec<Value>,
    #[serde(default = "default_window")]
    window: Duration,
    #[serde(default)]
    migration: MigrationConfig,
    #[serde(default)]
    app: AppModel,
    /// A second tenant sharing the tiers (the noisy neighbour).
    #[serde(default)]
    neighbour: Option<Neighbour>,
}

fn default_window() -> Duration {
    Duration(100_000_000)
}

/// One policy of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyEntry {
    pub name: String,
    pub config: PolicyConfig,
    /// The monitors feeding it (names); empty for policies fed by nothing or the truth.
    pub monitors: Vec<String>,
}

/// The validated `[tiering]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Tiering {
    pub setup: TierSetup,
    pub policies: Vec<PolicyEntry>,
    /// Length of the performance model's windows, ns of run time.
    pub window_ns: u64,
    pub migration: MigrationConfig,
    pub app: AppModel,
    /// A second tenant sharing the tiers, and its tier's index.
    pub neighbour: Option<(Neighbour, usize)>,
}

impl Tiering {
    pub fn to_document(&self) -> Value {
        let tiers: Vec<Value> = self
            .setup
            .tiers
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "capacity": t.capacity,
                    "latency_ns": t.latency_ns,
                    "bandwidth": t.bandwidth,
                    "queueing": t.queueing,
                    "curve": t.curve,
                    "background": Size(t.background as u64),
                })
            })
            .collect();
        let policies: Vec<Value> = self
            .policies
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(&p.config).expect("policy configs serialise");
                v["name"] = Value::from(p.name.clone());
                if !p.monitors.is_empty() {
                    v["monitors"] = Value::from(p.monitors.clone());
                }
                v
            })
            .collect();
        let mut doc = serde_json::json!({
            "tiers": tiers,
            "placement": self.setup.initial,
            "policies": policies,
            "window": Duration(self.window_ns),
            "migration": self.migration,
            "app": self.app,
        });
        if let Some((n, _)) = &self.neighbour {
            doc["neighbour"] = serde_json::to_value(n).expect("the neighbour serialises");
        }
        doc
    }
}

fn capacity(v: &Value, heap: u64) -> Result<u64, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("expected a size, got {n}")),
        Value::String(s) => {
            if let Some(p) = s.trim().strip_suffix('%') {
                let share: f64 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("`{s}` is not a percentage"))?;
                if !(0.0..=100.0).contains(&share) {
                    return Err(format!("`{s}` is not between 0% and 100%"));
                }
                Ok(((heap as f64 * share / 100.0) as u64) & !4095)
            } else {
                parse_size(s).map_err(|e| e.0)
            }
        }
        other => Err(format!(
            "expected a size (\"16GiB\") or a share of the heap (\"20%\"), got {other}"
        )),
    }
}

fn tier(entry: &TierEntry, last: bool, heap: u64) -> Result<TierSpec, FieldError> {
    let table = match entry {
        TierEntry::Preset(p) => TierTable {
            preset: Some(p.clone()),
            name: None,
            capacity: None,
            latency_ns: None,
            bandwidth: None,
            queueing: None,
            curve: None,
            background: None,
        },
        TierEntry::Table(t) => t.clone(),
    };
    let preset = match &table.preset {
        Some(p) => Some(tier_preset(p).ok_or_else(|| {
            let names: Vec<_> = TIER_PRESETS.iter().map(|p| p.name).collect();
            FieldError::new(
                "preset",
                format!(
                    "unknown tier `{p}`{} (expected one of {})",
                    tierscope_core::did_you_mean(p, &names),
                    names.join(", ")
                ),
            )
        })?),
        None => None,
    };
    let need = |v: Option<f64>, field: &str, from: Option<f64>| {
        v.or(from).ok_or_else(|| {
            FieldError::new(field, format!("a tier without a preset needs `{field}`"))
        })
    };
    let capacity = match &table.capacity {
        Some(v) => capacity(v, heap).map_err(|m| FieldError::new("capacity", m))?,
        // The slowest tier holds whatever does not fit elsewhere.
        None if last => heap,
        None => {
            return Err(FieldError::new(
                "capacity",
                "every tier but the last needs a capacity (a size or a share such as \"20%\")",
            ))
        }
    };
    let spec = TierSpec {
        name: table
            .name
            .or(preset.map(|p| p.name.to_string()))
            .ok_or_else(|| FieldError::new("name", "a tier without a preset needs a name"))?,
        capacity,
        latency_ns: need(table.latency_ns, "latency_ns", preset.map(|p| p.latency_ns))?,
        bandwidth: need(table.bandwidth, "bandwidth", preset.map(|p| p.bandwidth))?,
        queueing: need(table.queueing, "queueing", preset.map(|p| p.queueing))?,
        // A table's own curve, else the formula when it sets `queueing`, else the preset's.
        curve: match (&table.curve, table.queueing, preset) {
            (Some(c), _, _) => c.clone(),
            (None, None, Some(p)) => p.spec(0).curve,
            _ => Vec::new(),
        },
        background: table.background.map_or(0.0, |b| b.0 as f64),
    };
    if spec.background >= spec.bandwidth * 0.9 {
        return Err(FieldError::new(
            "background",
            format!(
                "{} bytes/s would leave the tier no room: keep it below 90% of its bandwidth \
                 ({} bytes/s)",
                spec.background, spec.bandwidth
            ),
        ));
    }
    for (field, v) in [
        ("latency_ns", spec.latency_ns),
        ("bandwidth", spec.bandwidth),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(FieldError::new(field, format!("must be positive, got {v}")));
        }
    }
    if !(spec.queueing.is_finite() && spec.queueing >= 0.0) {
        return Err(FieldError::new("queueing", "must be zero or positive"));
    }
    if let Some(why) = curve_error(&spec.curve) {
        return Err(FieldError::new("curve", why));
    }
    Ok(spec)
}

/// Which presets emit one of `kinds`, as a hint.
fn emitted_by(kinds: &[FeedKind]) -> String {
    let presets = tierscope_monitors::MonitorConfig::presets_emitting(kinds);
    format!("presets that do: {}", presets.join(", "))
}

fn policy(
    v: &Value,
    tiers: usize,
    monitors: &[MonitorEntry],
    duration_ns: u64,
) -> Result<PolicyEntry, FieldError> {
    let names = || POLICIES.iter().map(|p| p.0).collect::<Vec<_>>().join(", ");
    let mut table: Map<String, Value> = match v {
        Value::String(s) => {
            if PolicyConfig::named(s).is_none() {
                let why = if POLICIES.iter().any(|p| p.0 == s) {
                    "needs a table with its settings".to_string()
                } else {
                    format!(
                        "is not a policy{} (expected one of {})",
                        tierscope_core::did_you_mean(
                            s,
                            &POLICIES.iter().map(|p| p.0).collect::<Vec<_>>()
                        ),
                        names()
                    )
                };
                return Err(FieldError::new("", format!("`{s}` {why}")));
            }
            let mut m = Map::new();
            m.insert("type".into(), Value::String(s.clone()));
            m
        }
        Value::Object(m) => m.clone(),
        other => {
            return Err(FieldError::new(
                "",
                format!("expected a policy name or a table with `type`, got {other}"),
            ))
        }
    };
    let name = super::monitors::take_name(&mut table)?;
    let wanted: Option<Vec<String>> = match table.remove("monitors") {
        Some(v) => Some(
            serde_json::from_value(v)
                .map_err(|_| FieldError::new("monitors", "expected a list of monitor names"))?,
        ),
        None => None,
    };
    match table.get("type") {
        Some(Value::String(t)) if POLICIES.iter().any(|p| p.0 == t) => {}
        Some(Value::String(t)) => {
            return Err(FieldError::new(
                "type",
                format!(
                    "unknown policy `{t}`{} (expected one of {})",
                    tierscope_core::did_you_mean(
                        t,
                        &POLICIES.iter().map(|p| p.0).collect::<Vec<_>>()
                    ),
                    names()
                ),
            ))
        }
        _ => return Err(FieldError::new("type", "a policy table needs `type`")),
    }
    let config: PolicyConfig =
        serde_path_to_error::deserialize(Value::Object(table)).map_err(FieldError::from)?;
    config.validate(tiers)?;
    let feeds = match (config.input(), wanted) {
        (PolicyInput::Monitor(accepts), None) => {
            let fed: Vec<String> = monitors
                .iter()
                .filter(|m| accepts.contains(&m.config.emits()))
                .map(|m| m.name.clone())
                .collect();
            if fed.is_empty() {
                return Err(FieldError::new(
                    "type",
                    format!(
                        "`{}` acts on {}, and no monitor of the experiment emits that ({})",
                        config.kind(),
                        FeedKind::list(accepts),
                        emitted_by(accepts)
                    ),
                ));
            }
            fed
        }
        (PolicyInput::Monitor(accepts), Some(list)) => {
            // An empty list ran the policy on no monitor, and its document (which leaves
            // an empty list out) on every monitor: refused, as a name given twice.
            if list.is_empty() {
                return Err(FieldError::new(
                    "monitors",
                    format!(
                        "the list is empty (leave `monitors` out for every monitor `{}` can \
                         use)",
                        config.kind()
                    ),
                ));
            }
            if let Some(m) = list
                .iter()
                .enumerate()
                .find(|(i, m)| list[..*i].contains(m))
            {
                return Err(FieldError::new(
                    "monitors",
                    format!("`{}` is named twice", m.1),
                ));
            }
            for m in &list {
                let Some(entry) = monitors.iter().find(|e| &e.name == m) else {
                    return Err(FieldError::new(
                        "monitors",
                        format!("no monitor is called `{m}`"),
                    ));
                };
                let emits = entry.config.emits();
                if !accepts.contains(&emits) {
                    return Err(FieldError::new(
                        "monitors",
                        format!(
                            "`{}` acts on {}, and `{m}` (a {} monitor) emits {} ({})",
                            config.kind(),
                            FeedKind::list(accepts),
                            entry.config.kind(),
                            emits.describe(),
                            emitted_by(accepts)
                        ),
                    ));
                }
            }
            list
        }
        (_, Some(_)) => {
            return Err(FieldError::new(
                "monitors",
                format!("`{}` is not fed by a monitor", config.kind()),
            ))
        }
        (_, None) => vec![],
    };
    // What depends on the feeding monitor: its intervals (a monitor is built for them;
    // building allocates nothing large).
    for name in &feeds {
        let m = monitors
            .iter()
            .find(|m| &m.name == name)
            .expect("feeds are monitors");
        let intervals = m
            .config
            .build(
                tierscope_core::rng::Rng::for_stream(0, name),
                &tierscope_core::CostModel::default(),
            )
            .intervals();
        config.validate_feed(name, intervals, duration_ns)?;
    }
    Ok(PolicyEntry {
        name: name.unwrap_or_else(|| config.kind().to_string()),
        config,
        monitors: feeds,
    })
}

/// `app = { from = "FILE", ... }`: the application model measured into FILE's `[app]` table
/// (`tierscope measure apps`, experiments/tiering/apps/), with the fields written beside
/// `from` taking precedence (so a sweep can still vary one of them).
fn resolve_app(app: &mut Value, base_dir: &Path) -> Result<(), FieldError> {
    let Some(obj) = app.as_object_mut() else {
        return Ok(());
    };
    let Some(from) = obj.remove("from") else {
        return Ok(());
    };
    let Some(name) = from.as_str() else {
        return Err(FieldError::new(
            "from",
            "expected the path of a measured model's file",
        ));
    };
    let path = base_dir.join(name);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| FieldError::new("from", format!("cannot read {}: {e}", path.display())))?;
    let doc: Value = toml::from_str(&text)
        .map_err(|e| FieldError::new("from", format!("{}: {e}", path.display())))?;
    let Some(Value::Object(measured)) = doc.get("app") else {
        return Err(FieldError::new(
            "from",
            format!("{} has no [app] table", path.display()),
        ));
    };
    let mut merged = measured.clone();
    merged.extend(std::mem::take(obj));
    *obj = merged;
    Ok(())
}

/// Validates the `[tiering]` table of an experiment whose heap is `heap` bytes; files it
/// names (`app.from`) are relative to `base_dir`.
pub fn parse(
    mut v: Value,
    engine: EngineKind,
    heap: u64,
    monitors: &[MonitorEntry],
    duration_ns: u64,
    base_dir: &Path,
) -> Result<Tiering, FieldError> {
    if !engine.capabilities().contains(Capability::Tiers) {
        return Err(FieldError::new(
            "",
            format!(
                "engine `{}` has no memory tiers (engines with them: {}; set [machine] engine)",
                engine.name(),
                EngineKind::offering(Capability::Tiers).join(", ")
            ),
        ));
    }
    if let Some(app) = v.get_mut("app") {
        resolve_app(app, base_dir).map_err(|e| e.under("app"))?;
    }
    let file: TieringFile = serde_path_to_error::deserialize(v).map_err(FieldError::from)?;
    if file.tiers.len() < 2 || file.tiers.len() > MAX_TIERS {
        return Err(FieldError::new(
            "tiers",
            format!("expected 2 to {MAX_TIERS} tiers, got {}", file.tiers.len()),
        ));
    }
    let n = file.tiers.len();
    let mut tiers = vec![];
    for (i, t) in file.tiers.iter().enumerate() {
        tiers.push(tier(t, i == n - 1, heap).map_err(|e| e.under(&format!("tiers[{i}]")))?);
    }
    let total: u128 = tiers.iter().map(|t| t.capacity as u128).sum();
    if total < heap as u128 {
        return Err(FieldError::new(
            "tiers",
            format!("the tiers hold {total} bytes, less than the workload's heap of {heap} bytes"),
        ));
    }
    if file.window.0 == 0 {
        return Err(FieldError::new("window", "must be positive"));
    }
    file.migration
        .validate()
        .map_err(|e| e.under("migration"))?;
    if !(file.app.mlp >= 1.0 && file.app.compute_ns >= 0.0 && file.app.line_bytes > 0.0) {
        return Err(FieldError::new(
            "app",
            "expected mlp >= 1, compute_ns >= 0 and line_bytes > 0",
        ));
    }
    if file.policies.is_empty() {
        return Err(FieldError::new("policies", "at least one policy is needed"));
    }
    let mut policies: Vec<PolicyEntry> = vec![];
    for (i, p) in file.policies.iter().enumerate() {
        let at = format!("policies[{i}]");
        let entry = policy(p, n, monitors, duration_ns).map_err(|e| e.under(&at))?;
        if policies.iter().any(|q| q.name == entry.name) {
            return Err(FieldError::new(
                format!("{at}.name"),
                format!("`{}` is used twice (names must be unique)", entry.name),
            ));
        }
        policies.push(entry);
    }
    let neighbour = match file.neighbour {
        Some(nb) => {
            nb.validate(&tiers).map_err(|e| e.under("neighbour"))?;
            let tier = nb.tier_index(&tiers).expect("validated");
            Some((nb, tier))
        }
        None => None,
    };
    if neighbour.is_none() {
        if let Some(i) = policies
            .iter()
            .position(|p| p.config.input() == PolicyInput::TenantCounter)
        {
            return Err(FieldError::new(
                format!("policies[{i}]"),
                format!(
                    "`{}` reads the neighbour tenant's counter, and the experiment has none \
                     (add [tiering.neighbour])",
                    policies[i].config.kind()
                ),
            ));
        }
    }
    Ok(Tiering {
        setup: TierSetup {
            tiers,
            initial: file.placement,
        },
        policies,
        window_ns: file.window.0,
        migration: file.migration,
        app: file.app,
        neighbour,
    })
}
