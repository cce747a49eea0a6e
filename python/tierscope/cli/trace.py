"""`tierscope trace convert`: read a memory trace (valgrind lackey's `--trace-mem=yes`
output, or tierscope's binary format) and write it in the binary format, which an
experiment replays faster (`[workload] trace = { path, format = "binary" }`, engine exact;
docs/TRACES.md). Prints the trace's accesses, stores, touched 4 KiB pages and phase
markers."""

from __future__ import annotations

import argparse
from typing import Any

from tierscope import _core


def register(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="convert a memory trace (lackey) to tierscope's binary format",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "example:\n"
            "  valgrind --tool=lackey --trace-mem=yes --log-file=prog.lackey ./prog\n"
            "  tierscope trace convert prog.lackey prog.tstrace"
        ),
    )
    tsub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    c = tsub.add_parser("convert", help="read SRC, write DST in the binary format")
    c.add_argument("src", metavar="SRC", help="the trace to read")
    c.add_argument("dst", metavar="DST", nargs="?", help="the binary trace to write")
    c.add_argument(
        "--format", choices=["lackey", "binary"], default="lackey", help="SRC's format"
    )
    c.add_argument(
        "--instructions", action="store_true", help="keep lackey's instruction fetches"
    )
    c.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    info = _core.trace_convert(args.src, args.format, args.dst, args.instructions)
    print(
        f"{info['accesses']} accesses ({info['stores']} stores) on {info['pages']} pages of "
        f"4 KiB; {len(info['markers'])} phase markers"
    )
    for at, name in info["markers"]:
        print(f"  phase {name} from access {at}")
    if args.dst:
        print(f"wrote {args.dst}")
    return 0
