"""The result store of a sweep: one Parquet file of rows per finished run, written
atomically (a temporary file renamed into place), so a sweep killed at any point (even
with kill -9) keeps every finished run once and loses only the runs in flight, and a
restart skips the runs already stored.

Layout of DIR:
    tierscope-manifest.json the store's manifest (kind "sweep", tierscope.outdir): monitors/,
                            policies/, rows/ and runs/ are tierscope's, and the files it
                            names (sweep.json, repro.md, ...)
    sweep.json              the expanded sweep: source, run ids and parameters
    monitors/<run id>.parquet  the run's monitor table: one row per monitor
    policies/<run id>.parquet  for an experiment with [tiering], its policy table: one row
                            per policy run
    runs/<run id>/          the run's full outputs, when the sweep asks for them
    rows/<run id>.parquet   (stores written before the tables were separate) both kinds of
                            rows in one table told apart by `row`; read as the two tables

A run is stored when its monitors file is: its policies file is written first, so a kill
between the two leaves a run that is run again (the files are replaced), and the store's
invariant (each finished run once, keyed by its id) holds for both tables.

Swept parameters are typed columns (`param_columns`): numbers as numbers, and durations,
sizes, rates and percentages as numbers with the unit in the column name (a sweep of
`sample` over "2ms" and "10ms" is the column `sample_ns`, 2000000 and 10000000), so they
sort and plot by value.

A store is written under its claim (`claim_store`): locked, so a second sweep on the same
store is refused while the first runs; a store from before manifests (sweep.json without
one) is adopted and resumes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from tierscope import outdir
from tierscope.experiment import config_error
from tierscope.outdir import OutputError

#: The subdirectories of a store whose whole content tierscope writes (rows/: stores
#: from before the tables were separate).
STORE_DIRECTORIES = ("monitors", "policies", "rows", "runs")
#: The tables of a store, each a directory of one Parquet file per run.
Table = Literal["monitors", "policies"]
TABLES: tuple[Table, ...] = ("monitors", "policies")


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
#: The policy table's own columns: the policy run's name, its policy and type, the monitor
#: feeding it (null for none), then the numbers above.
POLICY_COLUMNS: dict[str, pa.DataType] = {
    "policy_run": pa.string(),
    "policy": pa.string(),
    "policy_kind": pa.string(),
    "monitor": pa.string(),
    **{k: t for k, (_, t) in POLICY_SUMMARY_COLUMNS.items()},
    **{k: pa.float64() for k in OP_LATENCY_COLUMNS},
    **{k: t for k, (_, t) in MIGRATION_COLUMNS.items()},
}
#: The monitor table's own columns.
MONITOR_COLUMNS: dict[str, pa.DataType] = {
    "monitor": pa.string(),
    "kind": pa.string(),
    **SUMMARY_COLUMNS,
}


def monitor_row(name: str, m: dict[str, Any]) -> dict[str, Any]:
    """A monitor's row (`MONITOR_COLUMNS`) from its entry of metrics.json."""
    row = {"monitor": name, "kind": m["kind"]}
    return row | {k: _cell(m.get(k), t) for k, t in SUMMARY_COLUMNS.items()}


def policy_row(name: str, p: dict[str, Any]) -> dict[str, Any]:
    """A policy run's row (`POLICY_COLUMNS`) from its entry of metrics.json."""
    summary = p.get("summary") or {}
    migration = p.get("migration") or {}
    row = {"policy_run": name, "policy": p.get("policy")}
    row |= {"policy_kind": p.get("kind"), "monitor": p.get("monitor")}
    for k, (key, t) in POLICY_SUMMARY_COLUMNS.items():
        row[k] = _cell(summary.get(key), t)
    latency = summary.get("op_latency_ns") or [None] * len(OP_LATENCY_COLUMNS)
    for k, v in zip(OP_LATENCY_COLUMNS, latency, strict=True):
        row[k] = _cell(v, pa.float64())
    for k, (key, t) in MIGRATION_COLUMNS.items():
        row[k] = _cell(migration.get(key), t)
    return row


def table_schema(table: Table, params: Sequence[ParamColumn]) -> pa.Schema:
    """A table's schema for swept parameters `params`: run_id, the parameters' columns,
    then the table's own (`MONITOR_COLUMNS` or `POLICY_COLUMNS`)."""
    own = MONITOR_COLUMNS if table == "monitors" else POLICY_COLUMNS
    return pa.schema([("run_id", pa.string()), *((p.column, p.type) for p in params), *own.items()])


def _cell(v: Any, t: pa.DataType) -> Any:
    """A metrics value as a cell of type `t`: null for missing, NaN or infinite numbers;
    whole floats in integer columns as ints."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    if pa.types.is_integer(t) and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


# --- typed parameters ------------------------------------------------------------------

#: Units of the quantities a swept value may be written in (the Rust core's
#: tierscope_core::units), by the suffix of the column holding them.
DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
DURATION_UNITS |= {"min": 60 * 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
SIZE_UNITS = {"B": 1, "KB": 10**3, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
SIZE_UNITS |= {"PB": 10**15}
SIZE_UNITS |= {f"{p}iB": 1 << (10 * (i + 1)) for i, p in enumerate("KMGTP")}
SIZE_UNITS |= {p: 1 << (10 * (i + 1)) for i, p in enumerate("KMGTP")} | {"k": 1 << 10}
RATE_UNITS = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}
_QUANTITY = re.compile(r"\s*(\d[\d_]*(?:\.\d*)?|\.\d+)\s*(\S*?)\s*")


def _split(v: Any) -> tuple[Fraction, str] | None:
    if not isinstance(v, str):
        return None
    m = _QUANTITY.fullmatch(v)
    return (Fraction(m[1].replace("_", "")), m[2]) if m else None


def parse_duration_ns(v: Any) -> int | None:
    """A duration string ("5ms") in nanoseconds; None if `v` is not one (a bare number
    is not: its unit would be a guess)."""
    q = _split(v)
    return round(q[0] * DURATION_UNITS[q[1]]) if q and q[1] in DURATION_UNITS else None


def parse_size_bytes(v: Any) -> int | None:
    """A size string ("4KiB", "90GB", "0") in bytes; None if `v` is not one."""
    q = _split(v)
    if not q or not (q[1] in SIZE_UNITS or q[1] == ""):
        return None
    return round(q[0] * SIZE_UNITS.get(q[1], 1))


def parse_rate_per_s(v: Any) -> int | None:
    """A rate string with its "/s" or "Hz" ("10M/s", "5kHz") in events per second; None
    if `v` is not one."""
    q = _split(v)
    if not q:
        return None
    unit = q[1].removesuffix("/s") if q[1].endswith("/s") else q[1].removesuffix("Hz")
    if unit == q[1] or unit not in RATE_UNITS:
        return None
    return round(q[0] * RATE_UNITS[unit])


def parse_percent(v: Any) -> float | None:
    """A percentage string ("20%") as its number (20.0); None if `v` is not one."""
    q = _split(v.removesuffix("%")) if isinstance(v, str) and v.endswith("%") else None
    return float(q[0]) if q and q[1] == "" else None


@dataclass(frozen=True)
class ParamColumn:
    """How a swept parameter is stored: its column (the parameter's name, with the unit
    for a quantity: `sample_ns`), its Arrow type and the unit ("ns", "bytes", "per_s",
    "percent", or None for numbers and text)."""

    param: str
    column: str
    type: pa.DataType
    unit: str | None

    def value(self, v: Any) -> Any:
        """A run's value of the parameter in this column."""
        if v is None:
            return None
        parse = {
            "ns": parse_duration_ns,
            "bytes": parse_size_bytes,
            "per_s": parse_rate_per_s,
            "percent": parse_percent,
        }.get(self.unit or "")
        if parse is not None:
            return parse(v)
        if self.type == pa.string():
            return v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        return v


def _largest_unit(v: int, units: dict[str, int], order: Sequence[str]) -> str:
    for u in order:
        if v and v % units[u] == 0:
            return f"{v // units[u]}{u}"
    return f"{v}{order[-1]}"


def format_param(column: ParamColumn, v: Any) -> str:
    """A stored parameter value as text with its unit, the largest that keeps it whole
    ("2ms", "4MiB", "10M/s", "20%"): how a sweep file writes it, for tables and axes."""
    if v is None:
        return "-"
    if column.unit == "ns":
        return _largest_unit(int(v), DURATION_UNITS, ("h", "min", "s", "ms", "us", "ns"))
    if column.unit == "bytes":
        # The shorter of the binary and the decimal form: 4MiB, 90GB.
        binary = _largest_unit(int(v), SIZE_UNITS, ("PiB", "TiB", "GiB", "MiB", "KiB", "B"))
        decimal = _largest_unit(int(v), SIZE_UNITS, ("PB", "TB", "GB", "MB", "KB", "B"))
        return min(binary, decimal, key=len)
    if column.unit == "per_s":
        return _largest_unit(int(v), RATE_UNITS, ("G", "M", "k", "")) + "/s"
    if column.unit == "percent":
        return f"{v:g}%"
    return str(v)


def as_written(df: Any, columns: Sequence[ParamColumn]) -> Any:
    """The polars DataFrame `df` (a sweep table) with each of `columns` (typed parameter
    columns) replaced by its values as text with units (`format_param`: "2ms"), named as
    the parameter: for tables and axis labels."""
    import polars as pl

    for c in columns:
        text = pl.Series(c.param, [format_param(c, v) for v in df[c.column].to_list()])
        df = df.with_columns(text.alias(c.column)).rename({c.column: c.param})
    return df


def _column_of(name: str, values: list[Any]) -> ParamColumn:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return ParamColumn(name, name, pa.int64(), None)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return ParamColumn(name, name, pa.float64(), None)
    if all(parse_duration_ns(v) is not None for v in values):
        return ParamColumn(name, f"{name}_ns", pa.int64(), "ns")
    if all(parse_rate_per_s(v) is not None for v in values):
        return ParamColumn(name, f"{name}_per_s", pa.int64(), "per_s")
    # A size needs a unit somewhere: "0" and "1" alone are not known to be bytes.
    if all(parse_size_bytes(v) is not None for v in values) and any(
        (q := _split(v)) is not None and q[1] != "" for v in values
    ):
        return ParamColumn(name, f"{name}_bytes", pa.int64(), "bytes")
    if all(parse_percent(v) is not None for v in values):
        return ParamColumn(name, f"{name}_percent", pa.float64(), "percent")
    return ParamColumn(name, name, pa.string(), None)


def param_columns(runs: list[dict[str, Any]]) -> list[ParamColumn]:
    """One typed column per swept parameter, in the order the runs name them: integers
    and floats as they are; strings that are all durations, rates (with /s or Hz), sizes
    or percentages as numbers in ns, per second, bytes or percent, the unit appended to
    the column's name; anything else as text (lists and tables as JSON)."""
    names: list[str] = []
    for r in runs:
        names += [k for k in r["params"] if k not in names]
    return [_column_of(n, [r["params"].get(n) for r in runs]) for n in names]


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
        self.runs = runs
        self.params = param_columns(runs)
        fixed = {"run_id", *MONITOR_COLUMNS, *POLICY_COLUMNS}
        for p in self.params:
            if p.column in fixed:
                raise config_error(
                    source,
                    f"a swept parameter is named {p.param!r}, like a column of the result "
                    f"tables ({p.column}); give its axis another `name`",
                    field="axes",
                )
        self.schemas = {t: table_schema(t, self.params) for t in TABLES}
        self.dirs = {t: directory / t for t in TABLES}
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
            for d in self.dirs.values():
                d.mkdir(exist_ok=True)
                # A kill -9 may leave a temporary file behind: it never became a result.
                for tmp in d.glob(".*.parquet.tmp"):
                    tmp.unlink()
        except OSError as e:
            raise outdir.cannot_write(display, e) from e
        self.claim.put("sweep.json", (json.dumps(doc, indent=1) + "\n").encode())

    def done(self) -> set[str]:
        """Ids of the runs whose rows are stored (in either layout)."""
        legacy = self.directory / "rows"
        return {p.stem for d in (self.dirs["monitors"], legacy) for p in d.glob("*.parquet")}

    def tables(self, run: dict[str, Any], metrics: dict[str, Any]) -> dict[Table, pa.Table]:
        """The monitor and policy tables of one finished run, from its metrics.json
        document: one row per monitor, and one per tiering policy run."""
        params: dict[str, Any] = {"run_id": run["id"]}
        for p in self.params:
            params[p.column] = p.value(run["params"].get(p.param))
        monitors = [{**params, **monitor_row(name, m)} for name, m in metrics["monitors"].items()]
        policies = [
            {**params, **policy_row(name, p)} for name, p in (metrics.get("policies") or {}).items()
        ]
        return {
            "monitors": pa.Table.from_pylist(monitors, schema=self.schemas["monitors"]),
            "policies": pa.Table.from_pylist(policies, schema=self.schemas["policies"]),
        }

    def write(self, run: dict[str, Any], metrics: dict[str, Any]) -> None:
        """Stores a finished run's tables, each file atomically: the policy table (when
        the run has policy runs) first, the monitor table last, which marks the run
        stored."""
        tables = self.tables(run, metrics)
        try:
            for name in ("policies", "monitors"):
                table = tables[name]
                if name == "policies" and table.num_rows == 0:
                    continue
                sink = pa.BufferOutputStream()
                pq.write_table(table, sink, compression="zstd")
                path = self.dirs[name] / f"{run['id']}.parquet"
                _atomic_write(path, sink.getvalue().to_pybytes())
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
    """A stored run's rows in `schema`: columns it lacks (rows written before they
    existed) added as nulls; columns it has beyond the schema kept after it."""
    columns, fields = [], []
    for f in schema:
        if f.name in table.column_names:
            columns.append(table[f.name].cast(f.type))
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


def _run_table(
    d: Path, run: dict[str, Any], table: Table, params: list[ParamColumn], schema: pa.Schema
) -> pa.Table | None:
    """One stored run's rows of `table`, in `schema`, the parameters typed from sweep.json
    (whatever the file holds); None when the run is not stored."""
    rid = str(run["id"])
    if (d / "monitors" / f"{rid}.parquet").is_file():
        path = d / table / f"{rid}.parquet"
        if not path.is_file():  # a run without policy runs
            return schema.empty_table()
        stored = read_rows(path)
    elif (d / "rows" / f"{rid}.parquet").is_file():
        stored = read_rows(d / "rows" / f"{rid}.parquet")
        # Before `row` existed every row was a monitor's.
        kinds = stored["row"].to_pylist() if "row" in stored.column_names else None
        want = "monitor" if table == "monitors" else "policy"
        keep = (
            [(k or "monitor") == want for k in kinds]
            if kinds
            else [want == "monitor"] * (stored.num_rows)
        )
        stored = stored.filter(pa.array(keep, pa.bool_()))
        own = set(schema.names) - {p.column for p in params}
        stored = stored.select([c for c in stored.column_names if c in own])
    else:
        return None
    typed = {p.column: p.value(run["params"].get(p.param)) for p in params}
    stored = stored.drop_columns([c for c in typed if c in stored.column_names])
    for i, p in enumerate(params):
        stored = stored.add_column(
            1 + i, pa.field(p.column, p.type), pa.array([typed[p.column]] * stored.num_rows, p.type)
        )
    return conform(stored, schema)


def load_sweep(directory: str | os.PathLike[str], table: Table = "monitors") -> Any:
    """A table of the sweep in `directory` as a polars DataFrame, in the sweep's run
    order: "monitors" (one row per run and monitor: precision, recall, cpu_percent, ...)
    or "policies" (one row per run and tiering policy run: speedup_over_slow,
    gap_to_oracle, promoted_bytes, ...). The swept parameters are typed columns after
    run_id (`param_columns`: `sample_ns` for a sweep of "2ms", "10ms"). Stores written
    before the tables were separate (rows/) read the same; columns a run was stored
    without are null."""
    import polars as pl

    if table not in TABLES:
        raise ValueError(f"no sweep table {table!r}; the tables are {', '.join(TABLES)}")
    d = Path(directory)
    manifest = d / "sweep.json"
    if not manifest.is_file():
        raise OutputError(f"{d}: not a tierscope sweep directory (no sweep.json)")
    doc = _read_json(manifest)
    try:
        runs = list(doc["runs"])
        params = param_columns(runs)
    except (KeyError, TypeError, AttributeError) as e:
        raise OutputError(f"{manifest}: not a sweep's list of runs") from e
    schema = table_schema(table, params)
    tables = [t for r in runs if (t := _run_table(d, r, table, params, schema)) is not None]
    if not tables:
        return pl.from_arrow(schema.empty_table())
    return pl.from_arrow(pa.concat_tables(tables, promote_options="default"))
