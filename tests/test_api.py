"""The Python API the CLI is built on: numpy results, progress, cancellation, atomic
output, and the heatmap rasterizer against a naive oracle."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tierscope
from conftest import TINY_MASIM, leftovers
from tierscope.export import damo
from tierscope.plot import rasterize


def tiny(workdir: Path, **over: Any) -> dict[str, Any]:
    exp: dict[str, Any] = {
        "name": "api",
        "seed": 3,
        "duration": "2s",
        "workload": {"masim": str(workdir / "tiny.cfg"), "rate": "1M/s"},
        "monitors": [{"preset": "damon-agg"}, {"preset": "telescope-flx", "name": "flx"}],
    }
    exp.update(over)
    return exp


@pytest.fixture
def cfg_dir(tmp_path: Path) -> Path:
    (tmp_path / "tiny.cfg").write_text(TINY_MASIM)
    return tmp_path


def test_run_returns_numpy_arrays(cfg_dir: Path) -> None:
    calls: list[tuple[int, int]] = []
    result = tierscope.run(tiny(cfg_dir), progress=lambda d, t: calls.append((d, t)))
    assert list(result.monitors) == ["damon-agg", "flx"]
    assert calls and calls[-1][0] == calls[-1][1] > 0
    assert all(d <= t for d, t in calls)
    for m in result.monitors.values():
        n = m.nr_windows
        assert n >= 5
        for key, column in m.windows.items():
            assert isinstance(column, np.ndarray) and len(column) == n, key
        assert m.windows["precision"].dtype == np.float64
        assert m.windows["nr_regions"].dtype == np.uint32
        s = m.snapshots
        assert len(s) == n and len(s.offsets) == n + 1
        assert s.offsets[0] == 0 and s.offsets[-1] == len(s.start) == len(s.nr_accesses)
        assert np.all(np.diff(s.offsets.astype(np.int64)) == m.windows["nr_regions"])
        assert np.all(s.start < s.end)
        assert np.array_equal(s.end_ns, m.windows["end_ns"])
        t = m.truth
        assert len(t) == n and t.offsets[-1] == len(t.start) == len(t.end)
        assert np.all(t.start < t.end)
        # Truth blocks lie inside the heap.
        heap_blocks = (result.heap["start"] // t.block_size, -(-result.heap["end"] // t.block_size))
        assert np.all(t.start >= heap_blocks[0]) and np.all(t.end <= heap_blocks[1])
        # Per-window true_hot_bytes agrees with the truth intervals.
        sizes = [int((e - b).sum()) * t.block_size for b, e in map(t.intervals, range(n))]
        assert sizes == m.windows["true_hot_bytes"].tolist()
        # The damo export carries exactly the snapshots.
        (record,) = damo.records(m)
        assert [len(x["regions"]) for x in record["snapshots"]] == m.windows["nr_regions"].tolist()
        # The writer's text is the records' JSON, character for character.
        assert damo.text(m) == json.dumps(damo.records(m), separators=(",", ":"))
    metrics = result.metrics
    assert metrics["experiment"]["monitors"][1]["name"] == "flx"
    assert metrics["monitors"]["flx"]["precision"] == result.monitors["flx"].summary["precision"]


def test_load_experiment_normalizes(cfg_dir: Path) -> None:
    exp = tierscope.load_experiment(tiny(cfg_dir))
    assert exp.monitor_names == ["damon-agg", "flx"]
    d = exp.to_dict()
    assert d["duration"] == "2s"
    assert d["workload"]["rate"] == 1_000_000
    assert d["machine"]["paging_levels"] == 4  # resolved for the heap
    assert d["monitors"][1] | {"name": "flx", "type": "telescope"} == d["monitors"][1]
    # The normalized form is an experiment in the file format: it loads back to itself.
    assert tierscope.load_experiment(d).to_dict() == d
    # Without a duration, one pass over the phases (2000 ms in TINY_MASIM).
    exp = tierscope.load_experiment({k: v for k, v in tiny(cfg_dir).items() if k != "duration"})
    assert exp.duration_ns == 2_000_000_000


def test_config_error_has_parts(cfg_dir: Path) -> None:
    with pytest.raises(tierscope.ConfigError) as info:
        tierscope.load_experiment(tiny(cfg_dir, monitors=[{"preset": "nope"}]))
    e = info.value
    assert "preset" in e.message and "nope" in str(e)
    assert e.file == "<experiment dict>"
    bad = cfg_dir / "bad.toml"
    bad.write_text('seed = "x"\n[workload]\nmasim = "tiny.cfg"\n')
    with pytest.raises(tierscope.ConfigError) as info:
        tierscope.load_experiment(bad)
    assert info.value.line == 1 and info.value.file == str(bad)


def test_interrupt_cancels_and_writes_nothing(cfg_dir: Path) -> None:
    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    out = cfg_dir / "out"
    with pytest.raises(KeyboardInterrupt):
        tierscope.run(tiny(cfg_dir, duration="600s"), out=out, progress=interrupt)
    assert not out.exists() and leftovers(cfg_dir, "out") == []


def test_failed_write_leaves_nothing(cfg_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tierscope.output

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(tierscope.output, "heatmap", broken)
    out = cfg_dir / "deep" / "er" / "out"
    with pytest.raises(RuntimeError, match="disk on fire"):
        tierscope.run(tiny(cfg_dir, duration="1s"), out=out, progress=False)
    assert not (cfg_dir / "deep").exists()


def naive_raster(regions: list[list[tuple[int, int, float]]], lo: int, hi: int, rows: int):
    # Row r covers [lo + r (hi - lo) / rows, lo + (r + 1) (hi - lo) / rows), exactly.
    grid = np.zeros((rows, len(regions)))
    for w, window in enumerate(regions):
        for r in range(rows):
            a = lo + Fraction(r * (hi - lo), rows)
            b = lo + Fraction((r + 1) * (hi - lo), rows)
            for s, e, v in window:
                if v > 0 and max(s, a) < min(e, b):
                    grid[r, w] = max(grid[r, w], v)
    return grid


@st.composite
def windows(draw: st.DrawFn) -> list[list[tuple[int, int, float]]]:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        cuts = sorted(set(draw(st.lists(st.integers(0, 1 << 16), min_size=2, max_size=12))))
        out.append([(a, b, float(draw(st.integers(0, 5)))) for a, b in itertools.pairwise(cuts)])
    return out


@settings(max_examples=150, deadline=None)
@given(windows(), st.integers(0, 1 << 15), st.integers(1, 1 << 16), st.integers(1, 40))
# An interval ending on a row's start (513 = 39 + 7 x 948 / 14), where division rounds up.
@example(w=[[(0, 513, 1.0)]], lo=39, span=948, rows=14)
def test_rasterize_matches_naive(w: list, lo: int, span: int, rows: int) -> None:
    flat = [r for window in w for r in window]
    offsets = np.cumsum([0] + [len(x) for x in w]).astype(np.uint64)
    starts = np.array([r[0] for r in flat], dtype=np.uint64)
    ends = np.array([r[1] for r in flat], dtype=np.uint64)
    values = np.array([r[2] for r in flat])
    got = rasterize(offsets, starts, ends, values, lo, lo + span, rows)
    np.testing.assert_array_equal(got, naive_raster(w, lo, lo + span, rows))


def test_load_reopens_a_run_directory(cfg_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = tierscope.run(tiny(cfg_dir), out=out, progress=False)
    again = tierscope.load(out)
    assert again.metrics == result.metrics
    assert list(again.monitors) == list(result.monitors)
    for name, m in result.monitors.items():
        a = again.monitors[name]
        for k, v in m.windows.items():
            assert np.array_equal(a.windows[k], v, equal_nan=True), k
            assert a.windows[k].dtype == v.dtype
        assert len(a.snapshots) == len(m.snapshots)
        assert np.array_equal(a.snapshots.regions(2)["start"], m.snapshots.regions(2)["start"])
        assert np.array_equal(a.truth.intervals(2)[1], m.truth.intervals(2)[1])
    with pytest.raises(tierscope.ConfigError, match="not a tierscope run directory"):
        tierscope.load(tmp_path / "nothing")
