"""Table 2 of the Telescope paper (kernel-thread cycles per monitor and microbenchmark) over
many seeds, and under other per-operation costs, without rerunning (issue 25;
docs/models/COST_MODEL.md, "Table 2's cycles over seeds").

The claims ledger reads Table 2 at seed 1 (`tierscope repro telescope`). A cell is one draw:
DAMON's regions split and merge at random, and Telescope's picks are random too, so a
Multi-4K DAMON cell runs over a factor of ten from seed to seed, and Telescope-BND's seed 1
(2.04 billion) lies in its upper tail (docs/models/FIDELITY.md). This script runs Table 2's
five experiments (experiments/paper/, the four monitors Table 2 names, Telescope reading
every sample as the files pin it) at each seed, keeps every monitor's operation counts, and
prints per cell the paper's value beside our p10 / median / p90 and how many seeds fall
within the ledger's tolerance (10 %).

A monitor's cycles are its counts times the cost model's per-operation cycles
(crates/tierscope-core/src/cost.rs), and no monitor's behaviour reads those costs, so
`--vary cost.KEY=V1,V2,...` recomputes every run's cycles at each value from the counts it
kept: one set of runs serves any cost. `--fit cost.KEY` solves, per cell, for the value at
which the median over seeds equals the paper's cell (the median of runs each linear in the
cost is monotone in it). A fitted value is a sensitivity finding, not a calibration: the
shipped constants stay.

    python scripts/table2_seed_spread.py --seeds 1-40 --out runs/table2-seeds
    python scripts/table2_seed_spread.py --seeds 1-40 --out runs/table2-seeds \\
        --vary cost.walk_step=120,157 --fit cost.walk_step

Runs are cached in `--out` (one JSON per experiment and seed), so a second call with other
`--vary` values runs nothing. `--jobs` runs at once (default 2).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import tierscope
from tierscope.studies import telescope_paper as paper
from tierscope.studies import trends

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_gap import seeds_of
from telescope_cost_sensitivity import MONITORS, table2_experiment

#: The ledger's tolerance for cycles (python/tierscope/studies/claims/telescope.toml).
TOLERANCE = 0.10
#: Counter name -> cost key of the generic counters (CostModel::cycles); Table 2's
#: monitors charge nothing else.
COUNTER_COST = {
    "entries_read": "entry_read",
    "walk_steps": "walk_step",
    "clear_ops": "clear",
    "flushes_page": "flush_page",
    "flushes_full": "flush_full",
    "region_visits": "region_visit",
    "random_draws": "random_draw",
    "regions_split": "region_split",
    "regions_merged": "region_merge",
}
#: Counters that are not operations (counts of effects, charged through others).
COUNTS_NOT_PRICED = {"bits_cleared", "bits_cleared_unsure", "pmu_throttled"}


def run_path(out: Path, name: str, seed: int, duration: str | None) -> Path:
    return out / f"{name}{'-' + duration if duration else ''}-s{seed}.json"


def one_run(name: str, seed: int, out: Path, duration: str | None = None) -> Path:
    """Runs `name` at `seed` (for `duration` instead of the file's, when given) with Table
    2's monitors; writes each monitor's counts, cycles and the run's cost constants to a
    JSON in `out` (kept: a later call reuses it)."""
    path = run_path(out, name, seed, duration)
    if path.exists():
        return path
    exp, _ = table2_experiment(name, [("seed", str(seed))], duration)
    metrics = tierscope.run(exp, progress=False).metrics
    record = {
        "experiment": name,
        "seed": seed,
        "cost": metrics["experiment"]["cost"],
        "monitors": {
            m: {"cycles": v["cycles"], "counts": v["cost"]} for m, v in metrics["monitors"].items()
        },
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record), "utf-8")
    tmp.replace(path)
    return path


def cycles(record: dict[str, Any], monitor: str, cost: dict[str, float]) -> float:
    """A monitor's cycles at the per-operation costs `cost` (the run's own, overridden)."""
    counts = record["monitors"][monitor]["counts"]
    extra = {k for k, n in counts.items() if n} - set(COUNTER_COST) - COUNTS_NOT_PRICED
    if extra:
        raise ValueError(f"{monitor} charges {sorted(extra)}, which this script does not price")
    return sum(counts[c] * cost[k] for c, k in COUNTER_COST.items())


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """p10, median and p90 (the inclusive method: defined from two values up)."""
    if len(values) < 2:
        v = values[0]
        return v, v, v
    q = statistics.quantiles(values, n=10, method="inclusive")
    return q[0], statistics.median(values), q[8]


def cell_values(
    records: Iterable[dict[str, Any]], monitor: str, cost_set: dict[str, float]
) -> list[float]:
    """Each run's billions of cycles for `monitor` at its costs overridden by `cost_set`."""
    return [cycles(r, monitor, {**r["cost"], **cost_set}) / 1e9 for r in records]


def fit(records: list[dict[str, Any]], monitor: str, key: str, target: float) -> float | None:
    """The value of cost `key` at which the median over `records` equals `target`
    (bisection over 0 to 100x the shipped value; None when out of that range)."""
    shipped = records[0]["cost"][key]
    lo, hi = 0.0, 100.0 * max(shipped, 1.0)

    def med(v: float) -> float:
        return statistics.median(cell_values(records, monitor, {key: v}))

    if not med(lo) <= target <= med(hi):
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if med(mid) < target else (lo, mid)
    return (lo + hi) / 2


def report(
    runs: dict[str, list[dict[str, Any]]],
    settings: list[tuple[str, dict[str, float]]],
    fit_key: str | None,
) -> list[str]:
    lines = []
    for label, cost_set in settings:
        lines.append(f"## {label}")
        lines.append(
            "experiment | monitor | paper G | ours p10 / median / p90 | seed 1 | "
            f"seeds within {TOLERANCE:.0%} | paper in p10-p90"
        )
        for name, records in runs.items():
            for m in MONITORS:
                vals = cell_values(records, m, cost_set)
                p = paper.TABLE2_GCYCLES[(name, m)]
                p10, med, p90 = spread(vals)
                within = sum(abs(v - p) <= TOLERANCE * p for v in vals)
                s1 = next((v for r, v in zip(records, vals, strict=True) if r["seed"] == 1), None)
                s1_text = "-" if s1 is None else f"{s1:.3g}"
                lines.append(
                    f"{name} | {m} | {p} | {p10:.3g} / {med:.3g} / {p90:.3g} | {s1_text} | "
                    f"{within} of {len(vals)} | {'yes' if p10 <= p <= p90 else 'no'}"
                )
        lines.append("")
    if fit_key:
        lines.append(
            f"## {fit_key} at which the median equals the paper's cell (shipped: "
            f"{next(iter(runs.values()))[0]['cost'][fit_key]:g})"
        )
        for name, records in runs.items():
            row = []
            for m in MONITORS:
                v = fit(records, m, fit_key, paper.TABLE2_GCYCLES[(name, m)])
                row.append(f"{m} {'-' if v is None else f'{v:.0f}'}")
            lines.append(f"{name}: " + ", ".join(row))
    return lines


class BadArgument(ValueError):
    """A command-line value this script cannot use (one line, exit 2)."""


def cost_key(path: str, option: str) -> str:
    key = path.removeprefix("cost.")
    if not path.startswith("cost.") or key not in COUNTER_COST.values():
        known = ", ".join(sorted(COUNTER_COST.values()))
        raise BadArgument(f"{option} {path!r}: expected cost.KEY, KEY one of {known}")
    return key


def parse_vary(texts: Sequence[str]) -> list[tuple[str, dict[str, float]]]:
    """The shipped costs, then one setting per `cost.KEY=V1,V2,...` value."""
    settings: list[tuple[str, dict[str, float]]] = [("shipped costs", {})]
    for text in texts:
        path, sep, values = text.partition("=")
        if not sep:
            raise BadArgument(f"--vary {text!r}: expected cost.KEY=V1,V2,...")
        key = cost_key(path, "--vary")
        for v in values.split(","):
            try:
                cycles_per_op = float(v)
            except ValueError:
                raise BadArgument(f"--vary {text!r}: {v!r} is not a number of cycles") from None
            settings.append((f"{key} = {v}", {key: cycles_per_op}))
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--seeds", default="1-20", help="e.g. 1-40 or 1-4,9 (default 1-20)")
    ap.add_argument(
        "--experiments",
        default=",".join(trends.TABLE2),
        help="experiments/paper/ names (default: Table 2's five)",
    )
    ap.add_argument("--out", required=True, type=Path, help="directory for the runs' counts")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument(
        "--duration",
        help="every run this long instead of its file's (cycles not scaled: a quick look)",
    )
    ap.add_argument("--vary", action="append", default=[], metavar="cost.KEY=V1,V2,...")
    ap.add_argument("--fit", metavar="cost.KEY")
    args = ap.parse_args(argv)
    try:
        settings = parse_vary(args.vary)
        fit_key = cost_key(args.fit, "--fit") if args.fit else None
        seeds = seeds_of(args.seeds)
    except (BadArgument, ValueError) as e:
        print(f"table2_seed_spread: {e}", file=sys.stderr)
        return 2
    names = [n for n in args.experiments.split(",") if n]
    unknown = [n for n in names if (n, MONITORS[0]) not in paper.TABLE2_GCYCLES]
    if unknown:
        print(
            f"table2_seed_spread: --experiments: {', '.join(unknown)} not in Table 2 "
            f"({', '.join(trends.TABLE2)})",
            file=sys.stderr,
        )
        return 2
    if args.jobs < 1 or not seeds:
        print("table2_seed_spread: --jobs and --seeds need at least 1", file=sys.stderr)
        return 2
    try:  # a bad --duration, before any run: the experiment's own one-line error
        table2_experiment(names[0], [("seed", str(seeds[0]))], args.duration)
    except tierscope.ConfigError as e:
        print(f"table2_seed_spread: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(n, s) for s in seeds for n in names]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(one_run, n, s, args.out, args.duration) for n, s in jobs]
        for i, f in enumerate(futures, 1):
            f.result()
            print(f"\r{i}/{len(jobs)} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for n, s in jobs:
        record = json.loads(run_path(args.out, n, s, args.duration).read_text("utf-8"))
        check_prices(record)
        runs[n].append(record)
    print("\n".join(report(runs, settings, fit_key)))
    return 0


def check_prices(record: dict[str, Any]) -> None:
    """Every monitor's counts, priced at the run's own costs, give the cycles it reported:
    else the cost model gained a term this script does not know."""
    for m in MONITORS:
        got = cycles(record, m, record["cost"])
        said = record["monitors"][m]["cycles"]
        if abs(got - said) > 1e-9 * max(got, 1.0):
            raise RuntimeError(
                f"{record['experiment']} seed {record['seed']} {m}: counts price to {got}, "
                f"the run said {said}: the cost model changed"
            )


if __name__ == "__main__":
    sys.exit(main())
