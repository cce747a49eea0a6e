"""Sweeps: expansion through the CLI, the local executor, the Parquet store, resuming
after kill -9 and Ctrl-C, the Ray executor (where Ray is installed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tierscope
from conftest import run_cli

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


def test_dry_run_lists_the_runs(tmp_path: Path) -> None:
    sweep_file(tmp_path, seeds=2)
    proc = run_cli("sweep", "sweep.toml", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sample=5ms,seed=2" in proc.stdout and "4 runs" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_killed_sweep_resumes_without_losing_or_repeating_a_row(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=10, samples=("2ms", "5ms", "10ms", "20ms"))
    cmd = [sys.executable, "-m", "tierscope", "sweep", str(sweep), "--out", "out", "--jobs", "2"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stderr=subprocess.DEVNULL)
    out = tmp_path / "out"
    deadline = time.monotonic() + 120
    while len(rows_dir(out)) < 8 if out.exists() else True:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored = len(rows_dir(out))
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
    assert proc.returncode == 2 and "not look like a tierscope sweep" in proc.stderr


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
    tierscope.run_sweep(sweep, tmp_path / "local", jobs=2, progress=False)
    _ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outcome = tierscope.run_sweep(sweep, tmp_path / "ray", executor="ray", progress=False)
    finally:
        _ray.shutdown()
    assert outcome.done == 4 and not outcome.failed
    local, remote = rows_dir(tmp_path / "local"), rows_dir(tmp_path / "ray")
    assert [p.name for p in local] == [p.name for p in remote]
    for a, b in zip(local, remote, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
