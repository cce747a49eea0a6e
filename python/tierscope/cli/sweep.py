"""`tierscope sweep`: run every experiment of a sweep file on the local machine (or a Ray
cluster), storing one row per (run, monitor) and per (run, policy run) in Parquet as runs
finish; a sweep stopped
at any point resumes where it stopped when run again with the same --out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tierscope.texttable import align

EPILOG = """\
examples:
  tierscope sweep sweeps/rates.toml --dry-run
  tierscope sweep sweeps/rates.toml --out runs/rates --jobs 2
  python -c 'import tierscope; print(tierscope.load_sweep("runs/rates"))'
  python -c 'import tierscope; print(tierscope.load_sweep("runs/rates", "policies"))'

the sweep file (docs/reference/EXPERIMENTS.md, "Sweeps"): a base experiment, [set] overrides,
[[axes]] of values at config paths (lists, zipped), seeds; run ids are stable.
outputs in DIR: sweep.json (the runs), monitors/<run id>.parquet (one row per monitor),
policies/<run id>.parquet (with [tiering]: one row per policy run), the swept
parameters typed (durations as COLUMN_ns, sizes COLUMN_bytes, rates COLUMN_per_s),
runs/<run id>/ (full outputs, with --outputs), tierscope-manifest.json (DIR is a
tierscope sweep store). An absent or empty DIR is created; a store of the same sweep is
resumed, never replaced; anything else is refused. DIR is locked while the sweep runs: a
second sweep on it is refused at once, naming the first one's pid.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sweep",
        help="run every experiment of a sweep, resumable, rows in Parquet",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sweep", metavar="SWEEP", help="sweep file (TOML, or JSON if it ends in .json)")
    p.add_argument(
        "-o", "--out", metavar="DIR", help="result directory (required unless --dry-run)"
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help="set a field of every run's experiment, repeatable (after the sweep's [set]; "
        "an axis on the same path is refused): seed=3, monitors[0].aggr=100ms",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    p.add_argument(
        "--jobs", type=int, default=0, metavar="N", help="runs at once (default 0: one per core)"
    )
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local (default) or ray (needs `pip install 'tierscope[ray]'`)",
    )
    p.add_argument("--address", metavar="ADDR", help="Ray cluster address (default: start one)")
    p.add_argument(
        "--outputs", action="store_true", help="also write each run's full outputs to DIR/runs/ID"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from tierscope import expand_sweep, run_sweep
    from tierscope.experiment import config_error, parse_set

    if args.jobs < 0:
        raise config_error("command line", f"must be 0 or more, got {args.jobs}", field="--jobs")
    overrides = parse_set(args.set)
    if args.dry_run:
        runs = expand_sweep(args.sweep, overrides=overrides)
        rows = [("run id", "params", "monitors", "dropped")]
        for r in runs:
            rows.append(
                (
                    r.id,
                    json.dumps(r.params),
                    ",".join(r.experiment.monitor_names),
                    ",".join(r.dropped) or "-",
                )
            )
        print(align(rows))
        print(f"{len(runs)} runs", file=sys.stderr)
        return 0
    if not args.out:
        raise config_error("command line", "give --out DIR (or --dry-run)", field="--out")
    outcome = run_sweep(
        args.sweep,
        Path(args.out),
        executor=args.executor,
        jobs=args.jobs,
        address=args.address,
        outputs=args.outputs,
        progress=not args.quiet,
        overrides=overrides,
    )
    if not args.quiet:
        print(
            f"{outcome.done} runs done, {outcome.skipped} already stored, "
            f"{len(outcome.failed)} failed, of {outcome.runs}, in {outcome.wall_s:.1f} s; "
            f"tables in {args.out}/monitors and policies",
            file=sys.stderr,
        )
    return 1 if outcome.failed else 0
