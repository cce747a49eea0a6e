"""`tierscope repro telescope`: run the Telescope paper's experiments (experiments/paper/,
statistical engine) and print our numbers next to the paper's. `tierscope repro
telescope-tiering`: the shape of its section 6.3 (tiering driven by each monitor, key-value
stores at 1-2 TB; docs/models/TIERING.md), from experiments/tiering/. `tierscope repro cori`: the
shapes of the Cori paper's Figures 1, 3 and 5 on generated traces (docs/techniques/CORI.md);
`tierscope repro cori-programs` its Figures 1 and 5 on traces of small C kernels of its
applications (programs/cori/) under valgrind lackey (needs the source tree, a C compiler
and valgrind).
`tierscope repro nemo`: the NEMO paper's three use cases (hot-set recovery, THP split
candidates, noisy neighbour) and the SRAM a terabyte sweep needs (docs/techniques/NEMO.md).
`tierscope repro vmmload`: the vmmload paper's Figure 3 (real programs natively and in the
micro-VM; needs the source tree, musl-gcc and /dev/kvm). `tierscope repro claims`: every
quantitative claim of the papers beside ours, with a status (the claims ledger,
docs/results/CLAIMS.md): runs the measurements the claims name (each a repro above, resumed when
already in DIR/NAME), writes DIR/CLAIMS.md and DIR/claims.json, prints the counts per
paper and status, and exits 1 naming each claim without a command, a key or a check.

The experiments run as one sweep over named bases stored in DIR (monitors/, sweep.json;
--executor local or ray; stopped, a rerun with the same DIR resumes it). For each
experiment it writes the usual run outputs (metrics.json, heatmaps like the paper's
Figure 7, damo records) plus timeline.png (precision and recall per window, like Figures 8
and 9) into DIR/runs/base=NAME, then prints and writes DIR/repro.md and DIR/repro.json:
precision / recall ours vs the paper's (section 6.2), and Table 2 (monitor cycles) with
ACCESSED bits flipped (Figure 10).

One seed of the needle is a coin flip for Telescope (DAMON's region management traps a
sliver of the needle in ~40% of seeds, docs/techniques/TELESCOPE.md section 4), so the needle also
gets a row per Telescope variant with the means over seeds 1..N (--needle-seeds; the
per-seed values are in repro.json). The seeds run as a sweep stored in
DIR/needle-5t-seeds, on --executor: stopped, a rerun with the same DIR resumes it.

One layout is a coin flip too: where the hot regions sit decides Telescope-FLX's precision
(docs/results/ROBUSTNESS.md). The 5 TB multi-phase and needle benchmarks (or those named by
--layout-experiment) also run over --layouts random layouts x --layout-seeds seeds with
every monitor (tierscope.studies.robustness), each as a sweep stored in DIR/NAME-layouts, and
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
from pathlib import Path

from tierscope.studies import (
    cori,
    cori_programs,
    nemo,
    robustness,
    telescope,
    telescope_tiering,
    vmmload,
)
from tierscope.studies import telescope_paper as paper
from tierscope.studies.claims import ledger


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "repro",
        help="reproduce a paper's experiments and compare with its numbers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paper",
        choices=[
            "telescope",
            "telescope-tiering",
            "cori",
            "cori-programs",
            "nemo",
            "vmmload",
            "claims",
        ],
        help="which paper: telescope (section 6.2), telescope-tiering (section 6.3), nemo "
        "(section 5's use cases), cori "
        "(Figures 1, 3, 5 on generated traces: --seeds), cori-programs (Figures 1 and 5 "
        "on traces of real programs under valgrind), vmmload (Figure 3), or claims "
        "(every paper's claims beside ours: docs/results/CLAIMS.md)",
    )
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/repro-PAPER)")
    p.add_argument(
        "--force",
        action="store_true",
        help="cori, cori-programs, nemo: replace an earlier output in DIR (only the files "
        "tierscope wrote there); telescope and telescope-tiering resume their store without it",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this experiment (repeatable): "
        f"{', '.join(paper.EXPERIMENTS)} (telescope); "
        f"{', '.join(telescope_tiering.EXPERIMENTS)} (telescope-tiering)",
    )
    p.add_argument(
        "--app",
        choices=["default", "measured"],
        default="default",
        help="telescope-tiering: the application model, purely memory-bound (default) or "
        "measured on real memcached and Redis (experiments/tiering/measured/)",
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
        default=telescope.NEEDLE_SEEDS,
        metavar="N",
        help=f"also give {telescope.SEED_EXPERIMENT}'s Telescope rows as means over seeds 1..N "
        f"(0: none; default {telescope.NEEDLE_SEEDS})",
    )
    p.add_argument(
        "--layouts",
        type=int,
        default=telescope.LAYOUTS,
        metavar="N",
        help="run the --layout-experiment benchmarks over N random layouts (x "
        "--layout-seeds) with every monitor and give p10 / median / p90 "
        f"(0: none; default {telescope.LAYOUTS})",
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
        default=telescope.LAYOUT_SEEDS,
        metavar="N",
        help=f"seeds 1..N of every layout (default {telescope.LAYOUT_SEEDS})",
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
        help="nemo: short runs (hot set 60 s, THP 20 s, noisy neighbour 2 s); telescope, "
        "telescope-tiering: every run 3 s / 6 s; cori-programs: backprop on a small input "
        "only; vmmload: one pair of small runs per case; "
        "claims: the measurements' quick variants. To check the pipeline: the numbers are "
        "not the documented ones",
    )
    p.add_argument(
        "--paper-length",
        action="store_true",
        help="telescope-tiering: the paper's 40 minutes per run (2400 s simulated, telemetry "
        "counted from 150 s) instead of 120 s; use a fresh --out",
    )
    p.add_argument(
        "--paper",
        action="append",
        dest="paper_only",
        choices=ledger.PAPERS,
        help="claims: only this paper's claims (repeatable; default all)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Runs the study named by `args.paper` (tierscope.studies) into --out."""
    if args.paper == "claims":
        return ledger.main(args.out, quick=args.quick, papers=args.paper_only)
    out = Path(args.out if args.out is not None else f"runs/repro-{args.paper}")
    if args.paper == "vmmload":
        return vmmload.main(out, quick=args.quick, force=args.force)
    if args.paper == "cori-programs":
        return cori_programs.main(out, quick=args.quick, force=args.force)
    if args.paper == "cori":
        return cori.main(out, seeds=range(1, max(1, args.seeds) + 1), force=args.force)
    if args.paper == "nemo":
        nemo.main(out, quick=args.quick, force=args.force)
        return 0
    if args.paper == "telescope-tiering":
        return telescope_tiering.main(
            out,
            only=args.only,
            executor=args.executor,
            jobs=args.threads,
            progress=not args.quiet,
            quick=args.quick,
            app=args.app,
            paper_length=args.paper_length,
        )
    return telescope.main(
        out,
        only=args.only,
        layout_experiments=args.layout_experiment,
        needle_seeds=args.needle_seeds,
        layouts=args.layouts,
        layout_seeds=args.layout_seeds,
        executor=args.executor,
        jobs=args.threads,
        progress=not args.quiet,
        quick=args.quick,
    )
