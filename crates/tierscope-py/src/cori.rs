//! Cori from Python: traces (read in cori-sim's format or generated), their reuse
//! histograms, the dominant reuse and candidate periods, cori-sim's runtime model, and the
//! tuner over any cost function (a Python callable: an experiment run, or the model).
//! `tierscope tune` and `tierscope repro cori` are built on these; docs/techniques/CORI.md describes
//! the Rust side.

use crate::errors::config_error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use tierscope_core::units::Size;
use tierscope_core::workload::trace::{LackeyOptions, Trace as Accesses};
use tierscope_cori::misses::llc_misses;
use tierscope_cori::tuner::{self, Stop};
use tierscope_cori::workloads::Workload;
use tierscope_cori::{
    candidate_periods, dominant_reuse, run, Bar, Edges, ModelConfig, ReuseHistogram, Scheduler,
    Trace,
};
use tierscope_nemo::LlcConfig;

/// A trace of page accesses, as cori-sim reads it.
#[pyclass(name = "CoriTrace", frozen)]
pub struct PyTrace {
    trace: Trace,
}

fn scheduler(name: &str) -> PyResult<Scheduler> {
    Scheduler::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| {
            PyValueError::new_err(format!("unknown scheduler `{name}` (history, oracle)"))
        })
}

#[pymethods]
impl PyTrace {
    /// Reads a trace in cori-sim's format (one address per line, as Python's `int(x, 0)`
    /// reads it); `ConfigError` names the file and line of bad input.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: PathBuf) -> PyResult<PyTrace> {
        let trace = py
            .detach(|| Trace::from_file(&path))
            .map_err(|e| config_error(py, &e))?;
        Ok(PyTrace { trace })
    }

    /// Reads a program's valgrind lackey trace (`--trace-mem=yes`; instruction fetches
    /// left out; the path may be a FIFO valgrind writes into) and returns its loads and
    /// stores and, for each cache shape `(bytes, ways)`, the trace of the requests that
    /// miss such a last-level cache (`None`: every load and store), as the Cori paper's
    /// traces are (tierscope_cori::misses).
    #[staticmethod]
    fn from_lackey(
        py: Python<'_>,
        path: PathBuf,
        caches: Vec<Option<(u64, u32)>>,
    ) -> PyResult<(usize, Vec<PyTrace>)> {
        let shapes = caches
            .iter()
            .map(|c| {
                c.map(|(size, ways)| {
                    let llc = LlcConfig {
                        size: Size(size),
                        ways,
                    };
                    llc.validate().map(|()| llc)
                })
                .transpose()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| config_error(py, &e))?;
        let shown = path.display().to_string();
        let (accesses, traces) = py
            .detach(|| {
                let accesses = Accesses::read_lackey_file(
                    &path,
                    &shown,
                    LackeyOptions {
                        instructions: false,
                    },
                )?;
                let traces = shapes
                    .iter()
                    .map(|llc| llc_misses(&accesses.records, llc.as_ref()))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok::<_, tierscope_core::FieldError>((accesses.records.len(), traces))
            })
            .map_err(|e| config_error(py, &e))?;
        Ok((
            accesses,
            traces.into_iter().map(|trace| PyTrace { trace }).collect(),
        ))
    }

    /// Writes the trace in cori-sim's format (each request as its page's first byte);
    /// `from_file` reads it back as the same trace.
    fn write(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| {
            let f = std::fs::File::create(&path)?;
            self.trace.write_cori_sim(std::io::BufWriter::new(f))
        })
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))
    }

    /// One of the shipped workloads shaped like the Cori paper's Figure 2 (`strided`,
    /// `triangular`, `random`, `irregular`, `iterative`), seeded, about `scale` x 300 K
    /// requests.
    #[staticmethod]
    fn generate(name: &str, seed: u64, scale: u64) -> PyResult<PyTrace> {
        let w = Workload::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
                PyValueError::new_err(format!("unknown workload `{name}` ({})", names.join(", ")))
            })?;
        Ok(PyTrace {
            trace: w.generate(seed, scale).map_err(PyValueError::new_err)?,
        })
    }

    /// The workloads `generate` knows.
    #[staticmethod]
    fn workloads() -> Vec<&'static str> {
        Workload::ALL.iter().map(|w| w.name()).collect()
    }

    #[getter]
    fn requests(&self) -> usize {
        self.trace.len()
    }

    #[getter]
    fn pages(&self) -> usize {
        self.trace.num_pages()
    }

    /// cori-sim's reuse bars: `(reuse distance in requests, mean repeats)` per bucket of
    /// `bucket` requests, bucket 0 and bars of 2 or less dropped.
    #[pyo3(signature = (bucket = tierscope_cori::CORI_BUCKET))]
    fn bars(&self, bucket: u64) -> PyResult<Vec<(u64, f64)>> {
        if bucket == 0 {
            return Err(PyValueError::new_err("bucket must be at least 1 request"));
        }
        let bars = ReuseHistogram::new(&self.trace, bucket, Edges::CoriSim).cori_bars();
        Ok(bars.iter().map(|b| (b.reuse, b.height)).collect())
    }

    /// cori-sim's model at a period of `period` requests (0: never reschedule): a dict of
    /// the run's counts and times (ns), `runtime_ns` among them.
    #[pyo3(signature = (period, scheduler_name = "history", count_quantum = 20, fast_ratio = 0.2))]
    fn model<'py>(
        &self,
        py: Python<'py>,
        period: u64,
        scheduler_name: &str,
        count_quantum: u32,
        fast_ratio: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let config = ModelConfig {
            scheduler: scheduler(scheduler_name)?,
            count_quantum,
            fast_ratio,
            ..ModelConfig::cori_sim(Scheduler::History)
        };
        let s = py
            .detach(|| run(&self.trace, &config, period))
            .map_err(|e| config_error(py, &e))?;
        let d = PyDict::new(py);
        d.set_item("period", s.period)?;
        d.set_item("periods", s.periods)?;
        d.set_item("reschedules", s.reschedules)?;
        d.set_item("fast_hits", s.fast_hits)?;
        d.set_item("migrated_pages", s.migrated_pages)?;
        d.set_item("queue_ns", s.queue_ns)?;
        d.set_item("runtime_ns", s.runtime_ns)?;
        d.set_item("all_fast_ns", s.all_fast_ns)?;
        d.set_item("all_slow_ns", s.all_slow_ns)?;
        Ok(d)
    }
}

/// Eq. 1's dominant reuse of `(reuse, height)` bars, or None without bars.
#[pyfunction]
pub fn cori_dominant_reuse(bars: Vec<(u64, f64)>) -> Option<u64> {
    let bars: Vec<Bar> = bars
        .into_iter()
        .map(|(reuse, height)| Bar { reuse, height })
        .collect();
    dominant_reuse(&bars)
}

/// Cori's candidate periods: `dr, 2 dr, ...` up to `runtime / 2`, one per distinct number
/// of periods.
#[pyfunction]
pub fn cori_candidates(dominant_reuse: u64, runtime: u64) -> Vec<u64> {
    candidate_periods(dominant_reuse, runtime)
}

/// The baselines' grid (`timestep`, 2 `timestep`, ... up to `runtime / 2`) in the orders
/// the paper names: `left` (longest first), `right` (shortest first), `random` (seeded).
#[pyfunction]
pub fn cori_baseline(order: &str, timestep: u64, runtime: u64, seed: u64) -> PyResult<Vec<u64>> {
    let grid = tuner::base_grid(timestep, runtime);
    match order {
        "left" => Ok(tuner::base_left(&grid)),
        "right" => Ok(tuner::base_right(&grid)),
        "random" => Ok(tuner::base_random(&grid, seed)),
        _ => Err(PyValueError::new_err(format!(
            "unknown baseline `{order}` (left, right, random)"
        ))),
    }
}

/// Tries `periods` in order with `cost(period) -> runtime` until a stopping rule fires:
/// `stops` holds `("trials", n)`, `("within", percent)`, `("no-gain", k)`. Returns
/// `(trials as [(period, runtime)], chosen (period, runtime) or None)`. An exception
/// raised by `cost` stops the tuning and propagates.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn cori_tune(
    periods: Vec<u64>,
    cost: Bound<'_, PyAny>,
    stops: Vec<(String, f64)>,
) -> PyResult<(Vec<(u64, f64)>, Option<(u64, f64)>)> {
    let stops = stops
        .iter()
        .map(|(kind, v)| match kind.as_str() {
            "trials" if *v >= 1.0 => Ok(Stop::Trials(*v as usize)),
            "within" if *v >= 0.0 => Ok(Stop::WithinBest(*v)),
            "no-gain" if *v >= 1.0 => Ok(Stop::NoGain(*v as usize)),
            _ => Err(PyValueError::new_err(format!(
                "bad stopping rule ({kind}, {v}): expected trials >= 1, within >= 0 or \
                 no-gain >= 1"
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    // The tuner takes a plain function: the first Python error is kept and every later
    // trial is cut short (an infinite runtime stops nothing, so the periods run out fast).
    let failed: std::cell::RefCell<Option<PyErr>> = Default::default();
    let tuning = tuner::tune(
        &periods,
        |p| {
            if failed.borrow().is_some() {
                return f64::INFINITY;
            }
            match cost.call1((p,)).and_then(|r| r.extract::<f64>()) {
                Ok(v) => v,
                Err(e) => {
                    *failed.borrow_mut() = Some(e);
                    f64::INFINITY
                }
            }
        },
        &stops,
    );
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    Ok((
        tuning
            .trials
            .iter()
            .map(|t| (t.period, t.runtime))
            .collect(),
        tuning.chosen.map(|t| (t.period, t.runtime)),
    ))
}

/// Trials `order` needs before a period runs within `percent` % of `best`, each period's
/// runtime looked up in `runtimes` (a period missing from it is an error); None when none
/// does. `order = "random"` with `seeds`: base-random's mean over those seeds' orders of
/// the grid `periods`.
#[pyfunction]
#[pyo3(signature = (periods, runtimes, best, percent, random_seeds = None))]
pub fn cori_trials_to_within(
    periods: Vec<u64>,
    runtimes: std::collections::HashMap<u64, f64>,
    best: f64,
    percent: f64,
    random_seeds: Option<Vec<u64>>,
) -> PyResult<Option<f64>> {
    if let Some(p) = periods.iter().find(|p| !runtimes.contains_key(p)) {
        return Err(PyValueError::new_err(format!("no runtime for period {p}")));
    }
    let cost = |p: u64| runtimes[&p];
    Ok(match random_seeds {
        None => tuner::trials_to_within(&periods, cost, best, percent).map(|t| t as f64),
        Some(seeds) => tuner::mean_trials_to_within(&periods, cost, best, percent, &seeds),
    })
}
