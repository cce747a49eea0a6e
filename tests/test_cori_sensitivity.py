"""scripts/cori_sensitivity.py (docs/techniques/CORI.md, "Cori's 3 %"): the fit period by
hand on a swept trace, and its rows against the model run by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import load_script
from tierscope import _core


def swept_trace(tmp_path: Path) -> Path:
    # 4 passes over 10 pages, 500 requests a visit: 20,000 requests.
    path = tmp_path / "swept.trace"
    lines = [
        hex((1 << 20) + (page << 12) + 64 * (i % 64))
        for _ in range(4)
        for page in range(10)
        for i in range(500)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_period_by_hand(tmp_path: Path) -> None:
    s = load_script("cori_sensitivity")
    trace = _core.CoriTrace.from_file(swept_trace(tmp_path))
    ids = s.page_ids(trace)
    assert ids.tolist()[:501] == [0] * 500 + [1] and int(ids.max()) == 9
    grid = _core.cori_baseline("right", 1000, trace.requests, 0)
    assert grid == list(range(1000, 10_001, 1000))
    # The fast tier holds int(0.2 * 10) = 2 pages: a 1000-request period touches 2 pages
    # 500 times each, a 2000-request one 4.
    assert s.fit_period(ids, grid, 2, 20) == 1000
    assert s.fit_period(ids, grid, 1, 20) == 0
    # A period of up to 10,000 requests holds at most two visits of a page (1000
    # requests): with a quantum of 1001 nothing is ranked, so every period fits. With 600
    # only pages visited twice in a period count: none at 5000; at 6000 requests pages
    # 0-1, 2-3, 4-5 and none in its four periods (1.5 on average); at 7000 all ten pages
    # over its three periods (3.3 > 2).
    assert s.fit_period(ids, grid, 2, 1001) == 10_000
    assert s.fit_period(ids, grid, 2, 600) == 6000
    assert s.fit_period(np.zeros(5, dtype=np.int64), [1, 2], 0, 1) == 0


def test_rows_against_the_model(tmp_path: Path) -> None:
    s = load_script("cori_sensitivity")
    trace = _core.CoriTrace.generate("iterative", 1, 1)
    rows = s.evaluate("iterative", trace, 0.2, 20)
    assert [r["scheduler"] for r in rows] == ["history", "oracle"]
    candidates = _core.cori_candidates(rows[0]["dr"], trace.requests)
    for r in rows:
        runtime = {p: trace.model(p, r["scheduler"])["runtime_ns"] for p in candidates}
        assert r["best_cand"] == min(candidates, key=lambda p: (runtime[p], candidates.index(p)))
        assert r["best_cand_trials"] == candidates.index(r["best_cand"]) + 1
        # The best candidate is never worse than where the stopping rules stop.
        assert r["best_cand_pct"] <= r["stop_pct"]
    # The reactive scheduler's miss (docs: 38.8 % at 2000) is the stopping rule's.
    assert rows[0]["stop_pct"] > 3.0 >= rows[0]["best_cand_pct"]


def test_cold_pages_grow_the_footprint_and_leave_the_reuse(tmp_path: Path) -> None:
    s = load_script("cori_sensitivity")
    trace = _core.CoriTrace.from_file(swept_trace(tmp_path))
    cold = s.with_cold_pages(trace, 2.0)
    # 20 more pages, each on its 64 lines once, before the sweep.
    assert (cold.pages, cold.requests) == (30, 20_000 + 20 * 64)
    # page_ids numbers pages by address: the cold ones, far above, are 10 to 29.
    ids = s.page_ids(cold)
    assert ids[:64].tolist() == [10] * 64
    assert sorted(set(ids[: 20 * 64].tolist())) == list(range(10, 30))
    assert cold.bars(1000) == trace.bars(1000)
    assert s.with_cold_pages(trace, 0.0) is trace


def test_claims_mode_reads_the_ledger_keys_off_repro_cori_rows() -> None:
    import argparse

    from tierscope.studies import cori as study

    s = load_script("cori_sensitivity")
    args = argparse.Namespace(
        seed=1, scale=1, timestep=1000, cold=0.0, ids=["C24", "C50"], traces="", generated=True
    )
    lines = s.claim_rows(args)
    got = {line.split()[0]: line.split()[2] for line in lines[1:]}
    assert set(got) == {"C24", "C50"}
    rows = [r for w in _core.CoriTrace.workloads() for r in study.evaluate(w, 1, 1, 1000, 10)]
    # C24: the Table I period with the lowest mean slowdown under the reactive scheduler.
    history = [r for r in rows if r["scheduler"] == "history"]
    means = {
        k: sum(r["table_i_slowdown_pct"][k] for r in history) / len(history) for k in study.TABLE_I
    }
    assert float(got["C24"]) == study.TABLE_I[min(means, key=means.__getitem__)]
    # C50: Cori's trials to within 3 % on the random trace, reactive scheduler.
    (random,) = [r for r in history if r["workload"] == "random"]
    assert float(got["C50"]) == random["cori_to_3pct"]


def test_an_unknown_claim_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        load_script("cori_sensitivity").main(["--claims", "C24", "C999"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "C999" in err and "C24," in err
