"""`tierscope measure apps`: run Debian's redis-server and memcached natively on loopback
ports with a memtier-like and a YCSB-like load, measure the server's CPU time per
operation over a store far larger than the cache and one that fits in it, this host's
memory latency (a pointer chase), and the store lines an operation touches (valgrind
lackey), and write the application model they give (`compute_ns`, `mlp`) to
OUT/NAME.toml with every number's provenance, for `[tiering] app = { from = ... }`
(docs/models/TIERING.md section 4.1). `make measure-apps` installs the packages first.
Missing programs: one line naming them and their packages, exit 2."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from tierscope.outdir import OutputError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "measure",
        help="measure real programs for the model's inputs (apps: Redis and memcached)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    msub = p.add_subparsers(dest="measure_command", metavar="WHAT", required=True)
    a = msub.add_parser("apps", help="Redis and memcached: CPU time per operation and mlp")
    a.add_argument(
        "-o", "--out", default="experiments/tiering/apps", help="folder for NAME.toml"
    )
    a.add_argument(
        "--quick", action="store_true", help="small values and short runs (the test suite's)"
    )
    a.add_argument(
        "--no-trace", action="store_true", help="skip the valgrind trace (minutes per server)"
    )
    a.add_argument(
        "--rederive",
        action="store_true",
        help="write OUT/NAME.toml again from its own [measured] table (nothing is run)",
    )
    a.set_defaults(func=apps)


def apps(args: argparse.Namespace) -> int:
    from tierscope.apps.measure import PLANS, measure_apps, rederive

    if args.rederive:
        for plan in PLANS:
            path = Path(args.out) / f"{plan.name}.toml"
            rederive(path)
            print(f"rewrote {path}")
        return 0
    command = "tierscope " + shlex.join(sys.argv[1:])
    try:
        written = measure_apps(
            Path(args.out), quick=args.quick, trace=not args.no_trace, command=command
        )
    except RuntimeError as e:
        raise OutputError(f"measure apps: {e}") from None
    for path in written:
        print(f"wrote {path}")
    return 0
