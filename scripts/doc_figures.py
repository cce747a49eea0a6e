"""Draws the pictures of docs/reference/FIGURES.md: one of every figure tierscope writes,
from small runs (a 64 MiB heap with an 8 MiB hot region, 2 s; a 6-run sweep; a tune of
2 trials; one Cori workload), at a low resolution to keep the repository small.

    .venv/bin/python scripts/doc_figures.py            # writes docs/reference/figures/
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import tierscope
from tierscope import plot
from tierscope.studies import cori
from tierscope.sweep.store import as_written, param_columns

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference" / "figures"
#: Resolution of the pictures in the docs (the tool writes 150 dpi PNGs, SVG and PDF).
DPI = 60

WORKLOAD = {
    "rate": "1M/s",
    "regions": [
        {"name": "cold", "size": "48MiB"},
        {"name": "hot", "size": "8MiB"},
        {"name": "warm", "size": "8MiB"},
    ],
    "phases": [
        {
            "name": "p",
            "duration": "2s",
            "patterns": [
                {"region": "hot", "kind": "random", "mode": "ro", "weight": 9},
                {"region": "warm", "kind": "random", "mode": "ro", "weight": 1},
            ],
        }
    ],
}
RUN = {
    "name": "figures",
    "duration": "2s",
    "workload": WORKLOAD,
    "monitors": [{"preset": "damon-mod"}, {"preset": "telescope-bnd"}, {"preset": "pebs-mod"}],
    "tiering": {
        "tiers": [{"preset": "dram", "capacity": "12MiB"}, "cxl"],
        "policies": ["telescope-rule", "oracle"],
    },
}
SWEEP = {
    "base": {**RUN, "duration": "1s", "tiering": {**RUN["tiering"], "policies": ["oracle"]}},
    "seeds": {"from": 1, "to": 2},
    "axes": [{"path": "monitors[damon-mod].sample", "values": ["2ms", "5ms", "10ms"]}],
}


def picture(fig: Any, name: str) -> None:
    fig.savefig(OUT / f"{name}.png", dpi=DPI)
    print(f"wrote {OUT.relative_to(ROOT)}/{name}.png")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    result = tierscope.run(RUN, progress=False)
    picture(plot.heatmap_figure(result, "telescope-bnd", title=""), "heatmap")
    picture(plot.heatmap_figure(result), "heatmaps")
    picture(plot.timeline_figure(result), "timeline")
    picture(plot.cost_figure(result), "cost")
    picture(plot.throughput_figure(result), "throughput")
    picture(plot.placement_figure(result), "placement")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [{"params": r.params} for r in tierscope.expand_sweep(SWEEP)]
        store = Path(tmp) / "sweep"
        tierscope.run_sweep(SWEEP, store, progress=False)
        # The parameter as the sweep writes it ("2ms"), as the report shows it.
        columns = [c for c in param_columns(runs) if c.param != "seed"]
        monitors = as_written(tierscope.load_sweep(store), columns)
        policies = as_written(tierscope.load_sweep(store, "policies"), columns)
        params = [c.param for c in columns]
        picture(plot.accuracy_cost_figure(monitors, params), "accuracy-cost")
        picture(plot.parameter_figure(monitors, params[0]), "parameter")
        picture(plot.speedup_figure(policies, params[0]), "speedup")
        tune = Path(tmp) / "tune"
        cmd = [sys.executable, "-m", "tierscope", "tune", "--workload", "strided"]
        subprocess.run([*cmd, "--stop", "trials:2", "-o", str(tune)], check=True)
        shutil.copy(tune / "tune.png", OUT / "tune.png")
        print(f"wrote {OUT.relative_to(ROOT)}/tune.png")
    rows = cori.evaluate(cori._core.CoriTrace.workloads()[0], 1, 1, 1000, 2)
    with tempfile.TemporaryDirectory() as tmp:
        cori.plot_figure3(rows, Path(tmp) / "figure3.png")
        shutil.copy(Path(tmp) / "figure3.png", OUT / "figure3.png")
    print(f"wrote {OUT.relative_to(ROOT)}/figure3.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
