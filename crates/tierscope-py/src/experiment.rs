//! Parsing experiments, and the parsed experiment as a Python object (a run needs the
//! Rust value, which has no deserialiser, so Python holds it rather than its JSON).

use crate::errors;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use tierscope_experiment::{Experiment, Format};

/// A validated experiment with presets expanded. `to_json()` is its normalized form.
#[pyclass(frozen, module = "tierscope._core", name = "Experiment")]
pub struct PyExperiment {
    pub inner: Experiment,
}

#[pymethods]
impl PyExperiment {
    fn to_json(&self) -> String {
        self.inner.to_json()
    }

    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.inner.seed
    }

    #[getter]
    fn duration_ns(&self) -> u64 {
        self.inner.duration_ns
    }

    #[getter]
    fn hot_threshold(&self) -> u32 {
        self.inner.hot_threshold
    }

    #[getter]
    fn block_size(&self) -> u64 {
        self.inner.block_size
    }

    #[getter]
    fn engine(&self) -> &'static str {
        self.inner.machine.engine.name()
    }

    /// The workload's phases in order (one pass of its cycle): their durations, ns.
    #[getter]
    fn phase_durations_ns(&self) -> Vec<u64> {
        self.inner
            .workload
            .spec
            .phases
            .iter()
            .map(|p| p.duration.0)
            .collect()
    }

    #[getter]
    fn monitor_names(&self) -> Vec<String> {
        self.inner.monitors.iter().map(|m| m.name.clone()).collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Experiment(name={:?}, monitors={:?}, duration_ns={})",
            self.inner.name,
            self.monitor_names(),
            self.inner.duration_ns
        )
    }
}

fn format_of(format: &str) -> PyResult<Format> {
    match format {
        "toml" => Ok(Format::Toml),
        "json" => Ok(Format::Json),
        other => Err(PyValueError::new_err(format!(
            "format: expected \"toml\" or \"json\", got {other:?}"
        ))),
    }
}

/// Parses and validates an experiment given as TOML or JSON text. `source` names it in
/// errors; relative paths inside it are resolved against `base_dir`.
#[pyfunction]
pub fn parse_experiment(
    py: Python<'_>,
    text: &str,
    source: &str,
    base_dir: PathBuf,
    format: &str,
) -> PyResult<PyExperiment> {
    tierscope_experiment::parse_experiment(text, source, &base_dir, format_of(format)?)
        .map(|inner| PyExperiment { inner })
        .map_err(|e| errors::config_error(py, &e))
}

/// One run of an expanded sweep.
#[pyclass(frozen, module = "tierscope._core", name = "SweepRun")]
pub struct PySweepRun {
    #[pyo3(get)]
    id: String,
    /// `[(axis name, value as JSON text)]`, seed last.
    #[pyo3(get)]
    params: Vec<(String, String)>,
    #[pyo3(get)]
    dropped: Vec<String>,
    #[pyo3(get)]
    experiment: Py<PyExperiment>,
}

/// Expands a sweep (TOML or JSON text) into its runs, in order. Pure: nothing runs.
/// `overrides`: `(PATH, VALUE)` pairs of the command line's `--set`, typed by the config
/// and applied to every run after the sweep's `set`.
#[pyfunction]
#[pyo3(signature = (text, source, base_dir, format, overrides = Vec::new()))]
pub fn expand_sweep(
    py: Python<'_>,
    text: &str,
    source: &str,
    base_dir: PathBuf,
    format: &str,
    overrides: Vec<(String, String)>,
) -> PyResult<Vec<PySweepRun>> {
    let runs = tierscope_experiment::sweep::expand_sweep_overridden(
        text,
        source,
        &base_dir,
        format_of(format)?,
        &overrides,
    )
    .map_err(|e| errors::config_error(py, &e))?;
    runs.into_iter()
        .map(|r| {
            Ok(PySweepRun {
                id: r.id,
                params: r
                    .params
                    .into_iter()
                    .map(|(k, v)| (k, v.to_string()))
                    .collect(),
                dropped: r.dropped,
                experiment: Py::new(
                    py,
                    PyExperiment {
                        inner: r.experiment,
                    },
                )?,
            })
        })
        .collect()
}
