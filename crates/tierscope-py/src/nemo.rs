//! NEMO's use cases from Python: the noisy neighbour (paper §5.3) and the THP split
//! candidates (§5.2), each one call returning the table's rows as dicts (serde rows through
//! `convert::to_python`, the binding's one way to Python). `tierscope repro nemo` formats
//! them; docs/techniques/NEMO.md ("Use case 2", "Use case 3") describes the models behind them.

use crate::convert::to_python;
use crate::errors::config_error;
use pyo3::prelude::*;
use serde::Serialize;
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
) -> PyResult<Bound<'py, PyAny>> {
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
    let rows: Vec<NoisyRow> = table.rows.iter().map(NoisyRow::from).collect();
    to_python(py, &rows)
}

/// A row of the noisy-neighbour table as Python sees it.
#[derive(Serialize)]
struct NoisyRow {
    technique: String,
    /// The MBM polling interval, s (None for the other techniques).
    mbm_interval_s: Option<f64>,
    victim_p50_ns: f64,
    victim_p99_ns: f64,
    p99_increase: Option<f64>,
    neighbour_gib_s: f64,
    cpu_share: Option<f64>,
    detection_s: Option<f64>,
    on_phases: u64,
    detected: u64,
    start_quota: Option<f64>,
    bandwidth_error: Option<f64>,
    samples: u64,
    quota_writes: u64,
    paper: &'static str,
}

impl From<&tierscope_nemo::noisy::Row> for NoisyRow {
    fn from(r: &tierscope_nemo::noisy::Row) -> Self {
        NoisyRow {
            technique: r.technique.name(),
            mbm_interval_s: match r.technique {
                Technique::Mbm { interval_s } => Some(interval_s),
                _ => None,
            },
            victim_p50_ns: r.victim_p50_ns,
            victim_p99_ns: r.victim_p99_ns,
            p99_increase: r.p99_increase,
            neighbour_gib_s: r.neighbour_bandwidth / GIB,
            cpu_share: r.cpu_share,
            detection_s: r.detection_s,
            on_phases: r.on_phases,
            detected: r.detected,
            start_quota: r.start_quota,
            bandwidth_error: r.bandwidth_error,
            samples: r.samples,
            quota_writes: r.quota_writes,
            paper: r.technique.paper(),
        }
    }
}

/// NEMO's THP split-candidate use case (paper §5.2) on `experiment` (statistical engine):
/// per fast-tier share of the heap (1:8 is 1/9), the truth's row, then MEMTIS-PEBS's and
/// MEMTIS-NEMO's, as dicts (the techniques run once). docs/techniques/NEMO.md ("Use case 2").
#[pyfunction]
#[pyo3(signature = (experiment, fast_shares = vec![1.0 / 3.0, 1.0 / 9.0]))]
pub fn nemo_thp_split<'py>(
    py: Python<'py>,
    experiment: &crate::experiment::PyExperiment,
    fast_shares: Vec<f64>,
) -> PyResult<Bound<'py, PyAny>> {
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
    let rows: Vec<ThpRow> = rows.iter().map(ThpRow::from).collect();
    to_python(py, &rows)
}

/// A row of the THP split-candidate table as Python sees it (`ThpSplitRow`'s fields).
#[derive(Serialize)]
struct ThpRow<'a> {
    fast_share: f64,
    technique: &'static str,
    candidates: usize,
    found_95_s: Option<f64>,
    found_end: f64,
    exact_end: f64,
    false_candidates: usize,
    cpu_percent: f64,
    buckets: &'a [usize],
}

impl<'a> From<&'a tierscope_experiment::nemo_thp::ThpSplitRow> for ThpRow<'a> {
    fn from(r: &'a tierscope_experiment::nemo_thp::ThpSplitRow) -> Self {
        ThpRow {
            fast_share: r.fast_share,
            technique: r.technique,
            candidates: r.candidates,
            found_95_s: r.found_95_s,
            found_end: r.found_end,
            exact_end: r.exact_end,
            false_candidates: r.false_candidates,
            cpu_percent: r.cpu_percent,
            buckets: &r.buckets,
        }
    }
}
