"""`tierscope tune` and the Cori binding: candidates from the reuse (traces) or the loops
(experiments), trials in order under the stopping rules, the best trial chosen, outputs
written; bad input exits 2 with one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from conftest import run_cli
from test_cli_errors import assert_bad_input
from tierscope import _core, cori


def test_loop_bars_count_each_phase_start_by_hand() -> None:
    # Phases of 250 and 500 ms repeating over 2 s: starts at 0 (250), 250 (500), 750
    # (250), 1000 (500), 1500 (250), 1750 (500): three of each.
    ms = 1_000_000
    assert cori.loop_bars([250 * ms, 500 * ms], 2000 * ms) == [(250 * ms, 3.0), (500 * ms, 3.0)]
    assert cori.loop_bars([], 10) == []


def test_tuner_stops_and_chooses_by_hand() -> None:
    # Costs fall, then rise: the best is 3; within 3 % of the best before it stops at 4
    # (100.5 vs 100: within), no-gain 2 would stop at 5.
    costs = {1: 130.0, 2: 110.0, 3: 100.0, 4: 100.5, 5: 120.0, 6: 90.0}
    trials, chosen = _core.cori_tune(list(costs), costs.__getitem__, [("within", 3.0)])
    assert [p for p, _ in trials] == [1, 2, 3, 4] and chosen == (3, 100.0)
    trials, chosen = _core.cori_tune(list(costs), costs.__getitem__, [("no-gain", 2.0)])
    assert [p for p, _ in trials] == [1, 2, 3, 4, 5] and chosen == (3, 100.0)
    trials, chosen = _core.cori_tune(list(costs), costs.__getitem__, [("trials", 1.0)])
    assert trials == [(1, 130.0)] and chosen == (1, 130.0)
    # Trials to within 3 % of the best (90): only period 6; base-random's mean over seeds.
    assert _core.cori_trials_to_within(list(costs), costs, 90.0, 3.0) == 6.0
    mean = _core.cori_trials_to_within(list(costs), costs, 90.0, 3.0, list(range(50)))
    assert 1.0 <= mean <= 6.0


def test_a_cost_that_raises_stops_the_tuning() -> None:
    def cost(p: int) -> float:
        if p == 2:
            raise RuntimeError("run failed")
        return float(p)

    try:
        _core.cori_tune([1, 2, 3], cost, [])
    except RuntimeError as e:
        assert "run failed" in str(e)
    else:
        raise AssertionError("the error was swallowed")


@pytest.mark.figures
def test_tune_a_trace_file(tmp_path: Path) -> None:
    # Page 0 every 2000 requests, 20 other pages cycling in between: their reuses (about
    # 20 requests) fall in bucket 0, which Cori drops; page 0's 199 reuses of 2000 make
    # the one bar, so the dominant reuse is 2000.
    lines = []
    for _ in range(200):
        lines.append(hex(0x1000))
        for k in range(1999):
            lines.append(hex(0x10000 + (k % 20) * 4096))
    (tmp_path / "t.trace").write_text("\n".join(lines) + "\n")
    trace = _core.CoriTrace.from_file(tmp_path / "t.trace")
    assert trace.requests == 400_000 and trace.pages == 21
    proc = run_cli("tune", "--trace", "t.trace", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "tune.json").read_text())
    dr = summary["dominant_reuse"]
    assert dr == 2000 and trace.bars() == [(2000, 199.0)]
    assert summary["candidates"] == _core.cori_candidates(dr, 400_000)
    assert summary["candidates"][0] == dr
    with open(tmp_path / "out" / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    # Trials follow the candidates, shortest first; the chosen is the cheapest trial.
    assert [int(r["value"]) for r in rows] == summary["candidates"][: len(rows)]
    best = min(rows, key=lambda r: float(r["cost"]))
    assert summary["chosen"][0] == int(best["value"])
    assert f"chosen: {summary['chosen'][0]}" in proc.stdout
    assert (tmp_path / "out" / "tune.png").stat().st_size > 0


def test_tune_a_generated_workload_with_its_exhaustive_curve(tmp_path: Path) -> None:
    proc = run_cli(
        "tune", "--workload", "irregular", "--scheduler", "oracle", "--exhaustive", "5000",
        "--stop", "trials:3", "--out", "out", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert len(summary["trials"]) <= 3
    curve = summary["curve"]
    assert [p for p, _ in curve] == [5000 * k for k in range(1, len(curve) + 1)]
    # The model is deterministic: a trial on the grid costs what the curve says.
    on_grid = dict(curve)
    for p, c in summary["trials"]:
        if p in on_grid:
            assert c == on_grid[p]


EXPERIMENT = """
duration = "1s"
warmup = "0s"
block_size = "4KiB"
[machine]
engine = "exact"
[workload]
rate = "1M/s"
regions = [{ name = "a", size = "8MiB" }, { name = "b", size = "8MiB" }]
phases = [
  { name = "a", duration = "100ms", patterns = [{ region = "a", kind = "zipf", mode = "rw" }] },
  { name = "b", duration = "100ms", patterns = [{ region = "b", kind = "zipf", mode = "rw" }] },
]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{ preset = "cori-fast", capacity = "20%" }, "cori-slow"]
placement = "interleaved"
policies = [{ type = "periodic", name = "history", mode = "history", period = "10ms" }]
window = "10ms"
"""

#: The periodic policy's own period (not the performance model's window).
PERIOD = "tiering.policies[history].period"


def test_tune_an_experiments_period(tmp_path: Path) -> None:
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    proc = run_cli("tune", "exp.toml", "--param", PERIOD, "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "tune.json").read_text())
    # Loops of 100 ms, five of each phase in 1 s: the dominant reuse is 100 ms, and the
    # candidates its multiples up to 500 ms, one per number of periods in 1 s (10, 5, 3,
    # 2; 500 ms makes 2 again and is dropped).
    assert summary["bars"] == [[100_000_000, 10.0]]
    assert summary["dominant_reuse"] == 100_000_000
    assert summary["candidates"] == [100_000_000 * k for k in (1, 2, 3, 4)]
    trials = summary["trials"]
    assert summary["chosen"] == min(trials, key=lambda t: t[1])
    # Each trial is one run of the experiment with the period set: run it again by hand.
    import tierscope

    p, cost = trials[0]
    (r,) = tierscope.expand_sweep(
        {"base": str(tmp_path / "exp.toml"), "set": {PERIOD: f"{p}ns"}}
    )
    again = tierscope.run(r.experiment, progress=False)
    assert next(iter(again.policies.values())).summary["app_ns"] == cost


def test_bad_tune_input(tmp_path: Path) -> None:
    (tmp_path / "bad.trace").write_text("0x1000\n0xzz\n")
    assert_bad_input(run_cli("tune", "--trace", "bad.trace", cwd=tmp_path), "bad.trace:2")
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    assert_bad_input(run_cli("tune", "exp.toml", cwd=tmp_path), "--param")
    assert_bad_input(
        run_cli("tune", "--workload", "random", "--stop", "soon:3", cwd=tmp_path), "--stop"
    )
    assert_bad_input(run_cli("tune", "--workload", "nope", cwd=tmp_path), "unknown workload")
    assert_bad_input(
        run_cli("tune", "exp.toml", "--param", PERIOD, "--run", "nope", cwd=tmp_path),
        "--run",
        "nope",
    )


@pytest.mark.figures
def test_repro_cori(tmp_path: Path) -> None:
    proc = run_cli("repro", "cori", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    rows = json.loads((out / "repro.json").read_text())["rows"]
    workloads = _core.CoriTrace.workloads()
    assert [(r["workload"], r["scheduler"]) for r in rows] == [
        (w, s) for w in workloads for s in ("history", "oracle")
    ]
    for r in rows:
        trace = _core.CoriTrace.generate(r["workload"], 1, 1)
        grid = _core.cori_baseline("right", 1000, trace.requests, 0)
        assert r["best_period"] in grid
        # Figure 1's cells from the model by hand: HMA's 10,000-request period.
        best = trace.model(r["best_period"], r["scheduler"])["runtime_ns"]
        hma = trace.model(10_000, r["scheduler"])["runtime_ns"]
        assert r["table_i_slowdown_pct"]["HMA"] == 100.0 * (hma / best - 1.0)
        # Cori tried its candidates in order and chose one of them.
        candidates = _core.cori_candidates(r["dominant_reuse"], trace.requests)
        assert r["cori_period"] in candidates[: r["cori_trials"]]
        # Cori's best candidate: the fastest of all of them (the first on ties), after as
        # many trials as its place, and never slower than where the stopping rules stop.
        runtime = {p: trace.model(p, r["scheduler"])["runtime_ns"] for p in candidates}
        assert r["cori_best_period"] == min(candidates, key=lambda p: runtime[p])
        assert r["cori_best_trials"] == candidates.index(r["cori_best_period"]) + 1
        assert r["cori_best_slowdown_pct"] <= r["cori_slowdown_pct"]
        # base-right starts at the grid's shortest period, base-left at its longest.
        assert 1 <= r["random_to_3pct"] <= len(grid)
        assert r["right_to_3pct"] is not None and r["left_to_3pct"] is not None
    text = (out / "repro.md").read_text()
    assert "paper: Cori gets within 3% of the best in 5x fewer trials" in text
    for w in workloads:
        assert (out / f"figure3-{w}.png").stat().st_size > 0


def test_tune_other_parameters(tmp_path: Path) -> None:
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    # A monitor's aggregation interval, scored by its f1 (larger is better).
    proc = run_cli(
        "tune", "exp.toml", "--param", "monitors[damon-mod].aggr", "--monitor", "damon-mod",
        "--metric", "f1", "--maximize", "--values", "20000000,100000000", "--out", "a",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    a = json.loads((tmp_path / "a" / "tune.json").read_text())
    assert [v for v, _ in a["trials"]] == [20_000_000, 100_000_000]
    assert a["maximize"] and a["chosen"] == max(a["trials"], key=lambda t: t[1])
    assert all(0.0 <= f1 <= 1.0 for _, f1 in a["trials"])
    # A migration quota, as sizes.
    proc = run_cli(
        "tune", "exp.toml", "--param", "tiering.migration.max_per_round", "--unit", "raw",
        "--values", "4KiB,1MiB", "--out", "b", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    b = json.loads((tmp_path / "b" / "tune.json").read_text())
    assert [v for v, _ in b["trials"]] == ["4KiB", "1MiB"]
    assert b["chosen"] == min(b["trials"], key=lambda t: t[1])


def test_bad_parameters(tmp_path: Path) -> None:
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    assert_bad_input(
        run_cli("tune", "exp.toml", "--param", "tiering.nonsense", cwd=tmp_path), "nonsense"
    )
    # Not a duration: the engine's name cannot be set to nanoseconds.
    assert_bad_input(
        run_cli("tune", "exp.toml", "--param", "machine.engine", cwd=tmp_path), "engine"
    )
