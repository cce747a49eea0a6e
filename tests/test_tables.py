"""A run's tables as polars DataFrames (RunResult.monitors_df, policies_df, windows_df,
snapshots_df, truth_df, policy_windows_df): the same numbers as the arrays and metrics
they come from, addresses in bytes in both snapshots and truth, and the monitor and
policy tables in the columns of a sweep's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import tierscope
from tierscope.sweep.store import MONITOR_COLUMNS, POLICY_COLUMNS

EXPERIMENT = {
    "name": "tables",
    "duration": "600ms",
    "warmup": "0s",
    "workload": {
        "rate": "1M/s",
        "regions": [{"name": "cold", "size": "56MiB"}, {"name": "hot", "size": "8MiB"}],
        "phases": [
            {
                "name": "p",
                "duration": "600ms",
                "patterns": [{"region": "hot", "kind": "random", "mode": "ro"}],
            }
        ],
    },
    "monitors": [{"preset": "damon-mod"}, {"preset": "telescope-bnd"}],
    "tiering": {
        "tiers": [{"preset": "dram", "capacity": "16MiB"}, "cxl"],
        "policies": ["telescope-rule", "oracle"],
    },
}


@pytest.fixture(scope="module")
def result() -> tierscope.RunResult:
    return tierscope.run(EXPERIMENT, progress=False)


def test_windows_and_snapshots_match_the_arrays(result: tierscope.RunResult) -> None:
    windows = result.windows_df()
    m = result.monitors["telescope-bnd"]
    mine = windows.filter(pl.col("monitor") == m.name)
    assert mine["window"].to_list() == list(range(m.nr_windows))
    assert np.array_equal(mine["precision"].to_numpy(), m.windows["precision"])
    snaps = result.snapshots_df("telescope-bnd")
    assert snaps.height == len(m.snapshots.start)
    last = len(m.snapshots) - 1
    regions = m.snapshots.regions(last)
    rows = snaps.filter(pl.col("window") == last)
    assert np.array_equal(rows["start_addr"].to_numpy(), regions["start"])
    assert np.array_equal(rows["nr_accesses"].to_numpy(), regions["nr_accesses"])
    assert set(rows["end_ns"].to_list()) == {int(m.snapshots.end_ns[last])}
    with pytest.raises(KeyError, match="no monitor 'nope'; the run has damon-mod, telescope"):
        result.snapshots_df("nope")


def test_truth_is_in_bytes_like_the_snapshots(result: tierscope.RunResult) -> None:
    truth = result.truth_df("damon-mod")
    bs = result.block_size
    heap = result.heap
    # The hot region is the first 8 MiB of the heap: every window's truth, in bytes.
    for w in truth.partition_by("window"):
        assert w["start_addr"].to_list() == [heap["start"]]
        assert w["end_addr"].to_list() == [heap["start"] + (8 << 20)]
    assert all(a % bs == 0 for a in truth["start_addr"].to_list())
    # Comparable with the snapshots' regions as they are: the last window reports the
    # start of the hot region hot.
    snaps = result.snapshots_df("damon-mod")
    last = snaps.filter(pl.col("window") == snaps["window"].max())
    covering = last.filter(
        (pl.col("start_addr") <= heap["start"]) & (pl.col("end_addr") > heap["start"])
    )
    assert covering["nr_accesses"].to_list()[0] > 0


def test_monitor_and_policy_tables_are_a_sweeps(
    result: tierscope.RunResult, tmp_path: Path
) -> None:
    monitors, policies = result.monitors_df(), result.policies_df()
    assert monitors.columns == list(MONITOR_COLUMNS)
    assert policies.columns == list(POLICY_COLUMNS)
    assert policies["policy_run"].to_list() == list(result.policies)
    rule = result.policies["telescope-rule@damon-mod"]
    row = policies.row(0, named=True)
    assert row["promoted_bytes"] == rule.migration["promoted_bytes"]
    assert row["speedup_over_slow"] == rule.summary["speedup_over_slow"]
    # A one-run sweep of the same experiment stores the same rows.
    tierscope.run_sweep({"base": EXPERIMENT}, tmp_path / "s", progress=False)
    stored = tierscope.load_sweep(tmp_path / "s").drop("run_id")
    assert stored.equals(monitors)
    assert tierscope.load_sweep(tmp_path / "s", "policies").drop("run_id").equals(policies)


def test_policy_windows_are_per_tier(result: tierscope.RunResult) -> None:
    df = result.policy_windows_df()
    p = result.policies["oracle"]
    mine = df.filter(pl.col("policy_run") == "oracle")
    assert mine.height == p.nr_windows * 2
    assert mine["tier"].to_list()[:2] == ["dram", "cxl"]
    fast = mine.filter(pl.col("tier") == "dram")
    assert np.array_equal(fast["placed_bytes"].to_numpy(), p.windows["placed"][:, 0])
    assert np.array_equal(fast["app_ns"].to_numpy(), p.windows["app_ns"])
