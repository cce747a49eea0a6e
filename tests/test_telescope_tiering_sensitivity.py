"""scripts/telescope_tiering_sensitivity.py (docs/models/TIERING.md section 7.2, the p95
rows of Table 4): the closed-loop response time by hand on a store written here, the
warm-up's windows left out as the summary leaves them out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import load_script


def store(tmp_path: Path) -> Path:
    """A YCSB run of 10 windows of 1,000 accesses at 10 accesses per operation: a slow
    warm-up window (not counted), then 8 windows of 1 ms and one of 2 ms."""
    run = tmp_path / "runs" / "base=ycsb-hotspot-2t"
    run.mkdir(parents=True)
    app_ns = np.array([9e6] + [1e6] * 8 + [2e6])
    np.savez(
        run / "arrays-policy-telescope-rule_telescope-bnd.npz",
        **{
            "windows.end_ns": np.arange(1, 11) * 1_000_000_000,
            "windows.accesses": np.full(10, 1000.0),
            "windows.app_ns": app_ns,
        },
    )
    counted_ns = app_ns[1:].sum()
    summary = {
        "app_ns": counted_ns,
        "ops_per_s": 9 * 100 / (counted_ns / 1e9),
        "op_latency_ns": [10_000.0, 20_000.0, 20_000.0],
    }
    metrics = {
        "policies": {
            "telescope-rule@telescope-bnd": {"monitor": "telescope-bnd", "summary": summary},
            "oracle": {"monitor": None, "summary": summary},
        }
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    return tmp_path


def test_closed_loop_p95_by_hand(tmp_path: Path) -> None:
    mod = load_script("telescope_tiering_sensitivity")
    (row,) = mod.rows(store(tmp_path), clients=170, threads=1)
    assert row["monitor"] == "telescope-bnd"
    assert row["service_p95_ms"] == pytest.approx(0.02)
    # 100 operations a window: 10 us each in the 1 ms windows, 20 us in the 2 ms one;
    # 170 clients wait 1.7 ms and 3.4 ms. The 3.4 ms window is 1 of 9 counted (11 %), so
    # the p95 is 3.4 ms; the warm-up's 15.3 ms is left out.
    assert row["closed_loop_p95_ms"] == pytest.approx(3.4)
    (two,) = mod.rows(tmp_path, clients=170, threads=2)
    assert two["closed_loop_p95_ms"] == pytest.approx(1.7)
    assert row["paper_redis_ms"] == 696.0


def test_counted_windows_must_add_up(tmp_path: Path) -> None:
    mod = load_script("telescope_tiering_sensitivity")
    arrays = {"windows.app_ns": np.array([3.0, 1.0, 1.0])}
    assert mod.counted(arrays, 2.0).tolist() == [False, True, True]
    with pytest.raises(ValueError):
        mod.counted(arrays, 2.5)


def memtier_store(tmp_path: Path) -> Path:
    """A memtier run of 9 counted windows of 1,000 accesses at 10 accesses per item
    operation, 1 ms each: 10 us per item operation, 1 us per access (and per miss)."""
    run = tmp_path / "runs" / "base=memtier-gaussian-1t"
    run.mkdir(parents=True)
    app_ns = np.full(9, 1e6)
    np.savez(
        run / "arrays-policy-telescope-rule_damon-mod.npz",
        **{
            "windows.end_ns": np.arange(1, 10) * 1_000_000_000,
            "windows.accesses": np.full(9, 1000.0),
            "windows.app_ns": app_ns,
        },
    )
    summary = {
        "app_ns": app_ns.sum(),
        "ops_per_s": 9 * 100 / (app_ns.sum() / 1e9),
        "op_latency_ns": [10_000.0, 10_000.0, 10_000.0],
    }
    metrics = {
        "policies": {"telescope-rule@damon-mod": {"monitor": "damon-mod", "summary": summary}}
    }
    (run / "metrics.json").write_text(json.dumps(metrics))
    return tmp_path


def test_item_share_at_memtiers_ratio() -> None:
    mod = load_script("telescope_tiering_sensitivity")
    assert mod.item_share(1.0) == 1.0
    assert mod.item_share(0.0) == pytest.approx(1 / 11)
    assert mod.item_share(0.5) == pytest.approx(6 / 11)
    with pytest.raises(ValueError):
        mod.item_share(1.5)


def test_get_misses_mix_into_the_closed_loop_by_hand(tmp_path: Path) -> None:
    mod = load_script("telescope_tiering_sensitivity")
    mt = memtier_store(tmp_path)
    # Every GET hits (the default): 2 clients each wait for 2 items of 10 us.
    (hit,) = mod.rows(mt, clients=2, threads=1)
    assert hit["closed_loop_p95_ms"] == pytest.approx(0.020)
    # Every GET misses: an operation moves an item with p = 1/11, a miss costs 1 us. Over
    # all operations the 2 requests hold K items: P(K=0) = (10/11)^2 = 0.826, P(K=1) =
    # 2 (1/11)(10/11) = 0.165, P(K=2) = 1/121: the p95 is K = 1, 10 + 1 = 11 us.
    (miss,) = mod.rows(mt, clients=2, threads=1, get_hits=0.0)
    assert miss["item_share"] == pytest.approx(1 / 11)
    assert miss["closed_loop_p95_ms"] == pytest.approx(0.011)
    # 170 clients: the mean response is 170 (10 / 11 + 10 / 11) = 309 us (Little's law);
    # the p95 lies above it (the binomial's spread) and below all items' 1,700 us.
    (many,) = mod.rows(mt, clients=170, threads=1, get_hits=0.0)
    assert 0.309 < many["closed_loop_p95_ms"] < 0.5
    # The YCSB experiment's reads are of loaded keys: --get-hits leaves it alone.
    (ycsb,) = mod.rows(store(tmp_path / "ycsb"), clients=170, threads=1, get_hits=0.0)
    assert ycsb["item_share"] == 1.0
    assert ycsb["closed_loop_p95_ms"] == pytest.approx(3.4)


def test_get_hits_out_of_range_is_refused(tmp_path: Path) -> None:
    mod = load_script("telescope_tiering_sensitivity")
    with pytest.raises(SystemExit) as e:
        mod.main([str(memtier_store(tmp_path)), "--get-hits", "2"])
    assert e.value.code == 2


def test_gaussian_get_hits_from_an_empty_store() -> None:
    mod = load_script("telescope_tiering_sensitivity")
    # One SET over a single key (stddev far below a key): the GET misses until it, for
    # a share (1 - exp(-x)) / x of the run, x = SETs on the key.
    one = mod.gaussian_get_hits(ops_per_s=11.0, seconds=1.0, keys=10, stddev=1e-3)
    assert one == pytest.approx(1 - (1 - np.exp(-1.0)))
    # Table 3's Gaussian: more operations, more hits; none without operations.
    assert mod.gaussian_get_hits(0.0, 2400.0) == 0.0
    slow, fast = mod.gaussian_get_hits(62.0, 2400.0), mod.gaussian_get_hits(15000.0, 2400.0)
    assert 0.9 < slow < fast < 1.0


@pytest.mark.parametrize("rate", ["0", "-5"])
def test_gaussian_hits_needs_a_positive_rate(rate: str) -> None:
    mod = load_script("telescope_tiering_sensitivity")
    with pytest.raises(SystemExit) as e:
        mod.main(["--gaussian-hits", rate])
    assert e.value.code == 2
