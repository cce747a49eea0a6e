"""`tierscope run`: run an experiment file, or the quick form built from options."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tierscope import _core, guards
from tierscope._core import ConfigError
from tierscope.experiment import config_error, parse_set
from tierscope.results import RunResult
from tierscope.texttable import align

QUICK_SOURCE = "command line"


def default_presets() -> list[str]:
    """The presets the quick form runs without --monitor (from the registry)."""
    return [p["name"] for p in _core.monitor_presets() if p["default"]]


def presets_help() -> str:
    """Every preset with its line of help and what it needs, from the registry."""
    engines = _core.engines()
    lines = []
    for p in _core.monitor_presets():
        needs = ""
        if p["requires"]:
            able = [e["name"] for e in engines if set(p["requires"]) <= set(e["capabilities"])]
            needs = f" [engines: {', '.join(able)}]"
        mark = " (default)" if p["default"] else ""
        lines.append(f"  {p['name']:<14} {p['help']}{needs}{mark}")
    return "\n".join(lines)


def engines_help() -> str:
    return "\n".join(f"  {e['name']:<6} {e['help']}" for e in _core.engines())


EPILOG_HEAD = """\
examples:
  tierscope run experiments/default.toml --out runs/default
  tierscope run experiments/default.toml --set seed=3 --set monitors[0].aggr=100ms
  tierscope run --masim workload.cfg --monitor damon-mod --monitor telescope-bnd \\
      --rate 10M/s --duration 30s --out runs/quick
  tierscope run --masim workload.cfg --tiers dram:256MiB,cxl \\
      --policy telescope-rule --policy oracle --out runs/tiering

real programs and traces: an experiment file's [workload] may name a static program
(`program = ["./prog", "arg"]`, engine kvm: it runs in the micro-VM until it exits;
docs/models/PROGRAMS.md) or a memory trace recorded by valgrind (`trace = { path = "t.lackey",
format = "lackey" }`, engine exact; `tierscope trace convert` writes the faster binary
format; docs/models/TRACES.md).

outputs in DIR: metrics.json, windows-<monitor>.csv, heatmap-<monitor>.png,
<monitor>.damon (read it with `damo report heatmap --input FILE`), arrays-<monitor>.npz
(tierscope.load(DIR) reads the directory back); with memory tiering (a [tiering] table,
or --tiers), also arrays-policy-<run>.npz per policy run, throughput.png and
placement.png. Every figure is also written as .svg and .pdf (TIERSCOPE_FIGURES=png,svg,pdf
chooses, TIERSCOPE_FIGURES=none writes none; docs/reference/FIGURES.md). DIR also gets
tierscope-manifest.json, naming every file tierscope wrote.
An absent or empty DIR is created or used. An existing DIR is never emptied: one without
tierscope-manifest.json is refused whatever the flags; an earlier output is refused unless
--force is given, and then only the files its manifest names are replaced (anything else
in DIR is kept). DIR is locked while the run lasts: a second writer is refused.

tiering (--tiers, --policy, --placement): these build the experiment's [tiering] table
(docs/reference/EXPERIMENTS.md). --tiers lists the machine's memory tiers, fastest first, each a
tier preset with an optional capacity: a size (256MiB) or a share of the heap (20%);
every tier but the last needs one, the last holds the rest of the heap. --policy names a
policy that needs no settings (policies with settings need an experiment file); a policy
fed by a monitor runs once per monitor of the experiment (the run is named
policy@monitor), the others once. --placement names where the heap starts out. An
unknown preset, policy or placement is refused with the accepted names.
"""


def tiering_help() -> str:
    """The tier presets, policies and placements, from the binding's registries."""
    tiers = "\n".join(
        f"  {t['name']:<10} {t['latency_ns']:.0f} ns, {t['bandwidth'] / 1e9:.1f} GB/s: "
        f"{t['source']}"
        for t in _core.tier_presets()
    )
    policies = "\n".join(
        f"  {p['name']:<15} {p['help']}"
        + (" (needs settings: experiment file only)" if p["needs_settings"] else "")
        for p in _core.policies()
    )
    placements = ", ".join(_core.placements())
    return (
        f"tier presets (--tiers):\n{tiers}\n\npolicies (--policy):\n{policies}\n\n"
        f"placements (--placement): {placements}\n"
    )


def epilog() -> str:
    return (
        f"{EPILOG_HEAD}\nmonitor presets (--monitor):\n{presets_help()}\n\n"
        f"engines (--engine):\n{engines_help()}\n\n{tiering_help()}"
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run an experiment and write its metrics, heatmaps and damo records",
        description=(
            "Run an experiment: every monitor on its own simulated machine fed the same\n"
            "access stream. Give an experiment file (TOML, or JSON if it ends in .json),\n"
            "or use the quick form with --masim."
        ),
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "experiment",
        nargs="?",
        metavar="EXPERIMENT",
        help="experiment file (docs/reference/EXPERIMENTS.md)",
    )
    p.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        help="output directory (default: runs/NAME-TIMESTAMP, NAME the experiment's)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help="set a field of the experiment, repeatable: the sweep path syntax (seed=3, "
        "monitors[0].aggr=100ms, tiering.policies[NAME].period=1s), the value typed by the "
        'config (docs/reference/EXPERIMENTS.md, "Overrides")',
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier output in DIR (only the files tierscope wrote there)",
    )
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
        help="a monitor preset, repeatable (listed below; default: "
        f"{', '.join(default_presets())})",
    )
    q.add_argument("--rate", help="accesses per simulated second (default 10M/s)")
    q.add_argument(
        "--duration",
        metavar="TIME",
        help="simulated time, e.g. 30s (default: the config's phases, once); with an "
        "experiment file, sets its duration",
    )
    q.add_argument(
        "--page-size",
        metavar="SIZE",
        help="page size of the workload's memory: 4KiB or 2MiB (THP); default 4KiB",
    )
    q.add_argument(
        "--host-page-size",
        metavar="SIZE",
        help="bare-metal (default), or the host page size backing a virtual machine's "
        "memory under nested paging: 4KiB, 2MiB or 1GiB (engines exact and stat; "
        "docs/models/MACHINE.md)",
    )
    q.add_argument(
        "--engine",
        help="machine: exact (default), stat or kvm (listed below; docs/models/KVM.md)",
    )
    q.add_argument(
        "--paging-levels",
        type=int,
        metavar="N",
        help="4 or 5 (default: the fewest levels whose address space holds the workload)",
    )
    q.add_argument(
        "--seed", type=int, help="random seed (default 1); with an experiment file, sets its seed"
    )
    q.add_argument("--name", help="experiment name (default: the MASIM file's name)")
    q.add_argument(
        "--tiers",
        metavar="PRESET[:CAPACITY],...",
        help="memory tiers, fastest first, e.g. dram:256MiB,cxl (at least two; capacity a "
        "size or a share of the heap such as 20%%; the last defaults to the heap); "
        "turns on tiering (see below)",
    )
    q.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help="a tiering policy to run, repeatable (one that needs no settings; needs "
        "--tiers; see below)",
    )
    q.add_argument(
        "--placement",
        metavar="NAME",
        help="initial placement of the heap on the tiers (needs --tiers; default: the "
        "experiment file's default)",
    )
    p.set_defaults(func=main)


#: Options of the quick form that also work with an experiment file: the field each sets.
ON_FILES = {"seed": "seed", "duration": "duration"}


def default_out(name: str) -> str:
    """The output directory when --out is not given: runs/NAME-TIMESTAMP (local time, to
    the second; NAME made safe for a directory name)."""
    import re
    import time

    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "run"
    return f"runs/{safe}-{time.strftime('%Y%m%d-%H%M%S')}"


#: Options of the quick form, and their defaults when it is used.
QUICK_DEFAULTS: dict[str, Any] = {
    "monitor": None,
    "rate": "10M/s",
    "duration": None,
    "page_size": "4KiB",
    "host_page_size": None,
    "engine": "exact",
    "paging_levels": None,
    "seed": 1,
    "name": None,
    "tiers": None,
    "policy": None,
    "placement": None,
}


def parse_tiers(text: str) -> list[Any]:
    """The `tiers` list of `--tiers`: `dram:256MiB,cxl` -> `[{"preset": "dram",
    "capacity": "256MiB"}, "cxl"]`. Values are checked by the experiment parser, whose
    errors name the field (tiering.tiers[i].preset, .capacity)."""
    tiers: list[Any] = []
    for item in text.split(","):
        preset, colon, capacity = item.strip().partition(":")
        if colon:
            tiers.append({"preset": preset.strip(), "capacity": capacity.strip()})
        else:
            tiers.append(preset.strip())
    return tiers


def quick_tiering(args: argparse.Namespace) -> dict[str, Any] | None:
    """The `[tiering]` table of the quick form, None without --tiers."""
    if args.tiers is None:
        for option, value in (("--policy", args.policy), ("--placement", args.placement)):
            if value is not None:
                raise config_error(
                    f"{QUICK_SOURCE}: {option}",
                    "needs --tiers (the memory tiers, e.g. --tiers dram:256MiB,cxl)",
                )
        return None
    # Without --policy the list is empty and the parser says a policy is needed.
    table: dict[str, Any] = {"tiers": parse_tiers(args.tiers), "policies": args.policy or []}
    if args.placement is not None:
        table["placement"] = args.placement
    return table


def quick_experiment(args: argparse.Namespace) -> dict[str, Any]:
    """The experiment dict of the quick form."""
    for key, default in QUICK_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    masim = Path(args.masim)
    machine: dict[str, Any] = {"engine": args.engine, "page_size": args.page_size}
    if args.paging_levels is not None:
        machine["paging_levels"] = args.paging_levels
    if args.host_page_size is not None:
        machine["host_page_size"] = args.host_page_size
    exp: dict[str, Any] = {
        "name": args.name or masim.stem,
        "seed": args.seed,
        "machine": machine,
        "workload": {"masim": str(masim.absolute()), "rate": args.rate},
        "monitors": [{"preset": p} for p in (args.monitor or default_presets())],
    }
    if args.duration is not None:
        exp["duration"] = args.duration
    tiering = quick_tiering(args)
    if tiering is not None:
        exp["tiering"] = tiering
    return exp


#: The option of the quick form that sets each field path of the experiment (or a table
#: holding it). The first match wins: longer paths come before their tables.
OPTION_OF_FIELD = {
    "name": "--name",
    "seed": "--seed",
    "duration": "--duration",
    "machine.engine": "--engine",
    "machine.page_size": "--page-size",
    "machine.paging_levels": "--paging-levels",
    "machine.host_page_size": "--host-page-size",
    "workload.masim": "--masim",
    "workload.rate": "--rate",
    "monitors": "--monitor",
    "tiering.tiers": "--tiers",
    "tiering.policies": "--policy",
    "tiering.placement": "--placement",
    # The rest of the table (the engine has no tiers, ...) exists because of --tiers.
    "tiering": "--tiers",
}


def option_of(field: str) -> str | None:
    """The option that set `field` or the table holding it (`monitors[2].preset` ->
    --monitor)."""
    for path, option in OPTION_OF_FIELD.items():
        if field == path or field.startswith((f"{path}.", f"{path}[")):
            return option
    return None


def quick_error(e: ConfigError) -> ConfigError:
    """An error about the quick form's experiment, in terms of the option at fault (by
    the error's field path). Errors in other files (the MASIM config) stay as they are."""
    if e.file != QUICK_SOURCE or (e.field or "").startswith("--set "):
        return e
    option = option_of(e.field)
    where = f"{QUICK_SOURCE}: {option}" if option else QUICK_SOURCE
    return config_error(where, e.message, field=e.field)


def format_table(result: RunResult) -> str:
    """The summary table printed after a run; with a `valid` column (yes / NO) when some
    monitor's kvm run is invalid (its scores are kept; the reason goes to stderr)."""
    flagged = any(not m.valid for m in result.monitors.values())
    head = ("monitor", "precision", "recall", "f1", "cpu %", "bits cleared", "entries read")
    rows = [(*head, "valid") if flagged else head]
    for name, m in result.monitors.items():
        s = m.summary
        row = (
            name,
            f"{s['precision']:.3f}",
            f"{s['recall']:.3f}",
            f"{s['f1']:.3f}",
            f"{s['cpu_percent']:.3f}",
            f"{s['bits_cleared']:,}",
            f"{s['entries_read']:,}",
        )
        rows.append((*row, "yes" if m.valid else "NO") if flagged else row)
    return align(rows)


def format_policy_table(result: RunResult) -> str:
    """The table of tiering policy runs printed after a run ("" without any): the
    columns of `tierscope compare`'s policy table but the kind."""
    from tierscope.cli.compare import POLICY_COLUMNS, format_cell, policy_rows

    columns = [c for c in POLICY_COLUMNS if c[0] != "kind"]
    policies = policy_rows(result.metrics)
    if not policies:
        return ""
    rows = [tuple(header for _, header, _ in columns)]
    rows += [tuple(format_cell(r.get(k), f) for k, _, f in columns) for r in policies]
    return align(rows)


def main(args: argparse.Namespace) -> int:
    from tierscope import run

    if args.experiment and args.masim:
        raise config_error(QUICK_SOURCE, "give an EXPERIMENT file or --masim, not both")
    overrides = parse_set(args.set)
    if args.experiment:
        given = [
            f"--{k.replace('_', '-')}"
            for k in QUICK_DEFAULTS
            if getattr(args, k) is not None and k not in ON_FILES
        ]
        if given:
            raise config_error(
                QUICK_SOURCE,
                f"{', '.join(given)}: only for the quick form (--masim); "
                "set these in the experiment file or with --set PATH=VALUE",
            )
        # --seed and --duration set the file's fields, before any --set.
        overrides = [
            (field, str(getattr(args, option)))
            for option, field in ON_FILES.items()
            if getattr(args, option) is not None
        ] + overrides
        source: str | dict[str, Any] = args.experiment
    elif args.masim:
        source = quick_experiment(args)
    else:
        raise config_error(QUICK_SOURCE, "give an EXPERIMENT file or --masim FILE")

    from tierscope.experiment import load_experiment

    if isinstance(source, dict):
        try:
            exp = load_experiment(source, source_name=QUICK_SOURCE, overrides=overrides)
        except ConfigError as e:
            raise quick_error(e) from None
    else:
        exp = load_experiment(source, overrides=overrides)
    out = args.out or default_out(exp.name)
    result = run(exp, out=out, progress=not args.quiet, threads=args.threads, force=args.force)
    for m in result.monitors.values():
        if m.program is not None and not args.quiet:
            # The program's own output went to stdout; how it ended goes beside it.
            print(f"{m.name}: {m.program}", file=sys.stderr)
    guards.report(result, quiet=args.quiet)
    if not args.quiet:
        print(format_table(result))
        policies = format_policy_table(result)
        if policies:
            print()
            print(policies)
        print(f"outputs in {out}", file=sys.stderr)
    return program_failed(result)


def program_failed(result: RunResult) -> int:
    """1 with one line on stderr when a real program exited with a non-zero status (its
    measurements were written all the same), else 0."""
    failed = [m for m in result.monitors.values() if m.program_status not in (None, 0)]
    if not failed:
        return 0
    m = failed[0]
    print(
        f"tierscope: the program failed: exit status {m.program_status} (monitor {m.name}"
        + (f" and {len(failed) - 1} more" if len(failed) > 1 else "")
        + ")",
        file=sys.stderr,
    )
    return 1
