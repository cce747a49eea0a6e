//! The one place where Rust errors become Python exceptions.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    tierscope,
    ConfigError,
    PyValueError,
    "An experiment, workload, sweep or option that cannot be used. `str(e)` is one line \
     naming the file, the line where known, and the field; `file`, `line`, `field` and \
     `message` hold the parts."
);
pyo3::create_exception!(
    tierscope,
    RunError,
    PyRuntimeError,
    "A run that started but did not finish."
);
pyo3::create_exception!(
    tierscope,
    Unavailable,
    RunError,
    "The experiment's engine cannot run on this host (the kvm engine without /dev/kvm or a \
     KVM capability it needs). `str(e)` is one line naming the reason; the CLI exits 2."
);
pyo3::create_exception!(
    tierscope,
    Cancelled,
    RunError,
    "A run stopped because `cancel()` was called (for example on Ctrl-C)."
);

/// `ConfigError` with its parts as attributes, so callers need not parse the message.
pub fn config_error(py: Python<'_>, e: &tierscope_core::FieldError) -> PyErr {
    let err = ConfigError::new_err(e.to_string());
    let value = err.value(py);
    // Setting attributes on a fresh exception instance cannot fail in practice; if it
    // did, the message alone still says everything, so the error is not replaced.
    let _ = value.setattr("file", &e.file);
    let _ = value.setattr("line", e.line);
    let _ = value.setattr("field", &e.field);
    let _ = value.setattr("message", &e.message);
    err
}

/// Why a run thread ended without a result.
#[derive(Debug)]
pub enum Failure {
    Run(tierscope_experiment::RunError),
    /// A bug: a panic on the run thread, caught before it could reach Python.
    Panic(String),
}

pub fn run_error(f: Failure) -> PyErr {
    match f {
        Failure::Run(tierscope_experiment::RunError::Cancelled) => {
            Cancelled::new_err("run cancelled")
        }
        Failure::Run(e @ tierscope_experiment::RunError::Engine(_)) => {
            RunError::new_err(e.to_string())
        }
        Failure::Run(e @ tierscope_experiment::RunError::Unavailable(_)) => {
            Unavailable::new_err(e.to_string())
        }
        // A limit the run reached: bad input, as a ConfigError (exit status 2).
        Failure::Run(tierscope_experiment::RunError::Limit(e)) => {
            Python::attach(|py| config_error(py, &e))
        }
        Failure::Panic(m) => RunError::new_err(format!(
            "internal error (a bug in tierscope, please report it): {m}"
        )),
    }
}
