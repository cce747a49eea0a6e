"""`tierscope repro telescope`'s seed-mean rows: means of real per-seed runs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import tierscope
from conftest import LEDGER_MISSING, run_cli
from tierscope.studies.telescope import seed_mean_rows, seed_runs

# 1 GiB heap, 8 MiB hot, 2 s on the statistical engine: Telescope's region dynamics (and
# so its precision and recall) depend on the seed; DAMON is there to be left out.
EXPERIMENT = """\
name = "seeds"
seed = SEED
duration = "2s"
warmup = "500ms"

[machine]
engine = "stat"

[workload]
rate = "10M/s"
regions = [{ name = "cold", size = "1016MiB" }, { name = "hot", size = "8MiB" }]
phases = [{ name = "hot", duration = "2s", patterns = [{ region = "hot", kind = "random" }] }]

[[monitors]]
preset = "damon-mod"

[[monitors]]
preset = "telescope-bnd"

[[monitors]]
preset = "telescope-flx"
"""

MONITORS = ("telescope-bnd", "telescope-flx")


def _file(tmp_path: Path, seed: int) -> Path:
    path = tmp_path / f"seed{seed}.toml"
    path.write_text(EXPERIMENT.replace("SEED", str(seed)))
    return path


def test_seed_means_are_means_of_per_seed_runs(tmp_path: Path) -> None:
    seeds = [1, 2, 3]
    per_seed = seed_runs(_file(tmp_path, 1), seeds, MONITORS, tmp_path / "seeds")
    assert list(per_seed) == list(MONITORS)  # damon-mod left out
    # Each seed's values are those of a whole run of that seed (monitors do not affect
    # each other: each has its own machine fed the same accesses).
    alone = {s: tierscope.run(_file(tmp_path, s), progress=False).metrics for s in seeds}
    for m in MONITORS:
        assert [r["seed"] for r in per_seed[m]] == seeds
        for r in per_seed[m]:
            want = alone[r["seed"]]["monitors"][m]
            assert (r["precision"], r["recall"]) == (want["precision"], want["recall"])
    # The seeds really differ, so a sweep that ignored the seed would fail above.
    assert len({(r["precision"], r["recall"]) for m in MONITORS for r in per_seed[m]}) > 2

    rows = seed_mean_rows("seeds", per_seed)
    assert [r["monitor"] for r in rows] == list(MONITORS)
    for row in rows:
        runs = [alone[s]["monitors"][row["monitor"]] for s in seeds]
        assert row["experiment"] == "seeds seeds 1-3"
        assert row["precision"] == statistics.fmean(r["precision"] for r in runs)
        assert row["recall"] == statistics.fmean(r["recall"] for r in runs)
        assert row["seeds"] == per_seed[row["monitor"]]


def test_needle_seeds_must_not_be_negative(tmp_path: Path) -> None:
    r = run_cli("repro", "telescope", "--needle-seeds", "-1", "--out", tmp_path / "x", cwd=tmp_path)
    assert r.returncode == 2
    assert "--needle-seeds" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


# Where the quick ledger runs, its test checks the same on the ledger's telescope
# measurement (check_needle_seed_means), so the suite runs the needle's seeds once.
@pytest.mark.skipif(LEDGER_MISSING is None, reason="test_claims checks the quick ledger's copy")
def test_repro_prints_the_needle_seed_means(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    r = run_cli(
        "repro", "telescope", "--only", "needle-5t", "--needle-seeds", "2", "--out", out,
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    check_needle_seed_means(out, r.stdout)


def check_needle_seed_means(out: Path, printed: str) -> None:
    """What `repro telescope --needle-seeds 2 --out OUT` must have written and printed."""
    data = json.loads((out / "repro.json").read_text())
    rows = [q for q in data["quality"] if q["experiment"] == "needle-5t seeds 1-2"]
    assert [q["monitor"] for q in rows] == list(MONITORS)
    seed1 = {q["monitor"]: q for q in data["quality"] if q["experiment"] == "needle-5t"}
    for q in rows:
        assert [s["seed"] for s in q["seeds"]] == [1, 2]
        # Seed 1 of the sweep is the needle-5t run itself.
        assert q["seeds"][0]["recall"] == seed1[q["monitor"]]["recall"]
        assert q["recall"] == statistics.fmean(s["recall"] for s in q["seeds"])
    lines = printed.splitlines()
    assert any("needle-5t seeds 1-2" in line and "telescope-flx" in line for line in lines)
