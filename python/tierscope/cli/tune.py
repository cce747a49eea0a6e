"""`tierscope tune`: choose how often something periodic acts by Cori's method (Doudali
et al., IPDPS 2021; docs/techniques/CORI.md): find the workload's dominant reuse, try its multiples
shortest first, stop when the cost settles (by default: a trial within 3 % of the best
before it, or two trials in a row without a new best), keep the best.

On a trace (--trace FILE in cori-sim's format, or --workload NAME, a generated one like
the paper's Figure 2), the tuned value is the period of cori-sim's page scheduler in
requests and the cost its runtime model. On an experiment file, the tuned value is any
duration of the experiment (--param, a config path as sweeps write them: e.g.
`tiering.policies[NAME].period` for a periodic policy's period,
`monitors[damon-mod].aggr` for an aggregation interval), the candidates come from the
workload's loops (its phases) and
the cost of a value is one run: a policy run's application time (--run, default the
first), or a monitor's summary value (--monitor and --metric, with --maximize for a
score such as f1). --values replaces the candidates (e.g. to tune a migration quota in
bytes: --param tiering.migration.max_per_round --values 1MB,16MB,256MB --unit raw).

Prints the trial table and the chosen value; with --exhaustive STEP also the cost at
every multiple of STEP up to half the run. With --out DIR, writes DIR/trials.csv,
DIR/curve.csv, DIR/tune.json and DIR/tune.png (the reuse bars above the cost against
the period, the paper's Figure 3), all at once at the end, with tierscope-manifest.json
naming them. An existing DIR is never emptied: one without the manifest is refused
whatever the flags; an earlier output is refused unless --force is given, and then only
the files its manifest names are replaced. DIR is locked while the tuning lasts.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from tierscope import cori, outdir
from tierscope.experiment import ConfigError
from tierscope.texttable import align


def _count(minimum: int) -> Any:
    """An argparse type: an integer of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"`{text}` is not an integer") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {v}")
        return v

    return parse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tune",
        help="choose a period (or any duration) by Cori's method",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("experiment", nargs="?", help="experiment file whose --param is tuned")
    src.add_argument("--trace", metavar="FILE", help="a trace in cori-sim's format")
    src.add_argument(
        "--workload",
        metavar="NAME",
        help="a generated trace: strided, triangular, random, irregular, iterative",
    )
    p.add_argument("--seed", type=_count(0), default=1, help="generated trace's seed (default 1)")
    p.add_argument(
        "--scale", type=_count(1), default=1, help="generated trace's size, x 300 K requests"
    )
    p.add_argument(
        "--scheduler", choices=["history", "oracle"], default="history", help="trace model"
    )
    p.add_argument("--quantum", type=_count(0), default=20, help="count quantum (cori-sim: 20)")
    p.add_argument("--fast-ratio", type=float, default=0.2, help="fast tier share (0.2)")
    p.add_argument("--bucket", type=_count(1), default=1000, help="reuse bucket, requests (1000)")
    p.add_argument("--param", metavar="PATH", help="experiment: the config path to tune")
    p.add_argument(
        "--values",
        metavar="V,V,...",
        help="experiment: values to try in this order instead of Cori's candidates",
    )
    p.add_argument(
        "--unit",
        choices=["ns", "raw"],
        default="ns",
        help="experiment: values are durations in ns (default) or written as given",
    )
    p.add_argument("--run", metavar="NAME", help="experiment: the policy run whose time counts")
    p.add_argument("--monitor", metavar="NAME", help="experiment: score a monitor instead")
    p.add_argument("--metric", metavar="KEY", help="the monitor summary key (e.g. f1)")
    p.add_argument("--maximize", action="store_true", help="the metric is better when larger")
    p.add_argument(
        "--stop",
        action="append",
        metavar="RULE",
        help="stopping rule, repeatable: within:PCT, no-gain:K, trials:N "
        "(default within:3 and no-gain:2)",
    )
    p.add_argument(
        "--exhaustive",
        type=_count(1),
        metavar="STEP",
        help="also the cost at every multiple of STEP",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help="experiment: set a field first, repeatable (seed=3, monitors[0].aggr=100ms); "
        "not --param itself",
    )
    p.add_argument(
        "-o", "--out", metavar="DIR", help="write trials.csv, curve.csv, tune.json, tune.png"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier output in DIR (only the files tierscope wrote there)",
    )
    p.set_defaults(func=main)


def _source() -> str:
    return "command line"


def _experiment_cost(args: argparse.Namespace) -> Any:
    """cost(value) for an experiment: one run with --param set to the value."""
    import tierscope

    path = Path(args.experiment).resolve()

    def cost(value: Any) -> float:
        setting = f"{value}ns" if args.unit == "ns" else value
        (r,) = tierscope.expand_sweep(
            {"base": str(path), "set": {args.param: setting}}, overrides=args.overrides
        )
        result = tierscope.run(r.experiment, progress=False)
        if args.monitor:
            m = result.monitors.get(args.monitor)
            if m is None:
                raise ConfigError(f"{_source()}: --monitor: no monitor `{args.monitor}`")
            if args.metric not in m.summary:
                keys = ", ".join(sorted(m.summary))
                raise ConfigError(f"{_source()}: --metric: `{args.metric}` is not one of {keys}")
            v = float(m.summary[args.metric])
        else:
            policies = result.policies or {}
            if not policies:
                raise ConfigError(
                    f"{path}: the experiment has no [tiering] policy runs: "
                    "give --monitor and --metric"
                )
            name = args.run or next(iter(policies))
            if name not in policies:
                raise ConfigError(
                    f"{_source()}: --run: no policy run `{name}` (runs: {', '.join(policies)})"
                )
            v = float(policies[name].summary["app_ns"])
        print(f"  {args.param} = {setting}: {v:.6g}", file=sys.stderr)
        return -v if args.maximize else v

    return cost


def _check(args: argparse.Namespace) -> None:
    from tierscope.experiment import parse_set

    args.overrides = parse_set(args.set)
    if args.overrides and not args.experiment:
        raise ConfigError(f"{_source()}: --set: only with an experiment file")
    if any(p == args.param for p, _ in args.overrides):
        raise ConfigError(f"{_source()}: --set: `{args.param}` is the --param being tuned")
    if args.experiment:
        if not args.param:
            raise ConfigError(f"{_source()}: --param: tuning an experiment needs the path to tune")
        if args.monitor and not args.metric:
            raise ConfigError(f"{_source()}: --metric: --monitor needs the summary key to score")
    elif args.param or args.values or args.monitor:
        raise ConfigError(f"{_source()}: --param, --values and --monitor are for experiments")


def main(args: argparse.Namespace) -> int:
    _check(args)
    if not args.out:
        return tune(args, None)
    # Claimed (locked, checked) before the trials run; written all at once after them.
    with outdir.claim(args.out, "tune", force=args.force) as claim:
        return tune(args, claim)


def tune(args: argparse.Namespace, claim: outdir.Claim | None) -> int:
    from tierscope import _core

    try:
        stops = [cori.parse_stop(s) for s in args.stop] if args.stop else list(cori.CORI_STOPS)
    except ValueError as e:
        raise ConfigError(f"{_source()}: --stop: {e}") from None
    if args.experiment:
        values = None
        if args.values:
            values = [v.strip() for v in args.values.split(",") if v.strip()]
            if args.unit == "ns":
                try:
                    values = [int(v) for v in values]
                except ValueError:
                    raise ConfigError(
                        f"{_source()}: --values: with --unit ns, give integers (ns)"
                    ) from None
        tuning = cori.tune_experiment(
            Path(args.experiment),
            args.param,
            _experiment_cost(args),
            values=values,
            stops=stops,
            grid_timestep=args.exhaustive,
            unit=args.unit,
            overrides=args.overrides,
        )
        if args.monitor:
            tuning.cost_unit = args.metric
        if args.maximize:
            tuning.maximize = True
            tuning.trials = [(p, -c) for p, c in tuning.trials]
            tuning.curve = [(p, -c) for p, c in tuning.curve]
            if tuning.chosen:
                tuning.chosen = (tuning.chosen[0], -tuning.chosen[1])
    else:
        # The binding answers a bad workload name, bucket or scale with ValueError.
        try:
            trace = (
                _core.CoriTrace.from_file(args.trace)
                if args.trace
                else _core.CoriTrace.generate(args.workload, args.seed, args.scale)
            )
            tuning = cori.tune_trace(
                trace,
                scheduler=args.scheduler,
                count_quantum=args.quantum,
                fast_ratio=args.fast_ratio,
                bucket=args.bucket,
                stops=stops,
                grid_timestep=args.exhaustive,
            )
        except (ValueError, OverflowError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(f"{_source()}: {e}") from None
    print(render(tuning))
    if claim is not None:
        with claim.stage() as staging:
            write(tuning, staging)
        print(f"wrote {args.out}/trials.csv, curve.csv, tune.json, tune.png")
    return 0


def render(t: cori.Tuning) -> str:
    lines = [
        f"tuning {t.what} ({t.unit})",
        f"dominant reuse: {t.dominant_reuse if t.dominant_reuse is not None else '-'}"
        f" ({len(t.bars)} bars); candidates: {len(t.candidates)}",
    ]
    rows = [["trial", "value", f"cost ({cost_unit(t)})"]]
    for i, (p, c) in enumerate(t.trials, 1):
        rows.append([str(i), str(p), f"{c:.6g}"])
    lines.append(align(rows))
    if t.chosen:
        lines.append(
            f"chosen: {t.chosen[0]} (cost {cost_text(t, t.chosen[1])}) after {len(t.trials)} trials"
        )
    else:
        lines.append("chosen: none (no candidate)")
    if t.curve:
        pick = max if t.maximize else min
        best = pick(t.curve, key=lambda x: x[1])
        lines.append(
            f"exhaustive: {len(t.curve)} values, best {best[0]} (cost {cost_text(t, best[1])})"
        )
    return "\n".join(lines)


def cost_unit(t: cori.Tuning) -> str:
    """What the cost column counts: ns of (modelled) run time, or the monitor's metric."""
    return "ns of run time" if t.cost_unit == "ns" else t.cost_unit


def cost_text(t: cori.Tuning, c: float) -> str:
    """A cost with its unit, and the slowdown over all-fast when there is a reference."""
    if t.cost_unit != "ns":
        return f"{t.cost_unit} {c:.6g}"
    text = f"{c:.6g} ns"
    if t.reference:
        text += f", {100.0 * (c / t.reference - 1.0):.2f} % slower than all-fast"
    return text


def write(t: cori.Tuning, out: Path) -> None:
    """Writes the tuning's files into the directory `out` (a staging directory)."""
    with open(out / "trials.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trial", "value", "cost"])
        for i, (p, c) in enumerate(t.trials, 1):
            w.writerow([i, p, c])
    with open(out / "curve.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["value", "cost"])
        w.writerows(t.curve)
    (out / "tune.json").write_text(json.dumps(t.as_json(), indent=1) + "\n")
    plot(t, out / "tune.png")


def plot(t: cori.Tuning, path: Path) -> None:
    """The reuse bars above the cost against the value (the paper's Figure 3), written in
    each figure format (`tierscope.plot.save`)."""
    from matplotlib.figure import Figure

    from tierscope.plot import save

    fig = Figure(figsize=(7, 5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    if t.bars:
        xs, hs = zip(*t.bars, strict=True)
        span = (max(xs) - min(xs)) or max(xs)
        top.bar(xs, hs, width=max(1.0, span / 60), color="tab:gray")
    if t.dominant_reuse is not None:
        top.axvline(t.dominant_reuse, color="tab:red", ls="--", label="dominant reuse")
        top.legend(loc="upper right")
    top.set_ylabel("reuse bars")
    ref = t.reference
    scale = (lambda c: 100.0 * (c / ref - 1.0)) if ref else (lambda c: c)
    label = "slowdown over all-fast (%)" if ref else "cost"
    if t.curve:
        top_x, top_y = zip(*t.curve, strict=True)
        bottom.plot(top_x, [scale(c) for c in top_y], color="tab:blue", label="every value")
    if t.trials:
        xs2, cs = zip(*t.trials, strict=True)
        bottom.scatter(xs2, [scale(c) for c in cs], color="tab:red", zorder=3, label="trials")
    bottom.set_xlabel(f"{t.what} ({t.unit})")
    bottom.set_ylabel(label)
    bottom.legend(loc="upper right")
    save(fig, path)
