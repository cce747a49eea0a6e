"""`tierscope report DIR`: write a self-contained HTML page (DIR/report.html) for a run
or a sweep directory: summary tables, cost, timelines and heatmaps for a run; rows over
seeds and parameter plots with the seeds' spread for a sweep. It opens offline.

Into DIR, the report is recorded in DIR's tierscope-manifest.json and replaces an earlier
one tierscope wrote; DIR is locked meanwhile (while a sweep writes DIR, give --out FILE).
An existing FILE, or a DIR/report.html tierscope did not write, is replaced only with
--force."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report of a run or sweep directory",
        description=__doc__,
    )
    p.add_argument(
        "dir", metavar="DIR", help="a run (metrics.json) or sweep (sweep.json) directory"
    )
    p.add_argument(
        "-o", "--out", metavar="FILE", help="where to write it (default DIR/report.html)"
    )
    p.add_argument(
        "--force", action="store_true", help="replace an existing FILE (or DIR/report.html)"
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from tierscope.report import write_report

    target = write_report(Path(args.dir), args.out, force=args.force)
    print(f"report in {target}", file=sys.stderr)
    return 0
