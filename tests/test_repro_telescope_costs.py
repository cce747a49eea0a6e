"""scripts/repro_telescope_costs.py's output costs on a small run directory: every kind of
output is timed, once per run, and written where it says."""

from __future__ import annotations

from pathlib import Path

import tierscope
from conftest import TINY_MASIM, load_script


def test_costs_times_every_output_of_a_run(tmp_path: Path) -> None:
    (tmp_path / "tiny.cfg").write_text(TINY_MASIM)
    experiment = {
        "name": "tiny",
        "duration": "1s",
        "workload": {"masim": str(tmp_path / "tiny.cfg"), "rate": "1M/s"},
        "monitors": [{"preset": "damon-agg"}, {"preset": "telescope-flx"}],
    }
    run_dir = tmp_path / "run"
    tierscope.run(experiment, out=run_dir, progress=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    parts = dict(load_script("repro_telescope_costs").costs(run_dir, scratch))
    assert list(parts) == [
        "load",
        "metrics.json",
        "csv",
        "heatmaps png",
        "heatmaps svg",
        "heatmaps pdf",
        "damo",
        "arrays",
        "timeline",
    ]
    assert all(v >= 0 for v in parts.values())
    # The drawing is real work, not a no-op: the heatmaps cost CPU and land on disk.
    assert parts["heatmaps png"] > 0
    written = {p.suffix for p in scratch.iterdir()}
    assert {".json", ".csv", ".png", ".svg", ".pdf", ".damon", ".npz"} <= written
