//! NEMO's THP split candidates (§5.2) from Python: one call returning the table's rows as
//! dicts (serde rows through `convert::to_python`, the binding's one way to Python).
//! `tierscope repro nemo` formats them; docs/techniques/NEMO.md ("Use case 2") describes
//! the model behind them. (The noisy neighbour, §5.3, is an experiment file.)

use crate::convert::to_python;
use pyo3::prelude::*;
use serde::Serialize;

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
