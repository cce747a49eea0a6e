"""Heatmaps of what a monitor reported hot against the truth, like Figure 7 of the
Telescope paper: time on x, offset in the heap on y. Also, for tiering policy runs, the
application's throughput and the fast tier's contents over time.

Regions are rasterized with numpy onto a grid of windows x address rows (each cell takes
the largest value of the regions overlapping it, so a small hot region is never averaged
away), then drawn with one `imshow` per panel: fast for hundreds of windows and
thousands of regions. Only matplotlib's Agg backend is used (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tierscope.results import MonitorResult, RunResult, tiers

GiB = float(1 << 30)
#: Address rows of a heatmap (fewer when the heap has fewer 4 KiB pages).
DEFAULT_ROWS = 512


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def rasterize(
    offsets: npt.NDArray[Any],
    starts: npt.NDArray[Any],
    ends: npt.NDArray[Any],
    values: npt.NDArray[Any],
    lo: int,
    hi: int,
    rows: int,
) -> npt.NDArray[np.float64]:
    """Paints intervals `[starts, ends)` of window `i` (elements `offsets[i]:offsets[i+1]`)
    onto a `(rows, windows)` grid over addresses `[lo, hi)`. A cell holds the maximum value
    of the intervals overlapping it; 0 where none with a positive value does."""
    nwin = len(offsets) - 1
    grid = np.zeros(nwin * rows)
    if nwin <= 0 or hi <= lo or len(starts) == 0:
        return grid.reshape(nwin, rows).T
    window = np.repeat(np.arange(nwin), np.diff(offsets.astype(np.int64)))
    s = np.clip(starts.astype(np.int64), lo, hi) - lo
    e = np.clip(ends.astype(np.int64), lo, hi) - lo
    v = values.astype(np.float64)
    keep = (e > s) & (v > 0)
    s, e, v, window = s[keep], e[keep], v[keep], window[keep]
    row_bytes = (hi - lo) / rows
    r0 = np.floor(s / row_bytes).astype(np.int64)
    r1 = np.minimum(np.ceil(e / row_bytes).astype(np.int64), rows)
    n = np.maximum(r1 - r0, 0)
    # Expand each interval into the rows it covers; disjoint intervals per window keep
    # the total at most rows + intervals per window.
    owner = np.repeat(np.arange(len(n)), n)
    first = np.repeat(np.cumsum(n) - n, n)
    row = r0[owner] + (np.arange(int(n.sum())) - first)
    np.maximum.at(grid, window[owner] * rows + row, v[owner])
    return grid.reshape(nwin, rows).T


def heatmap(
    monitor: MonitorResult,
    heap: dict[str, int],
    hot_threshold: int,
    path: Path,
    *,
    rows: int = DEFAULT_ROWS,
    title: str | None = None,
) -> None:
    """Writes a PNG with two panels sharing axes: the regions `monitor` reported hot
    (nr_accesses >= hot_threshold, coloured by nr_accesses) and the truly hot blocks."""
    # Imported here: matplotlib takes a while to import and only this function needs it.
    from matplotlib.figure import Figure

    lo, hi = int(heap["start"]), int(heap["end"])
    rows = max(1, min(rows, (hi - lo) // 4096))
    snaps, truth = monitor.snapshots, monitor.truth
    hot = np.where(snaps.nr_accesses >= hot_threshold, snaps.nr_accesses, 0)
    reported = rasterize(snaps.offsets, snaps.start, snaps.end, hot, lo, hi, rows)
    bs = truth.block_size
    true_hot = rasterize(
        truth.offsets,
        truth.start * np.uint64(bs),
        truth.end * np.uint64(bs),
        np.ones(len(truth.start)),
        lo,
        hi,
        rows,
    )

    nwin = len(snaps)
    t0 = float(snaps.start_ns[0]) / 1e9 if nwin else 0.0
    t1 = float(snaps.end_ns[-1]) / 1e9 if nwin else 1.0
    extent = (t0, t1, 0.0, (hi - lo) / GiB)

    fig = Figure(figsize=(10, 7), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, sharey=True)
    image = top.imshow(
        np.ma.masked_equal(reported, 0),
        origin="lower",
        aspect="auto",
        extent=extent,
        interpolation="nearest",
        cmap="viridis",
    )
    fig.colorbar(image, ax=top, label="nr_accesses")
    top.set_title(title or f"{monitor.name}: regions reported hot (nr_accesses >= {hot_threshold})")
    truth_image = bottom.imshow(
        np.ma.masked_equal(true_hot, 0),
        origin="lower",
        aspect="auto",
        extent=extent,
        interpolation="nearest",
        cmap="Reds",
        vmin=0,
        vmax=1.2,
    )
    fig.colorbar(truth_image, ax=bottom, label="truly hot", ticks=[])
    bottom.set_title(f"truth: {_size(bs)} blocks hot in the window")
    for ax in (top, bottom):
        ax.set_ylabel("offset in heap (GiB)")
        ax.set_facecolor("white")
        ax.set_xlim(t0, t1)
        ax.set_ylim(0, (hi - lo) / GiB)
    bottom.set_xlabel("time (s)")
    if nwin == 0:
        top.text(0.5, 0.5, "no aggregation window ended", transform=top.transAxes, ha="center")
    fig.savefig(path, dpi=100)


def timeline(result: RunResult, path: Path, *, title: str | None = None) -> None:
    """Writes a PNG of every monitor's per-window precision and recall over time (the
    shape of the Telescope paper's Figures 8 and 9)."""
    timeline_figure(result, title=title).savefig(path, dpi=100)


def timeline_figure(result: RunResult, *, title: str | None = None) -> Any:
    """The figure `timeline` writes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6), layout="constrained")
    prec_ax, rec_ax = fig.subplots(2, 1, sharex=True)
    for name, monitor in result.monitors.items():
        w = monitor.windows
        t = w["end_ns"].astype(float) / 1e9
        prec_ax.plot(t, w["precision"], label=name, linewidth=1)
        rec_ax.plot(t, w["recall"], label=name, linewidth=1)
    prec_ax.set_ylabel("precision")
    rec_ax.set_ylabel("recall")
    rec_ax.set_xlabel("time (s)")
    for ax in (prec_ax, rec_ax):
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    prec_ax.legend(loc="lower right", fontsize="small", ncols=3)
    prec_ax.set_title(title or f"{result.experiment.name}: precision and recall per window")
    return fig


def _per_second(accesses: npt.NDArray[Any], ns: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """accesses / (ns * 1e-9), NaN (a gap in the line) where no time passed."""
    a = accesses.astype(np.float64)
    t = ns.astype(np.float64) * 1e-9
    out = np.full(len(a), np.nan)
    np.divide(a, t, out=out, where=t > 0)
    return out


def throughput(result: RunResult, path: Path, *, title: str | None = None) -> None:
    """Writes a PNG of each policy run's throughput per performance window (accesses per
    second of modelled application time), with the all-fast and all-slow references
    dashed."""
    throughput_figure(result, title=title).savefig(path, dpi=100)


def throughput_figure(result: RunResult, *, title: str | None = None) -> Any:
    """The figure `throughput` writes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for name, p in result.policies.items():
        w = p.windows
        t = w["end_ns"].astype(float) / 1e9
        ax.plot(t, _per_second(w["accesses"], w["app_ns"]) / 1e6, label=name, linewidth=1)
    # The references depend on the access stream only, the same for every run.
    first = next(iter(result.policies.values()), None)
    if first is not None:
        w = first.windows
        t = w["end_ns"].astype(float) / 1e9
        for key, label, colour in (
            ("all_fast_ns", "all fast", "black"),
            ("all_slow_ns", "all slow", "grey"),
        ):
            ax.plot(
                t,
                _per_second(w["accesses"], w[key]) / 1e6,
                label=label,
                linestyle="--",
                color=colour,
                linewidth=1,
            )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("throughput (M accesses / s of app time)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", ncols=2)
    ax.set_title(title or f"{result.experiment.name}: throughput per window")
    return fig


def placement(result: RunResult, path: Path, *, title: str | None = None) -> None:
    """Writes a PNG of the bytes each policy run holds on the fastest tier at the end of
    each performance window, with the tier's capacity dashed."""
    placement_figure(result, title=title).savefig(path, dpi=100)


def placement_figure(result: RunResult, *, title: str | None = None) -> Any:
    """The figure `placement` writes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    specs = tiers(result.experiment)
    fast = specs[0] if specs else {}
    for name, p in result.policies.items():
        w = p.windows
        t = w["end_ns"].astype(float) / 1e9
        ax.step(t, w["placed"][:, 0].astype(float) / 2**20, where="post", label=name)
    if "capacity" in fast:
        ax.axhline(
            fast["capacity"] / 2**20, linestyle="--", color="black", linewidth=1, label="capacity"
        )
    tier = fast.get("name", "fast tier")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"bytes on {tier} (MiB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", ncols=2)
    ax.set_title(title or f"{result.experiment.name}: heap on the fastest tier ({tier})")
    return fig
