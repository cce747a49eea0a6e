"""Cori on real programs (tierscope.studies.cori_programs, docs/techniques/CORI.md "Real
programs"): a tiny input of one kernel built, traced by valgrind lackey, filtered through
the last-level cache and run through Cori (skipped where valgrind or a C compiler is
missing: `make musl` installs them); without valgrind the study exits 2 saying so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tierscope import _core, cli
from tierscope.studies import cori, cori_programs

REASON = cori_programs.missing()
needs_tools = pytest.mark.skipif(REASON is not None, reason=str(REASON))

#: backprop with 512 input units: 16 strides over a 513 x 17 float matrix (35 KiB) in the
#: forward pass, 16 over it and its momentum matrix when adjusting.
ARGS = ("512",)
SMALL = (4 << 10, 4)


def traced(work: Path) -> tuple[int, list[_core.CoriTrace]]:
    """backprop's tiny input through the small cache and through none."""
    exe = cori_programs.build(cori_programs.tree_root(), "backprop", work)
    accesses, traces, output = cori_programs.trace(exe, ARGS, [SMALL, None])
    assert output.startswith("output ")
    return accesses, traces


@pytest.fixture(scope="module")
def backprop(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[_core.CoriTrace]]:
    return traced(tmp_path_factory.mktemp("backprop"))


@needs_tools
def test_a_kernel_traced_through_a_cache_gives_cori_its_candidates(
    backprop: tuple[int, list[_core.CoriTrace]],
) -> None:
    accesses, (small, none) = backprop
    # Without a cache every load and store is a request; a 4 KiB cache keeps most of
    # them (the scalars, the bias row, the hidden units) from memory.
    assert none.requests == accesses
    assert 0 < small.requests < accesses / 2
    # The weights alone are 513 x 17 x 4 B = 35 KiB: at least 9 pages, all touched.
    assert small.pages >= 9 and small.pages <= none.pages
    # Reuse in buckets of 100 requests (cori-sim: 1000): the input is tiny.
    rows = cori.evaluate_trace({"workload": "backprop", "seed": 1}, small, 100, 3, bucket=100)
    assert [r["scheduler"] for r in rows] == ["history", "oracle"]
    dr = rows[0]["dominant_reuse"]
    assert dr is not None and 100 <= dr <= small.requests // 2
    candidates = _core.cori_candidates(dr, small.requests)
    # Cori's candidates: multiples of the dominant reuse up to half the run, shortest first.
    assert candidates[0] == dr
    assert all(p % dr == 0 for p in candidates)
    assert candidates == sorted(candidates) and candidates[-1] <= small.requests / 2
    for r in rows:
        assert r["cori_period"] in candidates
        assert r["best_period"] % 100 == 0 and r["best_period"] <= small.requests / 2
        # The best is over the grid of multiples of 100 up to half the run: Table I's
        # periods in that range are on it, so none beats the best; Cori's picks may lie
        # between the grid's points.
        for name, p in cori.TABLE_I.items():
            if p <= small.requests / 2:
                assert r["table_i_slowdown_pct"][name] >= 0.0, name
        assert r["cori_slowdown_pct"] > -5.0


@needs_tools
def test_the_same_program_gives_the_same_trace_and_numbers(
    backprop: tuple[int, list[_core.CoriTrace]], tmp_path: Path
) -> None:
    n1, (t1, _) = backprop
    n2, (t2, _) = traced(tmp_path)
    assert n1 == n2 and t1.requests == t2.requests and t1.bars(100) == t2.bars(100)
    period = max(100, t1.requests // 10)
    for s in ("history", "oracle"):
        assert t1.model(period, s) == t2.model(period, s)
    # Written in cori-sim's format, the trace reads back as the same trace.
    t1.write(tmp_path / "backprop.trace")
    back = _core.CoriTrace.from_file(tmp_path / "backprop.trace")
    assert back.requests == t1.requests and back.bars() == t1.bars()
    assert back.model(period, "history") == t1.model(period, "history")


def test_a_cache_shape_nemo_refuses_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(_core.ConfigError, match="power of two"):
        _core.CoriTrace.from_lackey(tmp_path / "none.lackey", [(3000, 4)])


def test_without_valgrind_the_study_says_so_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd: None if cmd == "valgrind" else real(cmd))
    assert cori_programs.missing() == "repro cori-programs needs valgrind (`make musl` installs it)"
    out = tmp_path / "out"
    assert cli.main(["repro", "cori-programs", "--out", str(out)]) == 2
    assert "needs valgrind" in capsys.readouterr().err
    assert not out.exists()
