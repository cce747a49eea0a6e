"""Sensitivity runs for the gaps between Table 2 of the Telescope paper (kernel-thread cycles
per monitor and microbenchmark), its section 6.2.4 (CPU %, ACCESSED bits flipped) and ours
(issue 25; docs/models/COST_MODEL.md, "Table 2's cycles: the gaps").

Runs the experiments `tierscope repro telescope` runs for Table 2 (experiments/paper/, the
four monitors Table 2 names: DAMON-MOD/AGG, Telescope-BND/FLX) once as shipped ("before")
and once per setting of one named assumption ("after"), and prints, per experiment and
monitor, the paper's cycles beside ours before and after (with the regions each sample
visits, the bits flipped and the CPU %), then the claims ledger's rows for these
experiments (T3, T6, T69, T86-T110 of python/tierscope/studies/claims/telescope.toml), each
with the ledger's own key, check and status rule, before and after:

    python scripts/telescope_cost_sensitivity.py --set cost.walk_step=240
    python scripts/telescope_cost_sensitivity.py --experiments subtb-1g,subtb-10g,subtb-100g \\
        --duration 20s --vary workload.rate=2.5M/s,5M/s,20M/s
    python scripts/telescope_cost_sensitivity.py --set 'monitors[telescope-bnd].flush=none' \\
        --set 'monitors[telescope-flx].flush=none'
    python scripts/telescope_cost_sensitivity.py --experiments all --threads-of 176

`--set PATH=VALUE` is `tierscope run --set` (the `[cost]` table is `cost.KEY`, a monitor
`monitors[PRESET]`); `--vary PATH=V1,V2,...` runs once per value on top of every `--set`.
`--duration` runs every experiment that long and scales its cycles and bits flipped to the
file's duration (`--set duration=...` runs longer or shorter without scaling): valid where
the per-second cost is stationary (the SubTB benchmarks, one phase each; at 20 s DAMON's
regions on 10 and 100 GB are still growing, so its scaled cycles there read ~10 % low; not
the multi-phase ones, whose phases differ).
`--threads-of N` adds the CPU % as a share of N hardware threads (the paper's machine has
176) beside the share of one core that tierscope reports. `--json FILE` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import tomllib
from collections.abc import Sequence
from typing import Any

import tierscope
from tierscope.data import experiments_dir
from tierscope.experiment import parse_set
from tierscope.studies import telescope, trends
from tierscope.studies import telescope_paper as paper
from tierscope.studies.claims import ledger

#: Table 2's experiments, and the ten microbenchmarks section 6.2.4's CPU % averages over.
TABLE2 = trends.TABLE2
ALL = (*TABLE2, "needle-5t", "needle-5t-thp", "subtb-1g-thp", "subtb-10g-thp", "subtb-100g-thp")
#: Table 2's monitors (PEBS has no kernel thread: the paper leaves it out of Table 2).
MONITORS = ("damon-mod", "damon-agg", "telescope-bnd", "telescope-flx")
#: The ledger rows these runs speak to.
CLAIM_IDS = ("T3", "T6", "T69", *(f"T{i}" for i in range(86, 111)))
#: Claims measured on the petabyte run, not on `repro telescope`'s.
PETABYTE = "petabyte-1p"
#: The samples per second of each monitor (DAMON-AGG samples every 1 ms, the others 5 ms).
SAMPLES_PER_S = {"damon-agg": 1000.0}
DEFAULT_SAMPLES_PER_S = 200.0


def _seconds(text: str) -> float:
    units = {"ms": 1e-3, "s": 1.0, "min": 60.0}
    for unit in ("ms", "min", "s"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


def table2_experiment(
    name: str, overrides: Sequence[tuple[str, str]], duration: str | None
) -> tuple[tierscope.Experiment, float]:
    """The shipped experiment file with only Table 2's monitors, `overrides` set (and
    `duration` when given); and the file's own duration in seconds. Also
    scripts/table2_seed_spread.py's runs."""
    doc = tomllib.loads((experiments_dir() / "paper" / f"{name}.toml").read_text("utf-8"))
    doc["monitors"] = [m for m in doc["monitors"] if m.get("preset") in MONITORS]
    full = _seconds(doc["duration"])
    sets = list(overrides) + ([("duration", duration)] if duration else [])
    return tierscope.load_experiment(doc, source_name=f"{name}.toml", overrides=sets), full


def measure(
    names: Sequence[str], overrides: Sequence[tuple[str, str]], duration: str | None
) -> dict[str, Any]:
    """Runs `names` with `overrides`; returns the repro's document (quality, cost, derived),
    with each cost row's regions per sample, and the petabyte run's metrics when run."""
    quality: list[dict[str, Any]] = []
    cost: list[dict[str, Any]] = []
    petabyte: dict[str, Any] | None = None
    for name in names:
        exp, full = table2_experiment(name, overrides, duration)
        ran = exp.duration_ns / 1e9
        scale = full / ran if duration else 1.0
        t0 = time.monotonic()
        metrics = tierscope.run(exp, progress=False).metrics
        print(f"  {name}: {time.monotonic() - t0:.0f} s wall", file=sys.stderr, flush=True)
        if name == PETABYTE:
            petabyte = metrics
        q, c = telescope.rows_for(name, metrics)
        for row in c:
            counts = metrics["monitors"][row["monitor"]]["cost"]
            per_s = SAMPLES_PER_S.get(row["monitor"], DEFAULT_SAMPLES_PER_S)
            row["regions_per_sample"] = counts["clear_ops"] / (per_s * ran)
            row["gcycles"] *= scale
            row["bits_flipped"] = round(row["bits_flipped"] * scale)
        quality += q
        cost += c
    doc: dict[str, Any] = {
        "quality": quality,
        "cost": cost,
        "derived": trends.applied(trends.telescope, quality, cost),
    }
    if petabyte is not None:
        doc["petabyte"] = petabyte
    return doc


def with_threads(doc: dict[str, Any], threads: int) -> dict[str, Any]:
    """The document with every CPU % a share of `threads` hardware threads."""
    cost = [{**r, "cpu_percent": r["cpu_percent"] / threads} for r in doc["cost"]]
    out = {**doc, "cost": cost, "derived": trends.applied(trends.telescope, doc["quality"], cost)}
    if "petabyte" in doc:
        mons = {
            m: {**v, "cpu_percent": v["cpu_percent"] / threads}
            for m, v in doc["petabyte"]["monitors"].items()
        }
        out["petabyte"] = {**doc["petabyte"], "monitors": mons}
    return out


def claim_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger's rows of `CLAIM_IDS` that `doc`'s experiments can give: ours by the
    claim's own key, the status by the ledger's rule."""
    out = []
    for c in ledger.load_claims(["telescope"]):
        if c.id not in CLAIM_IDS or c.key is None:
            continue
        source = doc.get("petabyte") if c.measure == f"run-{PETABYTE}" else doc
        if source is None:
            continue
        try:
            v = ledger.resolve(source, c.key)
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        ours = None if v is None else float(v)
        if ours is None or math.isnan(ours):
            continue
        out.append({"id": c.id, "paper": c.value, "ours": ours, "status": ledger.status(c, ours)})
    return out


#: Section 6.2.4's average CPU % of one core per monitor.
PAPER_CPU_PERCENT = {
    "telescope-bnd": 0.009,
    "telescope-flx": 0.009,
    "damon-mod": 0.033,
    "damon-agg": 0.09,
}
#: The multi-phase benchmark's length (three phases, changing at about 80 and 160 s) and
#: the clock of the paper's Xeon Gold 6238M (base).
MULTI_S = 240.0
PAPER_HZ = 2.1e9


def paper_implied_cpu() -> str:
    """The paper's own Table 2 Multi-4K cells as a share of one core over the benchmark's
    240 s, beside the paper's section 6.2.4 averages: how far its two numbers are apart."""
    lines = ["the paper's Table 2 Multi-4K as % of one core (240 s at 2.1 GHz) vs its 6.2.4:"]
    for m, avg in PAPER_CPU_PERCENT.items():
        share = 100 * paper.TABLE2_GCYCLES[("multiphase-5t", m)] * 1e9 / (PAPER_HZ * MULTI_S)
        lines.append(f"  {m:>14}: {share:.3f} % vs {avg} % ({share / avg:.0f}x)")
    return "\n".join(lines)


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def cost_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    rows = [
        (
            "experiment",
            "monitor",
            "paper G",
            "G before",
            "G after",
            "regions/sample",
            "bits flipped",
            "cpu %",
        )
    ]
    after_by = {(r["experiment"], r["monitor"]): r for r in after["cost"]}
    for b in before["cost"]:
        a = after_by[(b["experiment"], b["monitor"])]
        rows.append(
            (
                b["experiment"],
                b["monitor"],
                _g(b["paper_gcycles"]),
                f"{b['gcycles']:.3f}",
                f"{a['gcycles']:.3f}",
                f"{b['regions_per_sample']:.0f} -> {a['regions_per_sample']:.0f}",
                f"{b['bits_flipped']:,} -> {a['bits_flipped']:,}",
                f"{b['cpu_percent']:.3f} -> {a['cpu_percent']:.3f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def claims_table(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    after_by = {r["id"]: r for r in after}
    lines = []
    for b in before:
        a = after_by.get(b["id"])
        if a is None:
            continue
        lines.append(
            f"  {b['id']:>5}  paper {b['paper'][:40]:<40}  ours {_g(b['ours']):>8} -> "
            f"{_g(a['ours']):>8}  {b['status']} -> {a['status']}"
        )
    return "\n".join(lines)


def _settings(sets: list[str], vary: str | None) -> list[list[tuple[str, str]]]:
    base = parse_set(sets)
    if vary is None:
        return [base]
    path, _, values = vary.partition("=")
    return [[*base, (path.strip(), v.strip())] for v in values.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except tierscope.ConfigError as e:
        # A bad --set path or value, or experiment: one line, as tierscope's own commands.
        print(f"telescope_cost_sensitivity.py: error: {e}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None) -> int:
    ap = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
    )
    ap.add_argument(
        "--experiments",
        default=",".join(TABLE2),
        help="comma-separated experiments/paper/ names, or `all` (the ten microbenchmarks); "
        f"`{PETABYTE}` adds T6's run (default: Table 2's five)",
    )
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    ap.add_argument("--vary", metavar="PATH=V1,V2,...", help="one 'after' run per value")
    ap.add_argument("--duration", help="simulated time of every run (cycles scaled to the file's)")
    ap.add_argument("--threads-of", type=int, metavar="N", help="CPU %% as a share of N threads")
    ap.add_argument("--json", metavar="FILE", help="also write every row as JSON")
    args = ap.parse_args(argv)
    names = [n for word in args.experiments.split(",") for n in (ALL if word == "all" else [word])]
    settings = _settings(args.set, args.vary)
    if args.threads_of is not None and any(settings):
        ap.error("--threads-of is an assumption of its own: give it without --set or --vary")
    if not any(settings) and args.threads_of is None:
        ap.error("nothing to change: give --set, --vary or --threads-of")
    print("before (as shipped):", file=sys.stderr, flush=True)
    before = measure(names, [], args.duration)
    out: list[dict[str, Any]] = []
    for overrides in settings:
        label = ", ".join(f"{p}={v}" for p, v in overrides) or "as shipped"
        if overrides:
            print(f"after ({label}):", file=sys.stderr, flush=True)
            after = measure(names, overrides, args.duration)
        else:
            after = before
        if args.threads_of:
            label += f"; CPU % of {args.threads_of} threads"
            after = with_threads(after, args.threads_of)
            print(paper_implied_cpu())
        b_claims, a_claims = claim_rows(before), claim_rows(after)
        print(f"\n== {label}" + (f" ({args.duration} runs, scaled)" if args.duration else ""))
        print(cost_table(before, after))
        print(
            "ledger rows (before -> after; a derived row's mean, least or ratio is over the "
            f"experiments run: {', '.join(names)}):"
        )
        print(claims_table(b_claims, a_claims), flush=True)
        out.append(
            {
                "setting": label,
                "duration": args.duration,
                "before": before["cost"],
                "after": after["cost"],
                "claims_before": b_claims,
                "claims_after": a_claims,
            }
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
