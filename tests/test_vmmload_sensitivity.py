"""scripts/vmmload_sensitivity.py's parts of a slowdown, by hand (docs/models/PROGRAMS.md,
"What a CPU-bound program pays"), and its reading of run_program's statistics line."""

from __future__ import annotations

import pytest

from conftest import load_script


def test_vcpu_stats_line() -> None:
    s = load_script("vmmload_sensitivity")
    report = (
        "run_program: Some(Exited(0)) after 0.4 s; 29 syscall sites rewritten\n"
        "run_program: vcpu stats pf_taken=697 exits=734 irq_exits=27\n"
        "  write            1\n"
    )
    assert s.vcpu_stats(report) == {"pf_taken": 697, "exits": 734, "irq_exits": 27}
    assert s.vcpu_stats("  write 1\n") == {}


def test_parts_add_up_and_bare_metal_exits_remove_the_premium() -> None:
    s = load_script("vmmload_sensitivity")

    def r(t: float, exits: int = 0) -> object:
        return s.Run(wall_s=t, cpu_s=t, stats={"exits": exits})

    # Native raytrace 1 s; the VM adds 0.05 s of start-up (8x8 runs), 1,000 exits past
    # start-up's 100 at 40 us each (touch_pages: 1,001 pages cost 40 ms more than 1), and
    # 0.01 s more.
    runs = {
        "raytrace": {"native": [r(1.0)], "v": [r(1.0 + 0.05 + 0.04 + 0.01, 1100)]},
        "start-up": {"native": [r(0.001)], "v": [r(0.051, 100)]},
        "touch-n": {"native": [r(0.010)], "v": [r(0.060)]},
        "touch-1": {"native": [r(0.001)], "v": [r(0.011)]},
    }
    p = s.parts(runs, "v", "wall_s", 1001, bare_us=1.0)
    assert p["exit_us"] == pytest.approx(40.0)
    assert p["slowdown_pct"] == pytest.approx(10.0)
    assert p["startup_pct"] == pytest.approx(5.0)
    assert p["exits_pct"] == pytest.approx(4.0)
    assert p["rest_pct"] == pytest.approx(1.0)
    # All 1,100 exits at 1 us instead of 40: 10 % - 1,100 x 39 us / 1 s = 5.71 %.
    assert p["bare_metal_exits_pct"] == pytest.approx(10.0 - 4.29)
