"""The microbenchmarks over random layouts (tierscope.studies.robustness) and their distributions in
`tierscope repro telescope`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

import tierscope
from conftest import run_cli
from tierscope.studies import robustness
from tierscope.studies.telescope import PAPER_DIR

GIB = 1 << 30
MIB = 1 << 20
MB = 10**6
GB = 10**9


@pytest.mark.parametrize("bench", list(robustness.BENCHES))
def test_layouts_move_the_hot_regions_and_keep_the_benchmark(bench: str) -> None:
    b = robustness.BENCHES[bench]
    paper = tomllib.loads((PAPER_DIR / f"{bench}.toml").read_text())
    hot_names = {n for n, _ in b.hot}
    # The hot regions are the paper file's, so its phases still name them.
    assert hot_names <= {r["name"] for r in paper["workload"]["regions"]}
    orders = set()
    for i in range(8):
        regions = robustness.layout(bench, i)
        assert regions == robustness.layout(bench, i), "the same index, the same layout"
        names = [r["name"] for r in regions]
        assert len(set(names)) == len(names)
        hot = {r["name"]: r["size"] for r in regions if r["name"] in hot_names}
        cold = [r["size"] for r in regions if r["name"] not in hot_names]
        assert set(hot) == hot_names
        if robustness.layout_units(i) == "GiB":
            assert list(hot.values()) == list(b.hot_gib)
            assert all(c % b.gib_cold_unit == 0 for c in cold)
        else:
            assert sorted(hot.values()) == sorted(s for _, s in b.hot)
            assert all(c % (2 * MIB) == 0 for c in cold)
        # The heap keeps its size to within one unit per cold region.
        total = sum(hot.values()) + sum(cold)
        assert abs(total - b.heap) <= len(cold) * GIB, (i, total)
        orders.add(tuple(n for n in names if n in hot_names))
        # A cold region before and after every hot one.
        assert names[0] not in hot_names and names[-1] not in hot_names
    assert len(orders) > 1 or len(hot_names) == 1


def test_every_paper_experiment_has_layouts() -> None:
    from tierscope.studies import telescope_paper as paper

    assert set(robustness.BENCHES) == set(paper.EXPERIMENTS)
    assert set(robustness.DEFAULT_BENCHES) <= set(robustness.BENCHES)
    for name, b in robustness.BENCHES.items():
        # The benchmark's heap and hot sizes are its paper file's.
        regions = tomllib.loads((PAPER_DIR / f"{name}.toml").read_text())["workload"]["regions"]
        sizes = {r["name"]: r["size"] for r in regions}
        for hot, size in b.hot:
            assert sizes[hot].endswith("MB") or sizes[hot].endswith("GB"), sizes[hot]
            unit = MB if sizes[hot].endswith("MB") else GB
            assert int(sizes[hot][:-2]) * unit == size, (name, hot)


def test_gib_layouts_put_every_region_edge_18_mib_past_a_gib_boundary(tmp_path: Path) -> None:
    # docs/results/ROBUSTNESS.md explains Telescope-FLX's precision on these layouts by where the
    # hot regions' edges fall on the 1 GiB and 512 GiB entry grid: checked here against
    # the simulated process's real layout.
    regions = robustness.layout("multiphase-5t", 0)
    exp = tomllib.loads((PAPER_DIR / "multiphase-5t.toml").read_text())
    exp["workload"]["regions"] = regions
    exp["duration"] = "10ms"
    exp["warmup"] = "0s"
    exp["monitors"] = [{"preset": "telescope-bnd"}]
    r = tierscope.run(exp, progress=False)
    heap = [m for m in r.mappings if m["name"].startswith("heap:")]
    assert len(heap) == len(regions)
    for m in heap:
        for edge in (m["range"]["start"], m["range"]["end"]):
            assert edge % GIB == GIB - 18 * MIB, m
    top = max(m["range"]["end"] for m in heap)
    assert top % (512 * GIB) == 512 * GIB - 18 * MIB


def test_quantiles_and_distribution_match_numpy() -> None:
    rng = np.random.default_rng(3)
    values = list(rng.random(37))
    for q in (0.1, 0.5, 0.9):
        assert robustness.quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    rows = [
        {
            "monitor": m,
            "layout": f"L{i}",
            "seed": 1,
            "precision": p,
            "recall": 1 - p / 2,
            "cpu_percent": p * 2,
        }
        for i, p in enumerate(values)
        for m in ("a", "b")
    ]
    dist = robustness.distribution(rows)
    assert [d["monitor"] for d in dist] == ["a", "b"]
    assert dist[0]["runs"] == len(values)
    assert dist[0]["precision"]["p10"] == pytest.approx(float(np.quantile(values, 0.1)))
    assert dist[0]["cpu_percent"] == pytest.approx(float(np.median(values)) * 2)
    worst = min(values)
    assert dist[0]["worst"]["precision"] == worst
    table = robustness.format_distribution("T", dist)
    assert table.count("\n| a |") == 1 and f"{worst:.3f}" in table


def test_repro_gives_distributions_over_layouts(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    args = ("--only", "needle-5t", "--needle-seeds", "0", "--layouts", "2", "--layout-seeds", "1")
    r = run_cli("repro", "telescope", *args, "--out", out, "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads((out / "repro.json").read_text())
    lay = data["layouts"]["needle-5t"]
    runs = lay["runs"]
    assert len(runs) == 2 * len(robustness.MONITORS)
    assert {x["layout"] for x in runs} == {"L00-GiB", "L01-GB"}
    # The distribution is the runs' own.
    for d in lay["distribution"]:
        mine = [x["recall"] for x in runs if x["monitor"] == d["monitor"]]
        assert d["recall"]["p50"] == pytest.approx(float(np.quantile(mine, 0.5)))
    md = (out / "repro.md").read_text()
    assert "needle-5t over 2 layouts x 1 seeds" in md
    assert all(f"| {m} |" in md for m in robustness.MONITORS)
    # The layouts are a sweep in DIR/needle-5t-layouts: a rerun resumes it.
    again = run_cli("repro", "telescope", *args, "--out", out, "--quiet", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (out / "repro.md").read_text() == md


def test_negative_layouts_are_bad_input(tmp_path: Path) -> None:
    r = run_cli("repro", "telescope", "--layouts", "-1", "--out", tmp_path / "x", cwd=tmp_path)
    assert r.returncode == 2
    assert "--layouts" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_a_layout_experiment_outside_only_is_bad_input(tmp_path: Path) -> None:
    args = ("--only", "needle-5t", "--layout-experiment", "subtb-1g")
    r = run_cli("repro", "telescope", *args, "--out", tmp_path / "x", cwd=tmp_path)
    assert r.returncode == 2
    assert "--layout-experiment" in r.stderr and "subtb-1g" in r.stderr
    assert not (tmp_path / "x").exists()


def test_layouts_scale_to_another_heap() -> None:
    tib = 1 << 40
    for i in range(4):
        own = robustness.layout("multiphase-5t", i)
        big = robustness.layout("multiphase-5t", i, heap=5 * tib)
        # The same draw: the same order of regions, the same hot sizes, cold memory grown.
        assert [r["name"] for r in big] == [r["name"] for r in own]
        hot = {"hot_a", "hot_b", "hot_c"}
        assert [r["size"] for r in big if r["name"] in hot] == [
            r["size"] for r in own if r["name"] in hot
        ]
        total = sum(r["size"] for r in big)
        assert abs(total - 5 * tib) <= 4 * GIB, (i, total)
        assert total > sum(r["size"] for r in own) + 400 * GIB
    # A heap without room for the cold regions of a GiB layout is refused, not overrun.
    with pytest.raises(ValueError, match="does not hold"):
        robustness.layout("needle-5t", 0, heap=2 * GIB)
    small = robustness.layout("needle-5t", 0, heap=3 * GIB)
    assert abs(sum(r["size"] for r in small) - 3 * GIB) <= 2 * GIB


def test_a_monitor_may_name_its_sampling_mode(tmp_path: Path) -> None:
    # "PRESET:MODE" sets `sampling`, named as the preset; a bare preset keeps its default.
    sw = robustness.sweep(
        PAPER_DIR / "subtb-1g.toml", "subtb-1g", 1, 1, ("telescope-bnd:each", "damon-mod")
    )
    assert sw["set"]["monitors"] == [
        {"preset": "telescope-bnd", "sampling": "each"},
        {"preset": "damon-mod"},
    ]
    # The mode reaches the monitor: an unknown one is the config's error, naming the field.
    with pytest.raises(tierscope.ConfigError, match=r"monitors\[0\]\.sampling"):
        robustness.run_layouts(
            PAPER_DIR / "subtb-1g.toml",
            "subtb-1g",
            1,
            1,
            tmp_path / "bad",
            monitors=("telescope-bnd:sometimes",),
            duration="1s",
        )
