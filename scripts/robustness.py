"""Robustness of the paper's 5 TiB microbenchmarks to where the hot memory sits: N random
layouts (cold regions of random sizes between the hot ones, the hot regions in a random
order, half of the layouts with every region a whole number of GiB and half not) x seeds,
run as one sweep; prints and writes the distribution (p10 / median / p90) of each
monitor's precision and recall over layouts x seeds.

    .venv/bin/python scripts/robustness.py multiphase-5t --layouts 20 --seeds 2 \\
        --monitors telescope-bnd,telescope-flx --out runs/robust-multiphase

The layouts are drawn from `random.Random(layout index)`: the same command gives the same
layouts, and a stopped run resumes (the sweep store in --out).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

import tierscope

PAPER = Path(__file__).resolve().parents[1] / "experiments" / "paper"
GB = 10**9
GIB = 1 << 30
MIB2 = 2 << 20

#: Per benchmark: the hot regions (name, bytes) and the heap's total bytes.
BENCHES: dict[str, tuple[list[tuple[str, int]], int]] = {
    "multiphase-5t": ([("hot_a", 10 * GB), ("hot_b", 10 * GB), ("hot_c", 10 * GB)], 5000 * GB),
    "needle-5t": ([("needle", 50 * 10**6)], 5000 * GB),
}


def layout(bench: str, index: int) -> list[dict[str, Any]]:
    """Layout `index` of `bench`: cold fillers around the hot regions in a random order;
    even indices have every size a multiple of 1 GiB (entries of the upper levels tile
    them), odd ones multiples of 2 MiB only."""
    hot, total = BENCHES[bench]
    rng = random.Random(index)
    unit = GIB if index % 2 == 0 else MIB2
    hot = [(n, -(-s // unit) * unit) for n, s in hot]
    order = hot[:]
    rng.shuffle(order)
    cold_total = total - sum(s for _, s in hot)
    cuts = sorted(rng.random() for _ in range(len(order)))
    shares = [b - a for a, b in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
    colds = [max(unit, int(cold_total * f) // unit * unit) for f in shares]
    regions: list[dict[str, Any]] = []
    for i, c in enumerate(colds):
        regions.append({"name": f"cold_{i}", "size": c})
        if i < len(order):
            regions.append({"name": order[i][0], "size": order[i][1]})
    return regions


def sweep(bench: str, layouts: int, seeds: int, monitors: list[str]) -> dict[str, Any]:
    return {
        "base": str(PAPER / f"{bench}.toml"),
        "seeds": {"from": 1, "to": seeds},
        "set": {"monitors": [{"preset": m} for m in monitors]},
        "axes": [
            {
                "path": "workload.regions",
                "name": "layout",
                "labels": [f"L{i:02d}" for i in range(layouts)],
                "values": [layout(bench, i) for i in range(layouts)],
            }
        ],
    }


def table(df: Any) -> str:
    import polars as pl

    rows = [
        "| monitor | precision p10 | p50 | p90 | recall p10 | p50 | p90 | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (m,), g in df.group_by(["monitor"], maintain_order=True):
        q = {
            k: [g[k].quantile(x, interpolation="linear") for x in (0.1, 0.5, 0.9)]
            for k in ("precision", "recall")
        }
        cells = [f"{v:.3f}" for k in ("precision", "recall") for v in q[k]]
        rows.append(f"| {m} | " + " | ".join(cells) + f" | {g.height} |")
    del pl
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("bench", choices=list(BENCHES))
    p.add_argument("--layouts", type=int, default=20)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--monitors", default="telescope-bnd,telescope-flx", help="presets")
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=0)
    a = p.parse_args()
    s = sweep(a.bench, a.layouts, a.seeds, a.monitors.split(","))
    outcome = tierscope.run_sweep(s, a.out, jobs=a.jobs, source_name=f"robustness {a.bench}")
    df = tierscope.load_sweep(a.out)
    text = table(df)
    print(text)
    print(f"\n{outcome.runs} runs ({outcome.skipped} already stored), {outcome.wall_s:.0f} s")
    (Path(a.out) / "robustness.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
