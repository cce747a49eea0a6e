"""The paper's microbenchmarks over random layouts x seeds (docs/results/ROBUSTNESS.md): where the
hot memory sits, in what order, and in what units its sizes are written, as a sweep over
`workload.regions`; per monitor, the distribution (p10 / median / p90) of precision and
recall over the runs.

Layout `i` of a benchmark is drawn from `random.Random(i)`:
- the hot regions (the paper file's names, so its phases still apply) in a random order,
  each followed by a cold region of random size, the cold sizes random cuts of the rest of
  the heap;
- even layouts write every size in whole GiB, as a user writing "10 GiB" would (the hot
  regions of the multi-phase benchmark are 10 GiB, the needle stays 50 MB); odd layouts
  keep the paper's decimal sizes (10 GB) and cut the cold memory at 2 MiB.

Where the hot regions' edges fall relative to the 1 GiB and 512 GiB page-table entries is
what differs between the two: the heap ends 18 MiB below a 512 GiB boundary (shared
libraries and a guard page above it; crates/tierscope-sim/src/layout.rs), so with sizes in
whole GiB every region edge lies 18 MiB past a 1 GiB boundary.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

GB = 10**9
MB = 10**6
GIB = 1 << 30
MIB2 = 2 << 20


@dataclass(frozen=True)
class Bench:
    """A microbenchmark's hot regions (name, bytes as the paper writes them) and heap."""

    hot: tuple[tuple[str, int], ...]
    heap: int
    #: The hot regions' bytes in a GiB layout (the paper's "10 GB" written "10 GiB").
    hot_gib: tuple[int, ...]
    #: The cold regions' granularity in a GiB layout: whole GiB, except in a heap too small
    #: to hold two of them beside the hot memory (then 2 MiB, as in GB layouts).
    gib_cold_unit: int = GIB


_MULTIPHASE = Bench(
    hot=(("hot_a", 10 * GB), ("hot_b", 10 * GB), ("hot_c", 10 * GB)),
    heap=5000 * GB,
    hot_gib=(10 * GIB, 10 * GIB, 10 * GIB),
)
_NEEDLE = Bench(hot=(("needle", 50 * MB),), heap=5000 * GB, hot_gib=(50 * MB,))


def _subtb(heap: int, hot_gib: int, gib_cold_unit: int = GIB) -> Bench:
    """A SubTB benchmark: 10% of `heap` hot (`hot_gib` in a GiB layout)."""
    return Bench(
        hot=(("hot", heap // 10),), heap=heap, hot_gib=(hot_gib,), gib_cold_unit=gib_cold_unit
    )


#: Every microbenchmark of the Telescope paper (experiments/paper/), by its file's name;
#: the 2 MiB-page files share their 4 KiB twin's layouts.
BENCHES: dict[str, Bench] = {
    "multiphase-5t": _MULTIPHASE,
    "multiphase-5t-thp": _MULTIPHASE,
    "needle-5t": _NEEDLE,
    "needle-5t-thp": _NEEDLE,
    "subtb-1g": _subtb(1000 * MB, 100 << 20, MIB2),
    "subtb-1g-thp": _subtb(1000 * MB, 100 << 20, MIB2),
    "subtb-10g": _subtb(10_000 * MB, GIB),
    "subtb-10g-thp": _subtb(10_000 * MB, GIB),
    "subtb-100g": _subtb(100_000 * MB, 10 * GIB),
    "subtb-100g-thp": _subtb(100_000 * MB, 10 * GIB),
}

#: The benchmarks `tierscope repro telescope` runs over layouts unless told otherwise: the
#: two of issue 15 and docs/results/ROBUSTNESS.md's main tables.
DEFAULT_BENCHES = ("multiphase-5t", "needle-5t")

#: The monitors every layout runs: the paper file's, and ours beyond the paper. Linear
#: scans are left out: a pass over 5 TB of 4 KiB pages does not finish in a window.
MONITORS = (
    "damon-mod",
    "damon-agg",
    "pebs-mod",
    "pebs-agg",
    "telescope-bnd",
    "telescope-flx",
    "split-hint",
    "pruned-walk",
)


def layout_units(index: int) -> str:
    """How layout `index` writes sizes: "GiB" (even) or "GB" (odd)."""
    return "GiB" if index % 2 == 0 else "GB"


def layout(bench: str, index: int, heap: int | None = None) -> list[dict[str, Any]]:
    """Layout `index` of `bench`: its `workload.regions`, listed from the top of the heap;
    `heap` bytes in all instead of the benchmark's own."""
    b = BENCHES[bench]
    if heap is not None:
        b = replace(b, heap=heap)
        need = max(sum(s for _, s in b.hot), sum(b.hot_gib)) + (len(b.hot) + 1) * b.gib_cold_unit
        if heap < need:
            raise ValueError(
                f"a heap of {heap} bytes does not hold {bench}'s hot memory and a cold region "
                f"of at least {b.gib_cold_unit} bytes beside each hot one ({need} bytes)"
            )
    rng = random.Random(index)
    gib = layout_units(index) == "GiB"
    unit = b.gib_cold_unit if gib else MIB2
    hot = [(n, g if gib else s) for (n, s), g in zip(b.hot, b.hot_gib, strict=True)]
    rng.shuffle(hot)
    cold_total = b.heap - sum(s for _, s in hot)
    cuts = sorted(rng.random() for _ in hot)
    shares = [hi - lo for lo, hi in zip([0.0, *cuts], [*cuts, 1.0], strict=True)]
    colds = [max(unit, int(cold_total * f) // unit * unit) for f in shares]
    regions: list[dict[str, Any]] = []
    for i, c in enumerate(colds):
        regions.append({"name": f"cold_{i}", "size": c})
        if i < len(hot):
            regions.append({"name": hot[i][0], "size": hot[i][1]})
    return regions


def layout_label(index: int) -> str:
    return f"L{index:02d}-{layout_units(index)}"


def sweep(
    base: Path,
    bench: str,
    layouts: int,
    seeds: int,
    monitors: tuple[str, ...] = MONITORS,
    heap: int | None = None,
    duration: str | None = None,
) -> dict[str, Any]:
    """The sweep of the experiment file `base` (the benchmark's paper file) over layouts
    0..layouts-1 x seeds 1..seeds, every run with `monitors` (and `duration` long when
    given); `heap` as in `layout`. A monitor is a preset, or `PRESET:MODE` for a DAMON or
    Telescope preset with `sampling = "MODE"` (e.g. "telescope-bnd:each"), named as the
    preset."""
    fixed: dict[str, Any] = {"monitors": [_monitor(m) for m in monitors]}
    if duration is not None:
        fixed["duration"] = duration
    return {
        "base": str(base.resolve()),
        "seeds": {"from": 1, "to": seeds},
        "set": fixed,
        "axes": [
            {
                "path": "workload.regions",
                "name": "layout",
                "labels": [layout_label(i) for i in range(layouts)],
                "values": [layout(bench, i, heap) for i in range(layouts)],
            }
        ],
    }


def _monitor(spec: str) -> dict[str, Any]:
    """A `[[monitors]]` entry from a preset name or `PRESET:MODE`."""
    preset, _, mode = spec.partition(":")
    return {"preset": preset, "sampling": mode} if mode else {"preset": preset}


def run_layouts(
    base: Path,
    bench: str,
    layouts: int,
    seeds: int,
    out: Path,
    *,
    monitors: tuple[str, ...] = MONITORS,
    heap: int | None = None,
    executor: str = "local",
    jobs: int = 0,
    progress: bool = False,
    duration: str | None = None,
) -> list[dict[str, Any]]:
    """Runs `sweep(...)` stored in `out` (resumable) and returns each run's monitor rows:
    layout, seed, monitor, precision, recall, cpu_percent."""
    from tierscope import load_sweep, run_sweep

    outcome = run_sweep(
        sweep(base, bench, layouts, seeds, monitors, heap, duration),
        out,
        executor=executor,
        jobs=jobs,
        progress=progress,
        source_name=f"{bench} (layouts)",
    )
    outcome.raise_if_failed("layout runs")
    keep = ("layout", "seed", "monitor", "precision", "recall", "cpu_percent")
    return [{k: row[k] for k in keep} for row in load_sweep(out).iter_rows(named=True)]


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation (numpy's default)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def distribution(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per monitor (in first-seen order): p10 / median / p90 of precision and recall, the
    median CPU %, the worst run, and how many runs; `rows` are monitor rows of a sweep."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["monitor"], []).append(r)
    out = []
    for monitor, rs in by.items():
        entry: dict[str, Any] = {"monitor": monitor, "runs": len(rs)}
        for k in ("precision", "recall"):
            vs = [float(r[k]) for r in rs]
            entry[k] = {q: quantile(vs, p) for q, p in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))}
        entry["cpu_percent"] = statistics.median(float(r["cpu_percent"]) for r in rs)
        worst = min(rs, key=lambda r: min(r["precision"], r["recall"]))
        entry["worst"] = {
            "layout": worst["layout"],
            "seed": worst["seed"],
            "precision": worst["precision"],
            "recall": worst["recall"],
        }
        out.append(entry)
    return out


def format_distribution(title: str, dist: list[dict[str, Any]]) -> str:
    """A Markdown table of `distribution`'s rows under `title`."""
    lines = [
        f"{title}",
        "",
        "| monitor | precision p10 | p50 | p90 | recall p10 | p50 | p90 | cpu % (median) "
        "| worst run (layout, seed: P / R) | runs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in dist:
        cells = [f"{d[k][q]:.3f}" for k in ("precision", "recall") for q in ("p10", "p50", "p90")]
        w = d["worst"]
        worst = f"{w['layout']}, {w['seed']}: {w['precision']:.3f} / {w['recall']:.3f}"
        lines.append(
            f"| {d['monitor']} | "
            + " | ".join(cells)
            + f" | {d['cpu_percent']:.3f} | {worst} | {d['runs']} |"
        )
    return "\n".join(lines)
