"""Sweeps: expansion through the CLI, the local executor, the Parquet store (monitor rows,
and policy rows for experiments with [tiering]; rows stored before policy rows existed),
resuming after kill -9 and Ctrl-C, the Ray executor (where Ray is installed)."""

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
    OP_LATENCY_COLUMNS,
    POLICY_COLUMNS,
    POLICY_SUMMARY_COLUMNS,
    SUMMARY_COLUMNS,
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
#: The columns every row had before policy rows existed, in their order.
MONITOR_COLUMNS = ["run_id", "capacity", "seed", "monitor", "kind", *SUMMARY_COLUMNS]


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
    return sorted((out / "rows").glob("*.parquet"))


def test_local_sweep_stores_one_row_per_run_and_monitor(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=3)
    outcome = tierscope.run_sweep(sweep, tmp_path / "out", jobs=2, progress=False)
    assert (outcome.runs, outcome.done, outcome.skipped) == (6, 6, 0)
    df = tierscope.load_sweep(tmp_path / "out")
    assert df.height == 12
    assert df["seed"].dtype.is_integer() and df["sample"].to_list()[:2] == ["2ms", "2ms"]
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
    df = tierscope.load_sweep(tmp_path / "out")
    # Per run: its monitor row, then one row per policy run.
    assert df.height == 16
    assert df["row"].to_list() == ["monitor", "policy", "policy", "policy"] * 4
    # The monitor rows' columns come first, as before; the policy rows' are appended.
    assert df.columns == [*MONITOR_COLUMNS, *POLICY_COLUMNS]
    assert df["capacity"].dtype == pl.String and df["seed"].dtype.is_integer()
    assert df.select(["run_id", "row", "monitor", "policy_run"]).unique().height == 16
    monitors = df.filter(pl.col("row") == "monitor")
    policies = df.filter(pl.col("row") == "policy")
    assert monitors["monitor"].to_list() == ["damon-mod"] * 4
    assert monitors["kind"].to_list() == ["damon"] * 4
    assert monitors["precision"].null_count() == 0
    # Columns that do not apply to a row's kind are null.
    for column in POLICY_COLUMNS:
        if column != "row":
            assert monitors[column].null_count() == 4, column
    for column in ["kind", *SUMMARY_COLUMNS]:
        assert policies[column].null_count() == 12, column
    assert policies["policy_run"].to_list() == POLICY_RUNS * 4
    assert policies["policy_kind"].to_list() == ["telescope-rule", "oracle", "static"] * 4
    # The monitor feeding each policy; none for the oracle and static.
    assert policies["monitor"].to_list() == ["damon-mod", None, None] * 4
    # Each policy row is the run's own numbers: rerunning one run alone gives them.
    r = tierscope.expand_sweep(sweep)[3]
    assert r.params == {"capacity": "32MiB", "seed": 2}
    metrics = tierscope.run(r.experiment, progress=False).metrics["policies"]
    for name, p in metrics.items():
        row = df.filter((pl.col("run_id") == r.id) & (pl.col("policy_run") == name)).row(
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
        oracle.filter(pl.col("capacity") == c)["speedup_over_slow"].min() for c in ("4MiB", "32MiB")
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
    (row,) = tierscope.load_sweep(tmp_path / "out").to_dicts()
    assert row["rate"] == 2.5 and row["row"] == "policy" and row["monitor"] == "pebs"
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
    assert row["demoted_bytes"] is None and row["precision"] is None


def test_rows_stored_before_policy_rows_existed_still_load(tmp_path: Path) -> None:
    import polars as pl

    sweep = sweep_file(tmp_path, seeds=2)
    out = tmp_path / "out"
    tierscope.run_sweep(sweep, out, jobs=2, progress=False)
    new = tierscope.load_sweep(out)
    assert new["row"].to_list() == ["monitor"] * 8
    # Rewrite two runs' files as the store wrote them before: the monitor columns only.
    old = ["run_id", "sample", "seed", "monitor", "kind", *SUMMARY_COLUMNS]
    files = rows_dir(out)
    for f in files[:2]:
        table = pq.read_table(f)
        pq.write_table(table.select(old), f, compression="zstd")
        assert pq.read_table(f).column_names == old
    df = tierscope.load_sweep(out)
    # The same frame: the old rows are monitor rows, their policy columns null.
    assert df.columns == new.columns and df.schema == new.schema
    assert df.equals(new)
    assert df["row"].to_list() == ["monitor"] * 8
    assert df.select(list(POLICY_COLUMNS)[1:]).null_count().row(0) == (8,) * (
        len(POLICY_COLUMNS) - 1
    )
    # A mix of old and new files resumes: nothing reruns, the report still renders.
    assert tierscope.run_sweep(sweep, out, progress=False).skipped == 4
    text = tierscope.write_report(out).read_text()
    assert "4 of 4 runs stored" in text and "Tiering" not in text
    assert df.filter(pl.col("monitor") == "damon-mod").height == 4


def test_a_parameter_named_like_a_row_column_is_refused(tmp_path: Path) -> None:
    sweep = tiering_sweep_file(tmp_path)
    sweep.write_text(sweep.read_text() + 'name = "policy"\n')
    with pytest.raises(tierscope.ConfigError, match="named 'policy', like a column") as e:
        tierscope.run_sweep(sweep, tmp_path / "out", progress=False)
    assert e.value.field == "axes"
    assert not (tmp_path / "out").exists()


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
    assert not list((out / "rows").glob(".*.tmp"))
    df = tierscope.load_sweep(out)
    assert df.height == 80
    assert df.select(["run_id", "monitor"]).unique().height == 80
    # The same rows as a sweep that was never interrupted (same seeds, same bytes).
    clean = tmp_path / "clean"
    tierscope.run_sweep(sweep, clean, jobs=2, progress=False)
    for a, b in zip(rows_dir(out), rows_dir(clean), strict=True):
        assert a.name == b.name and a.read_bytes() == b.read_bytes(), a.name


def test_killed_tiering_sweep_resumes_without_losing_or_repeating_a_row(tmp_path: Path) -> None:
    # A run's monitor and policy rows are one file: a run is stored whole or not at all.
    sweep = tiering_sweep_file(tmp_path, seeds=8)
    out = tmp_path / "out"
    stored = kill_sweep_after(sweep, out, rows=4)
    assert 4 <= stored < 16, stored
    for f in rows_dir(out):
        assert pq.read_table(f)["row"].to_pylist() == ["monitor", "policy", "policy", "policy"]
    outcome = tierscope.run_sweep(sweep, out, jobs=2, progress=False)
    assert outcome.skipped >= stored and outcome.done == 16 - outcome.skipped
    assert not list((out / "rows").glob(".*.tmp"))
    df = tierscope.load_sweep(out)
    assert df.height == 64
    assert df.select(["run_id", "row", "monitor", "policy_run"]).unique().height == 64
    assert df.filter(df["row"] == "policy").select(["run_id", "policy_run"]).unique().height == 48
    clean = tmp_path / "clean"
    tierscope.run_sweep(sweep, clean, jobs=2, progress=False)
    for a, b in zip(rows_dir(out), rows_dir(clean), strict=True):
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
    assert not list((out / "rows").glob(".*.tmp"))
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
        local, remote = rows_dir(tmp_path / f"{name}local"), rows_dir(tmp_path / f"{name}ray")
        assert [p.name for p in local] == [p.name for p in remote]
        for a, b in zip(local, remote, strict=True):
            assert a.read_bytes() == b.read_bytes(), a.name
    assert tierscope.load_sweep(tmp_path / "tiering-ray")["row"].to_list().count("policy") == 6
