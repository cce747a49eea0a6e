"""`tierscope measure apps` (issue 25, item 2): the lackey trace cut into operations, the
derivation of mlp and compute_ns, and a quick native run of memcached whose measured model
an experiment then reads through `[tiering] app = { from = ... }`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tierscope.apps import lackey
from tierscope.apps.measure import (
    PLANS,
    derive,
    measure_apps,
    median_interval,
    model_accesses_per_op,
    rederive,
)
from tierscope.experiment import load_experiment

ROOT = Path(__file__).resolve().parent.parent


def _access(addr: int, kind: str = "L") -> str:
    return f" {kind} {addr:x},8"


def _trace() -> list[str]:
    """A server's trace: start-up, an accepted connection (fd 8), one fill reply, then
    three operations that each touch the stack line and their own item's lines."""
    stack = 0x1FFF000000
    lines = ["==1== Lackey", _access(stack), "I  04001000,3"]
    lines.append("SYSCALL[1,1](288) sys_accept4 ( 5, 0x0, 0x0, 2048 ) --> [async] ... ")
    lines.append("SYSCALL[1,1](288) ... [async] --> Success(0x8) ")
    lines += [_access(0x5000000, "S"), "SYSCALL[1,1](1) sys_write ( 8, 0x1, 5 ) --> Success(0x5) "]
    # A write to another descriptor (a log) is not a reply.
    lines.append("SYSCALL[1,1](1) sys_write ( 2, 0x1, 5 ) --> Success(0x5) ")
    for op in range(3):
        item = 0x6000000 + op * 0x10000
        lines += [_access(stack), _access(stack, "M")]
        lines += [_access(item + 64 * i) for i in range(3)]  # three adjacent lines
        lines.append(_access(0x7000000 + op * 0x2000))  # its bucket, on another page
        lines.append("SYSCALL[1,1](46) sys_sendmsg ( 8, 0x1, 0 ) --> Success(0x10) ")
    return lines


def test_replies_cut_the_trace_into_operations_and_shared_lines_are_left_out() -> None:
    ops, accesses = lackey.split_ops(_trace(), skip=1, count=10)
    assert len(ops) == 3
    assert accesses == [7, 7, 7]  # a modify is a load and a store
    stats = lackey.op_stats(ops, accesses, shared_share=0.5)
    assert stats.shared_lines == 1  # the stack line, in every operation
    assert stats.store_lines == 4 and stats.store_runs == 2 and stats.store_pages == 2
    assert stats.store_footprint_pages == 6
    with pytest.raises(ValueError, match="no operations"):
        lackey.op_stats([], [])


def test_mlp_from_the_median_paired_difference_and_its_interval() -> None:
    # 1000 accesses, 100 ns more each in the large store, 10 us more per operation (the
    # median pair): 10 accesses at a time.
    pairs = [9_000, 10_000, 8_000, 10_500, 12_000, 30_000, 11_000]
    small = [20_000.0] * 7
    large = [s + d for s, d in zip(small, pairs, strict=True)]
    d = derive(1000, large, small, 250.0, 150.0)
    assert d.resolved and d.stall_ns == 10_500 and d.mlp == pytest.approx(1000 * 100 / 10_500)
    # The model at this host's latency gives the large store's median time again.
    assert 1000 * (d.compute_ns + 250.0 / d.mlp) == pytest.approx(30_500)
    # The interval's upper end is the second-largest pair, not the outlier.
    assert d.stall_high_ns == 12_000 and d.bound_mlp == pytest.approx(1000 * 100 / 12_000)
    assert median_interval([5.0, 1.0, 3.0]) == (1.0, 3.0, 5.0)
    # Pairs are differenced before the median: noise common to a pair cancels.
    noisy = [20_000.0, 90_000.0, 31_000.0, 50_000.0, 25_000.0]
    d = derive(1000, [x + 1000 for x in noisy], noisy, 250.0, 150.0)
    assert d.resolved and d.stall_ns == 1000
    # No memory time seen: mlp is the lower bound from the interval's upper end.
    d = derive(1000, [30_000.0, 30_100.0, 29_900.0, 30_000.0, 30_000.0], [30_050.0] * 5,
               250.0, 150.0)
    assert not d.resolved and d.stall_ns < 0 and d.stall_high_ns == 1.0
    assert d.mlp == d.bound_mlp and d.compute_ns >= 0


def test_accesses_per_op_match_the_kv_models_count() -> None:
    # 56 + 32 + 1000 bytes = 17 lines, plus the bucket (crates/tierscope-core kv.rs).
    assert model_accesses_per_op(1000) == 18
    assert model_accesses_per_op(5_000_000) == 1 + (5_000_088 + 63) // 64


@pytest.mark.skipif(
    any(shutil.which(p) is None for p in ("memcached", "gcc")),
    reason="memcached or gcc missing (make measure-apps installs them)",
)
def test_quick_native_measurement_feeds_an_experiment(tmp_path: Path) -> None:
    [path] = measure_apps(tmp_path / "apps", quick=True, trace=False, plans=PLANS[:1],
                          command="pytest")
    text = path.read_text()
    assert "2-core" in text and "memcached 1." in text and "pytest" in text
    doc = tomllib.loads(text)
    measured, app = doc["measured"], doc["app"]
    # CPU time counts in clock ticks (10 ms): a 0.5 s run on a busy host may see none.
    cpu = measured["cpu_ns_per_op_large"] + measured["cpu_ns_per_op_small"]
    assert min(cpu) >= 0 and max(cpu) > 0
    assert measured["latency_ns_large"] > 0 and min(measured["ops_per_s_large"]) > 0
    d = derive(
        measured["accesses_per_op"], measured["cpu_ns_per_op_large"],
        measured["cpu_ns_per_op_small"], measured["latency_ns_large"],
        measured["latency_ns_small"],
    )
    assert app["mlp"] == pytest.approx(d.mlp, rel=1e-3) and app["mlp"] >= 1
    assert app["compute_ns"] == pytest.approx(d.compute_ns, rel=1e-3, abs=1e-3)
    assert doc["app_bound"]["mlp"] == pytest.approx(d.bound_mlp, rel=1e-3)
    # Written again from its own [measured] table: the same file.
    rederive(path)
    assert path.read_text() == text
    exp = dict(tomllib.loads((ROOT / "experiments/tiering/colloid-antagonist.toml").read_text()))
    exp["tiering"]["app"] = {"from": str(path)}
    loaded = load_experiment(exp)
    assert loaded.to_dict()["tiering"]["app"]["mlp"] == pytest.approx(app["mlp"])


def test_missing_programs_are_named_with_their_package(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    r = subprocess.run(
        [str(bin_dir / "tierscope"), "measure", "apps", "--quick", "-o", str(tmp_path)],
        capture_output=True, text=True, env={"PATH": str(tmp_path)},
    )
    assert r.returncode == 2, r.stderr
    assert "redis-server (package redis-server)" in r.stderr and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "name", ["memtier-gaussian-1t", "ycsb-hotspot-2t", "tpp-vs-telemetry-64g"]
)
def test_measured_experiments_differ_from_the_shipped_ones_only_in_the_app(name: str) -> None:
    tiering = ROOT / "experiments" / "tiering"
    shipped = tomllib.loads((tiering / f"{name}.toml").read_text())
    measured = tomllib.loads((tiering / "measured" / f"{name}.toml").read_text())
    app = measured["tiering"].pop("app")
    assert shipped["tiering"].pop("app", None) is None and measured == shipped
    source = (tiering / "measured" / app["from"]).resolve()
    assert source.parent == tiering / "apps" and "[app]" in source.read_text()
    loaded = load_experiment(tiering / "measured" / f"{name}.toml").to_dict()
    assert loaded["tiering"]["app"]["mlp"] == tomllib.loads(source.read_text())["app"]["mlp"]
