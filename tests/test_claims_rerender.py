"""scripts/claims_rerender.py: the ledger rendered again from an earlier CLAIMS.md's printed
values, each status kept where the printed digits hide a bound's side."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_script
from tierscope.studies.claims import ledger


def claim(check: dict[str, object]) -> ledger.Claim:
    return ledger.Claim.from_table(
        "nemo",
        {"id": "X1", "where": "w", "quantity": "q", "value": "2", "check": check},
    )


def test_printed_reads_ours_and_status() -> None:
    mod = load_script("claims_rerender")
    text = (
        "| id | where | quantity (setting) | paper | check | ours | status | command / note |\n"
        "| N49 | S | q | 2x | 2 ± 10%; than 1 | 1 | same direction | `c` n |\n"
        "| N50 | S | q | 2 | - | - | not modelled | why |\n"
    )
    assert mod.printed(text) == {"N49": (1.0, "same direction"), "N50": (None, "not modelled")}


def test_a_value_on_the_earlier_status_side_within_the_rounding() -> None:
    mod = load_script("claims_rerender")
    c = claim({"paper": 2, "tolerance": "10%", "than": 1})
    # 1 itself is on neither side of `than` (disagrees); the measurement printed as 1
    # was above it, where the earlier ledger said 'same direction'.
    x = mod.consistent(c, 1.0, "same direction")
    assert x > 1.0 and ledger._fmt(x) == "1"
    assert ledger.status(c, x) == "same direction"
    assert mod.consistent(c, 1.5, "same direction") == 1.5
    # No value printed as 1.5 is reproduced (1.8-2.2): refused.
    with pytest.raises(ValueError):
        mod.consistent(c, 1.5, "reproduced")


def test_an_unreadable_ledger_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("claims_rerender")
    assert mod.main([str(tmp_path / "missing.md"), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("claims_rerender: ") and "missing.md" in err[0]
