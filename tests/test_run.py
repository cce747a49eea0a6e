"""A small real run through the CLI: every output exists, has the stable layout, damo
reads the records, and runs are deterministic."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PNG_FIGURES, TINY_EXPERIMENT, TINY_MASIM, leftovers, run_cli

MONITORS = ("damon-mod", "telescope-bnd")
SUMMARY_KEYS = (
    "precision",
    "recall",
    "f1",
    "cycles",
    "cpu_percent",
    "bits_cleared",
    "entries_read",
)
WINDOW_KEYS = (
    "start_ns",
    "end_ns",
    "precision",
    "recall",
    "f1",
    "reported_hot_bytes",
    "true_hot_bytes",
    "nr_regions",
    "cycles",
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("run")
    (d / "tiny.cfg").write_text(TINY_MASIM)
    (d / "tiny.toml").write_text(TINY_EXPERIMENT)
    proc = run_cli("run", "tiny.toml", "--out", "out", cwd=d, env=PNG_FIGURES)
    assert proc.returncode == 0, proc.stderr
    return d, proc.stdout


def metrics(d: Path) -> dict:
    return json.loads((d / "out" / "metrics.json").read_text())


def test_metrics_layout(run_dir: tuple[Path, str]) -> None:
    d, _ = run_dir
    m = metrics(d)
    assert m["experiment"]["name"] == "tiny"
    assert m["experiment"]["seed"] == 7
    assert m["duration_ns"] == 2_000_000_000
    assert m["heap"]["end"] - m["heap"]["start"] >= 64 << 20
    assert list(m["monitors"]) == list(MONITORS)
    for name in MONITORS:
        mon = m["monitors"][name]
        for key in (*SUMMARY_KEYS, "cost", "machine", "impact", "windows"):
            assert key in mon, (name, key)
        assert 0.0 <= mon["precision"] <= 1.0
        assert 0.0 <= mon["recall"] <= 1.0
        assert mon["cycles"] > 0 and mon["entries_read"] > 0
        assert mon["machine"]["accesses"] > 0
        windows = mon["windows"]
        assert len(windows) >= 5  # 200 ms windows over 2 s
        for w in windows:
            assert tuple(w) == WINDOW_KEYS
            assert 0 <= w["start_ns"] < w["end_ns"] <= m["duration_ns"]
        ends = [w["end_ns"] for w in windows]
        assert ends == sorted(ends)


def test_table_on_stdout(run_dir: tuple[Path, str]) -> None:
    _, stdout = run_dir
    lines = stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["monitor", "precision", "recall", "f1"]
    assert [line.split()[0] for line in lines[1:]] == list(MONITORS)


def test_csv_matches_metrics(run_dir: tuple[Path, str]) -> None:
    d, _ = run_dir
    m = metrics(d)
    for name in MONITORS:
        with (d / "out" / f"windows-{name}.csv").open() as f:
            rows = list(csv.DictReader(f))
        windows = m["monitors"][name]["windows"]
        assert len(rows) == len(windows)
        assert tuple(rows[0]) == WINDOW_KEYS
        assert [int(r["end_ns"]) for r in rows] == [w["end_ns"] for w in windows]
        assert [float(r["recall"]) for r in rows] == [w["recall"] for w in windows]


def test_heatmaps_are_pngs(run_dir: tuple[Path, str]) -> None:
    d, _ = run_dir
    for name in MONITORS:
        data = (d / "out" / f"heatmap-{name}.png").read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert len(data) > 10_000


def damo_command() -> list[str]:
    exe = Path(sys.executable).parent / "damo"
    found = str(exe) if exe.exists() else shutil.which("damo")
    if found is None:
        pytest.skip("damo is not installed (pip install damo==3.4.3, or `make venv`)")
    if shutil.which("file") is None:
        # damo detects the record format with file(1) and cannot read records without it.
        pytest.skip("damo needs the `file` command (apt-get install file)")
    return [found]


@pytest.mark.parametrize("report", ["heatmap", "access"])
def test_damo_reads_the_records(run_dir: tuple[Path, str], report: str) -> None:
    d, _ = run_dir
    damo = damo_command()
    for name in MONITORS:
        record = d / "out" / f"{name}.damon"
        proc = subprocess.run(
            [*damo, "report", report, "--input", str(record)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TERM": "dumb"},
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip(), "damo printed nothing"
        assert "error" not in proc.stderr.lower(), proc.stderr


def test_damo_record_matches_metrics(run_dir: tuple[Path, str]) -> None:
    from tierscope.export import damo

    d, _ = run_dir
    m = metrics(d)
    for name in MONITORS:
        (record,) = damo.read(d / "out" / f"{name}.damon")
        snaps = record["snapshots"]
        windows = m["monitors"][name]["windows"]
        assert len(snaps) == len(windows)
        assert record["intervals"]["aggr_us"] == 200_000
        for s, w in zip(snaps, windows, strict=True):
            assert (s["start_time"], s["end_time"]) == (w["start_ns"], w["end_ns"])
            assert len(s["regions"]) == w["nr_regions"]
            starts = [r["start"] for r in s["regions"]]
            assert starts == sorted(starts)
            assert all(r["start"] < r["end"] for r in s["regions"])


def test_rerun_replaces_only_our_files_with_force(
    run_dir: tuple[Path, str], tmp_path: Path
) -> None:
    d, _ = run_dir
    shutil.copytree(d / "out", tmp_path / "out")
    (tmp_path / "tiny.cfg").write_text(TINY_MASIM)
    (tmp_path / "out" / "notes.txt").write_text("the user's, not ours")
    quick = ("run", "--masim", "tiny.cfg", "--monitor", "damon-agg", "--duration", "1s")
    # Without --force an earlier output is refused, untouched.
    proc = run_cli(*quick, "--rate", "1M/s", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "--force" in proc.stderr, proc.stderr
    assert list(metrics(tmp_path)["monitors"]) == list(MONITORS)
    proc = run_cli(*quick, "--rate", "1M/s", "--out", "out", "--force", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # The earlier output's files are gone (its monitors' too), the user's file is kept.
    assert list(metrics(tmp_path)["monitors"]) == ["damon-agg"]
    assert not (tmp_path / "out" / "heatmap-damon-mod.png").exists()
    assert (tmp_path / "out" / "notes.txt").read_text() == "the user's, not ours"
    manifest = json.loads((tmp_path / "out" / "tierscope-manifest.json").read_text())
    assert manifest["kind"] == "run" and "notes.txt" not in manifest["files"]
    assert sorted(manifest["files"]) == sorted(
        p.name
        for p in (tmp_path / "out").iterdir()
        if p.name not in ("notes.txt", "tierscope-manifest.json")
    )
    assert leftovers(tmp_path, "out") == []


def test_same_seed_same_bytes(run_dir: tuple[Path, str]) -> None:
    d, _ = run_dir
    # --threads 1 versus the fixture's one-per-core: the executor must not matter either.
    proc = run_cli("run", "tiny.toml", "--threads", "1", "--out", "again", cwd=d)
    assert proc.returncode == 0, proc.stderr
    for file in ("metrics.json", *(f"{name}.damon" for name in MONITORS)):
        assert (d / "out" / file).read_bytes() == (d / "again" / file).read_bytes(), file


def test_another_seed_changes_the_snapshots(run_dir: tuple[Path, str], tmp_path: Path) -> None:
    d, _ = run_dir
    (tmp_path / "tiny.cfg").write_text(TINY_MASIM)
    (tmp_path / "tiny.toml").write_text(TINY_EXPERIMENT.replace("seed = 7", "seed = 8"))
    proc = run_cli("run", "tiny.toml", "--out", "other", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    a = (d / "out" / "damon-mod.damon").read_bytes()
    b = (tmp_path / "other" / "damon-mod.damon").read_bytes()
    assert a != b


def test_quick_form_picks_five_level_paging_for_a_petabyte(workdir: Path) -> None:
    (workdir / "huge.cfg").write_text("heap, 1PiB\n\np\n2000\nheap, 1, 4096, 1, ro\n")
    proc = run_cli(
        "run",
        "--masim",
        "huge.cfg",
        "--engine",
        "stat",
        "--monitor",
        "telescope-bnd",
        "--duration",
        "1s",
        "--out",
        "out",
        "--quiet",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    m = json.loads((workdir / "out" / "metrics.json").read_text())
    assert m["experiment"]["machine"]["paging_levels"] == 5
    assert m["monitors"]["telescope-bnd"]["windows_evaluated"] >= 0
    # Asking for 4 levels is refused with the option named.
    proc = run_cli(
        "run",
        "--masim",
        "huge.cfg",
        "--engine",
        "stat",
        "--paging-levels",
        "4",
        "--out",
        "out2",
        cwd=workdir,
    )
    assert proc.returncode == 2
    assert "--paging-levels: machine.paging_levels:" in proc.stderr, proc.stderr
