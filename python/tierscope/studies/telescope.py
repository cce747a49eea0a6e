"""`tierscope repro telescope`: the Telescope paper's experiments (experiments/paper/,
statistical engine) with our numbers next to the paper's (`telescope_paper`): precision /
recall (section 6.2), Table 2 (monitor cycles) and ACCESSED bits flipped (Figure 10).

The experiments run as one sweep over named bases stored in DIR (resumable, any executor);
each run's outputs go to DIR/runs/base=NAME with timeline.png beside them. The needle's
Telescope rows are also given as means over seeds 1..N (a sweep in DIR/needle-5t-seeds),
and the 5 TB benchmarks run over random layouts x seeds (`robustness`, sweeps in
DIR/NAME-layouts). The tables are printed and written to DIR/repro.md and DIR/repro.json.
The command's help (`tierscope repro --help`) says more.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierscope.data import experiments_dir
from tierscope.experiment import config_error
from tierscope.outdir import Claim
from tierscope.studies import robustness, trends, write_tables
from tierscope.studies import telescope_paper as paper
from tierscope.texttable import align

#: Where the experiment files live (shipped with the package: `tierscope.data`).
PAPER_DIR = experiments_dir() / "paper"
SOURCE = "command line"

#: The experiment whose Telescope rows are also given as means over seeds 1..N.
SEED_EXPERIMENT = "needle-5t"
SEED_MONITORS = ("telescope-bnd", "telescope-flx")
#: Default N: 200 seeds of the two monitors take ~45 s (docs/results/REPRO_TELESCOPE.md), the
#: sweep of docs/techniques/TELESCOPE.md section 4.
NEEDLE_SEEDS = 200
#: Default layouts x seeds per 5 TB benchmark: 20 runs each, about 8 minutes on two cores
#: (docs/results/ROBUSTNESS.md gives the 20 x 5 distributions and their command).
LAYOUTS = 10
LAYOUT_SEEDS = 2
#: repro's tables in its directory, beside the store.
TABLES = ("repro.md", "repro.json")
#: `quick`: every run this long (simulated), to check the pipeline (the claims ledger's
#: quick variant); the numbers are not the documented ones.
QUICK_DURATION = "3s"


def _cell(v: float) -> str:
    return f"{v:.3f}"


def rows_for(
    name: str, metrics: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Precision/recall rows and cost rows of one experiment's metrics."""
    quality, cost = [], []
    for monitor, m in metrics["monitors"].items():
        pp, pr = paper.PRECISION_RECALL.get((name, monitor), ("", ""))
        quality.append(
            {
                "experiment": name,
                "monitor": monitor,
                "precision": m["precision"],
                "recall": m["recall"],
                "paper_precision": pp,
                "paper_recall": pr,
            }
        )
        cost.append(
            {
                "experiment": name,
                "monitor": monitor,
                "gcycles": m["cycles"] / 1e9,
                "paper_gcycles": paper.TABLE2_GCYCLES.get((name, monitor)),
                "bits_flipped": m["bits_cleared"],
                "bits_flipped_at_least": _flips_at_least(m),
                "cpu_percent": m["cpu_percent"],
                "app_slowdown": m.get("app_slowdown"),
            }
        )
    return quality, cost


def _flips_at_least(m: dict[str, Any]) -> int | None:
    """The fewest bits a monitor's run flipped: window sampling's DAMON counts every clear
    as a flip (`bits_cleared`, an upper bound) and its window counts vouch for all but
    `bits_cleared_unsure`; exact for every other run (none unsure). None for a run of a
    build before that counter (every run's cost lists it, zero when never charged)."""
    unsure = m.get("cost", {}).get("bits_cleared_unsure")
    return None if unsure is None else m["bits_cleared"] - unsure


def seed_sweep(
    path: Path, seeds: Sequence[int], monitors: Sequence[str], duration: str | None = None
) -> dict[str, Any]:
    """The sweep of the experiment file at `path` over `seeds`, with only `monitors`
    (and every run `duration` long when given)."""
    sweep: dict[str, Any] = {
        "base": str(path.resolve()),
        "seeds": list(seeds),
        "keep_monitors": list(monitors),
    }
    if duration is not None:
        sweep["set"] = {"duration": duration}
    return sweep


def seed_runs(
    path: Path,
    seeds: Sequence[int],
    monitors: Sequence[str],
    out: Path,
    *,
    executor: str = "local",
    jobs: int = 0,
    progress: bool = False,
    duration: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Runs the experiment file at `path` once per seed with only `monitors`, as a sweep
    stored in `out` (resumable: seeds already stored there are not run again); per
    monitor, each seed's precision and recall."""
    from tierscope import load_sweep, run_sweep

    sweep = seed_sweep(path, seeds, monitors, duration)
    name = f"{path} (seeds)"
    outcome = run_sweep(
        sweep, out, executor=executor, jobs=jobs, progress=progress, source_name=name
    )
    outcome.raise_if_failed("seed runs")
    df = load_sweep(out)
    per_seed: dict[str, list[dict[str, Any]]] = {m: [] for m in monitors}
    for row in df.iter_rows(named=True):
        per_seed[row["monitor"]].append(
            {"seed": row["seed"], "precision": row["precision"], "recall": row["recall"]}
        )
    return per_seed


def seed_mean_rows(name: str, per_seed: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Quality rows (as `rows_for`'s) with the means of `seed_runs`' values, the
    experiment named `NAME seeds A-B` (and `base` NAME: only these rows have one); the
    per-seed values are kept under `seeds`."""
    rows = []
    for monitor, runs in per_seed.items():
        seeds = [r["seed"] for r in runs]
        pp, pr = paper.PRECISION_RECALL.get((name, monitor), ("", ""))
        rows.append(
            {
                "experiment": f"{name} seeds {min(seeds)}-{max(seeds)}",
                "base": name,
                "monitor": monitor,
                "precision": statistics.fmean(r["precision"] for r in runs),
                "recall": statistics.fmean(r["recall"] for r in runs),
                "paper_precision": pp,
                "paper_recall": pr,
                "seeds": runs,
            }
        )
    return rows


def format_tables(quality: list[dict[str, Any]], cost: list[dict[str, Any]]) -> str:
    q = [("experiment", "monitor", "precision", "recall", "paper precision", "paper recall")]
    q += [
        (
            r["experiment"],
            r["monitor"],
            _cell(r["precision"]),
            _cell(r["recall"]),
            r["paper_precision"] or "-",
            r["paper_recall"] or "-",
        )
        for r in quality
    ]
    c = [
        (
            "experiment",
            "monitor",
            "Gcycles",
            "paper Gcycles (Table 2)",
            "bits flipped",
            "at least",
            "cpu %",
        )
    ]
    c += [
        (
            r["experiment"],
            r["monitor"],
            f"{r['gcycles']:.2f}",
            "-" if r["paper_gcycles"] is None else f"{r['paper_gcycles']:.2f}",
            f"{r['bits_flipped']:,}",
            "-" if r.get("bits_flipped_at_least") is None else f"{r['bits_flipped_at_least']:,}",
            f"{r['cpu_percent']:.3f}",
        )
        for r in cost
    ]
    return align(q) + "\n\n" + align(c)


def paper_sweep(duration: str | None = None) -> dict[str, Any]:
    """Every paper experiment, as one sweep over named bases (run ids `base=NAME`), every
    run `duration` long when given."""
    sweep: dict[str, Any] = {
        "bases": {n: str(PAPER_DIR / f"{n}.toml") for n in paper.EXPERIMENTS}
    }
    if duration is not None:
        sweep["set"] = {"duration": duration}
    return sweep


def main(
    out: Path,
    *,
    only: list[str] | None = None,
    layout_experiments: list[str] | None = None,
    needle_seeds: int = NEEDLE_SEEDS,
    layouts: int = LAYOUTS,
    layout_seeds: int = LAYOUT_SEEDS,
    executor: str = "local",
    jobs: int = 0,
    progress: bool = True,
    quick: bool = False,
) -> int:
    """Reproduces the experiments named by `only` (default all of
    `telescope_paper.EXPERIMENTS`) into the store `out`; `layout_experiments` (default
    `robustness.DEFAULT_BENCHES`) also run over `layouts` x `layout_seeds`, the needle's
    Telescope rows over seeds 1..`needle_seeds` (0: none); `quick`: every run
    `QUICK_DURATION` long. Bad names or counts raise ConfigError naming the command-line
    flag."""
    names = only or list(paper.EXPERIMENTS)
    unknown = [n for n in names if n not in paper.EXPERIMENTS]
    if unknown:
        raise config_error(
            SOURCE,
            f"--only: unknown experiment {unknown[0]!r} (expected one of "
            f"{', '.join(paper.EXPERIMENTS)})",
        )
    if layout_experiments:
        for n in layout_experiments:
            if n not in names:
                raise config_error(
                    SOURCE,
                    f"--layout-experiment: {n!r} is not among the experiments run "
                    f"(expected one of {', '.join(names)})",
                )
        layout_names = set(layout_experiments)
    else:
        layout_names = set(robustness.DEFAULT_BENCHES)
    for flag, value in (
        ("--needle-seeds", needle_seeds),
        ("--layouts", layouts),
        ("--layout-seeds", layout_seeds),
    ):
        if value < 0:
            raise config_error(SOURCE, f"{flag}: must be 0 or more, got {value}")
    # Here, not at the top: the sweep store brings pyarrow into every CLI call.
    from tierscope.sweep.store import claim_store

    # DIR is claimed (locked) for the whole reproduction: the store, the timelines and
    # the tables.
    with claim_store(out, adopt=TABLES) as claim:
        return _reproduce(
            claim,
            names,
            layout_names,
            needle_seeds=needle_seeds,
            layouts=layouts,
            layout_seeds=layout_seeds,
            executor=executor,
            jobs=jobs,
            progress=progress,
            duration=QUICK_DURATION if quick else None,
        )


def _reproduce(
    claim: Claim,
    names: list[str],
    layout_names: set[str],
    *,
    needle_seeds: int,
    layouts: int,
    layout_seeds: int,
    executor: str,
    jobs: int,
    progress: bool,
    duration: str | None,
) -> int:
    """`main` into the store claimed by `claim`; every run `duration` long when given."""
    from tierscope import load, run_sweep
    from tierscope.plot import timeline

    out = claim.target
    # One sweep over all paper experiments in DIR, of which --only runs a part: a rerun
    # with the same DIR resumes it, on either executor.
    outcome = run_sweep(
        paper_sweep(duration),
        out,
        executor=executor,
        jobs=jobs,
        outputs=True,
        progress=progress,
        source_name="repro telescope",
        only=[f"base={n}" for n in names],
    )
    outcome.raise_if_failed("experiments")
    quality: list[dict[str, Any]] = []
    cost: list[dict[str, Any]] = []
    walls: dict[str, float] = {}
    layout_runs: dict[str, dict[str, Any]] = {}
    for n in names:
        run_dir = out / "runs" / f"base={n}"
        result = load(run_dir)
        if f"base={n}" in outcome.run_wall_s:
            walls[n] = outcome.run_wall_s[f"base={n}"]
        with claim.stage() as staging:
            path = staging / "runs" / f"base={n}" / "timeline.png"
            path.parent.mkdir(parents=True)
            timeline(result, path, title=paper.EXPERIMENTS[n])
        q, c = rows_for(n, result.metrics)
        quality += q
        cost += c
        if n == SEED_EXPERIMENT and needle_seeds > 0:
            t0 = time.monotonic()
            seeds = range(1, needle_seeds + 1)
            per_seed = seed_runs(
                PAPER_DIR / f"{n}.toml",
                seeds,
                SEED_MONITORS,
                out / f"{n}-seeds",
                executor=executor,
                jobs=jobs,
                progress=progress,
                duration=duration,
            )
            quality += seed_mean_rows(n, per_seed)
            walls[f"{n} seeds 1-{needle_seeds}"] = time.monotonic() - t0
        if n in layout_names and layouts > 0 and layout_seeds > 0:
            t0 = time.monotonic()
            runs = robustness.run_layouts(
                PAPER_DIR / f"{n}.toml",
                n,
                layouts,
                layout_seeds,
                out / f"{n}-layouts",
                executor=executor,
                jobs=jobs,
                progress=progress,
                duration=duration,
            )
            layout_runs[n] = {"distribution": robustness.distribution(runs), "runs": runs}
            walls[f"{n} layouts"] = time.monotonic() - t0
    text = format_tables(quality, cost)
    for n, lay in layout_runs.items():
        title = (
            f"{n} over {layouts} layouts x {layout_seeds} seeds "
            "(docs/results/ROBUSTNESS.md): distributions over the runs"
        )
        text += "\n\n" + robustness.format_distribution(title, lay["distribution"])
    print(text)
    print(
        f"\n{len(names)} experiments ({outcome.skipped} already stored) in "
        f"{outcome.wall_s:.0f} s wall; outputs in {out}/runs/base=NAME"
    )
    with claim.stage() as staging:
        doc = {
            "quality": quality,
            "cost": cost,
            "layouts": layout_runs,
            "derived": trends.applied(trends.telescope, quality, cost),
            "wall_s": walls,
        }
        write_tables(staging, text + "\n", doc, indent=2)
    return 0
