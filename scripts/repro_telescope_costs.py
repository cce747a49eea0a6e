"""Where `tierscope repro telescope`'s CPU goes, piece by piece (issue 29): the simulation
of each paper experiment, of one needle seed run and of one layout run per benchmark (one
run at a time on one thread: process CPU time around it), and the output writing of each
experiment of an earlier repro directory (metrics.json, windows CSVs, heatmaps per format,
damo records, arrays, and the timeline the repro draws). Multiply the seed and layout runs
by their counts (--needle-seeds, --layouts x --layout-seeds) for the repro's totals.

    .venv/bin/python scripts/repro_telescope_costs.py sims [--only NAME ...]
    .venv/bin/python scripts/repro_telescope_costs.py outputs DIR [--only NAME ...]

DIR is a `tierscope repro telescope --out DIR`. Times are CPU seconds of this process,
which on a loaded machine run a little long (shared caches).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import tierscope
from tierscope import _core
from tierscope.experiment import Experiment, load_experiment
from tierscope.export import csv as csv_export
from tierscope.export import damo
from tierscope.output import monitor_arrays_file, safe_name
from tierscope.plot import FORMATS, heatmap, shared_scales, timeline
from tierscope.results import save_arrays
from tierscope.studies import robustness, telescope
from tierscope.studies import telescope_paper as paper
from tierscope.sweep.spec import expand_sweep


def cpu(work: Callable[[], Any]) -> float:
    """Process CPU seconds `work()` took."""
    t0 = time.process_time()
    work()
    return time.process_time() - t0


def simulate(experiment: Experiment) -> None:
    """Runs `experiment` on one thread and drops its result."""
    handle = _core.start_run(experiment._inner, 1)
    while not handle.done():
        time.sleep(0.01)
    handle.result()


def sims(names: Iterable[str]) -> None:
    for n in names:
        print(f"sim {n}: {cpu(lambda n=n: simulate(load_experiment(paper_file(n)))):.2f} s")
    seed = telescope.seed_sweep(paper_file(telescope.SEED_EXPERIMENT), [1], telescope.SEED_MONITORS)
    (run,) = expand_sweep(seed, source_name="seed run")
    print(f"sim {telescope.SEED_EXPERIMENT} seed 1: {cpu(lambda: simulate(run.experiment)):.2f} s")
    for bench in robustness.DEFAULT_BENCHES:
        layout = robustness.sweep(paper_file(bench), bench, 1, 1)
        (run,) = expand_sweep(layout, source_name="layout run")
        print(f"sim {bench} layout 0 seed 1: {cpu(lambda r=run: simulate(r.experiment)):.2f} s")


def outputs(directory: Path, names: Iterable[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            run_dir = directory / "runs" / f"base={n}"
            if not run_dir.is_dir():
                continue
            print(
                f"outputs {n}: " + ", ".join(f"{k} {v:.2f} s" for k, v in costs(run_dir, Path(tmp)))
            )


def costs(run_dir: Path, tmp: Path) -> list[tuple[str, float]]:
    """CPU seconds of each kind of output of the run in `run_dir`, written into `tmp`."""
    loaded: list[tierscope.RunResult] = []
    parts = {"load": cpu(lambda: loaded.append(tierscope.load(run_dir)))}
    result = loaded[0]
    result._metrics = None  # metrics.json's document built again, as after a run
    parts["metrics.json"] = cpu(
        lambda: (tmp / "metrics.json").write_text(json.dumps(result.metrics, indent=2))
    )
    scales = shared_scales(result)
    heatmaps = [f"heatmaps {fmt}" for fmt in FORMATS]
    for kind in ("csv", *heatmaps, "damo", "arrays"):
        parts[kind] = 0.0
    for name, m in result.monitors.items():
        f = safe_name(name)
        parts["csv"] += cpu(lambda m=m, f=f: csv_export.write_windows(m, tmp / f"w-{f}.csv"))
        # One format at a time (each builds the figure again, a few % of its drawing).
        for kind, fmt in zip(heatmaps, FORMATS, strict=True):
            parts[kind] += cpu(
                lambda name=name, f=f, fmt=fmt: heatmap(
                    result, name, tmp / f"h-{f}", scales=scales, formats=[fmt]
                )
            )
        parts["damo"] += cpu(lambda m=m, f=f: damo.write(m, tmp / f"{f}.damon"))
        parts["arrays"] += cpu(
            lambda m=m, name=name: save_arrays(m, tmp / monitor_arrays_file(name))
        )
    parts["timeline"] = cpu(lambda: timeline(result, tmp / "timeline.png"))
    return list(parts.items())


def paper_file(name: str) -> Path:
    return telescope.PAPER_DIR / f"{name}.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["sims", "outputs"])
    parser.add_argument("directory", nargs="?", type=Path, help="outputs: a repro directory")
    parser.add_argument("--only", action="append", choices=list(paper.EXPERIMENTS))
    args = parser.parse_args()
    names = args.only or list(paper.EXPERIMENTS)
    if args.what == "sims":
        sims(names)
    elif args.directory is None:
        parser.error("outputs needs the repro directory")
    elif not args.directory.is_dir():
        parser.error(f"{args.directory}: not a directory (a repro telescope output)")
    else:
        outputs(args.directory, names)


if __name__ == "__main__":
    main()
