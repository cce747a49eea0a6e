//! Memory traces from Python: lackey's text output converted to tierscope's binary format
//! (`tierscope trace convert`), both read by the same Rust code the replay uses.

use crate::errors::config_error;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tierscope_core::workload::trace::{LackeyOptions, PageStats, Trace, STORE};
use tierscope_core::FieldError;

/// Reads a trace within the limits of docs/reference/EXPERIMENTS.md ("Limits").
fn read(src: &str, format: &str, instructions: bool) -> Result<Trace, FieldError> {
    let path = std::path::Path::new(src);
    match format {
        "lackey" => Trace::read_lackey_file(path, src, LackeyOptions { instructions }),
        "binary" => Trace::read_binary_file(path, src),
        other => Err(FieldError::new(
            "format",
            format!("`{other}` is not a trace format (lackey, binary)"),
        )),
    }
}

/// Reads the trace `src` (`format` lackey or binary) and, when `dst` is given, writes it in
/// the binary format. Returns its accesses, stores, markers and touched 4 KiB pages.
#[pyfunction]
#[pyo3(signature = (src, format = "lackey", dst = None, instructions = false))]
pub fn trace_convert<'py>(
    py: Python<'py>,
    src: &str,
    format: &str,
    dst: Option<&str>,
    instructions: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let t = read(src, format, instructions).map_err(|e| config_error(py, &e))?;
    if let Some(dst) = dst {
        let out = std::fs::File::create(dst)
            .map_err(|e| config_error(py, &FieldError::new("", format!("{dst}: {e}"))))?;
        let mut w = std::io::BufWriter::new(out);
        t.write_binary(&mut w)
            .and_then(|()| std::io::Write::flush(&mut w))
            .map_err(|e| config_error(py, &FieldError::new("", format!("{dst}: {e}"))))?;
    }
    let mut pages: Vec<u64> = t.records.iter().map(|r| (r & !STORE) >> 12).collect();
    pages.sort_unstable();
    pages.dedup();
    let d = PyDict::new(py);
    d.set_item("accesses", t.records.len())?;
    d.set_item(
        "stores",
        t.records.iter().filter(|&&r| r & STORE != 0).count(),
    )?;
    d.set_item("markers", t.markers.clone())?;
    d.set_item("pages", pages.len())?;
    Ok(d)
}

fn stats_dict<'py>(py: Python<'py>, s: &PageStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("accesses", s.accesses)?;
    d.set_item("pages", s.pages)?;
    d.set_item("pages_80", s.pages_80)?;
    Ok(d)
}

/// How the accesses of trace `src` (of phase `phase` only, when given) spread over 4 KiB
/// pages: accesses, pages touched, the fewest pages taking 80 % of the accesses.
#[pyfunction]
#[pyo3(signature = (src, format = "lackey", phase = None, instructions = false))]
pub fn trace_page_stats<'py>(
    py: Python<'py>,
    src: &str,
    format: &str,
    phase: Option<&str>,
    instructions: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let t = read(src, format, instructions).map_err(|e| config_error(py, &e))?;
    let s = t.page_stats(phase).ok_or_else(|| {
        let names: Vec<&str> = t.markers.iter().map(|m| m.1.as_str()).collect();
        config_error(
            py,
            &FieldError::new(
                "phase",
                format!(
                    "no phase `{}` in {src} (its phases: {})",
                    phase.unwrap_or(""),
                    names.join(", ")
                ),
            ),
        )
    })?;
    stats_dict(py, &s)
}

/// The same statistics for the first `accesses` accesses of an experiment's workload.
#[pyfunction]
pub fn workload_page_stats<'py>(
    py: Python<'py>,
    experiment: &crate::experiment::PyExperiment,
    accesses: i64,
) -> PyResult<Bound<'py, PyDict>> {
    let limit = tierscope_core::limits::MAX_TRACE_ACCESSES;
    let accesses = u64::try_from(accesses)
        .ok()
        .filter(|a| (1..=limit).contains(a))
        .ok_or_else(|| {
            config_error(
                py,
                &FieldError::new(
                    "accesses",
                    format!("expected 1 to {limit} accesses, got {accesses}"),
                ),
            )
        })?;
    let exp = &experiment.inner;
    let s = py
        .detach(|| tierscope_experiment::page_stats::workload_page_stats(exp, accesses))
        .map_err(|e| config_error(py, &FieldError::new("workload", e)))?;
    stats_dict(py, &s)
}
