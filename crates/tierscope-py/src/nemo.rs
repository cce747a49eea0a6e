//! NEMO's noisy-neighbour use case (paper §5.3) from Python: one call runs every
//! technique and returns the table's rows as dicts. `tierscope repro nemo` formats them;
//! docs/NEMO.md ("Use case 3") describes the model behind them.

use crate::errors::config_error;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tierscope_nemo::noisy::{run, Config, Technique};

const GIB: f64 = (1u64 << 30) as f64;

/// Runs `Config::paper()` with the given overrides; one dict per technique, victim alone
/// first. Times in seconds or ns as named, bandwidths in GiB/s, shares as fractions.
/// A bad value raises `ConfigError` naming its field.
#[pyfunction]
#[pyo3(signature = (
    seed = 1,
    duration_s = 10.0,
    victim_gib_s = 2.0,
    cap_gib_s = 1.0,
    mbm_intervals_ms = vec![1.0, 10.0, 100.0],
    ewma = 0.5,
    gain = 0.5,
))]
#[allow(clippy::too_many_arguments)]
pub fn nemo_noisy_neighbour<'py>(
    py: Python<'py>,
    seed: u64,
    duration_s: f64,
    victim_gib_s: f64,
    cap_gib_s: f64,
    mbm_intervals_ms: Vec<f64>,
    ewma: f64,
    gain: f64,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let mut config = Config {
        seed,
        duration_s,
        mbm_intervals_s: mbm_intervals_ms.iter().map(|ms| ms * 1e-3).collect(),
        ..Config::paper()
    };
    config.victim.demand = victim_gib_s * GIB;
    config.controller.target = cap_gib_s * GIB;
    config.controller.ewma = ewma;
    config.controller.gain = gain;
    let table = py
        .detach(|| run(&config))
        .map_err(|e| config_error(py, &e))?;
    table
        .rows
        .iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("technique", r.technique.name())?;
            let interval_s = match r.technique {
                Technique::Mbm { interval_s } => Some(interval_s),
                _ => None,
            };
            d.set_item("mbm_interval_s", interval_s)?;
            d.set_item("victim_p50_ns", r.victim_p50_ns)?;
            d.set_item("victim_p99_ns", r.victim_p99_ns)?;
            d.set_item("p99_increase", r.p99_increase)?;
            d.set_item("neighbour_gib_s", r.neighbour_bandwidth / GIB)?;
            d.set_item("cpu_share", r.cpu_share)?;
            d.set_item("detection_s", r.detection_s)?;
            d.set_item("on_phases", r.on_phases)?;
            d.set_item("detected", r.detected)?;
            d.set_item("start_quota", r.start_quota)?;
            d.set_item("bandwidth_error", r.bandwidth_error)?;
            d.set_item("samples", r.samples)?;
            d.set_item("quota_writes", r.quota_writes)?;
            d.set_item("paper", r.technique.paper())?;
            Ok(d)
        })
        .collect()
}

/// NEMO's THP split-candidate use case (paper §5.2) on `experiment` (statistical engine):
/// per fast-tier share of the heap (1:8 is 1/9), the truth's row, then MEMTIS-PEBS's and
/// MEMTIS-NEMO's, as dicts (the techniques run once). docs/NEMO.md ("Use case 2").
#[pyfunction]
#[pyo3(signature = (experiment, fast_shares = vec![1.0 / 3.0, 1.0 / 9.0]))]
pub fn nemo_thp_split<'py>(
    py: Python<'py>,
    experiment: &crate::experiment::PyExperiment,
    fast_shares: Vec<f64>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    use tierscope_experiment::nemo_thp::{run, ThpSplitOptions};
    if let Some(bad) = fast_shares.iter().find(|s| !(**s > 0.0 && **s < 1.0)) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "fast shares must be between 0 and 1, got {bad}"
        )));
    }
    let opts = ThpSplitOptions {
        fast_shares,
        ..ThpSplitOptions::default()
    };
    let exp = &experiment.inner;
    let rows = py
        .detach(|| run(exp, &opts))
        .map_err(|e| crate::errors::run_error(crate::errors::Failure::Run(e)))?;
    rows.iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("fast_share", r.fast_share)?;
            d.set_item("technique", r.technique)?;
            d.set_item("candidates", r.candidates)?;
            d.set_item("found_95_s", r.found_95_s)?;
            d.set_item("found_end", r.found_end)?;
            d.set_item("exact_end", r.exact_end)?;
            d.set_item("false_candidates", r.false_candidates)?;
            d.set_item("cpu_percent", r.cpu_percent)?;
            d.set_item("buckets", r.buckets.clone())?;
            Ok(d)
        })
        .collect()
}
