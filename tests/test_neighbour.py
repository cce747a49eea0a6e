"""The noisy neighbour from Python: `[tiering.neighbour]` and the `throttle` policy in an
experiment, the `neighbour` table of each policy run in the result and in metrics.json,
loaded back unchanged (docs/techniques/THROTTLE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tierscope

EXPERIMENT = """
duration = "400ms"
warmup = "0s"
[machine]
engine = "stat"
[workload]
rate = "2M/s"
accesses_per_op = 4
regions = [{ name = "store", size = "64MiB" }]
phases = [{ name = "p", duration = "400ms", patterns = [{ region = "store", kind = "random" }] }]
[[monitors]]
type = "nemo_rule"
kinds = "both"
region = "64MiB"
entries = 2
operand = 1
[tiering]
tiers = [{ preset = "dram", capacity = "16MiB" }, { preset = "cxl", bandwidth = 1073741824 }]
placement = "all-slow"
window = "10ms"
app = { compute_ns = 100 }
policies = [
    { type = "static", name = "unthrottled" },
    { type = "throttle", name = "mbm-1ms", telemetry = "mbm", target = "64MiB" },
]
[tiering.neighbour]
size = "64MiB"
rate = "16777216/s"
on = "200ms"
off = "200ms"
offset = "50ms"
"""


def test_the_neighbour_table_round_trips(tmp_path: Path) -> None:
    (tmp_path / "nn.toml").write_text(EXPERIMENT)
    out = tmp_path / "out"
    result = tierscope.run(tmp_path / "nn.toml", out=out, progress=False)
    free = result.policies["unthrottled"].neighbour
    mbm = result.policies["mbm-1ms"].neighbour
    assert free is not None and mbm is not None
    assert (free["telemetry"], free["readings"], free["on_phases"]) == (None, 0, 1)
    # 400 polls at 320 us; throttled to well under the free neighbour's bandwidth.
    assert (mbm["telemetry"], mbm["readings"]) == ("mbm", 400)
    assert mbm["telemetry_cpu_ns"] == pytest.approx(400 * 320e3)
    assert mbm["bandwidth"] < 0.3 * free["bandwidth"]
    assert mbm["bandwidth_error"] == 0.0
    again = tierscope.load(out)
    assert again.metrics == result.metrics
    for name, p in result.policies.items():
        assert again.policies[name].neighbour == p.neighbour


def test_a_throttle_without_a_neighbour_is_refused(tmp_path: Path) -> None:
    (tmp_path / "nn.toml").write_text(EXPERIMENT.split("[tiering.neighbour]")[0])
    with pytest.raises(tierscope.ConfigError, match=r"policies\[1\].*tiering\.neighbour"):
        tierscope.run(tmp_path / "nn.toml", progress=False)
