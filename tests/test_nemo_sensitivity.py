"""scripts/nemo_sensitivity.py's score shares by hand, and scripts/poll_wakeup_cost.py's
measurement (docs/techniques/NEMO.md, "The gaps, pinned"; skipped without a C compiler)."""

from __future__ import annotations

import shutil

import pytest

from conftest import load_script


def test_score_shares_by_hand() -> None:
    s = load_script("nemo_sensitivity")
    # 21 buckets (MEMTIS's 0-20): 2 pages at 0, 1 at 15, 1 at 16, 4 at 20.
    buckets = [2] + [0] * 14 + [1, 1, 0, 0, 0, 4]
    assert len(buckets) == 21
    assert s.score_shares(buckets) == {"score_0": 2 / 8, "score_16_up": 5 / 8}
    assert s.score_shares([]) == {"score_0": None, "score_16_up": None}


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")
def test_wakeup_cost_is_measured_per_wakeup() -> None:
    s = load_script("poll_wakeup_cost")
    values = s.measure(polls=50, interval_us=200, repeats=2)
    # Each wake-up costs some CPU, and far less than the 200 us it slept.
    assert len(values) == 2 and all(0 < v < 200_000 for v in values)
