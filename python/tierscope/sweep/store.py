"""The result store of a sweep: one Parquet file of rows per finished run, written
atomically (a temporary file renamed into place), so a sweep killed at any point (even
with kill -9) keeps every finished run once and loses only the runs in flight, and a
restart skips the runs already stored.

Layout of DIR:
    sweep.json              the expanded sweep: source, run ids and parameters
    rows/<run id>.parquet   one row per monitor of the run
    runs/<run id>/          the run's full outputs, when the sweep asks for them
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tierscope.output import OutputError

#: Summary fields stored per (run, monitor), with their Arrow types.
SUMMARY_COLUMNS: dict[str, pa.DataType] = {
    "precision": pa.float64(),
    "recall": pa.float64(),
    "f1": pa.float64(),
    "cycles": pa.float64(),
    "cpu_percent": pa.float64(),
    "bits_cleared": pa.int64(),
    "entries_read": pa.int64(),
    "clear_ops": pa.int64(),
    "flushes": pa.int64(),
    "windows_evaluated": pa.int64(),
    "mean_nr_regions": pa.float64(),
    "app_slowdown": pa.float64(),
    "convergence_ms": pa.float64(),
    "phase_changes": pa.int64(),
    "phase_changes_converged": pa.int64(),
}


def param_types(runs: list[dict[str, Any]]) -> dict[str, pa.DataType]:
    """One Arrow type per swept parameter: int64 or float64 when every run's value is a
    number, else string (lists and tables as JSON text)."""
    names: list[str] = []
    for r in runs:
        names += [k for k in r["params"] if k not in names]
    types: dict[str, pa.DataType] = {}
    for name in names:
        values = [r["params"].get(name) for r in runs]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            types[name] = pa.int64()
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            types[name] = pa.float64()
        else:
            types[name] = pa.string()
    return types


def _param_value(v: Any, t: pa.DataType) -> Any:
    if t == pa.string():
        return v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return v


class Store:
    """The result store in `directory` for the sweep whose runs are `runs`
    (`{"id", "params"}` each, in order)."""

    def __init__(self, directory: Path, source: str, runs: list[dict[str, Any]]) -> None:
        self.directory = directory
        self.rows = directory / "rows"
        self.runs = runs
        self.types = param_types(runs)
        self.schema = pa.schema(
            [
                ("run_id", pa.string()),
                *self.types.items(),
                ("monitor", pa.string()),
                ("kind", pa.string()),
                *SUMMARY_COLUMNS.items(),
            ]
        )
        self._open(source)

    def _open(self, source: str) -> None:
        d = self.directory
        manifest = d / "sweep.json"
        doc = {"source": source, "runs": self.runs}
        if d.exists() and not d.is_dir():
            raise OutputError(f"{d}: exists and is not a directory; choose another --out")
        if manifest.is_file():
            old = json.loads(manifest.read_text(encoding="utf-8"))
            if [r["id"] for r in old.get("runs", [])] != [r["id"] for r in self.runs]:
                raise OutputError(
                    f"{d}: holds another sweep (its runs differ from this one's); "
                    "choose another --out"
                )
        elif d.exists() and any(d.iterdir()):
            raise OutputError(
                f"{d}: exists and does not look like a tierscope sweep (no sweep.json); "
                "refusing to write into it, choose another --out"
            )
        self.rows.mkdir(parents=True, exist_ok=True)
        # A kill -9 may leave a temporary file behind: it never became a result.
        for tmp in self.rows.glob(".*.tmp"):
            tmp.unlink()
        _atomic_write(manifest, (json.dumps(doc, indent=1) + "\n").encode())

    def done(self) -> set[str]:
        """Ids of the runs whose rows are stored."""
        return {p.stem for p in self.rows.glob("*.parquet")}

    def table(self, run: dict[str, Any], metrics: dict[str, Any]) -> pa.Table:
        """The rows of one finished run, from its metrics.json document."""
        rows = []
        for name, m in metrics["monitors"].items():
            row: dict[str, Any] = {"run_id": run["id"]}
            for k, t in self.types.items():
                row[k] = _param_value(run["params"].get(k), t)
            row["monitor"] = name
            row["kind"] = m["kind"]
            for k in SUMMARY_COLUMNS:
                v = m.get(k)
                row[k] = None if v is None or (isinstance(v, float) and math.isnan(v)) else v
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=self.schema)

    def write(self, run: dict[str, Any], metrics: dict[str, Any]) -> None:
        """Stores a finished run's rows (atomically: all of them or none)."""
        sink = pa.BufferOutputStream()
        pq.write_table(self.table(run, metrics), sink, compression="zstd")
        _atomic_write(self.rows / f"{run['id']}.parquet", sink.getvalue().to_pybytes())


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_sweep(directory: str | os.PathLike[str]) -> Any:
    """Every stored row of the sweep in `directory` as a polars DataFrame, in the sweep's
    run order."""
    import polars as pl

    d = Path(directory)
    manifest = d / "sweep.json"
    if not manifest.is_file():
        raise OutputError(f"{d}: not a tierscope sweep directory (no sweep.json)")
    order = [r["id"] for r in json.loads(manifest.read_text(encoding="utf-8"))["runs"]]
    files = [d / "rows" / f"{i}.parquet" for i in order]
    tables = [pq.read_table(f) for f in files if f.is_file()]
    if not tables:
        return pl.DataFrame()
    return pl.from_arrow(pa.concat_tables(tables))
