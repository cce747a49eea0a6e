"""`tierscope repro telescope`: runs paper experiments and sets them beside the paper."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import tierscope
from conftest import run_cli
from tierscope.studies.telescope import PAPER_DIR
from tierscope.studies.telescope_paper import EXPERIMENTS, PRECISION_RECALL


def test_every_listed_experiment_has_a_file() -> None:
    for name in EXPERIMENTS:
        assert (PAPER_DIR / f"{name}.toml").is_file(), name
    # Every paper claim refers to a listed experiment.
    assert {e for e, _ in PRECISION_RECALL} <= set(EXPERIMENTS)


@pytest.mark.figures
def test_one_experiment_writes_outputs_and_tables(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    r = run_cli(
        "repro", "telescope", "--only", "needle-5t-thp", "--out", out, "--quiet", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    exp = tomllib.loads((PAPER_DIR / "needle-5t-thp.toml").read_text())
    monitors = [m.get("name", m.get("preset")) for m in exp["monitors"]]
    run_dir = out / "runs" / "base=needle-5t-thp"
    assert (run_dir / "metrics.json").is_file()
    assert (run_dir / "timeline.png").stat().st_size > 0
    for m in monitors:
        assert (run_dir / f"heatmap-{m}.png").is_file()
    data = json.loads((out / "repro.json").read_text())
    assert [q["monitor"] for q in data["quality"]] == monitors
    metrics = json.loads((run_dir / "metrics.json").read_text())["monitors"]
    for q in data["quality"]:
        assert q["precision"] == metrics[q["monitor"]]["precision"]
    md = (out / "repro.md").read_text()
    assert "paper precision" in md and "paper Gcycles (Table 2)" in md
    assert all(m in md for m in monitors)
    # The paper suite is one sweep in DIR: its rows are stored, and a rerun resumes it
    # (nothing runs again, the tables are the same).
    df = tierscope.load_sweep(out)
    assert set(df["run_id"].to_list()) == {"base=needle-5t-thp"}
    again = run_cli(
        "repro", "telescope", "--only", "needle-5t-thp", "--out", out, "--quiet", cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    assert "(1 already stored)" in again.stdout
    assert (out / "repro.md").read_text() == md


def test_unknown_experiment_is_bad_input(tmp_path: Path) -> None:
    r = run_cli("repro", "telescope", "--only", "moonbase", "--out", tmp_path / "x", cwd=tmp_path)
    assert r.returncode == 2
    assert "--only" in r.stderr and "moonbase" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_cost_rows_give_window_samplings_range_of_bits_flipped() -> None:
    from tierscope.studies.telescope import format_tables, rows_for

    def monitor(cost: dict[str, int]) -> dict[str, object]:
        return {
            "precision": 1.0,
            "recall": 1.0,
            "cycles": 1e9,
            "bits_cleared": 500,
            "cpu_percent": 0.1,
            "cost": cost,
        }

    metrics = {
        "monitors": {
            "damon-mod": monitor({"bits_cleared": 500, "bits_cleared_unsure": 470}),
            "telescope-bnd": monitor({"bits_cleared": 500, "bits_cleared_unsure": 0}),
            "damon-agg": monitor({"bits_cleared": 500}),  # a build before the counter
        }
    }
    _, cost = rows_for("subtb-1g", metrics)
    at_least = {r["monitor"]: r["bits_flipped_at_least"] for r in cost}
    assert at_least == {"damon-mod": 30, "telescope-bnd": 500, "damon-agg": None}
    assert all(r["bits_flipped"] == 500 for r in cost)
    table = format_tables([], cost).splitlines()
    assert table[-1].split()[-2] == "-" and table[-3].split()[-2] == "30"
    # DAMON over Telescope reads DAMON's lower end, and not DAMON-MOD's alone when
    # DAMON-AGG's is unknown.
    from tierscope.studies.trends import telescope as derived

    quality, cost = rows_for("subtb-1g", metrics)
    ratio = derived(quality, cost)["damon_over_telescope_min"]
    assert ratio["bits_flipped"] is None and ratio["bits_flipped_upper"] == 1.0
    del metrics["monitors"]["damon-agg"]
    quality, cost = rows_for("subtb-1g", metrics)
    ratio = derived(quality, cost)["damon_over_telescope_min"]
    assert ratio["bits_flipped"] == 30 / 500 and ratio["bits_flipped_upper"] == 1.0
