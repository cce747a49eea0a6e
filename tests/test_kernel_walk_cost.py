"""scripts/kernel_walk_cost.py on a 1 GiB heap: three timings a repetition and the median
walk in cycles a level; bad counts are one line with exit 2
(docs/models/COST_MODEL.md, "Table 2's cycles over seeds")."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import load_script


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc): install gcc")
def test_a_walk_is_timed_against_a_failed_lookup(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script("kernel_walk_cost")
    runs = script.measure(1, 2000, 2)
    assert len(runs) == 2 and all(g > 0 and h > 0 and r > 0 for g, h, r in runs)
    assert script.main(["--gib", "1", "--calls", "2000", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"median walk \(random page - hole\) -?\d+ ns = -?\d+ cycles", out)


def test_bad_counts_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_script("kernel_walk_cost").main(["--repeats", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at least 1" in err
