"""The report of a run directory (summary, cost, timelines, heatmaps; with `[tiering]`,
the policy runs' table, throughput and fast-tier bytes over time) or of a sweep directory
(rows aggregated over seeds, parameter plots with the seeds' spread, for monitor rows and
for policy rows)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tierscope import outdir
from tierscope.output import OutputError, safe_name
from tierscope.plot import (
    accuracy_cost_figure,
    cost_figure,
    heatmap_figure,
    parameter_figure,
    placement_figure,
    shared_scales,
    speedup_figure,
    throughput_figure,
    timeline_figure,
)
from tierscope.report.html import esc, figure, page, png, table
from tierscope.results import RunResult, tiers
from tierscope.sweep.store import as_written, param_columns

#: Summary columns shown per monitor, in this order: keys of `tierscope compare`'s rows,
#: shown under its headers and in its units (percent where it says %).
SUMMARY = ("precision", "recall", "f1", "cpu_percent", "bits_flipped", "app_slowdown_percent")
#: The policy table's columns (as `tierscope compare`'s): header, key of its rows.
POLICY_TABLE = (
    ("policy run", "run"),
    ("kind", "kind"),
    ("monitor", "monitor"),
    ("speed-up over all-slow", "speedup_over_slow"),
    ("gap to oracle", "gap_to_oracle"),
    ("fast-hit ratio", "fast_hit_ratio"),
    ("GB promoted", "promoted_gb"),
    ("GB demoted", "demoted_gb"),
    ("migration CPU ms", "migration_cpu_ms"),
)


def write_report(
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
) -> Path:
    """Writes the report of the run or sweep in `directory` (default DIR/report.html),
    through `tierscope.outdir`: into DIR, holding DIR's lock, replacing a report.html
    tierscope wrote (its manifest names it) and recording it there; to `out`, a file,
    refusing an existing one unless `force`. An existing DIR/report.html tierscope did
    not write is replaced only with `force` too."""
    d = Path(directory)
    if (d / "metrics.json").is_file():
        make = run_report
    elif (d / "sweep.json").is_file():
        make = sweep_report
    else:
        raise OutputError(f"{d}: neither a run directory (metrics.json) nor a sweep (sweep.json)")
    if out is not None:
        with outdir.file_output(out, force=force) as path:
            path.write_text(make(d), encoding="utf-8")
        return Path(out)
    with outdir.claim(d, None, add=True, force=force) as claim:
        text = make(d)
        with claim.stage() as staging:
            (staging / "report.html").write_text(text, encoding="utf-8")
    return d / "report.html"


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
    from tierscope.cli.compare import COLUMNS
    from tierscope.cli.compare import rows as monitor_rows

    headers = {key: header for key, header, _ in COLUMNS}
    rows = [[r["monitor"], *(r[k] for k in SUMMARY)] for r in monitor_rows(m)]
    body.append(table(["monitor", *(headers[k] for k in SUMMARY)], rows))

    body.append("<h2>Cost</h2>")
    body.append(figure(cost_figure(result), "monitor CPU per monitor"))

    body.append("<h2>Precision and recall per window</h2>")
    fig = timeline_figure(result, title="")
    body.append(figure(fig, "precision and recall per window"))

    if result.policies:
        body += tiering_section(result)

    body.append("<h2>Heatmaps: reported hot (top) against the truth (bottom)</h2>")
    scales = shared_scales(result)
    for name in result.monitors:
        p = d / f"heatmap-{safe_name(name)}.png"
        alt = f"heatmap of {name}"
        if p.is_file():
            image = png(p.read_bytes(), alt)
        else:  # written without PNGs (TIERSCOPE_FIGURES=svg,pdf): drawn again
            image = figure(heatmap_figure(result, name, scales=scales, title=""), alt)
        body.append(f"<h3>{esc(name)}</h3>" + image)
    return page(title, body)


def tiering_section(result: RunResult) -> list[str]:
    """The `[tiering]` part of a run's report: the tiers, a table of the policy runs and
    their throughput and fast-tier bytes per performance window."""
    from tierscope.cli.compare import policy_rows

    out = ["<h2>Tiering: policy runs</h2>"]
    specs = tiers(result.experiment)
    described = ", ".join(
        f"<code>{esc(t.get('name', '?'))}</code> {t['capacity'] / 2**20:.4g} MiB"
        if "capacity" in t
        else f"<code>{esc(t.get('name', '?'))}</code>"
        for t in specs
    )
    out.append(
        f"<p class=meta>tiers, fastest first: {described}. Speed-up over all-slow: the "
        "application time with the whole heap on the slowest tier / the run's; gap to "
        "oracle: the run's time / the oracle's (1 = as good); GB = 10<sup>9</sup> bytes.</p>"
    )
    rows = policy_rows(result.metrics)
    ops = [p.summary.get("ops_per_s") for p in result.policies.values()]
    head = [h for h, _ in POLICY_TABLE]
    cells = [[r[k] for _, k in POLICY_TABLE] for r in rows]
    if any(v is not None for v in ops):
        head.append("ops/s")
        cells = [[*c, v] for c, v in zip(cells, ops, strict=True)]
    out.append(table(head, cells))
    out.append("<h3>Throughput per window</h3>")
    out.append(
        figure(throughput_figure(result, title=""), "throughput per window of each policy run")
    )
    out.append("<h3>Heap on the fastest tier</h3>")
    out.append(
        figure(placement_figure(result, title=""), "fast-tier bytes per window of each policy run")
    )
    return out


def sweep_report(d: Path) -> str:
    from tierscope.sweep import load_sweep

    manifest = json.loads((d / "sweep.json").read_text(encoding="utf-8"))
    monitors = load_sweep(d)
    policies = load_sweep(d, "policies")
    title = f"tierscope sweep: {Path(manifest['source']).name}"
    body = [f"<h1>{esc(title)}</h1>"]
    runs = manifest["runs"]
    stored = len(set(monitors["run_id"].to_list()) | set(policies["run_id"].to_list()))
    # The sweep file's name only: an absolute path would tell the reader about the
    # machine that wrote the report, not about the sweep.
    body.append(
        f"<p class=meta>{stored} of {len(runs)} runs stored; sweep file "
        f"<code>{esc(Path(manifest['source']).name)}</code></p>"
    )
    if not stored:
        body.append("<p>No run has finished yet.</p>")
        return page(title, body)
    # The swept parameters, seeds aside, shown as the sweep file writes them ("2ms",
    # "4MiB") under their names: the tables store them typed (`sample_ns`).
    columns = [p for p in param_columns(runs) if p.param != "seed"]
    params = [p.param for p in columns]
    if monitors.height:
        body += _sweep_monitors(as_written(monitors, columns), params)
    if policies.height:
        body += _sweep_policies(as_written(policies, columns), params)
    return page(title, body)


def _sweep_monitors(df: Any, params: list[str]) -> list[str]:
    """A sweep's monitor rows: aggregated over seeds, and precision and recall against
    each swept parameter."""
    import polars as pl

    body: list[str] = []
    keys = [*params, "monitor"]
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
    body.append("<h2>Accuracy against CPU cost (one point per parameter set)</h2>")
    body.append(
        figure(accuracy_cost_figure(df, params), "precision and recall against monitor CPU")
    )
    for p in params:
        body.append(
            f"<h2>Precision and recall against {esc(p)} (median, p10-p90 over the rest)</h2>"
        )
        body.append(figure(parameter_figure(df, p), f"precision and recall against {p}"))
    return body


def _sweep_policies(df: Any, params: list[str]) -> list[str]:
    """A sweep's policy rows: aggregated over seeds per parameter set and policy run, and
    the speed-up over all-slow against each swept parameter."""
    import polars as pl

    body = ["<h2>Tiering: per parameter set and policy run, over seeds</h2>"]
    agg = df.group_by([*params, "policy_run"], maintain_order=True).agg(
        pl.len().alias("seeds"),
        pl.col("speedup_over_slow").median().alias("speed-up p50"),
        pl.col("speedup_over_slow").quantile(0.1).alias("speed-up p10"),
        pl.col("gap_to_oracle").median().alias("gap to oracle p50"),
        pl.col("fast_hit_ratio").median().alias("fast-hit p50"),
        (pl.col("promoted_bytes").median() / 1e9).alias("GB promoted p50"),
        (pl.col("migration_cpu_ns").median() / 1e6).alias("migration CPU ms p50"),
    )
    body.append(table(agg.columns, agg.rows()))
    for p in params:
        body.append(
            f"<h2>Speed-up over all-slow against {esc(p)} (median, p10-p90 over the rest)</h2>"
        )
        body.append(figure(speedup_figure(df, p), f"speed-up over all-slow against {p}"))
    return body
