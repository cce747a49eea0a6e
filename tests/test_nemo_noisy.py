"""NEMO's noisy-neighbour use case through the binding `tierscope repro nemo` calls."""

import pytest

from tierscope import _core


def test_rows_per_technique_and_throttling_helps() -> None:
    rows = _core.nemo_noisy_neighbour(seed=3, duration_s=1.0, mbm_intervals_ms=[1.0, 100.0])
    names = [r["technique"] for r in rows]
    assert names == [
        "victim alone",
        "unthrottled",
        "NEMO (notify interrupt)",
        "NEMO (notify emulated, polled)",
        "MBM 1 ms",
        "MBM 100 ms",
    ]
    by = {r["technique"]: r for r in rows}
    assert by["victim alone"]["p99_increase"] == 0.0
    # MBM's CPU share is polls x 320 us: 1000 polls in 1 s at 1 ms, 10 at 100 ms.
    assert by["MBM 1 ms"]["cpu_share"] == pytest.approx(0.32)
    assert by["MBM 100 ms"]["cpu_share"] == pytest.approx(0.0032)
    nemo = by["NEMO (notify interrupt)"]
    assert nemo["bandwidth_error"] == 0.0
    assert nemo["victim_p99_ns"] < by["unthrottled"]["victim_p99_ns"]
    assert nemo["neighbour_gib_s"] < by["unthrottled"]["neighbour_gib_s"]


def test_same_seed_same_rows() -> None:
    a = _core.nemo_noisy_neighbour(seed=5, duration_s=0.5, mbm_intervals_ms=[10.0])
    b = _core.nemo_noisy_neighbour(seed=5, duration_s=0.5, mbm_intervals_ms=[10.0])
    assert a == b


def test_bad_values_name_their_field() -> None:
    with pytest.raises(_core.ConfigError) as e:
        _core.nemo_noisy_neighbour(duration_s=0.5, mbm_intervals_ms=[0.25])
    assert e.value.field == "mbm_intervals_s[0]"
    with pytest.raises(_core.ConfigError) as e:
        _core.nemo_noisy_neighbour(duration_s=0.5, gain=2.0)
    assert e.value.field == "controller.gain"
