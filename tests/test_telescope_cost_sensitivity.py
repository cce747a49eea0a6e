"""scripts/telescope_cost_sensitivity.py on SubTB 1 GB for 2 s: a `[cost]` change moves the
cycles and nothing the monitors did, the ledger rows are read with the ledger's own keys, and
the CPU % as a share of N threads is the share of one core over N
(docs/models/COST_MODEL.md, "Table 2's cycles: the gaps")."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from conftest import load_script


@pytest.fixture(scope="module")
def runs() -> tuple[ModuleType, dict[str, Any], dict[str, Any]]:
    s = load_script("telescope_cost_sensitivity")
    before = s.measure(["subtb-1g"], [], "2s")
    after = s.measure(["subtb-1g"], [("cost.walk_step", "120")], "2s")
    return s, before, after


def test_a_cost_constant_moves_cycles_only(runs: tuple[ModuleType, Any, Any]) -> None:
    s, before, after = runs
    assert [r["monitor"] for r in before["cost"]] == list(s.MONITORS)
    for b, a in zip(before["cost"], after["cost"], strict=True):
        assert a["regions_per_sample"] == b["regions_per_sample"]
        assert a["bits_flipped"] == b["bits_flipped"]
        assert a["gcycles"] > b["gcycles"]
    # Each row carries Table 2's cell beside ours.
    assert before["cost"][0]["paper_gcycles"] == 1.15


def test_ledger_rows_use_the_ledgers_keys(runs: tuple[ModuleType, Any, Any]) -> None:
    s, before, _ = runs
    rows = {r["id"]: r for r in s.claim_rows(before)}
    # Table 2's SubTB-1GB column (T88, T93, T98, T103): ours is the cost row's cycles.
    cells = {
        "T88": "damon-mod",
        "T93": "damon-agg",
        "T98": "telescope-bnd",
        "T103": "telescope-flx",
    }
    by_monitor = {r["monitor"]: r["gcycles"] for r in before["cost"]}
    for cid, monitor in cells.items():
        assert rows[cid]["ours"] == pytest.approx(by_monitor[monitor])
        assert rows[cid]["status"] in ("reproduced", "same direction", "disagrees")
    # Rows of experiments not run are left out (Multi-4K's T86).
    assert "T86" not in rows


def test_cpu_share_of_n_threads(runs: tuple[ModuleType, Any, Any]) -> None:
    s, before, _ = runs
    one = {r["id"]: r["ours"] for r in s.claim_rows(before)}
    many = {r["id"]: r["ours"] for r in s.claim_rows(s.with_threads(before, 176))}
    for cid in ("T108", "T109", "T110"):
        assert many[cid] == pytest.approx(one[cid] / 176)
    # Cycles are not CPU shares: Table 2's cells stay.
    assert many["T88"] == one["T88"]


def test_a_bad_setting_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_script("telescope_cost_sensitivity").main(["--set", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nonsense" in err and "PATH=VALUE" in err
