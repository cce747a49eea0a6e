"""scripts/table2_seed_spread.py on SubTB 1 GB for 2 s: a run's counts priced at other
per-operation costs give what a rerun at those costs reports (so one set of seeds serves
any cost), the fit solves for the median, runs are cached, and bad options are one line
with exit 2 (docs/models/COST_MODEL.md, "Table 2's cycles over seeds")."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tierscope
from conftest import load_script


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("table2_seed_spread")


@pytest.fixture(scope="module")
def records(script: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("seeds")
    return [
        json.loads(script.one_run("subtb-1g", seed, out, "2s").read_text("utf-8"))
        for seed in (1, 2, 3)
    ]


def test_counts_price_to_what_a_rerun_at_other_costs_reports(
    script: ModuleType, records: list[dict[str, Any]]
) -> None:
    rec = records[0]
    script.check_prices(rec)
    sets = [("seed", "1"), ("cost.walk_step", "150"), ("cost.clear", "90")]
    exp, _ = script.table2_experiment("subtb-1g", sets, "2s")
    rerun = tierscope.run(exp, progress=False).metrics["monitors"]
    for m in script.MONITORS:
        priced = script.cycles(rec, m, {**rec["cost"], "walk_step": 150.0, "clear": 90.0})
        assert priced == pytest.approx(rerun[m]["cycles"], rel=1e-12)
        assert priced > rec["monitors"][m]["cycles"]
        # The monitor did the same work: only its price moved.
        assert rerun[m]["cost"] == rec["monitors"][m]["counts"]


def test_a_changed_cost_model_is_caught(script: ModuleType, records: list[dict[str, Any]]) -> None:
    rec = json.loads(json.dumps(records[0]))
    rec["monitors"]["damon-mod"]["cycles"] *= 1.01
    with pytest.raises(RuntimeError, match="damon-mod: counts price to"):
        script.check_prices(rec)


def test_fit_solves_for_the_median(script: ModuleType, records: list[dict[str, Any]]) -> None:
    for m in script.MONITORS:
        target = statistics.median(script.cell_values(records, m, {"walk_step": 137.0}))
        assert script.fit(records, m, "walk_step", target) == pytest.approx(137.0, rel=1e-6)
        # A cell no walk cost can reach (below the other operations' cycles) has no fit.
        assert script.fit(records, m, "walk_step", 1e-9) is None


def test_runs_are_cached(script: ModuleType, tmp_path: Path) -> None:
    first = script.one_run("subtb-1g", 4, tmp_path, "1s")
    stamp = first.stat().st_mtime_ns
    assert script.one_run("subtb-1g", 4, tmp_path, "1s") == first
    assert first.stat().st_mtime_ns == stamp


def test_spread_and_seeds(script: ModuleType) -> None:
    assert script.seeds_of("1-3,9") == [1, 2, 3, 9]
    p10, med, p90 = script.spread([float(v) for v in range(1, 12)])
    assert (p10, med, p90) == (2.0, 6.0, 10.0)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--vary", "cost.nope=1"], "cost.nope"),
        (["--vary", "cost.walk_step=fast"], "'fast' is not a number"),
        (["--fit", "walk_step"], "expected cost.KEY"),
        (["--experiments", "needle-5t"], "not in Table 2"),
        (["--jobs", "0"], "at least 1"),
        (["--seeds", "1", "--duration", "soon"], "duration"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    script: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    words: str,
) -> None:
    assert script.main(["--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err
