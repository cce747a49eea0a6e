//! The registries, as Python reads them: monitor presets and engines with what they need
//! and offer. The CLI's help and checks come from here, never from a copy.

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
