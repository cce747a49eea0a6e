"""A microbenchmark of the Telescope paper over random layouts (tierscope.studies.robustness) in a
heap of another size, with the monitors you choose, and the distribution table of
docs/results/ROBUSTNESS.md. The layouts are the same draws as `tierscope repro telescope
--layouts`, scaled to the heap: issue 15 placed the multi-phase benchmark's hot regions
in a 5 TiB heap, where the paper's file uses 5000 GB.

    .venv/bin/python scripts/layouts_at.py multiphase-5t --heap 5TiB --layouts 20 --seeds 5 \\
        --monitors telescope-bnd,telescope-flx,pruned-walk --out runs/layouts-5tib-mp

The sweep is stored in --out (interrupted, the same command resumes it); the table is
printed and written to OUT/distribution.md, every run's values to OUT/runs.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import NoReturn

from tierscope._core import monitor_presets
from tierscope.studies import robustness
from tierscope.studies.telescope import PAPER_DIR

UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "PiB": 1 << 50,
}


def parse_size(text: str) -> int:
    """Bytes of a size such as `5TiB` or `5000GB`."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGTP]i?B|B)\s*", text)
    if not m or m.group(2) not in UNITS:
        raise ValueError(f"expected a size such as 5TiB or 5000GB, got {text!r}")
    return int(m.group(1)) * UNITS[m.group(2)]


class Parser(argparse.ArgumentParser):
    """Bad input is one line on stderr and exit status 2, without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    ap = Parser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("bench", choices=list(robustness.BENCHES))
    ap.add_argument("--heap", required=True, help="the heap's size, e.g. 5TiB")
    ap.add_argument("--layouts", type=int, default=20, metavar="N")
    ap.add_argument("--seeds", type=int, default=5, metavar="N")
    ap.add_argument(
        "--monitors",
        default=",".join(robustness.MONITORS),
        help="comma-separated presets (default: every monitor of docs/results/ROBUSTNESS.md)",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=0, metavar="N", help="runs at once")
    args = ap.parse_args(argv)
    try:
        heap = parse_size(args.heap)
    except ValueError as e:
        ap.error(f"--heap: {e}")
    if args.layouts < 1 or args.seeds < 1:
        ap.error("--layouts and --seeds: must be 1 or more")
    try:
        robustness.layout(args.bench, 0, heap)
    except ValueError as e:
        ap.error(f"--heap: {e}")
    monitors = tuple(m for m in args.monitors.split(",") if m)
    known = {p["name"] for p in monitor_presets()}
    unknown = [m for m in monitors if m not in known]
    if unknown or not monitors:
        ap.error(
            f"--monitors: unknown preset {unknown[0]!r} (expected presets among "
            f"{', '.join(sorted(known))})"
            if unknown
            else "--monitors: name at least one preset"
        )
    runs = robustness.run_layouts(
        PAPER_DIR / f"{args.bench}.toml",
        args.bench,
        args.layouts,
        args.seeds,
        args.out,
        monitors=monitors,
        heap=heap,
        jobs=args.threads,
        progress=True,
    )
    title = f"{args.bench} in a {args.heap} heap over {args.layouts} layouts x {args.seeds} seeds"
    table = robustness.format_distribution(title, robustness.distribution(runs))
    print(table)
    (args.out / "distribution.md").write_text(table + "\n", encoding="utf-8")
    (args.out / "runs.json").write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
