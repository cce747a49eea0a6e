"""Where a Telescope monitor's false positives come from, window by window, from a run's
output directory (`tierscope run ... --out DIR`): docs/results/ROBUSTNESS.md, root causes.

    .venv/bin/python scripts/flex_leaks.py runs/DIR telescope-flx telescope-bnd

A region reported hot that holds cold 2 MiB blocks is a false positive for those blocks.
Telescope profiles, for a sampling address, the highest entry that qualifies for the
region (bounded: inside it; flex: overshooting by at most a share of the entry's span), so
the region is cut into the entries its samples can land on. Each such region gets the
strongest of these causes:
- `pml4 leak` / `pud leak`: an entry of 512 GiB / 1 GiB profiling it holds truly hot
  blocks outside it (flex only: the entry overshoots onto hot memory next door);
- `pml4 coarse` / `pud coarse`: such an entry holds hot blocks inside the region beside
  cold ones: one accessed bit stands for both;
- `partly hot`: neither, but the region holds hot blocks: DAMON's boundaries have not
  caught up with the hot set's edges (what Telescope-BND's false positives are);
- `none`: none of these (nothing in the region could have been accessed).

Each window gets the strongest cause among its regions (or `no false positive`, or
`nothing reported`: a monitor still searching),
and the script prints, per cause, the share of windows, their mean precision, and the
cold bytes reported hot per window: the window means decompose the monitor's precision.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

BLOCK_SHIFT = 21
#: Levels from the root down (4-level paging): name, span in bytes.
LEVELS = [("pml4", 1 << 39), ("pud", 1 << 30), ("pmd", 1 << 21), ("pte", 1 << 12)]


def entries(start: int, end: int, flex: dict[str, float] | None) -> list[tuple[int, int, str]]:
    """The entries Telescope profiles in region [start, end), top-down, with their level:
    an entry that qualifies is profiled for every sampling address inside it, otherwise
    its children are (bounded when `flex` is None)."""
    out: list[tuple[int, int, str]] = []

    def visit(level: int, e0: int) -> None:
        name, span = LEVELS[level]
        e1 = e0 + span
        outside = max(0, start - e0) + max(0, e1 - end)
        if outside == 0 or (flex is not None and outside <= flex[name] * span):
            out.append((e0, e1, name))
            return
        child = LEVELS[level + 1][1]
        c = max(e0, start) & ~(child - 1)
        while c < min(e1, end):
            visit(level + 1, c)
            c += child

    root = LEVELS[0][1]
    e = start & ~(root - 1)
    while e < end:
        visit(0, e)
        e += root
    return out


def hot_bytes(lo: int, hi: int, hot: np.ndarray) -> int:
    """Bytes of [lo, hi) in the hot blocks `hot` (sorted (start, end) block intervals)."""
    if hi <= lo or len(hot) == 0:
        return 0
    blo, bhi = lo >> BLOCK_SHIFT, (hi - 1 >> BLOCK_SHIFT) + 1
    total = 0
    for s, e in hot:
        s2, e2 = max(int(s), blo), min(int(e), bhi)
        if s2 < e2:
            a = max(s2 << BLOCK_SHIFT, lo)
            b = min(e2 << BLOCK_SHIFT, hi)
            total += max(0, b - a)
    return total


#: Why a region reported hot holds cold blocks, strongest first: an entry of 512 GiB or
#: 1 GiB profiling it holds hot memory outside it (`leak`) or inside it beside the cold
#: bytes (`coarse`); or none does, and the region merely holds hot blocks (`partly hot`).
CAUSES = ("pml4 leak", "pml4 coarse", "pud leak", "pud coarse", "partly hot", "none")


def region_cause(start: int, end: int, hot: np.ndarray, flex: dict[str, float] | None) -> str:
    found = set()
    for e0, e1, level in entries(start, end, flex):
        if level not in ("pml4", "pud"):
            continue
        lo, hi = max(e0, start), min(e1, end)
        inside = hot_bytes(lo, hi, hot)
        if hot_bytes(e0, lo, hot) + hot_bytes(hi, e1, hot) > 0:
            found.add(f"{level} leak")
        if 0 < inside < hi - lo:
            found.add(f"{level} coarse")
    if hot_bytes(start, end, hot) > 0:
        found.add("partly hot")
    return next((c for c in CAUSES if c in found), "none")


class BadInput(Exception):
    """A run directory or monitor name that cannot be analysed."""


def analyse(run: Path, monitor: str) -> dict[str, float]:
    path = run / "metrics.json"
    if not path.is_file():
        raise BadInput(f"{path}: no such file (expected a run's output directory)")
    metrics = json.loads(path.read_text())
    exp = metrics["experiment"]
    threshold = int(exp["hot_threshold"])
    names = [m["name"] for m in exp["monitors"]]
    if monitor not in names:
        raise BadInput(f"{path}: no monitor {monitor!r} (the run has {', '.join(names)})")
    cfg = exp["monitors"][names.index(monitor)]
    if cfg["type"] != "telescope":
        raise BadInput(f"{path}: monitor {monitor} is a {cfg['type']}, not a telescope")
    flex = None
    if cfg["variant"] == "flex":
        flex = {name: float(cfg["flex_threshold"][name]) for name, _ in LEVELS}
    result = metrics["monitors"][monitor]
    z = np.load(run / f"arrays-{monitor}.npz")
    so, to = z["snapshots.offsets"], z["truth.offsets"]
    precision = z["windows.precision"]
    # The summary's means skip the warm-up's windows: so does this.
    first = len(so) - 1 - int(result["windows_evaluated"])
    classes = (*CAUSES, "no false positive", "nothing reported")
    windows: dict[str, list[float]] = {c: [] for c in classes}
    cold: dict[str, int] = dict.fromkeys(CAUSES, 0)
    for w in range(first, len(so) - 1):
        hot = np.stack([z["truth.start"][to[w] : to[w + 1]], z["truth.end"][to[w] : to[w + 1]]], 1)
        causes = set()
        reported = False
        for i in range(so[w], so[w + 1]):
            if int(z["snapshots.nr_accesses"][i]) < threshold:
                continue
            reported = True
            start, end = int(z["snapshots.start"][i]), int(z["snapshots.end"][i])
            inside = hot_bytes(start, end, hot)
            if inside == end - start:
                continue
            cause = region_cause(start, end, hot, flex)
            causes.add(cause)
            cold[cause] += end - start - inside
        clean = "no false positive" if reported else "nothing reported"
        window_cause = next((c for c in CAUSES if c in causes), clean)
        windows[window_cause].append(float(precision[w]))
    n = len(so) - 1 - first
    out: dict[str, float] = {"windows": n, "precision": float(result["precision"])}
    for c in classes:
        ws = windows[c]
        out[f"{c}: share of windows"] = len(ws) / max(n, 1)
        out[f"{c}: their mean precision"] = float(np.mean(ws)) if ws else float("nan")
        if c in cold:
            out[f"{c}: cold GiB reported per window"] = cold[c] / max(n, 1) / 2**30
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", type=Path, help="a run's output directory")
    p.add_argument("monitors", nargs="+", help="Telescope monitors' names in the run")
    a = p.parse_args()
    for m in a.monitors:
        try:
            r = analyse(a.run, m)
        except BadInput as e:
            p.exit(2, f"{p.prog}: error: {e}\n")
        print(m)
        for k, v in r.items():
            print(f"  {k:32} {v:.3f}" if isinstance(v, float) else f"  {k:32} {v}")


if __name__ == "__main__":
    main()
