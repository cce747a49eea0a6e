//! The `[[monitors]]` tables: a preset and/or a `type` with fields, expanded into a named
//! monitor configuration from the registry, and checked against the engine's hardware.

use super::machine::EngineKind;
use serde::Serialize;
use serde_json::{Map, Value};
use tierscope_core::FieldError;
use tierscope_monitors::MonitorConfig;

/// One monitor of an experiment, presets expanded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonitorEntry {
    pub name: String,
    pub config: MonitorConfig,
}

impl MonitorEntry {
    /// The table that parses back to this entry: `name`, `type` and every field.
    pub fn to_table(&self) -> Value {
        let mut v = serde_json::to_value(&self.config).expect("monitor configs serialise");
        if let Value::Object(m) = &mut v {
            m.insert("name".into(), Value::String(self.name.clone()));
        }
        v
    }
}

/// Removes a table's optional `name` (a non-empty string) and returns it.
pub fn take_name(table: &mut Map<String, Value>) -> Result<Option<String>, FieldError> {
    match table.remove("name") {
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(other) => Err(FieldError::new(
            "name",
            format!("expected a non-empty string, got {other}"),
        )),
        None => Ok(None),
    }
}

/// Turns one `[[monitors]]` table into a monitor: `preset` (optional) gives the starting
/// configuration, `type` and the other keys set or override fields, `name` defaults to the
/// preset or the type. Field paths in errors are relative to the table.
pub fn expand(table: &Map<String, Value>) -> Result<MonitorEntry, FieldError> {
    let mut table = table.clone();
    let name = take_name(&mut table)?;
    let preset = match table.remove("preset") {
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(FieldError::new(
                "preset",
                format!("expected a string, got {other}"),
            ))
        }
        None => None,
    };
    let presets = || MonitorConfig::preset_names().join(", ");
    let mut merged = match &preset {
        Some(p) => {
            let config = MonitorConfig::preset(p).ok_or_else(|| {
                FieldError::new(
                    "preset",
                    format!(
                        "unknown preset `{p}`{} (expected one of {})",
                        tierscope_core::did_you_mean(p, &MonitorConfig::preset_names()),
                        presets()
                    ),
                )
            })?;
            match serde_json::to_value(config).expect("configs serialise") {
                Value::Object(m) => m,
                _ => unreachable!("monitor configs serialise to tables"),
            }
        }
        None => Map::new(),
    };
    if let (Some(p), Some(t)) = (&preset, table.get("type")) {
        if merged.get("type") != Some(t) {
            return Err(FieldError::new(
                "type",
                format!("{t} contradicts preset `{p}`"),
            ));
        }
    }
    if preset.is_none() && !table.contains_key("type") {
        return Err(FieldError::new(
            "",
            format!(
                "give `preset` (one of {}) or `type` (one of {})",
                presets(),
                MonitorConfig::KINDS.join(", ")
            ),
        ));
    }
    merged.extend(table);
    let config = MonitorConfig::from_table(merged)?;
    config.validate()?;
    let name = name.or(preset).unwrap_or_else(|| config.kind().to_string());
    Ok(MonitorEntry { name, config })
}

/// Whether `engine` has the hardware `config` needs; the error names the field that chose
/// the monitor (`preset` or `type`), relative to its table.
pub fn check_engine(
    config: &MonitorConfig,
    table: &Map<String, Value>,
    engine: EngineKind,
) -> Result<(), FieldError> {
    let missing = config.requires().missing_from(engine.capabilities());
    let Some(&c) = missing.first() else {
        return Ok(());
    };
    let field = if table.contains_key("preset") {
        "preset"
    } else {
        "type"
    };
    Err(FieldError::new(
        field,
        format!(
            "`{}` needs {}, which engine `{}` does not have (engines with it: {}; set \
             [machine] engine)",
            config.kind(),
            c.describe(),
            engine.name(),
            EngineKind::offering(c).join(", ")
        ),
    ))
}
