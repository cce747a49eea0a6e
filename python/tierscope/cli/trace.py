"""`tierscope trace convert`: read a memory trace (valgrind lackey's `--trace-mem=yes`
output, or tierscope's binary format) and write it in the binary format, which an
experiment replays faster (`[workload] trace = { path, format = "binary" }`, engine exact;
docs/models/TRACES.md). Prints the trace's accesses, stores, touched 4 KiB pages and phase
markers. DST is written all at once (into a temporary sibling moved into place); an
existing DST is replaced only with --force."""

from __future__ import annotations

import argparse
from typing import Any

from tierscope import _core, outdir
from tierscope._core import ConfigError


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
    c.add_argument("--force", action="store_true", help="replace an existing DST")
    c.add_argument(
        "--format", choices=["lackey", "binary"], default="lackey", help="SRC's format"
    )
    c.add_argument(
        "--instructions", action="store_true", help="keep lackey's instruction fetches"
    )
    c.set_defaults(func=main)
    s = tsub.add_parser(
        "stats",
        help="how a trace, or an experiment's workload, spreads its accesses over pages",
        description=(
            "Accesses, 4 KiB pages touched, and the fewest pages that take 80 %% of the "
            "accesses (the hottest first), for a trace (of one phase with --phase) or for "
            "the first --accesses accesses of an experiment's workload (--experiment): the "
            "comparison of a real program with the model meant to stand for it."
        ),
    )
    s.add_argument("src", metavar="SRC", nargs="?", help="the trace to read")
    s.add_argument(
        "--format", choices=["lackey", "binary"], default="lackey", help="SRC's format"
    )
    s.add_argument("--phase", help="only the accesses of the phases with this marker name")
    s.add_argument(
        "--instructions", action="store_true", help="keep lackey's instruction fetches"
    )
    s.add_argument("--experiment", metavar="EXP", help="an experiment file instead of SRC")
    s.add_argument(
        "--accesses", type=int, default=10_000_000, help="accesses of EXP's workload"
    )
    s.set_defaults(func=stats)


def main(args: argparse.Namespace) -> int:
    if args.dst is None:
        info = _core.trace_convert(args.src, args.format, None, args.instructions)
    else:
        with outdir.file_output(args.dst, force=args.force) as path:
            try:
                info = _core.trace_convert(args.src, args.format, str(path), args.instructions)
            except ConfigError as e:
                if str(path) not in str(e):
                    raise
                # Writing failed (the binding names the file it wrote): name DST instead.
                reason = str(e).split(f"{path}: ", 1)[-1]
                raise outdir.OutputError(f"cannot write {args.dst}: {reason}") from None
    print(
        f"{info['accesses']} accesses ({info['stores']} stores) on {info['pages']} pages of "
        f"4 KiB; {len(info['markers'])} phase markers"
    )
    for at, name in info["markers"]:
        print(f"  phase {name} from access {at}")
    if args.dst:
        print(f"wrote {args.dst}")
    return 0


def stats(args: argparse.Namespace) -> int:
    from tierscope.experiment import config_error, load_experiment

    if (args.src is None) == (args.experiment is None):
        raise config_error("command line", "give a trace SRC or --experiment EXP, not both")
    if args.experiment:
        exp = load_experiment(args.experiment)
        info = _core.workload_page_stats(exp._inner, args.accesses)
        what = f"{args.experiment} ({args.accesses} accesses)"
    else:
        info = _core.trace_page_stats(args.src, args.format, args.phase, args.instructions)
        what = args.src + (f", phase {args.phase}" if args.phase else "")
    share = info["pages_80"] / info["pages"] if info["pages"] else 0.0
    print(
        f"{what}: {info['accesses']} accesses on {info['pages']} pages of 4 KiB; "
        f"80 % of the accesses on {info['pages_80']} pages ({share:.1%} of those touched, "
        f"{info['pages_80'] * 4096 / 2**20:.2f} MiB)"
    )
    return 0
