"""`tierscope run`: run an experiment file, or the quick form built from options."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from tierscope._core import ConfigError
from tierscope.experiment import config_error, dict_to_json
from tierscope.results import RunResult
from tierscope.texttable import align

PRESETS = ("damon-mod", "damon-agg", "telescope-bnd", "telescope-flx")
#: Every preset --monitor accepts (the default set is PRESETS; pml needs --engine kvm).
ALL_PRESETS = (*PRESETS, "scan-agg", "scan-mod", "scan-cons", "pebs-mod", "pebs-agg", "pml")
QUICK_SOURCE = "command line"

EPILOG = """\
examples:
  tierscope run experiments/default.toml --out runs/default
  tierscope run --masim workload.cfg --monitor damon-mod --monitor telescope-bnd \\
      --rate 10M/s --duration 30s --out runs/quick

outputs in DIR: metrics.json, windows-<monitor>.csv, heatmap-<monitor>.png,
<monitor>.damon (read it with `damo report heatmap --input FILE`).
An existing DIR is replaced only if it holds an earlier tierscope output.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run an experiment and write its metrics, heatmaps and damo records",
        description=(
            "Run an experiment: every monitor on its own simulated machine fed the same\n"
            "access stream. Give an experiment file (TOML, or JSON if it ends in .json),\n"
            "or use the quick form with --masim."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "experiment", nargs="?", metavar="EXPERIMENT", help="experiment file (docs/EXPERIMENTS.md)"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        metavar="N",
        help="monitors run in parallel on up to N threads (default 0: one per core)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    q = p.add_argument_group(
        "quick form", "run a MASIM config without an experiment file (instead of EXPERIMENT)"
    )
    q.add_argument("--masim", metavar="FILE", help="MASIM config file (the workload)")
    q.add_argument(
        "--monitor",
        action="append",
        metavar="PRESET",
        help=f"a monitor preset, repeatable: {', '.join(ALL_PRESETS)} "
        f"(default: {', '.join(PRESETS)}; pml only with --engine kvm)",
    )
    q.add_argument("--rate", help="accesses per simulated second (default 10M/s)")
    q.add_argument(
        "--duration",
        metavar="TIME",
        help="simulated time, e.g. 30s (default: the config's phases, once)",
    )
    q.add_argument(
        "--page-size",
        metavar="SIZE",
        help="page size of the workload's memory: 4KiB or 2MiB (THP); default 4KiB",
    )
    q.add_argument(
        "--engine",
        help="machine: exact (default), stat (statistical), or kvm (the workload in a real "
        "KVM micro-VM, in real time; docs/KVM.md)",
    )
    q.add_argument("--seed", type=int, help="random seed (default 1)")
    q.add_argument("--name", help="experiment name (default: the MASIM file's name)")
    p.set_defaults(func=main)


#: Options of the quick form, and their defaults when it is used.
QUICK_DEFAULTS: dict[str, Any] = {
    "monitor": None,
    "rate": "10M/s",
    "duration": None,
    "page_size": "4KiB",
    "engine": "exact",
    "seed": 1,
    "name": None,
}


def quick_experiment(args: argparse.Namespace) -> dict[str, Any]:
    """The experiment dict of the quick form."""
    for key, default in QUICK_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    masim = Path(args.masim)
    exp: dict[str, Any] = {
        "name": args.name or masim.stem,
        "seed": args.seed,
        "machine": {"engine": args.engine, "page_size": args.page_size},
        "workload": {"masim": str(masim.absolute()), "rate": args.rate},
        "monitors": [{"preset": p} for p in (args.monitor or PRESETS)],
    }
    if args.duration is not None:
        exp["duration"] = args.duration
    return exp


#: Experiment keys the quick form sets, by the option that sets them.
OPTION_OF_KEY = {
    "name": "--name",
    "seed": "--seed",
    "duration": "--duration",
    "engine": "--engine",
    "page_size": "--page-size",
    "masim": "--masim",
    "rate": "--rate",
}


def quick_error(exp: dict[str, Any], e: ConfigError) -> ConfigError:
    """Rephrases an error about the quick form's generated JSON in terms of the option
    at fault. The JSON holds one value per line, so the error's line usually names the
    key; when it points at a closing brace instead, the option whose value the message
    quotes is the one."""
    if e.file != QUICK_SOURCE or e.line is None:
        return e
    message = re.sub(r" at line \d+ column \d+$", "", e.message)
    lines = dict_to_json(exp).splitlines()
    match = re.match(r'\s*"(\w+)":', lines[e.line - 1]) if e.line <= len(lines) else None
    option = OPTION_OF_KEY.get(match.group(1)) if match else None
    if option is None:
        values = {**exp, **exp["machine"], **exp["workload"]}
        quoted = [o for k, o in OPTION_OF_KEY.items() if f"`{values.get(k)}`" in message]
        option = quoted[0] if len(quoted) == 1 else None
    return config_error(QUICK_SOURCE, f"{option}: {message}" if option else message)


def format_table(result: RunResult) -> str:
    """The summary table printed after a run."""
    head = ("monitor", "precision", "recall", "f1", "cpu %", "bits cleared", "entries read")
    rows = [head]
    for name, m in result.monitors.items():
        s = m.summary
        rows.append(
            (
                name,
                f"{s['precision']:.3f}",
                f"{s['recall']:.3f}",
                f"{s['f1']:.3f}",
                f"{s['cpu_percent']:.3f}",
                f"{s['bits_cleared']:,}",
                f"{s['entries_read']:,}",
            )
        )
    return align(rows)


def main(args: argparse.Namespace) -> int:
    from tierscope import run

    if args.experiment and args.masim:
        raise config_error(QUICK_SOURCE, "give an EXPERIMENT file or --masim, not both")
    if args.experiment:
        given = [f"--{k.replace('_', '-')}" for k in QUICK_DEFAULTS if getattr(args, k) is not None]
        if given:
            raise config_error(
                QUICK_SOURCE,
                f"{', '.join(given)}: only for the quick form (--masim); "
                "set these in the experiment file",
            )
        source: str | dict[str, Any] = args.experiment
    elif args.masim:
        source = quick_experiment(args)
    else:
        raise config_error(QUICK_SOURCE, "give an EXPERIMENT file or --masim FILE")

    from tierscope.experiment import load_experiment

    if isinstance(source, dict):
        try:
            exp = load_experiment(source, source_name=QUICK_SOURCE)
        except ConfigError as e:
            raise quick_error(source, e) from None
    else:
        exp = load_experiment(source)
    result = run(exp, out=args.out, progress=not args.quiet, threads=args.threads)
    if not args.quiet:
        print(format_table(result))
        print(f"outputs in {args.out}", file=sys.stderr)
    return 0
