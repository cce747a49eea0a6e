"""Figures of a run and of a sweep. Each is a function returning a matplotlib `Figure`
(in a notebook, `heatmap_figure(result)` displays inline; `save(fig, path)` writes it);
the run directory's figures are written in every format of `figure_formats()` (PNG, and
SVG and PDF for papers). docs/reference/FIGURES.md shows each one.

A run (`tierscope.run` or `tierscope.load`):
- `heatmap_figure`: what monitors reported hot against the truth, like Figure 7 of the
  Telescope paper: time on x, offset in the heap on y with the workload's regions named.
- `timeline_figure`: each monitor's precision and recall per window (Figures 8 and 9).
- `cost_figure`: each monitor's CPU by the cost model.
- `throughput_figure`, `placement_figure`: for tiering policy runs, the application's
  throughput and the fastest tier's contents over time.

A sweep (the tables of `tierscope.load_sweep`):
- `accuracy_cost_figure`: precision and recall against CPU, one point per parameter set.
- `parameter_figure`, `speedup_figure`: precision and recall, or a policy run's speed-up,
  against one swept parameter.

Regions are rasterized with numpy onto a grid of windows x address rows (each cell takes
the largest value of the regions overlapping it, so a small hot region is never averaged
away), then drawn with one `imshow` per panel: fast for hundreds of windows and
thousands of regions. Only matplotlib's object API is used (no pyplot, no display).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tierscope.outdir import OutputError
from tierscope.results import MonitorResult, RunResult, tiers

#: Address rows of a heatmap (fewer when the heap has fewer 4 KiB pages).
DEFAULT_ROWS = 512
#: Every format a figure can be written in; the default is all of them.
FORMATS = ("png", "svg", "pdf")
#: Resolution of the PNGs (the vector formats have none).
PNG_DPI = 150
#: Names the formats figures are written in (a comma-separated list of `FORMATS`),
#: e.g. "png" for a large sweep whose figures are only looked at on screen, or `NO_FIGURES`
#: for none (drawing them can cost more than the run: about 0.5 s of CPU per PNG).
FORMATS_ENV = "TIERSCOPE_FIGURES"
#: The value of `FORMATS_ENV` that writes no figure files (the arrays they are drawn from
#: are still written: `tierscope report` draws what it shows again).
NO_FIGURES = "none"
#: The workload's regions are named on the heap axis up to this many.
MAX_REGION_NAMES = 24
#: What `nr_accesses` counts, by feed kind (docs/models/TIERING.md). Access checks are
#: shown as a share of the window's checks, so monitors with different intervals share
#: one scale; the other kinds in their own unit.
FEED_UNITS = {
    "access_checks": "% of the window's checks\nthat found it accessed",
    "samples": "sampled accesses\nper window",
    "counter_reads": "counter value\n(the rule's unit)",
    "hint_faults": "NUMA hint faults\nper window",
    "writes": "pages written\nper window",
    "huge_and_base_counts": "samples (2 MiB pages),\naccesses (4 KiB pages)",
}
#: Colours of the truth panel: not hot, hot (binary, no gradient).
TRUTH_COLOURS = ("white", "#b2182b")


def figure_formats() -> tuple[str, ...]:
    """The formats figures are written in: `$TIERSCOPE_FIGURES` (comma-separated) when
    set, else all of `FORMATS`; none for `NO_FIGURES`. An unknown format is an
    `OutputError` (one line) naming the accepted ones."""
    raw = os.environ.get(FORMATS_ENV, "").strip()
    if not raw:
        return FORMATS
    if raw.lower() == NO_FIGURES:
        return ()
    chosen = tuple(dict.fromkeys(f.strip().lower() for f in raw.split(",") if f.strip()))
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise OutputError(
            f"{FORMATS_ENV}={raw!r}: unknown figure format {', '.join(unknown) or '(none)'}; "
            f"accepted: {', '.join(FORMATS)}, or {NO_FIGURES!r} alone"
        )
    return chosen


def save(fig: Any, path: Path, formats: Sequence[str] | None = None) -> list[Path]:
    """Writes `fig` as `path` with each suffix of `formats` (default `figure_formats()`):
    heatmap.png, heatmap.svg, heatmap.pdf. Returns the files written (none when
    `TIERSCOPE_FIGURES=none`)."""
    import matplotlib

    written: list[Path] = []
    engine = fig.get_layout_engine()
    # A fixed salt for the SVG's element ids and no dates: the same run writes the same
    # bytes in every format.
    with matplotlib.rc_context({"svg.hashsalt": "tierscope"}):
        try:
            for fmt in figure_formats() if formats is None else formats:
                target = path.with_suffix(f".{fmt}")
                metadata = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}.get(fmt, {})
                fig.savefig(target, format=fmt, dpi=PNG_DPI, metadata=metadata)
                written.append(target)
                # The first format laid the figure out; the others keep its positions
                # instead of drawing it twice each to lay it out again (with a layout
                # engine, savefig draws once to lay out and once to render).
                if engine is not None:
                    fig.set_layout_engine("none")
        finally:
            if engine is not None:
                fig.set_layout_engine(engine)
    return written


def _draw_and_save(
    draw: Callable[[], Any], path: Path, formats: Sequence[str] | None = None
) -> list[Path]:
    """`save(draw(), path, formats)`, without drawing when there is no format to write."""
    chosen = figure_formats() if formats is None else tuple(formats)
    return save(draw(), path, chosen) if chosen else []


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _axis_unit(span: int) -> tuple[str, float]:
    """The unit of an address axis spanning `span` bytes: the largest of GiB, MiB, KiB
    that keeps at least one whole unit."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if span >= 1 << shift:
            return unit, float(1 << shift)
    return "B", 1.0


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
    span = hi - lo
    row_bytes = span / rows
    r0 = np.floor(s / row_bytes).astype(np.int64)
    r1 = np.ceil(e / row_bytes).astype(np.int64)
    # Row r covers [r * span / rows, (r + 1) * span / rows): an interval ending on a row's
    # start must not paint that row, nor one starting on a row's end the row before.
    # Division rounds either way there, so quotients close to a whole number are settled
    # in exact integer arithmetic (Python's, as products can pass 64 bits).
    for q, x, up in ((r0, s, False), (r1, e, True)):
        exact = x / row_bytes
        for i in np.flatnonzero(np.abs(exact - np.rint(exact)) < 1e-6):
            num = int(x[i]) * rows
            q[i] = -(-num // span) if up else num // span
    r1 = np.minimum(r1, rows)
    n = np.maximum(r1 - r0, 0)
    # Expand each interval into the rows it covers; disjoint intervals per window keep
    # the total at most rows + intervals per window.
    owner = np.repeat(np.arange(len(n)), n)
    first = np.repeat(np.cumsum(n) - n, n)
    row = r0[owner] + (np.arange(int(n.sum())) - first)
    np.maximum.at(grid, window[owner] * rows + row, v[owner])
    return grid.reshape(nwin, rows).T


def checks_per_window(monitor: MonitorResult) -> float | None:
    """The most access checks a region can pass in one window (aggregation / sampling
    interval), for a monitor that counts access checks; else None."""
    sample, aggr = monitor.intervals.get("sample", 0), monitor.intervals.get("aggr", 0)
    if monitor.feed != "access_checks" or sample <= 0 or aggr <= 0:
        return None
    return max(1.0, aggr / sample)


def reported_values(monitor: MonitorResult, hot_threshold: int) -> npt.NDArray[np.float64]:
    """Each snapshot region's value on the heatmap: 0 below `hot_threshold`, else its
    `nr_accesses`, as a percentage of the window's checks for a monitor counting them."""
    nr = monitor.snapshots.nr_accesses.astype(np.float64)
    hot = np.where(nr >= hot_threshold, nr, 0.0)
    checks = checks_per_window(monitor)
    return hot * (100.0 / checks) if checks else hot


def quantity(monitor: MonitorResult) -> str:
    """The colour scale a monitor's heatmap panel is drawn on: monitors with the same one
    share it (`FEED_UNITS`; a run directory from before feeds were recorded: nr_accesses)."""
    if monitor.feed in FEED_UNITS:
        return f"nr_accesses:\n{FEED_UNITS[monitor.feed]}"
    return "nr_accesses"


def shared_scales(result: RunResult, monitors: Sequence[str] | None = None) -> dict[str, float]:
    """The top of each colour scale (`quantity`): 100 % for access checks, else the
    largest value over the monitors drawn on it (at least 1, so a monitor that reported
    nothing still gets a scale of its unit)."""
    tops: dict[str, float] = {}
    for name in monitors or list(result.monitors):
        m = result.monitors[name]
        q = quantity(m)
        if checks_per_window(m):
            tops[q] = 100.0
            continue
        values = reported_values(m, result.experiment.hot_threshold)
        tops[q] = max(tops.get(q, 1.0), float(values.max()) if len(values) else 1.0)
    return tops


def heap_regions(result: RunResult) -> list[tuple[str, int, int]]:
    """The workload's named regions inside the heap: (name, start, end) as offsets from
    the heap's start, in address order (from the mappings named `heap:NAME`)."""
    lo, hi = int(result.heap["start"]), int(result.heap["end"])
    found = []
    for m in result.mappings:
        name = str(m.get("name", ""))
        start, end = int(m["range"]["start"]), int(m["range"]["end"])
        if name.startswith("heap:") and lo <= start < end <= hi:
            found.append((name.removeprefix("heap:"), start - lo, end - lo))
    return sorted(found, key=lambda r: r[1])


def _truth_kind(monitor: MonitorResult) -> str:
    # A write log is scored against the blocks written (docs/models/TIERING.md).
    return "written" if monitor.feed == "writes" else "accessed"


def heatmap_figure(
    result: RunResult,
    monitors: str | Sequence[str] | None = None,
    *,
    scales: dict[str, float] | None = None,
    rows: int = DEFAULT_ROWS,
    title: str | None = None,
) -> Any:
    """Heatmaps of the regions `monitors` (a name, names, default all) reported hot
    (`nr_accesses >= hot_threshold`), one panel each, above the truly hot blocks (one
    panel per kind of truth: accessed, or written for a write log), sharing the time and
    heap axes. Panels of the same quantity share one colour scale (`shared_scales`, or
    `scales` to share it with other figures); the truth is drawn in two colours, hot or
    not. The heap axis is labelled with the workload's region names on the right."""
    from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize
    from matplotlib.figure import Figure

    names = [monitors] if isinstance(monitors, str) else list(monitors or result.monitors)
    chosen = [result.monitors[n] for n in names]
    scales = scales or shared_scales(result, names)
    truths: dict[str, MonitorResult] = {}
    for m in chosen:
        truths.setdefault(_truth_kind(m), m)
    lo, hi = int(result.heap["start"]), int(result.heap["end"])
    rows = max(1, min(rows, (hi - lo) // 4096))
    unit, scale = _axis_unit(hi - lo)
    top_y = (hi - lo) / scale
    first = chosen[0] if chosen else None
    nwin = len(first.snapshots) if first else 0
    t0 = float(first.snapshots.start_ns[0]) / 1e9 if first and nwin else 0.0
    t1 = float(first.snapshots.end_ns[-1]) / 1e9 if first and nwin else result.duration_ns / 1e9
    extent = (t0, t1, 0.0, top_y)
    regions = heap_regions(result)

    npanels = len(chosen) + len(truths)
    fig = Figure(figsize=(10, 1.2 + 2.6 * npanels), layout="constrained")
    axes = np.atleast_1d(fig.subplots(npanels, 1, sharex=True, sharey=True))
    threshold = result.experiment.hot_threshold
    for ax, m in zip(axes, chosen, strict=False):
        q = quantity(m)
        grid = rasterize(
            m.snapshots.offsets,
            m.snapshots.start,
            m.snapshots.end,
            reported_values(m, threshold),
            lo,
            hi,
            rows,
        )
        image = ax.imshow(
            np.ma.masked_equal(grid, 0),
            origin="lower",
            aspect="auto",
            extent=extent,
            interpolation="nearest",
            cmap="viridis",
            norm=Normalize(0.0, scales.get(q, 1.0)),
        )
        fig.colorbar(image, ax=ax, label=q, pad=0.01)
        ax.set_title(f"{m.name}: regions reported hot (nr_accesses >= {threshold})")
        if len(m.snapshots) == 0:
            ax.text(0.5, 0.5, "no window ended", transform=ax.transAxes, ha="center")
        elif not grid.any():
            ax.text(0.5, 0.5, "nothing reported hot", transform=ax.transAxes, ha="center")
    truth_map = ListedColormap(list(TRUTH_COLOURS))
    truth_norm = BoundaryNorm([-0.5, 0.5, 1.5], 2)
    for ax, (kind, m) in zip(axes[len(chosen) :], truths.items(), strict=True):
        bs = m.truth.block_size
        grid = rasterize(
            m.truth.offsets,
            m.truth.start * np.uint64(bs),
            m.truth.end * np.uint64(bs),
            np.ones(len(m.truth.start)),
            lo,
            hi,
            rows,
        )
        image = ax.imshow(
            grid,
            origin="lower",
            aspect="auto",
            extent=extent,
            interpolation="nearest",
            cmap=truth_map,
            norm=truth_norm,
        )
        bar = fig.colorbar(image, ax=ax, ticks=[0, 1], pad=0.01, label="truth")
        bar.ax.set_yticklabels(["not hot", "hot"])
        ax.set_title(f"truth: {_size(bs)} blocks {kind} in the window")
    for ax in axes:
        ax.set_ylabel(f"offset in heap ({unit})")
        ax.set_xlim(t0, t1)
        ax.set_ylim(0, top_y)
        _name_regions(ax, regions, scale)
    axes[-1].set_xlabel("time (s)")
    if title is None:
        title = f"{result.experiment.name}: reported hot against the truth"
    if title:
        fig.suptitle(title)
    return fig


def _name_regions(ax: Any, regions: list[tuple[str, int, int]], scale: float) -> None:
    """Thin lines between the workload's regions and their names on a right-hand axis."""
    if not regions or len(regions) > MAX_REGION_NAMES:
        return
    for _, start, _ in regions[1:]:
        ax.axhline(start / scale, color="grey", linewidth=0.5, linestyle=":")
    right = ax.secondary_yaxis("right")
    right.set_yticks(
        [(s + e) / 2 / scale for _, s, e in regions],
        [name for name, _, _ in regions],
        fontsize="small",
    )
    right.tick_params(length=0)


def heatmap(
    result: RunResult,
    monitor: str,
    path: Path,
    *,
    scales: dict[str, float] | None = None,
    formats: Sequence[str] | None = None,
) -> list[Path]:
    """Writes `heatmap_figure(result, monitor)` to `path` in each format (`save`)."""
    return _draw_and_save(
        lambda: heatmap_figure(result, monitor, scales=scales, title=""), path, formats
    )


def timeline_figure(result: RunResult, *, title: str | None = None) -> Any:
    """Every monitor's precision and recall per window over time (the shape of the
    Telescope paper's Figures 8 and 9), the monitors named in a legend below the axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6), layout="constrained")
    prec_ax, rec_ax = fig.subplots(2, 1, sharex=True)
    for i, (name, monitor) in enumerate(result.monitors.items()):
        w = monitor.windows
        t = w["end_ns"].astype(float) / 1e9
        prec_ax.plot(t, w["precision"], label=name, linewidth=_width(i))
        rec_ax.plot(t, w["recall"], label=name, linewidth=_width(i))
    prec_ax.set_ylabel("precision\n(reported hot that is hot)")
    rec_ax.set_ylabel("recall\n(hot that is reported)")
    rec_ax.set_xlabel("time (s)")
    for ax in (prec_ax, rec_ax):
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    _legend_below(fig, prec_ax)
    if title is None:
        title = f"{result.experiment.name}: precision and recall per window"
    if title:
        fig.suptitle(title)
    return fig


def _width(i: int) -> float:
    """The width of the `i`-th line: runs with equal values draw the same line, so each
    is a little thinner than the one before and every one stays visible."""
    return max(0.8, 3.0 - 0.6 * i)


def _finish_line_axes(fig: Any, ax: Any, title: str | None, default: str | None) -> Any:
    """A line plot's common end: y from 0, a light grid, the legend below, and `title`
    (`default` when None, none when empty)."""
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    _legend_below(fig, ax)
    title = default if title is None else title
    if title:
        ax.set_title(title)
    return fig


def _legend_below(fig: Any, ax: Any) -> None:
    """The legend of `ax`'s lines under the figure's axes, where it covers none."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="outside lower center", ncols=min(4, len(handles)), frameon=False
        )


def timeline(result: RunResult, path: Path, *, title: str | None = None) -> list[Path]:
    """Writes `timeline_figure` to `path` in each format (`save`)."""
    return _draw_and_save(lambda: timeline_figure(result, title=title), path)


def _per_second(accesses: npt.NDArray[Any], ns: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """accesses / (ns * 1e-9), NaN (a gap in the line) where no time passed."""
    a = accesses.astype(np.float64)
    t = ns.astype(np.float64) * 1e-9
    out = np.full(len(a), np.nan)
    np.divide(a, t, out=out, where=t > 0)
    return out


def throughput_figure(result: RunResult, *, title: str | None = None) -> Any:
    """Each policy run's throughput per performance window (accesses per second of
    modelled application time), with the all-fast and all-slow references dashed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    for i, (name, p) in enumerate(result.policies.items()):
        w = p.windows
        t = w["end_ns"].astype(float) / 1e9
        rate = _per_second(w["accesses"], w["app_ns"]) / 1e6
        ax.plot(t, rate, label=name, linewidth=_width(i))
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
    return _finish_line_axes(fig, ax, title, f"{result.experiment.name}: throughput per window")


def throughput(result: RunResult, path: Path, *, title: str | None = None) -> list[Path]:
    """Writes `throughput_figure` to `path` in each format (`save`)."""
    return _draw_and_save(lambda: throughput_figure(result, title=title), path)


def placement_figure(result: RunResult, *, title: str | None = None) -> Any:
    """The bytes each policy run holds on the fastest tier at the end of each performance
    window, with the tier's capacity dashed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5), layout="constrained")
    ax = fig.subplots()
    specs = tiers(result.experiment)
    fast = specs[0] if specs else {}
    for i, (name, p) in enumerate(result.policies.items()):
        w = p.windows
        t = w["end_ns"].astype(float) / 1e9
        placed = w["placed"][:, 0].astype(float) / 2**20
        ax.step(t, placed, where="post", label=name, linewidth=_width(i))
    if "capacity" in fast:
        ax.axhline(
            fast["capacity"] / 2**20, linestyle="--", color="black", linewidth=1, label="capacity"
        )
    tier = fast.get("name", "fast tier")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"heap on {tier} (MiB)")
    default = f"{result.experiment.name}: heap on the fastest tier ({tier})"
    return _finish_line_axes(fig, ax, title, default)


def placement(result: RunResult, path: Path, *, title: str | None = None) -> list[Path]:
    """Writes `placement_figure` to `path` in each format (`save`)."""
    return _draw_and_save(lambda: placement_figure(result, title=title), path)


def accuracy_cost_figure(monitors: Any, params: Sequence[str] = ()) -> Any:
    """A sweep's trade-off: each monitor's precision and recall against its CPU cost, one
    point per parameter set (medians over seeds), one colour per monitor, the points of a
    monitor joined in the sweep's order. `monitors`: the sweep's monitor table
    (`tierscope.load_sweep(DIR)`, a polars DataFrame); `params`: its parameter columns
    (default: none, one point per monitor)."""
    import polars as pl
    from matplotlib.figure import Figure

    keys = [*params, "monitor"]
    points = monitors.group_by(keys, maintain_order=True).agg(
        pl.col("cpu_percent").median(),
        pl.col("precision").median(),
        pl.col("recall").median(),
    )
    fig = Figure(figsize=(10, 4), layout="constrained")
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    # Few enough points to say which parameter set each one is.
    named = 0 < len(params) and points.height <= 40
    for i, name in enumerate(dict.fromkeys(points["monitor"].to_list())):
        mine = points.filter(pl.col("monitor") == name)
        x = mine["cpu_percent"].to_numpy()
        for ax, metric in zip(axes, ("precision", "recall"), strict=True):
            y = mine[metric].to_numpy()
            ax.plot(x, y, marker="o", linewidth=_width(i) / 2, label=name, color=f"C{i}")
            if not named:
                continue
            # Parameter sets landing on one point (a parameter that does not touch this
            # monitor) share one label.
            labels: dict[tuple[float, float], list[str]] = {}
            for row, px, py in zip(mine.select(params).rows(), x, y, strict=True):
                labels.setdefault((px, py), []).append(", ".join(str(v) for v in row))
            for (px, py), texts in labels.items():
                ax.annotate(
                    " / ".join(texts),
                    (px, py),
                    xytext=(3, 3),
                    textcoords="offset points",
                    fontsize="x-small",
                    color=f"C{i}",
                )
    cpus = points["cpu_percent"].drop_nulls().to_numpy()
    for ax, metric in zip(axes, ("precision", "recall"), strict=True):
        positive = cpus[cpus > 0]
        # Costs spanning orders of magnitude (a scan against a sampler) on a log axis.
        if len(positive) and positive.max() > 20 * positive.min():
            ax.set_xscale("log")
        ax.set_xlabel("monitor CPU (% of one core, median over seeds)")
        ax.set_ylabel(f"{metric} (median over seeds)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    _legend_below(fig, axes[0])
    return fig


def cost_figure(result: RunResult) -> Any:
    """Each monitor's CPU, % of one core by the cost model, as horizontal bars."""
    from matplotlib.figure import Figure

    names = list(result.monitors)
    fig = Figure(figsize=(8, 1.2 + 0.35 * len(names)), layout="constrained")
    ax = fig.subplots()
    cpu = [result.monitors[n].summary.get("cpu_percent") or 0.0 for n in names]
    ax.barh(names, cpu, color="#4477aa")
    ax.set_xlabel("monitor CPU, % of one core (cost model)")
    ax.invert_yaxis()
    return fig


def _spread(ax: Any, df: Any, p: str, values: list[Any], metric: str, label: str) -> None:
    """One line of a parameter plot: `metric`'s median over the rows at each value of
    `p`, its 10-90% spread shaded in the line's colour."""
    import polars as pl

    med, lo, hi = [], [], []
    for v in values:
        col = df.filter(pl.col(p) == v)[metric].drop_nulls().to_numpy()
        med.append(np.median(col) if len(col) else np.nan)
        lo.append(np.quantile(col, 0.1) if len(col) else np.nan)
        hi.append(np.quantile(col, 0.9) if len(col) else np.nan)
    x = np.arange(len(values))
    (line,) = ax.plot(x, med, marker="o", label=label)
    ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color())


def _values_axis(ax: Any, values: list[Any], p: str) -> None:
    ax.set_xticks(np.arange(len(values)), [str(v) for v in values], rotation=30, fontsize="small")
    ax.set_xlabel(p)


def parameter_figure(monitors: Any, param: str) -> Any:
    """A sweep's precision and recall against one parameter (`param`, a column of the
    sweep's monitor table), one line per monitor: the median over the rows at each value,
    their 10-90 % spread shaded (seeds and the other parameters)."""
    import polars as pl
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.5), layout="constrained")
    axes = fig.subplots(1, 2)
    values = list(dict.fromkeys(monitors[param].to_list()))
    for monitor in dict.fromkeys(monitors["monitor"].to_list()):
        sub = monitors.filter(pl.col("monitor") == monitor)
        for ax, metric in zip(axes, ("precision", "recall"), strict=True):
            _spread(ax, sub, param, values, metric, monitor)
    for ax, metric in zip(axes, ("precision", "recall"), strict=True):
        _values_axis(ax, values, param)
        ax.set_ylabel(metric)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    _legend_below(fig, axes[0])
    return fig


def speedup_figure(policies: Any, param: str) -> Any:
    """A sweep's speed-up over all-slow against one parameter (`param`, a column of the
    sweep's policy table), one line per policy run: the median over the rows at each
    value, their 10-90 % spread shaded."""
    import polars as pl
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.5), layout="constrained")
    ax = fig.subplots()
    values = list(dict.fromkeys(policies[param].to_list()))
    for run in dict.fromkeys(policies["policy_run"].to_list()):
        sub = policies.filter(pl.col("policy_run") == run)
        _spread(ax, sub, param, values, "speedup_over_slow", run)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="all slow")
    _values_axis(ax, values, param)
    ax.set_ylabel("speed-up over all-slow")
    return _finish_line_axes(fig, ax, "", None)
