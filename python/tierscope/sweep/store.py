"""The result store of a sweep: one Parquet file of rows per finished run, written
atomically (a temporary file renamed into place), so a sweep killed at any point (even
with kill -9) keeps every finished run once and loses only the runs in flight, and a
restart skips the runs already stored.

Layout of DIR:
    tierscope-manifest.json the store's manifest (kind "sweep", tierscope.outdir): rows/ and
                            runs/ are tierscope's, and the files it names (sweep.json,
                            repro.md, ...)
    sweep.json              the expanded sweep: source, run ids and parameters
    rows/<run id>.parquet   one row per monitor of the run (`row` = "monitor") and, for an
                            experiment with [tiering], one per policy run (`row` = "policy")
    runs/<run id>/          the run's full outputs, when the sweep asks for them

A run's rows, monitor and policy rows alike, are one file: they are stored together or not
at all, so the store's invariant (each finished run once, keyed by its id) holds for both.

A store is written under its claim (`claim_store`): locked, so a second sweep on the same
store is refused while the first runs; a store from before manifests (sweep.json without
one) is adopted and resumes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tierscope import outdir
from tierscope.experiment import config_error
from tierscope.outdir import OutputError

#: The subdirectories of a store whose whole content tierscope writes.
STORE_DIRECTORIES = ("rows", "runs")


def _adopt(extra: Sequence[str]) -> Callable[[Path], list[str] | None]:
    """Recognises a store written before manifests: it has sweep.json (and maybe `extra`
    files written beside it, such as repro's tables)."""

    def adopt(d: Path) -> list[str] | None:
        if not (d / "sweep.json").is_file():
            return None
        return ["sweep.json", *(n for n in extra if (d / n).is_file())]

    return adopt


@contextlib.contextmanager
def claim_store(
    directory: str | os.PathLike[str], *, adopt: Sequence[str] = ()
) -> Iterator[outdir.Claim]:
    """Claims the sweep store in `directory` (`tierscope.outdir.claim`, resumable, kind
    "sweep"): created if absent or empty, continued if it is a store (or one from before
    manifests, with `adopt` naming other files of ours beside its sweep.json), refused if
    it holds anything else or another tierscope is writing it."""
    with outdir.claim(
        directory,
        "sweep",
        resume=True,
        adopt=_adopt(adopt),
        directories=STORE_DIRECTORIES,
    ) as claim:
        yield claim


def _read_json(path: Path) -> Any:
    """A JSON file of the store; a corrupt one is an `OutputError` naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise OutputError(f"{path}: cannot read it: {e}") from e


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


#: Summary fields of a policy run stored per (run, policy run): column -> (key in the
#: policy's "summary", Arrow type).
POLICY_SUMMARY_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "speedup_over_slow": ("speedup_over_slow", pa.float64()),
    "gap_to_oracle": ("gap_to_oracle", pa.float64()),
    "fast_hit_ratio": ("fast_hit_ratio", pa.float64()),
    "throughput": ("throughput", pa.float64()),
    "app_ns": ("app_ns", pa.float64()),
    "all_fast_ns": ("all_fast_ns", pa.float64()),
    "all_slow_ns": ("all_slow_ns", pa.float64()),
    "migration_cpu_ns": ("migration_cpu_ns", pa.int64()),
    "monitor_cpu_ns": ("monitor_cpu_ns", pa.float64()),
    "ops_per_s": ("ops_per_s", pa.float64()),
}
#: The operation latency percentiles (summary "op_latency_ns", [p50, p95, p99]), one
#: column each.
OP_LATENCY_COLUMNS = ("op_latency_p50_ns", "op_latency_p95_ns", "op_latency_p99_ns")
#: Migration counters of a policy run: column -> (key in its "migration", Arrow type).
#: The migration's cpu_ns is the summary's migration_cpu_ns, stored once.
MIGRATION_COLUMNS: dict[str, tuple[str, pa.DataType]] = {
    "promoted_bytes": ("promoted_bytes", pa.int64()),
    "demoted_bytes": ("demoted_bytes", pa.int64()),
    "migrated_pages": ("pages", pa.int64()),
    "migration_rounds": ("rounds", pa.int64()),
    "refused_bytes": ("refused_bytes", pa.int64()),
    "shootdowns": ("shootdowns", pa.int64()),
    "migration_stall_ns": ("stall_ns", pa.int64()),
    "huge_splits": ("splits", pa.int64()),
    "huge_collapses": ("collapses", pa.int64()),
}
#: The columns added with policy rows, after the monitor rows' own (appended, so the
#: monitor rows' columns keep their names, types and order): which kind of row, the
#: policy run's name, its policy and type, then the numbers above.
POLICY_COLUMNS: dict[str, pa.DataType] = {
    "row": pa.string(),
    "policy_run": pa.string(),
    "policy": pa.string(),
    "policy_kind": pa.string(),
    **{k: t for k, (_, t) in POLICY_SUMMARY_COLUMNS.items()},
    **{k: pa.float64() for k in OP_LATENCY_COLUMNS},
    **{k: t for k, (_, t) in MIGRATION_COLUMNS.items()},
}


def row_schema(types: dict[str, pa.DataType]) -> pa.Schema:
    """The rows' schema for swept parameters of `types`: run_id, the parameters, the
    monitor rows' columns, then the policy rows' (`POLICY_COLUMNS`)."""
    return pa.schema(
        [
            ("run_id", pa.string()),
            *types.items(),
            ("monitor", pa.string()),
            ("kind", pa.string()),
            *SUMMARY_COLUMNS.items(),
            *POLICY_COLUMNS.items(),
        ]
    )


def _cell(v: Any, t: pa.DataType) -> Any:
    """A metrics value as a cell of type `t`: null for missing, NaN or infinite numbers;
    whole floats in integer columns as ints."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    if pa.types.is_integer(t) and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


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
    """The result store claimed by `claim` (`claim_store`) for the sweep whose runs are
    `runs` (`{"id", "params"}` each, in order)."""

    def __init__(
        self,
        claim: outdir.Claim,
        source: str,
        runs: list[dict[str, Any]],
        overrides: list[str] | None = None,
    ) -> None:
        self.claim = claim
        #: The command line's `--set PATH=VALUE` overrides, recorded in sweep.json.
        self.overrides = overrides or []
        self.directory = directory = claim.target
        self.rows = directory / "rows"
        self.runs = runs
        self.types = param_types(runs)
        fixed = set(row_schema({}).names)
        for name in self.types:
            if name in fixed:
                raise config_error(
                    source,
                    f"a swept parameter is named {name!r}, like a column of the result "
                    "rows; give its axis another `name`",
                    field="axes",
                )
        self.schema = row_schema(self.types)
        self._open(source)

    def _open(self, source: str) -> None:
        display = self.claim.display
        manifest = self.directory / "sweep.json"
        doc: dict[str, Any] = {"source": source, "runs": self.runs}
        if self.overrides:
            doc["overrides"] = self.overrides
        if manifest.is_file():
            old = _read_json(manifest)
            runs = old.get("runs", []) if isinstance(old, dict) else None
            if not isinstance(runs, list) or not all(
                isinstance(r, dict) and "id" in r for r in runs
            ):
                raise OutputError(f"{manifest}: not a sweep's list of runs")
            if [r["id"] for r in runs] != [r["id"] for r in self.runs]:
                raise OutputError(
                    f"{display}: holds another sweep (its runs differ from this one's); "
                    "choose another --out"
                )
            if old.get("overrides", []) != self.overrides:
                given = " ".join(f"--set {o}" for o in old.get("overrides", [])) or "no --set"
                raise OutputError(
                    f"{display}: holds this sweep run with other overrides ({given}); "
                    "give the same ones, or choose another --out"
                )
        try:
            self.rows.mkdir(exist_ok=True)
            # A kill -9 may leave a temporary file behind: it never became a result.
            for tmp in self.rows.glob(".*.parquet.tmp"):
                tmp.unlink()
        except OSError as e:
            raise outdir.cannot_write(display, e) from e
        self.claim.put("sweep.json", (json.dumps(doc, indent=1) + "\n").encode())

    def done(self) -> set[str]:
        """Ids of the runs whose rows are stored."""
        return {p.stem for p in self.rows.glob("*.parquet")}

    def table(self, run: dict[str, Any], metrics: dict[str, Any]) -> pa.Table:
        """The rows of one finished run, from its metrics.json document: one per monitor,
        then one per tiering policy run. A column that does not apply to a row's kind is
        null (a policy row's `kind` and monitor summary; a monitor row's policy columns);
        a policy row's `monitor` is the monitor feeding the policy (null for none)."""
        params: dict[str, Any] = {"run_id": run["id"]}
        for k, t in self.types.items():
            params[k] = _param_value(run["params"].get(k), t)
        rows = []
        for name, m in metrics["monitors"].items():
            row = dict(params)
            row["monitor"] = name
            row["kind"] = m["kind"]
            for k in SUMMARY_COLUMNS:
                v = m.get(k)
                row[k] = None if v is None or (isinstance(v, float) and math.isnan(v)) else v
            row["row"] = "monitor"
            rows.append(row)
        for name, p in (metrics.get("policies") or {}).items():
            summary = p.get("summary") or {}
            migration = p.get("migration") or {}
            row = dict(params)
            row["monitor"] = p.get("monitor")
            row["row"] = "policy"
            row["policy_run"] = name
            row["policy"] = p.get("policy")
            row["policy_kind"] = p.get("kind")
            for k, (key, t) in POLICY_SUMMARY_COLUMNS.items():
                row[k] = _cell(summary.get(key), t)
            latency = summary.get("op_latency_ns") or [None] * len(OP_LATENCY_COLUMNS)
            for k, v in zip(OP_LATENCY_COLUMNS, latency, strict=True):
                row[k] = _cell(v, pa.float64())
            for k, (key, t) in MIGRATION_COLUMNS.items():
                row[k] = _cell(migration.get(key), t)
            rows.append(row)
        return pa.Table.from_pylist(rows, schema=self.schema)

    def write(self, run: dict[str, Any], metrics: dict[str, Any]) -> None:
        """Stores a finished run's rows (atomically: all of them or none)."""
        table = self.table(run, metrics)
        try:
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, compression="zstd")
            _atomic_write(self.rows / f"{run['id']}.parquet", sink.getvalue().to_pybytes())
        except OSError as e:
            raise outdir.cannot_write(self.claim.display, e) from e


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A stored run's rows in the current `schema`: columns it lacks (rows written
    before they existed) added as nulls, except `row`, which rows written before policy
    rows existed lack and which is "monitor" for them all; columns it has beyond the
    schema kept after it."""
    columns, fields = [], []
    for f in schema:
        if f.name in table.column_names:
            columns.append(table[f.name].cast(f.type))
        elif f.name == "row":
            columns.append(pa.array(["monitor"] * table.num_rows, f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
        fields.append(f)
    for f in table.schema:
        if f.name not in schema.names:
            columns.append(table[f.name])
            fields.append(f)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def read_rows(path: Path) -> pa.Table:
    """A stored run's rows; a file that is not Parquet (a disk error, a hand edit) is an
    `OutputError` naming it, to be removed so that the sweep runs that run again."""
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise OutputError(
            f"{path}: not a readable Parquet file of rows ({' '.join(str(e).split())}); "
            "remove it and run the sweep again to redo that run"
        ) from e


def load_sweep(directory: str | os.PathLike[str]) -> Any:
    """Every stored row of the sweep in `directory` as a polars DataFrame, in the sweep's
    run order: per run its monitor rows, then its policy rows (`row` tells them apart).
    Rows stored before a column existed have it null (`row`: "monitor")."""
    import polars as pl

    d = Path(directory)
    manifest = d / "sweep.json"
    if not manifest.is_file():
        raise OutputError(f"{d}: not a tierscope sweep directory (no sweep.json)")
    doc = _read_json(manifest)
    try:
        runs = doc["runs"]
        schema = row_schema(param_types(runs))
        files = [d / "rows" / f"{r['id']}.parquet" for r in runs]
    except (KeyError, TypeError, AttributeError) as e:
        raise OutputError(f"{manifest}: not a sweep's list of runs") from e
    tables = [conform(read_rows(f), schema) for f in files if f.is_file()]
    if not tables:
        return pl.DataFrame()
    return pl.from_arrow(pa.concat_tables(tables, promote_options="default"))
