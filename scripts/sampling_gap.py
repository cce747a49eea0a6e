"""DAMON reading every sample (`sampling = "each"`) against window sampling (`sampling =
"window"`) on the statistical engine, over many seeds (docs/models/FIDELITY.md, "DAMON's
window sampling"). A DAMON run's region count and F1 move a lot from seed to seed (its
regions split and merge on noisy counts), so a difference seen in three seeds is only one
once many seeds show it.

- `summary EXPERIMENT`: every DAMON monitor of the file (the others are dropped) per seed,
  once per mode, through the `run_summary` example; compares precision, recall, F1, CPU %
  (cycles) and the mean number of regions per monitor;
- `tiering MONITOR`: `bench_speed one MONITOR:each telescope-rule SIZE DURATION SEED`
  against `MONITOR:window` (memtier, gaussian keys, the Telescope rule; MONITOR a DAMON or
  a Telescope preset, whose `sampling` takes the same two values); compares the speed-up
  over all-slow and the bytes promoted.

Each row gives both modes' mean with its standard error, the difference (window minus each),
Welch's t test's and the Mann-Whitney U test's two-sided p-values, and the ratio of the
per-seed standard deviations (window over each). Every run's output is kept in --out, so a
stopped comparison resumes and a second one with more seeds reuses the first's runs.

    cargo build --release -p tierscope-experiment --example run_summary --example bench_speed
    python3 scripts/sampling_gap.py summary experiments/densities.toml --phase 2 \\
        --presets damon-mod,damon-agg --seeds 1-20 --out runs/sampling-densities
    python3 scripts/sampling_gap.py tiering damon-mod --seeds 1-40 --out runs/sampling-tiering
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_gap import mean_se, rank_sum_p, seeds_of, welch

ROOT = Path(__file__).resolve().parents[1]
BINARIES = ROOT / "target" / "release" / "examples"
MODES = ("each", "window")

Measures = dict[str, float]


def variant(
    exp: dict[str, Any],
    seed: int,
    mode: str,
    base: Path,
    presets: Sequence[str] = (),
    phase: int | None = None,
    duration: str | None = None,
) -> dict[str, Any]:
    """The experiment `exp` (a parsed TOML file from directory `base`) at `seed` on the
    statistical engine, with its DAMON monitors alone (or one monitor per preset of
    `presets`), each sampling in `mode`; with `phase`, the workload's phase of that index
    alone, for the whole duration (`duration`, or the file's)."""
    # Window sampling exists on the statistical engine alone (elsewhere DAMON reads each sample).
    out = dict(exp, seed=seed, machine=dict(exp.get("machine", {}), engine="stat"))
    if duration is not None:
        out["duration"] = duration
    damon = [{"preset": p} for p in presets] or [
        m for m in exp.get("monitors", []) if str(m.get("preset", "")).startswith("damon")
    ]
    if not damon:
        raise ValueError("the experiment has no DAMON monitor (preset damon-mod or damon-agg)")
    out["monitors"] = [dict(m, sampling=mode) for m in damon]
    workload = dict(exp.get("workload", {}))
    if phase is not None:
        phases = workload.get("phases", [])
        if not 0 <= phase < len(phases):
            raise ValueError(f"phase {phase}: the workload has {len(phases)} inline phases")
        if "duration" not in out:
            raise ValueError("a phase alone needs the experiment's duration")
        workload["phases"] = [dict(phases[phase], duration=out["duration"])]
    # The variant is written elsewhere: a masim file is named from the original's directory.
    if "masim" in workload:
        workload["masim"] = str((base / workload["masim"]).resolve())
    out["workload"] = workload
    return out


def parse_summary(text: str) -> dict[str, Measures]:
    """`run_summary`'s monitor table: per monitor, precision, recall, F1, CPU % (the cost
    model's cycles over the run's) and regions."""
    out: dict[str, Measures] = {}
    lines = text.splitlines()
    for line in lines[1:]:
        cols = line.split()
        if len(cols) != 9 or line.startswith("policy"):
            break
        prec, recall, f1, cpu, _bits, regions = (float(c) for c in cols[1:7])
        out[cols[0]] = {
            "precision": prec,
            "recall": recall,
            "f1": f1,
            "cpu_percent": cpu,
            "regions": regions,
        }
    if not out:
        raise ValueError(f"no monitor table in run_summary's output:\n{text}")
    return out


TIERING_LINE = re.compile(r"speed-up over all-slow ([0-9.]+), ([0-9.]+) GB promoted")


def parse_tiering(text: str) -> Measures:
    """`bench_speed one`'s line: the speed-up over all-slow and the GB promoted."""
    m = TIERING_LINE.search(text)
    if m is None:
        raise ValueError(f"no result line in bench_speed's output:\n{text}")
    return {"speed-up": float(m.group(1)), "promoted GB": float(m.group(2))}


def cached(path: Path, cmd: Sequence[str]) -> str:
    """The output of `cmd`, run (at a lower priority) unless `path` already holds it."""
    if not path.exists():
        tmp = path.with_suffix(".part")
        done = subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
        tmp.write_text(done.stdout)
        tmp.rename(path)
    return path.read_text()


def summary_runs(
    exp_path: Path,
    seeds: Sequence[int],
    out: Path,
    bins: Path,
    jobs: int,
    presets: Sequence[str] = (),
    phase: int | None = None,
    duration: str | None = None,
) -> dict[str, list[Measures]]:
    """Per mode, one row per seed: `MONITOR: MEASURE` -> value."""
    exp = tomllib.loads(exp_path.read_text())
    stem = exp_path.stem + ("" if phase is None else f"-phase{phase}")
    stem += "" if duration is None else f"-{duration}"

    def one(mode: str, seed: int) -> Measures:
        spec = out / f"{stem}-{'+'.join(presets) or 'damon'}-{mode}-s{seed}.json"
        spec.write_text(
            json.dumps(variant(exp, seed, mode, exp_path.parent, presets, phase, duration))
        )
        text = cached(spec.with_suffix(".txt"), [str(bins / "run_summary"), str(spec)])
        return {f"{mon}: {k}": v for mon, ms in parse_summary(text).items() for k, v in ms.items()}

    return run_all(one, seeds, jobs)


def tiering_runs(
    monitor: str, size: str, duration: str, seeds: Sequence[int], out: Path, bins: Path, jobs: int
) -> dict[str, list[Measures]]:
    def one(mode: str, seed: int) -> Measures:
        name = f"{monitor}:{mode}"
        path = out / f"tiering-{monitor}-{mode}-{size}-{duration}-s{seed}.txt"
        cmd = [str(bins / "bench_speed"), "one", name, "telescope-rule", size, duration, str(seed)]
        return parse_tiering(cached(path, cmd))

    return run_all(one, seeds, jobs)


def run_all(
    one: Callable[[str, int], Measures], seeds: Sequence[int], jobs: int
) -> dict[str, list[Measures]]:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {m: [pool.submit(one, m, s) for s in seeds] for m in MODES}
        return {m: [f.result() for f in fs] for m, fs in futures.items()}


def sd(x: Sequence[float]) -> float:
    """The per-seed standard deviation."""
    return mean_se(x)[1] * math.sqrt(len(x))


def table(runs: dict[str, list[Measures]]) -> list[str]:
    """One line per measure: each and window (mean ± standard error), the difference, the
    two p-values and the ratio of the per-seed standard deviations."""
    n = {m: len(r) for m, r in runs.items()}
    lines = [
        f"{'measure':<26} {'each (n=' + str(n['each']) + ')':>17} "
        f"{'window (n=' + str(n['window']) + ')':>17} {'diff':>8} {'p(t)':>6} {'p(U)':>6} "
        f"{'sd w/e':>6}"
    ]
    for k in runs["each"][0]:
        x, y = ([r[k] for r in runs[m]] for m in MODES)
        (a, sa), (b, sb) = mean_se(x), mean_se(y)
        _, p = welch(x, y)
        ratio = sd(y) / sd(x) if sd(x) > 0 else math.nan
        # Equal values summed in another order differ in the last bits.
        diff = b - a if abs(b - a) > 1e-9 * max(abs(a), abs(b)) else 0.0
        lines.append(
            f"{k:<26} {a:>9.4g} ± {sa:<5.2g} {b:>9.4g} ± {sb:<5.2g} {diff:>+8.3g} "
            f"{p:>6.3f} {rank_sum_p(x, y):>6.3f} {ratio:>6.2f}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "summary", help="an experiment file's DAMON (or --presets) monitors: F1, CPU %% and regions"
    )
    s.add_argument("experiment", type=Path)
    s.add_argument(
        "--presets",
        default="",
        help="DAMON or Telescope presets to run instead of the file's DAMON monitors",
    )
    s.add_argument("--phase", type=int, help="the workload's phase of this index alone")
    s.add_argument("--duration", help="the run's duration instead of the file's, e.g. 30s")
    t = sub.add_parser("tiering", help="bench_speed's tiering case, speed-up and promoted GB")
    t.add_argument("monitor", choices=["damon-mod", "damon-agg", "telescope-bnd", "telescope-flx"])
    t.add_argument("--size", default="1TB")
    t.add_argument("--duration", default="60s")
    for p in (s, t):
        p.add_argument("--seeds", default="1-20", help="e.g. 1-20 or 1-4,9 (default 1-20)")
        p.add_argument("--out", type=Path, required=True, help="directory for the runs' outputs")
        p.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
        p.add_argument("--binaries", type=Path, default=BINARIES, help="the examples' directory")
        p.add_argument("--per-seed", action="store_true", help="also print every run's values")
    args = ap.parse_args()
    try:
        seeds = seeds_of(args.seeds)
    except ValueError:
        ap.exit(
            2, f"{ap.prog}: error: --seeds: expected a list such as 1-4,9, got {args.seeds!r}\n"
        )
    binary = args.binaries / ("run_summary" if args.command == "summary" else "bench_speed")
    if not binary.is_file():
        ap.exit(
            2,
            f"{ap.prog}: error: {binary}: not built (cargo build --release -p "
            f"tierscope-experiment --example {binary.name})\n",
        )
    args.out.mkdir(parents=True, exist_ok=True)
    if args.command == "summary":
        if not args.experiment.is_file():
            ap.exit(2, f"{ap.prog}: error: {args.experiment}: no such experiment file\n")
        presets = [p for p in args.presets.split(",") if p]
        try:
            runs = summary_runs(
                args.experiment,
                seeds,
                args.out,
                args.binaries,
                args.jobs,
                presets,
                args.phase,
                args.duration,
            )
        except ValueError as e:
            ap.exit(2, f"{ap.prog}: error: {e}\n")
    else:
        runs = tiering_runs(
            args.monitor, args.size, args.duration, seeds, args.out, args.binaries, args.jobs
        )
    print("\n".join(table(runs)))
    if args.per_seed:
        for k in runs["each"][0]:
            print(f"\n{k} per seed ({', '.join(map(str, seeds))}):")
            for m in MODES:
                print(f"  {m:<7} " + " ".join(f"{r[k]:.4g}" for r in runs[m]))


if __name__ == "__main__":
    main()
