"""`tierscope compare DIR` (python/tierscope/cli/compare.py): rows from metrics.json, the
printed table, the files written where --out says (never into DIR), and the error for a
directory without metrics. Several runs: tests/test_cli_conventions.py."""

from __future__ import annotations

import json
from pathlib import Path

from tierscope.cli import compare

WINDOWS = [
    # Before the 1 s warm-up: left out.
    {"start_ns": 0, "end_ns": 500_000_000, "recall": 0.0, "true_hot_bytes": 1 << 30},
    {"start_ns": 1_000_000_000, "end_ns": 1_200_000_000, "recall": 0.5, "true_hot_bytes": 4 << 20},
    {"start_ns": 1_200_000_000, "end_ns": 1_600_000_000, "recall": 1.0, "true_hot_bytes": 4 << 20},
]


def metrics() -> dict[str, object]:
    monitor = {
        "precision": 0.9,
        "recall": 0.75,
        "f1": 0.8,
        "cycles": 2.5e9,
        "cpu_percent": 1.25,
        "bits_cleared": 12345,
        "flushes": 7,
        "app_slowdown": 0.0125,
        "kind": "pebs",
        "cost": {"bits_cleared": 12345, "pmu_samples": 999},
        "windows": WINDOWS,
    }
    return {"experiment": {"warmup_ns": 1_000_000_000}, "monitors": {"pebs-agg": monitor}}


def test_rows_take_summary_cost_and_windows_after_warmup() -> None:
    (row,) = compare.rows(metrics())
    assert row["monitor"] == "pebs-agg" and row["kind"] == "pebs"
    assert row["gcycles"] == 2.5
    assert row["bits_flipped"] == 12345 and row["pmu_samples"] == 999
    # Mean window 0.3 s; missed hot memory: (2 MiB + 0) / 2 windows = 1 MiB.
    assert abs(row["window_s"] - 0.3) < 1e-12
    assert abs(row["missed_hot_mib"] - 1.0) < 1e-12
    assert abs(row["app_slowdown_percent"] - 1.25) < 1e-12


def test_table_and_files(tmp_path: Path, capsys: object) -> None:
    (tmp_path / "metrics.json").write_text(json.dumps(metrics()))
    assert compare.main([str(tmp_path), "--out", str(tmp_path.parent / "cmp")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"], "not into DIR"
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    header, rule, line = out.splitlines()
    assert header.split()[:2] == ["monitor", "kind"] and set(rule) <= {"-", " "}
    assert line.split()[:6] == ["pebs-agg", "pebs", "0.900", "0.750", "0.800", "2.500"]
    assert "12,345" in line and "1.2500" in line
    cmp = tmp_path.parent / "cmp"
    md = (cmp / "compare.md").read_text().splitlines()
    assert md[0].startswith("| monitor | kind | precision") and md[2].startswith("| pebs-agg |")
    assert json.loads((cmp / "compare.json").read_text())[0]["pmu_samples"] == 999


def test_missing_metrics_is_bad_input(tmp_path: Path, capsys: object) -> None:
    assert compare.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "metrics.json: no such file" in err
