"""scripts/dram_share.py: the fast tier's share of a tiering run's accesses per stretch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import load_script

share = load_script("dram_share")


def test_shares_per_stretch_and_last_window(tmp_path: Path) -> None:
    served = np.array([[1, 3], [1, 3], [3, 1], [4, 0], [9, 1]])
    path = tmp_path / "arrays-policy-rule_mon.npz"
    np.savez(path, **{"windows.served": served})
    rows = share.shares(path, every=2)
    assert [start for start, _ in rows] == [0, 2, 4, 4]
    assert [round(x, 3) for _, x in rows] == [0.25, 0.875, 0.9, 0.9]


def test_a_run_without_tiering_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["dram_share.py", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_:
        share.main()
    assert exit_.value.code == 2
    assert "no arrays-policy" in capsys.readouterr().err


def test_an_unreadable_arrays_file_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "arrays-policy-rule_mon.npz").write_text("not an npz\n")
    monkeypatch.setattr("sys.argv", ["dram_share.py", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_:
        share.main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "windows.served" in err and "\n" not in err
