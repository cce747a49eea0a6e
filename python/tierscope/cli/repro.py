"""`tierscope repro telescope`: run the Telescope paper's experiments (experiments/paper/,
statistical engine) and print our numbers next to the paper's. `tierscope repro
telescope-tiering`: the shape of its section 6.3 (tiering driven by each monitor, key-value
stores at 1-2 TB; docs/TIERING.md), from experiments/tiering/. `tierscope repro cori`: the
shapes of the Cori paper's Figures 1, 3 and 5 on generated traces (docs/CORI.md).
`tierscope repro nemo`: the NEMO paper's three use cases (hot-set recovery, THP split
candidates, noisy neighbour) and the SRAM a terabyte sweep needs (docs/NEMO.md).

The experiments run as one sweep over named bases stored in DIR (rows/, sweep.json;
--executor local or ray; stopped, a rerun with the same DIR resumes it). For each
experiment it writes the usual run outputs (metrics.json, heatmaps like the paper's
Figure 7, damo records) plus timeline.png (precision and recall per window, like Figures 8
and 9) into DIR/runs/base=NAME, then prints and writes DIR/repro.md and DIR/repro.json:
precision / recall ours vs the paper's (section 6.2), and Table 2 (monitor cycles) with
ACCESSED bits flipped (Figure 10).

One seed of the needle is a coin flip for Telescope (DAMON's region management traps a
sliver of the needle in ~40% of seeds, docs/TELESCOPE.md section 4), so the needle also
gets a row per Telescope variant with the means over seeds 1..N (--needle-seeds; the
per-seed values are in repro.json). The seeds run as a sweep stored in
DIR/needle-5t-seeds, on --executor: stopped, a rerun with the same DIR resumes it.

One layout is a coin flip too: where the hot regions sit decides Telescope-FLX's precision
(docs/ROBUSTNESS.md). The 5 TB multi-phase and needle benchmarks (or those named by
--layout-experiment) also run over --layouts random layouts x --layout-seeds seeds with
every monitor (tierscope.robustness), each as a sweep stored in DIR/NAME-layouts, and
repro.md gives per monitor the p10 / median / p90 of precision and recall over those runs
(per-run values in repro.json).

DIR is tierscope's (tierscope-manifest.json names what it wrote) and is locked while
repro runs: a second writer is refused. telescope and telescope-tiering resume the store
already in DIR (its rows are kept; repro.md, repro.json and timelines are rewritten);
cori and nemo replace an earlier output of theirs only with --force, and then only the
files its manifest names. A non-empty DIR without the manifest is refused whatever the
flags (an output from before manifests that holds sweep.json is adopted).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierscope import paper, repro_cori, repro_nemo, repro_tiering, robustness
from tierscope.experiment import config_error
from tierscope.outdir import Claim
from tierscope.sweep.store import claim_store
from tierscope.texttable import align

#: Where the experiment files live, relative to the repository root.
PAPER_DIR = Path(__file__).resolve().parents[3] / "experiments" / "paper"
SOURCE = "command line"

#: The experiment whose Telescope rows are also given as means over seeds 1..N.
SEED_EXPERIMENT = "needle-5t"
SEED_MONITORS = ("telescope-bnd", "telescope-flx")
#: Default N: 200 seeds of the two monitors take ~45 s (docs/REPRO_TELESCOPE.md), the
#: sweep of docs/TELESCOPE.md section 4.
NEEDLE_SEEDS = 200
#: Default layouts x seeds per 5 TB benchmark: 20 runs each, about 8 minutes on two cores
#: (docs/ROBUSTNESS.md gives the 20 x 5 distributions and their command).
LAYOUTS = 10
LAYOUT_SEEDS = 2
#: repro's tables in its directory, beside the store.
TABLES = ("repro.md", "repro.json")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "repro",
        help="reproduce a paper's experiments and compare with its numbers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paper",
        choices=["telescope", "telescope-tiering", "cori", "nemo"],
        help="which paper: telescope (section 6.2), telescope-tiering (section 6.3), nemo "
        "(section 5's use cases) or cori "
        "(Figures 1, 3, 5 on generated traces: --seeds)",
    )
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/repro-PAPER)")
    p.add_argument(
        "--force",
        action="store_true",
        help="cori, nemo: replace an earlier output in DIR (only the files tierscope wrote "
        "there); telescope and telescope-tiering resume their store without it",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this experiment (repeatable): "
        f"{', '.join(paper.EXPERIMENTS)} (telescope); "
        f"{', '.join(repro_tiering.EXPERIMENTS)} (telescope-tiering)",
    )
    p.add_argument(
        "--threads", type=int, default=0, metavar="N", help="runs at once (0: one per core)"
    )
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="where the seed sweep runs (local, or ray: `pip install 'tierscope[ray]'`)",
    )
    p.add_argument(
        "--needle-seeds",
        type=int,
        default=NEEDLE_SEEDS,
        metavar="N",
        help=f"also give {SEED_EXPERIMENT}'s Telescope rows as means over seeds 1..N "
        f"(0: none; default {NEEDLE_SEEDS})",
    )
    p.add_argument(
        "--layouts",
        type=int,
        default=LAYOUTS,
        metavar="N",
        help="run the --layout-experiment benchmarks over N random layouts (x "
        "--layout-seeds) with every monitor and give p10 / median / p90 "
        f"(0: none; default {LAYOUTS})",
    )
    p.add_argument(
        "--layout-experiment",
        action="append",
        metavar="NAME",
        help="run this experiment over --layouts (repeatable; any of --only's names; "
        f"default {' and '.join(robustness.DEFAULT_BENCHES)})",
    )
    p.add_argument(
        "--layout-seeds",
        type=int,
        default=LAYOUT_SEEDS,
        metavar="N",
        help=f"seeds 1..N of every layout (default {LAYOUT_SEEDS})",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="cori: generated traces' seeds 1..N (default 1)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="nemo: short runs (hot set 60 s, THP 20 s, noisy neighbour 2 s) to check the "
        "pipeline; the numbers are not the documented ones",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=main)


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
                "cpu_percent": m["cpu_percent"],
            }
        )
    return quality, cost


def seed_sweep(path: Path, seeds: Sequence[int], monitors: Sequence[str]) -> dict[str, Any]:
    """The sweep of the experiment file at `path` over `seeds`, with only `monitors`."""
    return {"base": str(path.resolve()), "seeds": list(seeds), "keep_monitors": list(monitors)}


def seed_runs(
    path: Path,
    seeds: Sequence[int],
    monitors: Sequence[str],
    out: Path,
    *,
    executor: str = "local",
    jobs: int = 0,
    progress: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Runs the experiment file at `path` once per seed with only `monitors`, as a sweep
    stored in `out` (resumable: seeds already stored there are not run again); per
    monitor, each seed's precision and recall."""
    from tierscope import load_sweep, run_sweep

    sweep = seed_sweep(path, seeds, monitors)
    name = f"{path} (seeds)"
    outcome = run_sweep(
        sweep, out, executor=executor, jobs=jobs, progress=progress, source_name=name
    )
    outcome.raise_if_failed("seed runs")
    df = load_sweep(out)
    per_seed: dict[str, list[dict[str, Any]]] = {m: [] for m in monitors}
    for row in df.iter_rows(named=True):
        if row["row"] != "monitor":
            continue
        per_seed[row["monitor"]].append(
            {"seed": row["seed"], "precision": row["precision"], "recall": row["recall"]}
        )
    return per_seed


def seed_mean_rows(name: str, per_seed: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Quality rows (as `rows_for`'s) with the means of `seed_runs`' values, the
    experiment named `NAME seeds A-B`; the per-seed values are kept under `seeds`."""
    rows = []
    for monitor, runs in per_seed.items():
        seeds = [r["seed"] for r in runs]
        pp, pr = paper.PRECISION_RECALL.get((name, monitor), ("", ""))
        rows.append(
            {
                "experiment": f"{name} seeds {min(seeds)}-{max(seeds)}",
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
    c = [("experiment", "monitor", "Gcycles", "paper Gcycles (Table 2)", "bits flipped", "cpu %")]
    c += [
        (
            r["experiment"],
            r["monitor"],
            f"{r['gcycles']:.2f}",
            "-" if r["paper_gcycles"] is None else f"{r['paper_gcycles']:.2f}",
            f"{r['bits_flipped']:,}",
            f"{r['cpu_percent']:.3f}",
        )
        for r in cost
    ]
    return align(q) + "\n\n" + align(c)


def paper_sweep() -> dict[str, Any]:
    """Every paper experiment, as one sweep over named bases (run ids `base=NAME`)."""
    return {"bases": {n: str(PAPER_DIR / f"{n}.toml") for n in paper.EXPERIMENTS}}


def main(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = f"runs/repro-{args.paper}"
    if args.paper == "cori":
        return repro_cori.main(
            Path(args.out), seeds=range(1, max(1, args.seeds) + 1), force=args.force
        )
    if args.paper == "nemo":
        repro_nemo.main(Path(args.out), quick=args.quick, force=args.force)
        return 0
    if args.paper == "telescope-tiering":
        return repro_tiering.main(
            Path(args.out),
            only=args.only,
            executor=args.executor,
            jobs=args.threads,
            progress=not args.quiet,
        )
    names = args.only or list(paper.EXPERIMENTS)
    unknown = [n for n in names if n not in paper.EXPERIMENTS]
    if unknown:
        raise config_error(
            SOURCE,
            f"--only: unknown experiment {unknown[0]!r} (expected one of "
            f"{', '.join(paper.EXPERIMENTS)})",
        )
    if args.layout_experiment:
        for n in args.layout_experiment:
            if n not in names:
                raise config_error(
                    SOURCE,
                    f"--layout-experiment: {n!r} is not among the experiments run "
                    f"(expected one of {', '.join(names)})",
                )
        layout_names = set(args.layout_experiment)
    else:
        layout_names = set(robustness.DEFAULT_BENCHES)
    for flag, value in (
        ("--needle-seeds", args.needle_seeds),
        ("--layouts", args.layouts),
        ("--layout-seeds", args.layout_seeds),
    ):
        if value < 0:
            raise config_error(SOURCE, f"{flag}: must be 0 or more, got {value}")
    out = Path(args.out)
    # DIR is claimed (locked) for the whole reproduction: the store, the timelines and
    # the tables.
    with claim_store(out, adopt=TABLES) as claim:
        return telescope(args, claim, names, layout_names)


def telescope(
    args: argparse.Namespace, claim: Claim, names: list[str], layout_names: set[str]
) -> int:
    """`repro telescope` into the store claimed by `claim`."""
    from tierscope import load, run_sweep
    from tierscope.plot import timeline

    out = claim.target
    # One sweep over all paper experiments in DIR, of which --only runs a part: a rerun
    # with the same DIR resumes it, on either executor.
    outcome = run_sweep(
        paper_sweep(),
        out,
        executor=args.executor,
        jobs=args.threads,
        outputs=True,
        progress=not args.quiet,
        source_name="repro telescope",
        only=[f"base={n}" for n in names],
    )
    outcome.raise_if_failed("experiments")
    quality: list[dict[str, Any]] = []
    cost: list[dict[str, Any]] = []
    walls: dict[str, float] = {}
    layouts: dict[str, dict[str, Any]] = {}
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
        if n == SEED_EXPERIMENT and args.needle_seeds > 0:
            t0 = time.monotonic()
            seeds = range(1, args.needle_seeds + 1)
            per_seed = seed_runs(
                PAPER_DIR / f"{n}.toml",
                seeds,
                SEED_MONITORS,
                out / f"{n}-seeds",
                executor=args.executor,
                jobs=args.threads,
                progress=not args.quiet,
            )
            quality += seed_mean_rows(n, per_seed)
            walls[f"{n} seeds 1-{args.needle_seeds}"] = time.monotonic() - t0
        if n in layout_names and args.layouts > 0 and args.layout_seeds > 0:
            t0 = time.monotonic()
            runs = robustness.run_layouts(
                PAPER_DIR / f"{n}.toml",
                n,
                args.layouts,
                args.layout_seeds,
                out / f"{n}-layouts",
                executor=args.executor,
                jobs=args.threads,
                progress=not args.quiet,
            )
            layouts[n] = {"distribution": robustness.distribution(runs), "runs": runs}
            walls[f"{n} layouts"] = time.monotonic() - t0
    text = format_tables(quality, cost)
    for n, lay in layouts.items():
        title = (
            f"{n} over {args.layouts} layouts x {args.layout_seeds} seeds "
            "(docs/ROBUSTNESS.md): distributions over the runs"
        )
        text += "\n\n" + robustness.format_distribution(title, lay["distribution"])
    print(text)
    print(
        f"\n{len(names)} experiments ({outcome.skipped} already stored) in "
        f"{outcome.wall_s:.0f} s wall; outputs in {out}/runs/base=NAME"
    )
    with claim.stage() as staging:
        (staging / "repro.md").write_text(text + "\n", encoding="utf-8")
        (staging / "repro.json").write_text(
            json.dumps(
                {"quality": quality, "cost": cost, "layouts": layouts, "wall_s": walls},
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0
