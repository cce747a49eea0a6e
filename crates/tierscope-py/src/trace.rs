//! Memory traces from Python: lackey's text output converted to tierscope's binary format
//! (`tierscope trace convert`), both read by the same Rust code the replay uses.

use crate::errors::config_error;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tierscope_core::workload::trace::{LackeyOptions, Trace, STORE};
use tierscope_core::FieldError;

fn read(src: &str, format: &str, instructions: bool) -> Result<Trace, FieldError> {
    let file = std::fs::File::open(src).map_err(|e| FieldError::new("", format!("{src}: {e}")))?;
    let input = std::io::BufReader::new(file);
    match format {
        "lackey" => Trace::read_lackey(input, src, LackeyOptions { instructions }),
        "binary" => Trace::read_binary(input, src),
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
