"""Sweeps: expansion through the CLI, the local executor, the Parquet store (a monitor
table, and a policy table for experiments with [tiering]; swept parameters typed; stores
written in the single-table layout), resuming after kill -9 and Ctrl-C, the Ray executor
(where Ray is installed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tierscope
from conftest import run_cli
from tierscope.sweep.store import (
    MIGRATION_COLUMNS,
    MONITOR_COLUMNS,
    OP_LATENCY_COLUMNS,
    POLICY_COLUMNS,
    POLICY_SUMMARY_COLUMNS,
    param_columns,
)

BASE = """\
name = "tiny"
duration = "1s"
warmup = "200ms"
[workload]
rate = "1M/s"
regions = [{ name = "cold", size = "56MiB" }, { name = "hot", size = "8MiB" }]
phases = [{ name = "p", duration = "1s",
            patterns = [{ region = "hot", kind = "random", mode = "ro" }] }]
[[monitors]]
preset = "damon-mod"
[[monitors]]
preset = "telescope-bnd"
"""


def sweep_file(d: Path, seeds: int = 5, samples: tuple[str, ...] = ("2ms", "5ms")) -> Path:
    (d / "base.toml").write_text(BASE)
    values = ", ".join(f'"{s}"' for s in samples)
    p = d / "sweep.toml"
    p.write_text(
        f'base = "base.toml"\nseeds = {{ from = 1, to = {seeds} }}\n'
        f'[[axes]]\npath = "monitors[damon-mod].sample"\nvalues = [{values}]\n'
    )
    return p


# Random accesses to an 8 MiB hot region between two cold 64 MiB ones; the fast tier
# starts out holding the start of the first cold region, so the hot region starts slow.
# One monitor and three policies: 4 rows per run (1 monitor, 3 policy runs), ~0.5 s each.
TIERING_BASE = """\
name = "tiers"
duration = "1s"
warmup = "0s"
[workload]
rate = "1M/s"
regions = [{ name = "cold_top", size = "64MiB" }, { name = "hot", size = "8MiB" },
           { name = "cold_bottom", size = "64MiB" }]
phases = [{ name = "p", duration = "1s",
            patterns = [{ region = "hot", kind = "random", mode = "rw" }] }]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{ preset = "dram", capacity = "32MiB" }, "cxl"]
policies = ["telescope-rule", "oracle", "static"]
"""
POLICY_RUNS = ["telescope-rule@damon-mod", "oracle", "static"]


def tiering_sweep_file(
    d: Path, seeds: int = 2, capacities: tuple[str, ...] = ("4MiB", "32MiB")
) -> Path:
    """A sweep of the fast tier's capacity (the hot region fits in 32 MiB, not 4 MiB)."""
    (d / "tiers.toml").write_text(TIERING_BASE)
    values = ", ".join(f'"{c}"' for c in capacities)
    p = d / "tiers-sweep.toml"
    p.write_text(
        f'base = "tiers.toml"\nseeds = {{ from = 1, to = {seeds} }}\n'
        f'[[axes]]\npath = "tiering.tiers[0].capacity"\nvalues = [{values}]\n'
    )
    return p


def rows_dir(out: Path) -> list[Path]:
    """The stored runs' monitor tables (one file per stored run)."""
    return sorted((out / "monitors").glob("*.parquet"))


def table_files(out: Path) -> list[Path]:
    """Every stored table file, monitors then policies."""
    return rows_dir(out) + sorted((out / "policies").glob("*.parquet"))


def test_local_sweep_stores_one_row_per_run_and_monitor(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=3)
    outcome = tierscope.run_sweep(sweep, tmp_path / "out", jobs=2, progress=False)
    assert (outcome.runs, outcome.done, outcome.skipped) == (6, 6, 0)
    df = tierscope.load_sweep(tmp_path / "out")
    assert df.height == 12
    # The swept durations as integers in ns, the unit in the column's name.
    assert df.columns == ["run_id", "sample_ns", "seed", *MONITOR_COLUMNS]
    assert df["seed"].dtype.is_integer() and df["sample_ns"].dtype.is_integer()
    assert df["sample_ns"].to_list()[::6] == [2_000_000, 5_000_000]
    assert df.select(["run_id", "monitor"]).unique().height == 12
    # Each row is the run's own metrics: rerunning one run alone gives the same numbers.
    r = tierscope.expand_sweep(sweep)[4]
    m = tierscope.run(r.experiment, progress=False).metrics["monitors"]["telescope-bnd"]
    row = df.filter((df["run_id"] == r.id) & (df["monitor"] == "telescope-bnd")).row(0, named=True)
    assert row["precision"] == m["precision"] and row["bits_cleared"] == m["bits_cleared"]
    # Run again: everything is stored, nothing runs.
    again = tierscope.run_sweep(sweep, tmp_path / "out", progress=False)
    assert (again.done, again.skipped) == (0, 6)


def test_tiering_sweep_stores_a_row_per_policy_run(tmp_path: Path) -> None:
    import polars as pl

    sweep = tiering_sweep_file(tmp_path)
    outcome = tierscope.run_sweep(sweep, tmp_path / "out", jobs=2, progress=False)
    assert (outcome.runs, outcome.done) == (4, 4)
    monitors = tierscope.load_sweep(tmp_path / "out")
    policies = tierscope.load_sweep(tmp_path / "out", "policies")
    # Two tables, each with its own columns only: no column of nulls for the other kind.
    params = ["run_id", "capacity_bytes", "seed"]
    assert monitors.columns == [*params, *MONITOR_COLUMNS]
    assert policies.columns == [*params, *POLICY_COLUMNS]
    assert policies["capacity_bytes"].to_list() == [4 << 20] * 6 + [32 << 20] * 6
    assert monitors.height == 4 and policies.height == 12
    assert policies.select(["run_id", "policy_run"]).unique().height == 12
    assert monitors["monitor"].to_list() == ["damon-mod"] * 4
    assert monitors["kind"].to_list() == ["damon"] * 4
    assert monitors["precision"].null_count() == 0
    assert policies["policy_run"].to_list() == POLICY_RUNS * 4
    assert policies["policy_kind"].to_list() == ["telescope-rule", "oracle", "static"] * 4
    # The monitor feeding each policy; none for the oracle and static.
    assert policies["monitor"].to_list() == ["damon-mod", None, None] * 4
    # Each policy row is the run's own numbers: rerunning one run alone gives them.
    r = tierscope.expand_sweep(sweep)[3]
    assert r.params == {"capacity": "32MiB", "seed": 2}
    metrics = tierscope.run(r.experiment, progress=False).metrics["policies"]
    for name, p in metrics.items():
        row = policies.filter((pl.col("run_id") == r.id) & (pl.col("policy_run") == name)).row(
            0, named=True
        )
        assert (row["policy"], row["policy_kind"]) == (p["policy"], p["kind"])
        for column, (key, _) in POLICY_SUMMARY_COLUMNS.items():
            assert row[column] == p["summary"].get(key), (name, column)
        for column, (key, _) in MIGRATION_COLUMNS.items():
            assert row[column] == p["migration"][key], (name, column)
        # Operation latency only for workloads with operations (not this one).
        assert all(row[c] is None for c in OP_LATENCY_COLUMNS)
    # What the numbers say: the rule promotes the hot region; the oracle is the
    # reference; never migrating is all-slow; a fast tier the hot region fits in is worth
    # more to the oracle than one it does not.
    by_run = policies.group_by("policy_run")
    assert set(by_run.len()["len"].to_list()) == {4}
    rule = policies.filter(pl.col("policy_run") == POLICY_RUNS[0])
    assert rule["promoted_bytes"].min() > 0 and rule["migration_cpu_ns"].min() > 0
    oracle = policies.filter(pl.col("policy_run") == "oracle")
    assert oracle["gap_to_oracle"].to_list() == [1.0] * 4
    static = policies.filter(pl.col("policy_run") == "static")
    assert static["speedup_over_slow"].to_list() == [1.0] * 4
    assert static["promoted_bytes"].to_list() == [0] * 4
    small, big = (
        oracle.filter(pl.col("capacity_bytes") == c)["speedup_over_slow"].min()
        for c in (4 << 20, 32 << 20)
    )
    assert big > small > 1.0
    # Run again: everything is stored, nothing runs.
    again = tierscope.run_sweep(sweep, tmp_path / "out", progress=False)
    assert (again.done, again.skipped) == (0, 4)


def test_policy_row_of_a_workload_with_operations(tmp_path: Path) -> None:
    # A key-value workload's policy runs report ops/s and operation latency percentiles;
    # non-finite numbers (strict JSON has none) and whole floats in integer columns too.
    from tierscope.sweep.store import Store, claim_store

    with claim_store(tmp_path / "out") as claim:
        store = Store(claim, "s.toml", [{"id": "a", "params": {"rate": 2.5}}])
    summary = {
        "speedup_over_slow": 2.0,
        "gap_to_oracle": None,
        "fast_hit_ratio": 0.75,
        "throughput": float("nan"),
        "migration_cpu_ns": 3000.0,
        "ops_per_s": 1.5e6,
        "op_latency_ns": [100.0, 250.0, 900.0],
    }
    migration = {"promoted_bytes": 4096, "pages": 1, "stall_ns": 7}
    metrics = {
        "monitors": {},
        "policies": {
            "hemem@pebs": {
                "policy": "hemem",
                "kind": "pebs-hemem",
                "monitor": "pebs",
                "summary": summary,
                "migration": migration,
            }
        },
    }
    store.write({"id": "a", "params": {"rate": 2.5}}, metrics)
    assert tierscope.load_sweep(tmp_path / "out").height == 0
    (row,) = tierscope.load_sweep(tmp_path / "out", "policies").to_dicts()
    assert row["rate"] == 2.5 and row["monitor"] == "pebs"
    assert (row["policy_run"], row["policy"], row["policy_kind"]) == (
        "hemem@pebs",
        "hemem",
        "pebs-hemem",
    )
    assert row["ops_per_s"] == 1.5e6
    assert [row[c] for c in OP_LATENCY_COLUMNS] == [100.0, 250.0, 900.0]
    assert row["gap_to_oracle"] is None and row["throughput"] is None
    assert row["migration_cpu_ns"] == 3000 and isinstance(row["migration_cpu_ns"], int)
    assert (row["promoted_bytes"], row["migrated_pages"], row["migration_stall_ns"]) == (4096, 1, 7)
    # Counters the metrics lack are null, not zero.
    assert row["demoted_bytes"] is None


def legacy_store(out: Path, param: str, raw: dict[str, str], *, with_row: bool) -> None:
    """Rewrites a store's tables as stores wrote them before the tables were separate:
    one rows/<run id>.parquet per run, the parameter as the string swept (`raw`: by run
    id), the policy rows' columns after the monitor rows' and `row` telling them apart
    (without it, as before policy rows existed)."""
    import polars as pl

    column = next(c for c in pl.read_parquet(rows_dir(out)[0]).columns if c.startswith(param))
    (out / "rows").mkdir()
    for f in rows_dir(out):
        tables = [pl.read_parquet(f)]
        if (out / "policies" / f.name).is_file():
            tables.append(pl.read_parquet(out / "policies" / f.name))
        frames = []
        for kind, t in zip(("monitor", "policy"), tables, strict=False):
            t = t.drop(column).insert_column(1, pl.Series(param, [raw[f.stem]] * t.height))
            frames.append(t.with_columns(pl.lit(kind).alias("row")) if with_row else t)
        old = pl.concat(frames, how="diagonal_relaxed")
        old.write_parquet(out / "rows" / f.name)
        f.unlink()
        (out / "policies" / f.name).unlink(missing_ok=True)


@pytest.mark.parametrize("tiering", [False, True])
def test_stores_in_the_single_table_layout_still_load(tmp_path: Path, tiering: bool) -> None:
    sweep = tiering_sweep_file(tmp_path) if tiering else sweep_file(tmp_path, seeds=2)
    out = tmp_path / "out"
    tierscope.run_sweep(sweep, out, jobs=2, progress=False)
    new = {t: tierscope.load_sweep(out, t) for t in ("monitors", "policies")}
    runs = tierscope.expand_sweep(sweep)
    param = "capacity" if tiering else "sample"
    legacy_store(out, param, {r.id: r.params[param] for r in runs}, with_row=tiering)
    assert rows_dir(out) == [] and len(list((out / "rows").iterdir())) == len(runs)
    # The same frames, the parameter typed again from sweep.json.
    for t, frame in new.items():
        old = tierscope.load_sweep(out, t)
        assert old.schema == frame.schema and old.equals(frame), t
    # compare reads it too: each run's monitors and policy runs.
    from tierscope.cli.compare import load_runs

    compared = load_runs([str(out)])
    assert [len(r.metrics["monitors"]) for r in compared] == [1 if tiering else 2] * len(runs)
    assert all(len(r.metrics["policies"]) == (3 if tiering else 0) for r in compared)
    # A store in the old layout resumes: nothing reruns, the report still renders.
    assert tierscope.run_sweep(sweep, out, progress=False).skipped == len(runs)
    text = tierscope.write_report(out).read_text()
    assert f"{len(runs)} of {len(runs)} runs stored" in text
    assert ("Tiering" in text) == tiering


def test_parameters_are_typed_by_their_values() -> None:
    runs = [
        {"params": {"aggr": "2ms", "cap": "4KiB", "rate": "10M/s", "share": "20%", "n": 3}},
        {"params": {"aggr": "1.5s", "cap": "0", "rate": "5kHz", "share": "2.5%", "n": 2.5}},
        {"params": {"aggr": "10us", "cap": "90GB", "rate": "1/s", "share": "0%", "n": 1}},
    ]
    columns = param_columns(runs)
    assert [(c.column, str(c.type), c.unit) for c in columns] == [
        ("aggr_ns", "int64", "ns"),
        ("cap_bytes", "int64", "bytes"),
        ("rate_per_s", "int64", "per_s"),
        ("share_percent", "double", "percent"),
        ("n", "double", None),
    ]
    values = [[c.value(r["params"][c.param]) for c in columns] for r in runs]
    assert values == [
        [2_000_000, 4096, 10_000_000, 20.0, 3],
        [1_500_000_000, 0, 5_000, 2.5, 2.5],
        [10_000, 90_000_000_000, 1, 0.0, 1],
    ]
    # Values of mixed kinds, bare numbers as text, lists: text (lists as JSON).
    mixed = [{"params": {"a": "2ms", "b": "1", "c": [1, 2]}}, {"params": {"a": "4KiB", "b": "2"}}]
    columns = param_columns(mixed)
    assert [(c.column, str(c.type)) for c in columns] == [
        ("a", "string"),
        ("b", "string"),
        ("c", "string"),
    ]
    assert columns[2].value([1, 2]) == "[1, 2]" and columns[2].value(None) is None


def test_dry_run_lists_the_runs(tmp_path: Path) -> None:
    sweep_file(tmp_path, seeds=2)
    proc = run_cli("sweep", "sweep.toml", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sample=5ms,seed=2" in proc.stdout and "4 runs" in proc.stderr
    assert not (tmp_path / "out").exists()


def kill_sweep_after(sweep: Path, out: Path, *, rows: int) -> int:
    """Starts `tierscope sweep` into `out` (2 jobs), kills it with SIGKILL once at least
    `rows` runs are stored, and returns how many are."""
    cmd = [sys.executable, "-m", "tierscope", "sweep", str(sweep), "--out", out.name]
    proc = subprocess.Popen([*cmd, "--jobs", "2"], cwd=out.parent, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(rows_dir(out)) < rows if out.exists() else True:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return len(rows_dir(out))


def test_killed_sweep_resumes_without_losing_or_repeating_a_row(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=10, samples=("2ms", "5ms", "10ms", "20ms"))
    out = tmp_path / "out"
    stored = kill_sweep_after(sweep, out, rows=8)
    assert 8 <= stored < 40, stored
    # Restarted, it runs only what is missing and ends with every row once.
    outcome = tierscope.run_sweep(sweep, out, jobs=2, progress=False)
    assert outcome.skipped >= stored and outcome.done == 40 - outcome.skipped
    assert not list((out / "monitors").glob(".*.tmp"))
    df = tierscope.load_sweep(out)
    assert df.height == 80
    assert df.select(["run_id", "monitor"]).unique().height == 80
    # The same rows as a sweep that was never interrupted (same seeds, same bytes).
    clean = tmp_path / "clean"
    tierscope.run_sweep(sweep, clean, jobs=2, progress=False)
    for a, b in zip(rows_dir(out), rows_dir(clean), strict=True):
        assert a.name == b.name and a.read_bytes() == b.read_bytes(), a.name


def test_killed_tiering_sweep_resumes_without_losing_or_repeating_a_row(tmp_path: Path) -> None:
    # A run's policy table is written before its monitor table, which marks it stored: a
    # stored run has both, whole.
    sweep = tiering_sweep_file(tmp_path, seeds=8)
    out = tmp_path / "out"
    stored = kill_sweep_after(sweep, out, rows=4)
    assert 4 <= stored < 16, stored
    for f in rows_dir(out):
        assert pq.read_table(f).num_rows == 1
        assert pq.read_table(out / "policies" / f.name)["policy_run"].to_pylist() == POLICY_RUNS
    outcome = tierscope.run_sweep(sweep, out, jobs=2, progress=False)
    assert outcome.skipped >= stored and outcome.done == 16 - outcome.skipped
    assert not list((out / "monitors").glob(".*.tmp"))
    assert not list((out / "policies").glob(".*.tmp"))
    assert tierscope.load_sweep(out).height == 16
    policies = tierscope.load_sweep(out, "policies")
    assert policies.height == 48
    assert policies.select(["run_id", "policy_run"]).unique().height == 48
    clean = tmp_path / "clean"
    tierscope.run_sweep(sweep, clean, jobs=2, progress=False)
    for a, b in zip(table_files(out), table_files(clean), strict=True):
        assert a.name == b.name and a.read_bytes() == b.read_bytes(), a.name


def test_ctrl_c_stops_cleanly_and_keeps_finished_runs(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=10, samples=("2ms", "5ms", "10ms", "20ms"))
    cmd = [sys.executable, "-m", "tierscope", "sweep", str(sweep), "--out", "out", "--jobs", "2"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    out = tmp_path / "out"
    deadline = time.monotonic() + 120
    while not out.exists() or len(rows_dir(out)) < 4:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not list((out / "monitors").glob(".*.tmp"))
    assert tierscope.load_sweep(out).height == 2 * len(rows_dir(out))


def test_another_sweep_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=1)
    assert run_cli("sweep", "sweep.toml", "--out", "out", "--quiet", cwd=tmp_path).returncode == 0
    sweep.write_text(sweep.read_text().replace('"5ms"', '"7ms"'))
    proc = run_cli("sweep", "sweep.toml", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "holds another sweep" in proc.stderr, proc.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "precious.txt").write_text("keep")
    proc = run_cli("sweep", "sweep.toml", "--out", "other", cwd=tmp_path)
    assert proc.returncode == 2 and "not written by tierscope" in proc.stderr, proc.stderr
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["precious.txt"]


def test_bad_sweep_names_file_line_and_field(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=1)
    sweep.write_text(sweep.read_text().replace('"5ms"', '"5 parsecs"'))
    proc = run_cli("sweep", "sweep.toml", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("tierscope: error: sweep.toml:3: monitors[0].sample: run `"), line
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_ray_executor_gives_the_same_rows(tmp_path: Path) -> None:
    if os.environ.get("TIERSCOPE_TEST_RAY") != "require":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'tierscope[ray]')")
    import ray as _ray

    sweep = sweep_file(tmp_path, seeds=2)
    # With [tiering]: the policy rows too.
    tiering = tiering_sweep_file(tmp_path, seeds=1)
    tierscope.run_sweep(sweep, tmp_path / "local", jobs=2, progress=False)
    tierscope.run_sweep(tiering, tmp_path / "tiering-local", jobs=2, progress=False)
    _ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outcome = tierscope.run_sweep(sweep, tmp_path / "ray", executor="ray", progress=False)
        tiered = tierscope.run_sweep(
            tiering, tmp_path / "tiering-ray", executor="ray", progress=False
        )
    finally:
        _ray.shutdown()
    assert outcome.done == 4 and not outcome.failed
    assert tiered.done == 2 and not tiered.failed
    for name in ("", "tiering-"):
        local = table_files(tmp_path / f"{name}local")
        remote = table_files(tmp_path / f"{name}ray")
        assert [p.name for p in local] == [p.name for p in remote]
        for a, b in zip(local, remote, strict=True):
            assert a.read_bytes() == b.read_bytes(), a.name
    assert tierscope.load_sweep(tmp_path / "tiering-ray", "policies").height == 6


def test_the_next_run_starts_before_a_finished_one_is_handed_over(tmp_path: Path) -> None:
    # Handing a result over (writing its outputs) can take longer than a simulation: the
    # local executor gives the slot to the next run first, so with one slot, run k+1 has
    # started when run k's result arrives; the results still arrive in the sweep's order.
    from tierscope.sweep.local import run_local

    runs = tierscope.expand_sweep(sweep_file(tmp_path, seeds=2))
    started: list[str] = []
    seen: list[tuple[str, list[str]]] = []
    run_local(
        runs,
        1,
        lambda r, metrics, result: seen.append((r.id, list(started))),
        lambda r, message: pytest.fail(message),
        on_start=lambda r: started.append(r.id),
    )
    ids = [r.id for r in runs]
    assert [run for run, _ in seen] == ids
    for k, (_, at_hand_over) in enumerate(seen):
        assert at_hand_over == ids[: min(k + 2, len(ids))]
