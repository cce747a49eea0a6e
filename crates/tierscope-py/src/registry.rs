//! The registries, as Python reads them: monitor presets and engines with what they need
//! and offer, tiering policies, tier presets and initial placements. The CLI's help and
//! checks come from here, never from a copy.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tierscope_core::Capabilities;
use tierscope_experiment::config::EngineKind;
use tierscope_monitors::registry::DEFAULT_PRESETS;
use tierscope_monitors::MonitorConfig;

fn names(c: Capabilities) -> Vec<&'static str> {
    c.iter().map(|c| c.name()).collect()
}

/// Every monitor preset, in registry order: `name`, `type`, `help`, `requires` (capability
/// names), `default` (whether the quick form runs it without `--monitor`).
#[pyfunction]
pub fn monitor_presets(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    MonitorConfig::presets()
        .into_iter()
        .map(|p| {
            let d = PyDict::new(py);
            d.set_item("name", p.name)?;
            d.set_item("type", p.config.kind())?;
            d.set_item("help", p.help)?;
            d.set_item("requires", names(p.config.requires()))?;
            d.set_item("default", DEFAULT_PRESETS.contains(&p.name))?;
            Ok(d)
        })
        .collect()
}

/// Every engine: `name`, `help`, `capabilities`, `real` (runs in real time).
#[pyfunction]
pub fn engines(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    EngineKind::ALL
        .into_iter()
        .map(|e| {
            let d = PyDict::new(py);
            d.set_item("name", e.name())?;
            d.set_item("help", e.help())?;
            d.set_item("capabilities", names(e.capabilities()))?;
            d.set_item("real", e.is_real())?;
            Ok(d)
        })
        .collect()
}

/// Every tiering policy: `name`, `help`, `needs_settings` (no default configuration: an
/// experiment file's table is needed).
#[pyfunction]
pub fn policies(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    tierscope_tiering::PolicyConfig::POLICIES
        .iter()
        .map(|&(name, help)| {
            let d = PyDict::new(py);
            d.set_item("name", name)?;
            d.set_item("help", help)?;
            d.set_item(
                "needs_settings",
                tierscope_tiering::PolicyConfig::named(name).is_none(),
            )?;
            Ok(d)
        })
        .collect()
}

/// Every tier preset: `name`, `latency_ns`, `bandwidth` (bytes/s), `source`.
#[pyfunction]
pub fn tier_presets(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    tierscope_core::tiers::TIER_PRESETS
        .iter()
        .map(|p| {
            let d = PyDict::new(py);
            d.set_item("name", p.name)?;
            d.set_item("latency_ns", p.latency_ns)?;
            d.set_item("bandwidth", p.bandwidth)?;
            d.set_item("source", p.source)?;
            Ok(d)
        })
        .collect()
}

/// The initial placements' names, the default first.
#[pyfunction]
pub fn placements() -> Vec<&'static str> {
    tierscope_core::tiers::InitialPlacement::NAMES.to_vec()
}

/// damo schemes as tierscope reads them (`form`: "line" for damo's `--damos_*` options,
/// "json" for damo's JSON), each in the shape and units of `damo args damon --format json
/// --raw` for the keys tierscope models (tests compare them with damo's own output). With
/// `intervals` (sample, aggregation; ns) each also has `bounds`: the `nr_accesses` and age
/// ranges the kernel would get from damo. A line or document tierscope refuses raises
/// ValueError with its one-line reason.
#[pyfunction]
#[pyo3(signature = (text, form, intervals = None))]
pub fn damos_schemes<'py>(
    py: Python<'py>,
    text: &str,
    form: &str,
    intervals: Option<(u64, u64)>,
) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::exceptions::PyValueError;
    use tierscope_tiering::policy::damos;
    let schemes = match form {
        "line" => damos::parse_damo(text),
        "json" => damos::parse_damo_json(&serde_json::Value::String(text.to_string())),
        other => {
            return Err(PyValueError::new_err(format!(
                "form: expected \"line\" or \"json\", got {other:?}"
            )))
        }
    }
    .map_err(PyValueError::new_err)?;
    let raw: Vec<serde_json::Value> = schemes
        .iter()
        .map(|s| {
            let mut v = s.damo_raw();
            if let Some((sample, aggr)) = intervals {
                let (nr, age) = s.kernel_bounds(tierscope_core::Intervals {
                    sample,
                    aggr,
                    ops_update: aggr,
                });
                v["bounds"] = serde_json::json!({"nr_accesses": nr, "age": age});
            }
            v
        })
        .collect();
    crate::convert::to_python(py, &raw)
}
