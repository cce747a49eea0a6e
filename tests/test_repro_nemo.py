"""`tierscope repro nemo`: the three use cases and the SRAM table, end to end (--quick)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import LEDGER_MISSING, run_cli
from tierscope.studies import nemo


def check_quick_repro(out: Path) -> None:
    """What `tierscope repro nemo --quick --out OUT` must have written to OUT."""
    text = (out / "repro.md").read_text()
    for heading in (
        "hot-set recovery",
        "THP split candidates",
        "MEMTIS (Figure 6)",
        "noisy neighbour",
        "1 s sweep",
    ):
        assert heading in text
    report = json.loads((out / "repro.json").read_text())
    hot = {r["technique"]: r for r in report["hotset"]}
    assert set(hot) == {"hemem@pebs-hemem", "hemem@nemo-hotset", "oracle"}
    # The oracle knows the new hot set at once: the fast tier serves most accesses
    # within a window of the shift.
    assert hot["oracle"]["to_80_s"] is not None and hot["oracle"]["to_80_s"] <= 2
    thp = report["thp"]
    assert [(r["ratio"], r["technique"]) for r in thp] == [
        (ratio, t) for ratio in ("1:2", "1:8") for t in ("truth", "memtis-pebs", "memtis-nemo")
    ]
    for r in thp:
        assert sum(r["buckets"]) == sum(thp[0]["buckets"])
    # The noisy neighbour on the engines: every throttled run lowers the victim's mean
    # request latency and never raises its p99 against the unthrottled neighbour, cuts the
    # neighbour's bandwidth, counts every request it issued; NEMO's reads cost a small
    # fraction of MBM's polls at the same interval.
    noisy = {r["technique"]: r for r in report["noisy"]}
    assert list(noisy) == ["victim alone", *nemo.NOISY_RUNS.values()]
    free = noisy["unthrottled"]
    assert free["p99_increase"] > 0 and free["mean_increase"] > 0
    for technique in list(nemo.NOISY_RUNS.values())[1:]:
        r = noisy[technique]
        assert r["mean_increase"] < free["mean_increase"], technique
        assert r["p99_increase"] <= free["p99_increase"], technique
        assert r["neighbour_gib_s"] < free["neighbour_gib_s"], technique
        assert r["bandwidth_error"] == 0.0 and r["detected"] == r["on_phases"] > 0, technique
    nemo_cpu = noisy["NEMO (notify emulated, polled)"]["cpu_share"]
    assert 0 < nemo_cpu < noisy["MBM 1 ms"]["cpu_share"] / 100
    # MEMTIS end to end (Figure 6): PEBS and NEMO, with and without splits, and the oracle;
    # every run at least as fast as all-slow, the splitting ones split most (HugeOnly
    # splits only where the rate limit cuts a move inside a huge page).
    assert {r["ratio"] for r in report["memtis"]} == {"1:2", "1:8"}
    e2e = {r["technique"]: r for r in report["memtis"] if r["ratio"] == "1:8"}
    assert set(e2e) == {
        f"{p}@{m}" for p in ("memtis", "memtis-hugeonly") for m in ("pebs-memtis", "nemo-memtis")
    } | {"oracle"}
    assert all(r["speedup_over_slow"] >= 1.0 - 1e-9 for r in e2e.values())
    for m in ("pebs-memtis", "nemo-memtis"):
        assert e2e[f"memtis@{m}"]["splits"] > e2e[f"memtis-hugeonly@{m}"]["splits"]
    assert report["derived"]["memtis"][0]["nemo_over_pebs"] is not None
    assert report["derived"]["memtis_nemo_split_gain_1_8_over_1_2"] is not None


# Where the quick ledger runs, its test checks its nemo measurement (check_quick_repro),
# so the suite runs the quick repro once.
@pytest.mark.skipif(LEDGER_MISSING is None, reason="test_claims checks the quick ledger's copy")
def test_quick_repro_writes_every_use_case(tmp_path: Path) -> None:
    proc = run_cli("repro", "nemo", "--quick", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    check_quick_repro(tmp_path / "out")


def test_sram_table_by_hand() -> None:
    rows = {(r["memory"], r["granularity"], r["width_bytes"]): r for r in nemo.sram_table()}
    r = rows[("1 TB", "2 MiB", 8)]
    # 1e12 B x 10 ms x 8 B / (1 s x 2 MiB) of state; 476,838 huge pages -> a 2^19-entry
    # table of 13 index bits (4,769 states) + a valid bit.
    assert r["sram_bytes"] == pytest.approx(1e12 * 0.01 * 8 / 2**21)
    assert r["table_bytes"] == 2**19 * 14 / 8
    r = rows[("5 TB", "4 KiB", 2)]
    assert r["sram_bytes"] == pytest.approx(5e12 * 0.5 * 2 / 4096)
