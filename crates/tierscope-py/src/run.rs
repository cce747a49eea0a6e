//! Runs on a Rust thread so that Python stays responsive: it polls `progress()` and
//! `done()`, and on Ctrl-C calls `cancel()` and then `result()` to join.

use crate::convert;
use crate::errors::{self, Failure};
use crate::experiment::PyExperiment;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use tierscope_experiment::{run_experiment, Progress, RunResult};

type Outcome = Result<RunResult, Failure>;

/// A run in progress on a background thread.
#[pyclass(frozen, module = "tierscope._core")]
pub struct RunHandle {
    progress: Arc<Progress>,
    /// `None` once `result()` has joined the thread.
    thread: Mutex<Option<JoinHandle<Outcome>>>,
}

/// Locks without panicking: no code panics while holding these locks, and if one ever
/// did, the data (a join handle) is still valid.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Starts running `experiment` on a background thread with up to `max_threads` worker
/// threads (0: one per core; negative: a `ConfigError` naming `threads`).
#[pyfunction]
#[pyo3(signature = (experiment, max_threads = 0))]
pub fn start_run(experiment: PyRef<'_, PyExperiment>, max_threads: i64) -> PyResult<RunHandle> {
    let max_threads = usize::try_from(max_threads).map_err(|_| {
        errors::config_error(
            experiment.py(),
            &tierscope_core::FieldError::new(
                "threads",
                format!("must be 0 (one per core) or more, got {max_threads}"),
            ),
        )
    })?;
    let exp = experiment.inner.clone();
    let progress = Arc::new(Progress::for_experiment(&exp));
    let shared = Arc::clone(&progress);
    let thread = std::thread::Builder::new()
        .name("tierscope-run".into())
        .spawn(move || {
            catch_unwind(AssertUnwindSafe(|| {
                run_experiment(&exp, &shared, max_threads).map_err(Failure::Run)
            }))
            .unwrap_or_else(|p| Err(Failure::Panic(panic_message(p.as_ref()))))
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the run thread: {e}")))?;
    Ok(RunHandle {
        progress,
        thread: Mutex::new(Some(thread)),
    })
}

#[pymethods]
impl RunHandle {
    /// Simulated nanoseconds done (summed over monitors) and the total to do.
    fn progress(&self) -> (u64, u64) {
        self.progress.fraction()
    }

    /// True when the run thread has finished (or its result was taken).
    fn done(&self) -> bool {
        match lock(&self.thread).as_ref() {
            Some(h) => h.is_finished(),
            None => true,
        }
    }

    /// Asks the run to stop at the next monitor wake-up; `result()` then raises
    /// `Cancelled`.
    fn cancel(&self) {
        self.progress.cancel();
    }

    /// Waits for the run and returns its result as a dict (see convert.rs for the
    /// layout). Raises `RunError`, or `Cancelled` after `cancel()`. Can be called once.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let handle = lock(&self.thread)
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the result was already taken"))?;
        // Joining without the interpreter lock lets other Python threads run meanwhile.
        let outcome = py
            .detach(move || handle.join())
            .unwrap_or_else(|p| Err(Failure::Panic(panic_message(p.as_ref()))));
        let result = outcome.map_err(errors::run_error)?;
        convert::run_result(py, &result)
    }
}
