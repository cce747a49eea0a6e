//! Results to Python, one way: anything structured is a serde `Serialize` value that goes
//! through serde_json and `json.loads` ([`to_python`]), so its keys are exactly the Rust
//! field names (`RunResult`'s summary, cost, stats, intervals, heap, mappings, policies;
//! the NEMO use cases' rows in `nemo.rs`). Per-window and per-region arrays go as little-endian `bytes` (u64, u32 or
//! f64, named in `python/tierscope/results.py`), which Python wraps with
//! `numpy.frombuffer` without a per-element conversion.
//!
//! Layout of the dict:
//! ```text
//! {"duration_ns", "block_size", "heap": {"start", "end"}, "mappings": [...],
//!  "monitors": [{"name", "kind", "feed", "intervals", "summary", "cost", "machine", "impact",
//!                "monitor_cpu_ns", "program", "program_status",
//!                "kvm": null, or on the kvm engine the guards' figures and verdict
//!                       (`tierscope_kvm::guard::RealCheck`: "valid", "invalid_reason",
//!                       "rate_requested", "rate_achieved", ...),
//!                "windows":   {"start_ns", "end_ns", "precision", "recall", "f1",
//!                              "reported_hot_bytes", "true_hot_bytes", "nr_regions",
//!                              "cycles"},
//!                "snapshots": {"offsets", "start_ns", "end_ns",
//!                              "start", "end", "nr_accesses", "age"},
//!                "truth":     {"offsets", "start", "end"}}],
//!  "policies": [{"name", "policy", "kind", "monitor", "migration", "summary",
//!                "windows": [{"end_ns", "accesses", "served", "app_ns", "all_fast_ns",
//!                             "all_slow_ns", "latency_ns", "placed", "copied"}]}]}
//! ```
//! Policy windows are few (one per `[tiering] window`) and go through serde_json.
//! `offsets` has one entry per window plus one: window `i` owns elements
//! `offsets[i]..offsets[i + 1]` of the flattened arrays after it. Truth intervals are in
//! block numbers (`address / block_size`), half-open.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tierscope_experiment::{MonitorRun, RunResult};

/// Values that travel as little-endian bytes.
trait Le: Copy {
    fn put(self, out: &mut Vec<u8>);
}

impl Le for u64 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Le for u32 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Le for f64 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

fn pack<T: Le>(values: impl IntoIterator<Item = T>) -> Vec<u8> {
    let values = values.into_iter();
    let mut out = Vec::with_capacity(values.size_hint().0 * std::mem::size_of::<T>());
    for v in values {
        v.put(&mut out);
    }
    out
}

/// Fills `dict` with `(key, bytes)` pairs.
fn put_arrays(dict: &Bound<'_, PyDict>, arrays: Vec<(&str, Vec<u8>)>) -> PyResult<()> {
    for (key, data) in arrays {
        dict.set_item(key, PyBytes::new(dict.py(), &data))?;
    }
    Ok(())
}

/// Prefix sums of `lengths`, starting at 0: the flattened-array offsets.
fn offsets(lengths: impl Iterator<Item = usize>) -> Vec<u8> {
    let mut acc = 0u64;
    let mut all = vec![0u64];
    for n in lengths {
        acc += n as u64;
        all.push(acc);
    }
    pack(all)
}

fn windows<'py>(py: Python<'py>, m: &MonitorRun) -> PyResult<Bound<'py, PyDict>> {
    let w = &m.windows;
    let d = PyDict::new(py);
    put_arrays(
        &d,
        vec![
            ("start_ns", pack(w.iter().map(|x| x.start_ns))),
            ("end_ns", pack(w.iter().map(|x| x.end_ns))),
            ("precision", pack(w.iter().map(|x| x.precision))),
            ("recall", pack(w.iter().map(|x| x.recall))),
            ("f1", pack(w.iter().map(|x| x.f1))),
            (
                "reported_hot_bytes",
                pack(w.iter().map(|x| x.reported_hot_bytes)),
            ),
            ("true_hot_bytes", pack(w.iter().map(|x| x.true_hot_bytes))),
            ("nr_regions", pack(w.iter().map(|x| x.nr_regions))),
            ("cycles", pack(w.iter().map(|x| x.cycles))),
        ],
    )?;
    Ok(d)
}

fn snapshots<'py>(py: Python<'py>, m: &MonitorRun) -> PyResult<Bound<'py, PyDict>> {
    let s = &m.snapshots;
    let regions = || s.iter().flat_map(|snap| snap.regions.iter());
    let d = PyDict::new(py);
    put_arrays(
        &d,
        vec![
            ("offsets", offsets(s.iter().map(|x| x.regions.len()))),
            ("start_ns", pack(s.iter().map(|x| x.start))),
            ("end_ns", pack(s.iter().map(|x| x.end))),
            ("start", pack(regions().map(|r| r.start))),
            ("end", pack(regions().map(|r| r.end))),
            ("nr_accesses", pack(regions().map(|r| r.nr_accesses))),
            ("age", pack(regions().map(|r| r.age))),
        ],
    )?;
    Ok(d)
}

fn truth<'py>(py: Python<'py>, m: &MonitorRun) -> PyResult<Bound<'py, PyDict>> {
    let t = &m.truth;
    let all: Vec<(u64, u64)> = t.iter().flatten().copied().collect();
    let d = PyDict::new(py);
    put_arrays(
        &d,
        vec![
            ("offsets", offsets(t.iter().map(Vec::len))),
            ("start", pack(all.iter().map(|x| x.0))),
            ("end", pack(all.iter().map(|x| x.1))),
        ],
    )?;
    Ok(d)
}

fn to_json(value: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(value)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot serialise a result: {e}")))
}

/// `value` as Python objects (dicts, lists, numbers, strings, None) through JSON. Floats
/// keep their exact value; NaN and infinities become None, as in metrics.json.
pub fn to_python<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?
        .getattr("loads")?
        .call1((to_json(value)?,))
}

/// The whole result as a dict (layout in the module comment).
pub fn run_result<'py>(py: Python<'py>, r: &RunResult) -> PyResult<Bound<'py, PyDict>> {
    let meta = serde_json::json!({
        "duration_ns": r.duration_ns,
        "block_size": r.block_size,
        "heap": r.heap,
        "mappings": r.mappings,
        "monitors": r.monitors.iter().map(|m| serde_json::json!({
            "name": m.name,
            "kind": m.kind,
            "feed": m.feed,
            "intervals": m.intervals,
            "summary": m.summary,
            "cost": tierscope_experiment::cost::Listed(&m.cost),
            "machine": m.machine,
            "impact": m.impact,
            "monitor_cpu_ns": m.monitor_cpu_ns,
            "program": m.program,
            "program_status": m.program_status,
            "kvm": m.kvm,
        })).collect::<Vec<_>>(),
        "policies": r.policies,
    });
    let dict = to_python(py, &meta)?.cast_into::<PyDict>()?;
    let monitors = dict
        .get_item("monitors")?
        .ok_or_else(|| PyRuntimeError::new_err("monitors missing from the result"))?;
    for (i, m) in r.monitors.iter().enumerate() {
        let entry = monitors.get_item(i)?;
        entry.set_item("windows", windows(py, m)?)?;
        entry.set_item("snapshots", snapshots(py, m)?)?;
        entry.set_item("truth", truth(py, m)?)?;
    }
    Ok(dict)
}
