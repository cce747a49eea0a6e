"""`tierscope validate`: run one experiment on the real machine (kvm) and on the exact
simulator, and print precision, recall and cost side by side."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tierscope import guards, outdir
from tierscope.experiment import config_error
from tierscope.output import write_run_dir
from tierscope.results import RunResult, _finite_or_none
from tierscope.texttable import align

EPILOG = """\
example:
  tierscope validate experiments/kvm-16g.toml --out runs/kvm-16g-validate

outputs in DIR: validate.json (the table's numbers), and the full outputs of both runs
in DIR/kvm and DIR/exact (metrics.json, windows CSVs, heatmaps, damo records), written
all at once when both runs are done, with tierscope-manifest.json naming every file.
An existing DIR is never emptied: one without tierscope-manifest.json is refused whatever
the flags; an earlier output is refused unless --force is given, and then only the files
its manifest names are replaced. DIR is locked while the runs last.
The experiment's own `engine` is ignored: it is a sweep over engine = kvm, exact, which
drops [machine.kvm] and the monitors needing hardware the engine lacks (pml off kvm)
from each run.
"""

ENGINES = ("kvm", "exact")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate",
        help="run an experiment on kvm (real bits) and on the exact simulator, side by side",
        description=(
            "Run the same experiment on the kvm engine (the workload in a KVM micro-VM,\n"
            "real ACCESSED/DIRTY bits, real time) and on the exact simulator, and print\n"
            "precision, recall and cost of every monitor side by side."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("experiment", metavar="EXPERIMENT", help="experiment file (TOML or JSON)")
    p.add_argument("-o", "--out", metavar="DIR", help="output directory (required)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier output in DIR (only the files tierscope wrote there)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars and no table")
    p.set_defaults(func=main)


def row(result: RunResult, name: str) -> dict[str, Any] | None:
    m = result.monitors.get(name)
    if m is None:
        return None
    s = m.summary
    duration_s = result.duration_ns / 1e9
    values = {
        "precision": s["precision"],
        "recall": s["recall"],
        "f1": s["f1"],
        "cpu_percent_model": s["cpu_percent"],
        # Measured on kvm only (0 from a simulated engine).
        "monitor_cpu_percent_real": (
            100.0 * m.monitor_cpu_ns / result.duration_ns if m.monitor_cpu_ns else None
        ),
        "bits_cleared": s["bits_cleared"],
        "entries_read": s["entries_read"],
        "flushes": s["flushes"],
        "windows_evaluated": s["windows_evaluated"],
        "accesses_per_s": m.machine.get("accesses", 0) / duration_s,
        # The kvm engine's guards (docs/models/KVM.md); always true on exact.
        "valid": m.valid,
        "invalid_reason": m.invalid_reason,
    }
    # validate.json is strict JSON: NaN (no window evaluated) becomes null.
    return {k: _finite_or_none(v) for k, v in values.items()}


def fmt(v: Any, spec: str) -> str:
    if v is None:
        return "-"
    return format(v, spec)


def format_table(rows: dict[str, dict[str, dict[str, Any] | None]]) -> str:
    """monitor | precision kvm / exact | recall kvm / exact | modelled cpu % | real cpu %
    (kvm) | bits cleared | kvm accesses/s."""
    head = (
        "monitor",
        "precision kvm",
        "exact",
        "recall kvm",
        "exact",
        "model cpu% kvm",
        "exact",
        "real cpu% kvm",
        "bits cleared kvm",
        "exact",
        "kvm accesses/s",
    )
    lines = [head]
    for name, r in rows.items():
        k, e = r["kvm"] or {}, r["exact"] or {}
        lines.append(
            (
                name,
                fmt(k.get("precision"), ".3f"),
                fmt(e.get("precision"), ".3f"),
                fmt(k.get("recall"), ".3f"),
                fmt(e.get("recall"), ".3f"),
                fmt(k.get("cpu_percent_model"), ".3f"),
                fmt(e.get("cpu_percent_model"), ".3f"),
                fmt(k.get("monitor_cpu_percent_real"), ".3f"),
                fmt(k.get("bits_cleared"), ","),
                fmt(e.get("bits_cleared"), ","),
                fmt(k.get("accesses_per_s"), ".3g"),
            )
        )
    return align(lines)


def engine_sweep(path: Path) -> dict[str, Any]:
    """The sweep behind validate: the experiment on each engine, pruned to what it can run."""
    return {
        "base": str(path.resolve()),
        "prune": True,
        "axes": [{"path": "machine.engine", "values": list(ENGINES)}],
    }


def main(args: argparse.Namespace) -> int:
    from tierscope import Unavailable, _core, expand_sweep, load_experiment, run

    if not args.out:
        # One line, not argparse's usage.
        raise config_error("command line", "give --out DIR", field="--out")
    path = Path(args.experiment)
    out = Path(args.out)
    # The file as written must be valid (errors name its own lines).
    load_experiment(path)
    reason = _core.kvm_unavailable()
    if reason is not None:
        raise Unavailable(f"the kvm engine cannot run here: {reason}")
    runs = expand_sweep(engine_sweep(path), source_name=f"{path} (validate)")
    results: dict[str, RunResult] = {}
    # Claimed (locked, checked) before the runs; written all at once after them.
    with outdir.claim(out, "validate", force=args.force) as claim:
        for r in runs:
            engine = r.params["engine"]
            results[engine] = run(
                r.experiment, progress=not args.quiet, threads=1 if engine == "kvm" else 0
            )
        names = list(results["kvm"].monitors)
        rows = {n: {e: row(results[e], n) for e in ENGINES} for n in names}
        doc = {
            "experiment": str(path),
            "duration_ns": results["kvm"].duration_ns,
            "block_size": results["kvm"].block_size,
            "monitors": rows,
        }
        with claim.stage() as staging:
            for engine, result in results.items():
                write_run_dir(result, staging / engine)
            text = json.dumps(doc, indent=2) + "\n"
            (staging / "validate.json").write_text(text, encoding="utf-8")
    guards.report(results["kvm"], quiet=args.quiet)
    if not args.quiet:
        print(format_table(rows))
        print(f"outputs in {out}", file=sys.stderr)
    return 0
