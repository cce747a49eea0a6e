"""Exact vs statistical engine, below the summary: runs one monitor of an experiment file
on both engines over many seeds (the `probe_trace` example, one TSV per run, kept in
--out so a stopped run resumes) and compares per phase, seed by seed:

- `regions`: the mean number of regions reported per window;
- `bits`: bits cleared (test-and-clear operations that found the bit set);
- `bits/clear`: in memory the phase's patterns access (`act`) and elsewhere (`oth`);
- `P(set)`: the fraction of reads (one sampling interval after the clear) that found
  the bit set in accessed memory: the engines' bit probability as the monitor sees it;
- `bit at clear, age A`: the fraction of clears that found the bit set, among entries
  whose previous clear was A ago (`never`: not cleared before), per address class: the
  bit probability as a function of the time since the clear, whatever the regions;
- the largest nr_accesses per window (DAMON merges neighbours within a tenth of it), the
  regions of at most 64 KiB, and the regions in accessed memory by nr_accesses.

Each row gives the mean over seeds with its standard error per engine, their ratio,
Welch's t with its two-sided p-value (Student's t distribution), and the two-sided p-value
of the Mann-Whitney U test (a difference in the distributions' location whatever their
shape). --windows adds the mean
number of regions per window, to see where the engines first drift apart.

    cargo build --release -p tierscope-experiment --example probe_trace
    python3 scripts/engine_gap.py experiments/default.toml --monitor damon-agg \\
        --seeds 1-24 --out runs/gap-default

Summary rows skip windows ending before the experiment's warm-up, as the summary does.
"""

from __future__ import annotations

import argparse
import csv
import math
import subprocess
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINARY = ROOT / "target" / "release" / "examples" / "probe_trace"
ENGINES = ("exact", "stat")
#: probe_trace's age buckets: time since the entry's previous clear (up to 2 ms, ...).
AGES = ("never", "2ms", "10ms", "50ms", "200ms", "1s", "long")
#: probe_trace's regions in accessed memory by nr_accesses (0, 1, 2, 3, 4 or more).
NR = ("nr0", "nr1", "nr2", "nr3", "nr4p")

Row = dict[str, float]


def seeds_of(text: str) -> list[int]:
    """'1-4,9' -> [1, 2, 3, 4, 9]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def trace(exp: Path, engine: str, seed: int, monitor: str, out: Path) -> list[Row]:
    """The windows of one run, running it unless its TSV is already in `out`."""
    path = out / f"{engine}-s{seed}.tsv"
    if not path.exists():
        tmp = path.with_suffix(".part")
        with tmp.open("w") as f:
            cmd = ["nice", str(BINARY), str(exp), engine, str(seed), monitor]
            subprocess.run(cmd, stdout=f, check=True)
        tmp.rename(path)
    with path.open() as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f, delimiter="\t")]


def warmup_s(exp: Path) -> float:
    """The experiment's warm-up in seconds (`warmup = "500ms"` or `"1s"`; 0 if absent)."""
    for line in exp.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "warmup":
            v = value.strip().strip('"')
            return float(v[:-2]) / 1e3 if v.endswith("ms") else float(v[:-1])
    return 0.0


def ratio(rows: list[Row], num: str, den: str) -> float:
    d = sum(r[den] for r in rows)
    return sum(r[num] for r in rows) / d if d else math.nan


def mean_se(x: Sequence[float]) -> tuple[float, float]:
    x = [v for v in x if not math.isnan(v)]
    n = len(x)
    m = sum(x) / n
    var = sum((v - m) ** 2 for v in x) / (n - 1) if n > 1 else math.nan
    return m, math.sqrt(var / n)


def betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Numerical Recipes 6.4)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + aa / c
            c = c if abs(c) > 1e-300 else 1e-300
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    x = df / (df + t * t)
    # t = 0, or so small that x rounds to 1: no difference at all.
    if x >= 1.0:
        return 1.0
    a, b = df / 2.0, 0.5
    lbeta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - lbeta)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1.0 - x) / b


def welch(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Welch's t (y minus x) and its two-sided p-value."""
    (mx, sx), (my, sy) = mean_se(x), mean_se(y)
    nx, ny = len(x), len(y)
    se = math.hypot(sx, sy)
    if nx < 2 or ny < 2 or se == 0:
        return math.nan, math.nan
    t = (my - mx) / se
    df = (sx**2 + sy**2) ** 2 / (sx**4 / (nx - 1) + sy**4 / (ny - 1))
    return t, t_two_sided(t, df)


def rank_sum_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with the tie
    correction): do the two samples come from one distribution, whatever its shape?"""
    pooled = sorted((v, i < len(x)) for i, v in enumerate([*x, *y]))
    n1, n2 = len(x), len(y)
    n = n1 + n2
    r1, ties, i = 0.0, 0.0, 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        r1 += rank * sum(1 for k in range(i, j + 1) if pooled[k][1])
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    u = r1 - n1 * (n1 + 1) / 2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return math.nan
    z = (u - n1 * n2 / 2) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2))


def measures(rows: list[Row], warm: float) -> dict[str, float]:
    """One run's measures: the whole run after warm-up, then per phase."""
    after = [r for r in rows if r["end_s"] > warm + 1e-9]
    out: dict[str, float] = {
        "regions": sum(r["regions"] for r in after) / len(after),
        "bits": sum(r["bits"] for r in rows),
    }
    for ph in sorted({int(r["phase"]) for r in rows}):
        p = [r for r in rows if int(r["phase"]) == ph]
        out[f"{ph + 1}: regions"] = sum(r["regions"] for r in p) / len(p)
        out[f"{ph + 1}: regions in accessed memory"] = sum(r["regions_active"] for r in p) / len(p)
        out[f"{ph + 1}: bits"] = sum(r["bits"] for r in p)
        out[f"{ph + 1}: clears"] = sum(r["clears"] for r in p)
        out[f"{ph + 1}: bits/clear act"] = ratio(p, "bits_act", "clears_act")
        out[f"{ph + 1}: bits/clear oth"] = ratio(p, "bits_oth", "clears_oth")
        out[f"{ph + 1}: P(set) act"] = ratio(p, "set_act", "reads_act")
        if "max_nr" in p[0]:
            out[f"{ph + 1}: max nr_accesses"] = sum(r["max_nr"] for r in p) / len(p)
            out[f"{ph + 1}: regions <= 64 KiB"] = sum(r["small_regions"] for r in p) / len(p)
            for k in NR:
                out[f"{ph + 1}: share of accessed regions {k}"] = ratio(p, k, "regions_active")
        for c in ("act", "oth"):
            for a in AGES:
                if f"c_{c}_{a}" in p[0]:
                    out[f"{ph + 1}: bit at clear, {c}, age {a}"] = ratio(
                        p, f"b_{c}_{a}", f"c_{c}_{a}"
                    )
    return out


def fmt(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.4g}"


def table(per_engine: dict[str, list[dict[str, float]]]) -> None:
    keys = list(per_engine["exact"][0])
    n = {e: len(v) for e, v in per_engine.items()}
    print(
        f"{'measure':<34} {'exact (n=' + str(n['exact']) + ')':>22} "
        f"{'stat (n=' + str(n['stat']) + ')':>22} {'stat/exact':>10} {'t':>6} {'p':>7} {'p(U)':>7}"
    )
    for k in keys:
        x, y = ([m[k] for m in per_engine[e]] for e in ENGINES)
        (a, sa), (b, sb) = mean_se(x), mean_se(y)
        t, p = welch(x, y)
        pu = rank_sum_p(x, y)
        print(
            f"{k:<34} {fmt(a) + ' ± ' + fmt(sa):>22} {fmt(b) + ' ± ' + fmt(sb):>22} "
            f"{b / a if a else math.nan:>10.3f} {t:>6.2f} {p:>7.3f} {pu:>7.3f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--monitor", required=True)
    ap.add_argument("--seeds", default="1-8")
    ap.add_argument("--out", type=Path, required=True, help="directory for the runs' TSVs")
    ap.add_argument("--windows", action="store_true", help="mean regions per window")
    args = ap.parse_args()
    if not args.experiment.is_file():
        ap.exit(2, f"{ap.prog}: error: {args.experiment}: no such experiment file\n")
    try:
        seeds = seeds_of(args.seeds)
    except ValueError:
        ap.exit(
            2, f"{ap.prog}: error: --seeds: expected a list such as 1-4,9, got {args.seeds!r}\n"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    exp = args.experiment.resolve()
    warm = warmup_s(exp)
    runs = {e: [trace(exp, e, s, args.monitor, args.out) for s in seeds] for e in ENGINES}
    table({e: [measures(r, warm) for r in rs] for e, rs in runs.items()})
    if args.windows:
        print(f"\n{'end_s':>7} {'phase':>5} {'exact regions':>16} {'stat regions':>16}")
        for i, w in enumerate(runs["exact"][0]):
            (a, sa), (b, sb) = (mean_se([r[i]["regions"] for r in runs[e]]) for e in ENGINES)
            print(
                f"{w['end_s']:>7.1f} {int(w['phase']) + 1:>5} {a:>9.1f} ± {sa:<5.1f}"
                f"{b:>9.1f} ± {sb:<5.1f}"
            )


if __name__ == "__main__":
    main()
