"""The report of a run directory (summary, cost, timelines, heatmaps) or of a sweep
directory (rows aggregated over seeds, parameter plots with the seeds' spread)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from tierscope.output import OutputError, safe_name
from tierscope.plot import timeline_figure
from tierscope.report.html import esc, figure, page, png, table

#: Summary columns shown per monitor, in this order.
SUMMARY = ("precision", "recall", "f1", "cpu_percent", "bits_cleared", "app_slowdown")


def write_report(directory: str | os.PathLike[str], out: Path | None = None) -> Path:
    """Writes the report of the run or sweep in `directory` (default DIR/report.html)."""
    d = Path(directory)
    if (d / "metrics.json").is_file():
        text = run_report(d)
    elif (d / "sweep.json").is_file():
        text = sweep_report(d)
    else:
        raise OutputError(f"{d}: neither a run directory (metrics.json) nor a sweep (sweep.json)")
    target = out or d / "report.html"
    target.write_text(text, encoding="utf-8")
    return target


def _figure(*size: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained")


def run_report(d: Path) -> str:
    from tierscope.load import load

    result = load(d)
    m = result.metrics
    exp = m["experiment"]
    title = f"tierscope run: {exp['name']}"
    body = [f"<h1>{esc(title)}</h1>"]
    heap = m["heap"]["end"] - m["heap"]["start"]
    body.append(
        f"<p class=meta>engine <code>{esc(exp['machine']['engine'])}</code>, "
        f"heap {heap / 2**30:.3g} GiB, {m['duration_ns'] / 1e9:.3g} s simulated, "
        f"seed {exp['seed']}, truth at {m['block_size'] >> 10} KiB blocks</p>"
    )
    body.append("<h2>Summary (means after warm-up)</h2>")
    rows = [[name, *(mm.get(k) for k in SUMMARY)] for name, mm in m["monitors"].items()]
    body.append(table(["monitor", *SUMMARY], rows))

    body.append("<h2>Cost</h2>")
    fig = _figure(8, 2.5)
    ax = fig.subplots()
    names = list(m["monitors"])
    ax.barh(names, [m["monitors"][n]["cpu_percent"] for n in names], color="#4477aa")
    ax.set_xlabel("monitor CPU, % of one core (cost model)")
    ax.invert_yaxis()
    body.append(figure(fig, "monitor CPU per monitor"))

    body.append("<h2>Precision and recall per window</h2>")
    fig = timeline_figure(result, title="")
    body.append(figure(fig, "precision and recall per window"))

    body.append("<h2>Heatmaps: reported hot (top) against the truth (bottom)</h2>")
    for name in result.monitors:
        p = d / f"heatmap-{safe_name(name)}.png"
        if p.is_file():
            body.append(f"<h3>{esc(name)}</h3>" + png(p.read_bytes(), f"heatmap of {name}"))
    return page(title, body)


def sweep_report(d: Path) -> str:
    from tierscope.sweep import load_sweep

    manifest = json.loads((d / "sweep.json").read_text(encoding="utf-8"))
    df = load_sweep(d)
    title = f"tierscope sweep: {Path(manifest['source']).name}"
    body = [f"<h1>{esc(title)}</h1>"]
    runs = manifest["runs"]
    stored = df["run_id"].n_unique() if df.height else 0
    body.append(
        f"<p class=meta>{stored} of {len(runs)} runs stored; source {esc(manifest['source'])}</p>"
    )
    if not df.height:
        body.append("<p>No run has finished yet.</p>")
        return page(title, body)
    params = [k for k in runs[0]["params"] if k != "seed"]
    keys = [*params, "monitor"]
    import polars as pl

    agg = df.group_by(keys, maintain_order=True).agg(
        pl.len().alias("seeds"),
        pl.col("precision").median().alias("precision p50"),
        pl.col("precision").quantile(0.1).alias("precision p10"),
        pl.col("recall").median().alias("recall p50"),
        pl.col("recall").quantile(0.1).alias("recall p10"),
        pl.col("cpu_percent").median().alias("cpu % p50"),
    )
    body.append("<h2>Per parameter set and monitor, over seeds</h2>")
    body.append(table(agg.columns, agg.rows()))
    for p in params:
        body.append(
            f"<h2>Precision and recall against {esc(p)} (median, p10-p90 over the rest)</h2>"
        )
        fig = _figure(10, 3.5)
        axes = fig.subplots(1, 2)
        values = list(dict.fromkeys(df[p].to_list()))
        x = np.arange(len(values))
        for monitor in dict.fromkeys(df["monitor"].to_list()):
            sub = df.filter(pl.col("monitor") == monitor)
            for ax, metric in zip(axes, ("precision", "recall"), strict=True):
                med, lo, hi = [], [], []
                for v in values:
                    col = sub.filter(pl.col(p) == v)[metric].drop_nulls().to_numpy()
                    med.append(np.median(col) if len(col) else np.nan)
                    lo.append(np.quantile(col, 0.1) if len(col) else np.nan)
                    hi.append(np.quantile(col, 0.9) if len(col) else np.nan)
                ax.plot(x, med, marker="o", label=monitor)
                ax.fill_between(x, lo, hi, alpha=0.2)
        for ax, metric in zip(axes, ("precision", "recall"), strict=True):
            ax.set_xticks(x, [str(v) for v in values], rotation=30, fontsize="small")
            ax.set_ylabel(metric)
            ax.set_xlabel(p)
            ax.set_ylim(-0.02, 1.02)
        axes[0].legend(fontsize="small")
        body.append(figure(fig, f"precision and recall against {p}"))
    return page(title, body)
