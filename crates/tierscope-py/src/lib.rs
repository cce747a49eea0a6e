//! Python bindings of tierscope, imported as `tierscope._core`.
//!
//! This crate only translates: experiments are parsed and run by `tierscope-experiment`;
//! everything a user touches (CLI, plots, exports) is Python. Rules kept here:
//! Rust errors become Python exceptions in one place ([`errors`]), no panic crosses into
//! Python ([`run`] catches them on the run thread), and large per-window arrays travel as
//! little-endian `bytes` that Python wraps with `numpy.frombuffer` ([`convert`]).

mod convert;
mod cori;
mod errors;
mod experiment;
mod nemo;
mod registry;
mod run;
mod trace;

use pyo3::prelude::*;

/// None when the kvm engine can run on this host, else the one-line reason (no /dev/kvm,
/// a missing capability).
#[pyfunction]
fn kvm_unavailable() -> Option<String> {
    tierscope_experiment::build::kvm_unavailable()
}

/// The input limits of docs/reference/EXPERIMENTS.md ("Limits"), by name (bytes, nanoseconds,
/// counts), from `tierscope_core::limits`: Python checks the files it reads against them
/// and the docs test compares its table with them.
#[pyfunction]
fn limits() -> std::collections::BTreeMap<&'static str, u64> {
    use tierscope_core::limits as l;
    [
        ("heap_bytes", l::MAX_HEAP),
        ("regions", l::MAX_REGIONS as u64),
        ("phases", l::MAX_PHASES as u64),
        ("patterns", l::MAX_PATTERNS as u64),
        ("duration_ns", l::MAX_DURATION_NS),
        ("rate", l::MAX_RATE),
        ("config_file_bytes", l::MAX_CONFIG_FILE),
        ("trace_file_bytes", l::MAX_TRACE_FILE),
        ("trace_line_bytes", l::MAX_TRACE_LINE as u64),
        ("trace_accesses", l::MAX_TRACE_ACCESSES),
        ("sweep_runs", l::MAX_SWEEP_RUNS as u64),
        ("kept_bytes_per_monitor", l::MAX_KEPT_BYTES),
        ("policy_windows", l::MAX_POLICY_WINDOWS),
        ("cori_scale", tierscope_cori::workloads::MAX_SCALE),
    ]
    .into_iter()
    .collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    m.add("RunError", py.get_type::<errors::RunError>())?;
    m.add("Cancelled", py.get_type::<errors::Cancelled>())?;
    m.add("Unavailable", py.get_type::<errors::Unavailable>())?;
    m.add_class::<experiment::PyExperiment>()?;
    m.add_class::<experiment::PySweepRun>()?;
    m.add_class::<run::RunHandle>()?;
    m.add_function(wrap_pyfunction!(experiment::expand_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(registry::monitor_presets, m)?)?;
    m.add_function(wrap_pyfunction!(registry::engines, m)?)?;
    m.add_function(wrap_pyfunction!(registry::policies, m)?)?;
    m.add_function(wrap_pyfunction!(registry::tier_presets, m)?)?;
    m.add_function(wrap_pyfunction!(registry::placements, m)?)?;
    m.add_function(wrap_pyfunction!(registry::damos_schemes, m)?)?;
    m.add_function(wrap_pyfunction!(experiment::parse_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(run::start_run, m)?)?;
    m.add_function(wrap_pyfunction!(kvm_unavailable, m)?)?;
    m.add_function(wrap_pyfunction!(limits, m)?)?;
    m.add_class::<cori::PyTrace>()?;
    m.add_function(wrap_pyfunction!(cori::cori_dominant_reuse, m)?)?;
    m.add_function(wrap_pyfunction!(cori::cori_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(cori::cori_baseline, m)?)?;
    m.add_function(wrap_pyfunction!(cori::cori_tune, m)?)?;
    m.add_function(wrap_pyfunction!(cori::cori_trials_to_within, m)?)?;
    m.add_function(wrap_pyfunction!(nemo::nemo_thp_split, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_page_stats, m)?)?;
    m.add_function(wrap_pyfunction!(trace::workload_page_stats, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
