"""`tierscope repro vmmload`'s exit cost and bare-metal projection (studies/vmmload.py),
by hand on made-up rows: no KVM needed."""

from __future__ import annotations

from typing import Any

import pytest

from tierscope.studies import vmmload


def row(case: str, native_s: float, vm_s: float, calls: dict[str, int]) -> dict[str, Any]:
    return {
        "case": case,
        "native_s": native_s,
        "vm_s": vm_s,
        "slowdown_pct": (vm_s / native_s - 1) * 100,
        "syscalls": sum(calls.values()),
        "syscalls_by_name": calls,
        "added_us_per_call": (vm_s - native_s) / max(sum(calls.values()), 1) * 1e6,
    }


def test_exit_cost_subtracts_start_up_and_the_native_call() -> None:
    # 100,001 getpid calls against 1: 100,000 extra calls. Natively 0.5 us each
    # (0.051 - 0.001 s), in the VM 30.5 us each (3.06 - 0.01 s): an exit adds 30 us, 60x.
    many = row("getpid", 0.051, 3.06, {"getpid": 100_001, "exit_group": 1})
    one = row("getpid-1", 0.001, 0.01, {"getpid": 1, "exit_group": 1})
    e = vmmload.exit_cost(many, one)
    assert e["native_call_us"] == pytest.approx(0.5)
    assert e["vm_call_us"] == pytest.approx(30.5)
    assert e["exit_us"] == pytest.approx(30.0)
    assert e["exit_over_native_call"] == pytest.approx(60.0)
    assert e["bare_metal_exit_us"] == pytest.approx(2528 / 2.1e9 * 1e6)
    with pytest.raises(vmmload.StudyError):
        vmmload.exit_cost(one, one)


def test_bare_metal_slowdown_replaces_each_calls_exit() -> None:
    # 10,000 calls over 1 s natively, +40 % in the VM; at 30 us per exit against 1 us on
    # bare metal, 10,000 x 29 us = 0.29 s of the 0.4 s go: +11 %.
    r = row("md5-16k", 1.0, 1.4, {"read": 10_000})
    assert vmmload.bare_metal_slowdown_pct(r, 30.0, 1.0) == pytest.approx(11.0)
    # With this host's own exit cost, the measured slowdown.
    assert vmmload.bare_metal_slowdown_pct(r, 30.0, 30.0) == pytest.approx(40.0)


def test_derived_projects_every_md5_case() -> None:
    rows = [
        row("md5-4k", 1.0, 2.0, {"read": 20_000}),
        row("md5-16k", 1.0, 1.3, {"read": 5_000}),
        row("getpid", 0.051, 3.06, {"getpid": 100_001}),
        row("getpid-1", 0.001, 0.01, {"getpid": 1}),
    ]
    d = vmmload.derived(rows)
    assert set(d["bare_metal_slowdown_pct"]) == {"md5-4k", "md5-16k"}
    bare = d["exit"]["bare_metal_exit_us"]
    assert d["bare_metal_slowdown_pct"]["md5-16k"] == pytest.approx(
        30.0 - 5_000 * (30.0 - bare) * 1e-6 * 100
    )
    # Fewer calls per byte, less left after the projection too.
    assert d["bare_metal_slowdown_pct"]["md5-4k"] > d["bare_metal_slowdown_pct"]["md5-16k"]
    assert "exit" not in vmmload.derived(rows[:2])
