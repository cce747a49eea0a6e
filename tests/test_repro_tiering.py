"""`tierscope repro telescope-tiering`: the section 6.3 sweep, its table beside the paper's
Table 4, on small stand-ins for the shipped 1-2 TB experiments (same names, same shape)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tierscope
from tierscope.studies import telescope_tiering

# A key-value store with Gaussian keys and one with hotspot keys, each small enough to run
# in about a second, their data first on the slow tier as in the paper's setup.
SMALL = """\
duration = "2s"
warmup = "0s"
hot_threshold = 5
[machine]
engine = "stat"
[workload]
rate = "2M/s"
kv = {KV}
[[monitors]]
preset = "damon-mod"
[[monitors]]
preset = "telescope-bnd"
[tiering]
tiers = [{ preset = "dram", capacity = "64MiB" }, "pmem"]
placement = "all-slow"
policies = ["telescope-rule", "oracle", "static"]
window = "200ms"
"""
KVS = {
    "memtier-gaussian-1t": '{ keys = 2000, value_size = "256KiB", mix = "memtier", '
    'distribution = "gaussian", stddev = 0.01, duration = "2s" }',
    "ycsb-hotspot-2t": '{ keys = 4000, value_size = "128KiB", mix = "ycsb-b", '
    'distribution = "hotspot", hot_data = 0.02, hot_ops = 0.99, duration = "2s" }',
}


@pytest.fixture
def small_experiments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "tiering"
    d.mkdir()
    for name, kv in KVS.items():
        (d / f"{name}.toml").write_text(SMALL.replace("{KV}", kv), encoding="utf-8")
    monkeypatch.setattr(telescope_tiering, "TIERING_DIR", d)
    return d


def test_shipped_experiments_parse() -> None:
    for name in telescope_tiering.EXPERIMENTS:
        exp = tierscope.load_experiment(telescope_tiering.TIERING_DIR / f"{name}.toml")
        assert exp.name == name


def test_repro_tiering_table(
    small_experiments: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repro"
    assert telescope_tiering.main(out, only=None, executor="local", jobs=0, progress=False) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "repro.json").read_text())
    rows = data["rows"]
    runs = {(r["experiment"], r["run"]) for r in rows}
    for name in KVS:
        for run in ["telescope-rule@damon-mod", "telescope-rule@telescope-bnd", "oracle", "static"]:
            assert (name, run) in runs
        metrics = json.loads((out / "runs" / f"base={name}" / "metrics.json").read_text())
        # The small stand-in ran (2 s), not the shipped 1-2 TB experiment of that name.
        assert metrics["duration_ns"] == 2_000_000_000
    for r in rows:
        # Data starts on the slow tier: never migrating is all-slow; the oracle is the best.
        if r["run"] == "static":
            assert r["speedup_over_slow"] == pytest.approx(1.0)
        assert r["gap_to_oracle"] >= 1.0 - 1e-9
        assert r["p95_op_ms"] > 0
    bnd = [r for r in rows if r["run"] == "telescope-rule@telescope-bnd"]
    assert all(r["promoted_gb"] > 0 and r["speedup_over_slow"] > 1.0 for r in bnd)
    assert all(r["paper_migrated_gb"] for r in bnd), "Table 4 beside ours"
    assert "paper GB migrated" in printed and "telescope-rule@telescope-bnd" in printed
    # Stored: a second call runs nothing again.
    assert telescope_tiering.main(out, only=None, executor="local", jobs=0, progress=False) == 0
    assert "(2 already stored)" in capsys.readouterr().out
    # The same store asked for runs of another length: refused, not read as those.
    with pytest.raises(tierscope.OutputError):
        telescope_tiering.main(out, only=None, executor="local", jobs=0, progress=False, quick=True)


def test_paper_length_is_the_papers_40_minutes() -> None:
    assert "set" not in telescope_tiering.sweep()
    assert telescope_tiering.sweep(paper_length=True)["set"] == {
        "duration": "2400s",
        "warmup": "150s",
        "workload.kv.duration": "2400s",
    }
    assert telescope_tiering.sweep(quick=True)["set"]["duration"] == "6s"


def test_quick_and_paper_length_together_are_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(tierscope.ConfigError, match="--quick and --paper-length"):
        telescope_tiering.main(
            tmp_path,
            only=None,
            executor="local",
            jobs=0,
            progress=False,
            quick=True,
            paper_length=True,
        )


def test_unknown_experiment_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(tierscope.ConfigError, match="--only: unknown experiment"):
        telescope_tiering.main(tmp_path, only=["nope"], executor="local", jobs=0, progress=False)
