"""The kvm engine's guards against silently wrong results through the CLI (docs/models/KVM.md):
a run that falls short of the rate asked is flagged in metrics.json, in the table `run`
prints, in `compare`, and by one warning line on stderr; its scores are kept. Tests that
need KVM skip with the reason it is unavailable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_MASIM, run_cli
from tierscope import _core

KVM_REASON = _core.kvm_unavailable()
needs_kvm = pytest.mark.skipif(KVM_REASON is not None, reason=f"KVM: {KVM_REASON}")

# 10 G accesses/s per vCPU, the most an experiment may ask: no guest reaches it. Telescope
# flushes, so the ACCESSED probe does not flag it whatever the host: only the rate does.
IMPOSSIBLE = """\
name = "impossible"
duration = "1s"
warmup = "200ms"

[machine]
engine = "kvm"
page_size = "4KiB"

[workload]
masim = "tiny.cfg"
rate = "10G/s"

[[monitors]]
preset = "telescope-bnd"
"""


@needs_kvm
def test_a_run_short_of_its_rate_is_flagged_everywhere(tmp_path: Path) -> None:
    (tmp_path / "tiny.cfg").write_text(TINY_MASIM)
    (tmp_path / "exp.toml").write_text(IMPOSSIBLE)
    proc = run_cli("run", "exp.toml", "--out", "out", cwd=tmp_path)
    # Flagged, not refused: the run succeeds and writes everything.
    assert proc.returncode == 0, proc.stderr
    warnings = [x for x in proc.stderr.splitlines() if "warning" in x]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith("tierscope: warning: telescope-bnd: invalid run: ")
    assert "of the 10.0 G/s asked" in warnings[0], warnings[0]
    # The probe's answer, once.
    assert proc.stderr.count("ACCESSED probe: this host ") == 1, proc.stderr

    m = json.loads((tmp_path / "out" / "metrics.json").read_text())["monitors"]["telescope-bnd"]
    assert m["valid"] is False
    assert m["invalid_reason"] == warnings[0].split("invalid run: ", 1)[1]
    k = m["kvm"]
    assert k["valid"] is False and k["rate_requested"] == 10e9
    assert 0 < k["rate_share"] < 0.5
    assert len(k["rate_achieved"]) == 1 and 0 < k["rate_achieved"][0] < 5e9
    assert k["windows_checked"] >= 1 and k["window_nominal_ms"] > 0
    assert isinstance(k["accessed_rearm"], bool) and k["probe_affects"] is False
    # The scores are kept.
    assert m["precision"] is not None and m["windows_evaluated"] >= 1

    table = proc.stdout.splitlines()
    assert table[0].split()[-1] == "valid", proc.stdout
    assert table[1].split()[0] == "telescope-bnd" and table[1].split()[-1] == "NO"

    cmp = run_cli("compare", "out", "--out", "cmp", cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    lines = cmp.stdout.splitlines()
    assert lines[0].split()[-1] == "valid" and lines[2].split()[-1] == "NO", cmp.stdout
    assert any(x.startswith("telescope-bnd: invalid: the guest reached") for x in lines)
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert rows[0]["valid"] is False and rows[0]["invalid_reason"] == m["invalid_reason"]


def test_compare_adds_the_valid_column_only_when_a_run_is_invalid() -> None:
    from tierscope.cli import compare

    ok = {"kind": "damon", "precision": 1.0, "recall": 1.0, "windows": []}
    metrics = {"monitors": {"a": ok, "b": dict(ok)}}
    columns, notes = compare.monitor_columns(compare.rows(metrics))
    assert columns == compare.COLUMNS and notes == []
    metrics["monitors"]["b"] |= {"valid": False, "invalid_reason": "too slow"}
    table = compare.rows(metrics)
    columns, notes = compare.monitor_columns(table)
    assert columns[-1] == compare.VALID_COLUMN and notes == ["b: invalid: too slow"]
    body = compare.format_table(table, columns).splitlines()
    assert [r.split()[-1] for r in body] == ["valid", body[1].split()[-1], "yes", "NO"]
