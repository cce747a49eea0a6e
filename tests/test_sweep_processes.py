"""The local executor's worker processes (tierscope.sweep.processes), which run a sweep
whose runs write their outputs: the same files and rows as in-process runs, the caller's
command in each run's manifest, errors and cancellation reaching the caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tierscope
from conftest import run_cli
from test_sweep import rows_dir, sweep_file
from tierscope.outdir import OutputError
from tierscope.sweep.processes import run_processes


def test_worker_outputs_are_a_runs_outputs(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=2)
    proc = run_cli(
        "sweep", "sweep.toml", "--out", "out", "--outputs", "--jobs", "2", "--quiet", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    runs = tierscope.expand_sweep(sweep)
    assert len(runs) == 4
    for r in runs:
        written = out / "runs" / r.id
        alone = tmp_path / "alone" / r.id
        tierscope.run(r.experiment, out=alone, progress=False, threads=1)
        names = sorted(p.name for p in written.iterdir())
        assert names == sorted(p.name for p in alone.iterdir())
        assert any(n.endswith(".damon") for n in names), names
        for name in names:
            if name != "tierscope-manifest.json":
                assert (written / name).read_bytes() == (alone / name).read_bytes(), name
        manifest = json.loads((written / "tierscope-manifest.json").read_text())
        assert manifest["command"] == [
            "tierscope",
            "sweep",
            "sweep.toml",
            "--out",
            "out",
            "--outputs",
            "--jobs",
            "2",
            "--quiet",
        ]
    # The rows are the in-process executor's (a sweep without outputs runs in-process).
    tierscope.run_sweep(sweep, tmp_path / "rows", jobs=2, progress=False)
    for a, b in zip(rows_dir(out), rows_dir(tmp_path / "rows"), strict=True):
        assert a.name == b.name and a.read_bytes() == b.read_bytes(), a.name


def test_an_output_error_in_a_worker_reaches_the_caller(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, seeds=1)
    first = tierscope.expand_sweep(sweep)[0]
    foreign = tmp_path / "out" / "runs" / first.id
    foreign.mkdir(parents=True)
    (foreign / "precious.txt").write_text("keep")
    with pytest.raises(OutputError, match="not written by tierscope"):
        tierscope.run_sweep(sweep, tmp_path / "out", jobs=2, outputs=True, progress=False)
    assert [p.name for p in foreign.iterdir()] == ["precious.txt"]


def test_an_error_in_the_caller_cancels_the_runs_in_flight(tmp_path: Path) -> None:
    # Two runs at once: a short one, and one far too long to end in this test unless
    # cancelled. Once the short one is handed over and the long one reports progress, the
    # caller's progress callback fails: the error reaches the caller once the long run
    # has stopped, which wrote nothing (outputs are all or nothing).
    sweep = sweep_file(tmp_path, seeds=1)
    short = tierscope.expand_sweep(sweep)[0]
    long = tierscope.expand_sweep(sweep, overrides=[("duration", "3600s")])[1]
    done: list[str] = []

    def progress(finished: int, fraction: float) -> None:
        if finished == 1 and 0.0 < fraction < 1.0:
            raise RuntimeError("progress failed")

    with pytest.raises(RuntimeError, match="progress failed"):
        run_processes(
            [short, long],
            2,
            tmp_path / "runs",
            lambda r, metrics, result: done.append(r.id),
            lambda r, message: pytest.fail(message),
            on_progress=progress,
        )
    assert done == [short.id]
    assert (tmp_path / "runs" / short.id / "metrics.json").is_file()
    assert not (tmp_path / "runs" / long.id).exists()
