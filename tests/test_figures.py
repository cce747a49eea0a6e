"""Figures (tierscope.plot): every figure in PNG, SVG and PDF by default, the same bytes
for the same run; one colour scale per quantity across heatmap panels, labelled with what
nr_accesses counts; the truth in two colours; the workload's regions named on the heap
axis; an empty monitor on its unit's scale; legends outside the axes; the figure functions
return matplotlib Figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tierscope
from tierscope import plot
from tierscope.outdir import OutputError

TIERING = {
    "name": "tiers",
    "duration": "1s",
    "warmup": "0s",
    "workload": {
        "rate": "1M/s",
        "regions": [{"name": "cold", "size": "56MiB"}, {"name": "hot", "size": "8MiB"}],
        "phases": [
            {
                "name": "p",
                "duration": "1s",
                "patterns": [{"region": "hot", "kind": "random", "mode": "ro"}],
            }
        ],
    },
    "monitors": [{"preset": "damon-mod"}, {"preset": "damon-agg"}, {"preset": "pebs-mod"}],
    "tiering": {
        "tiers": [{"preset": "dram", "capacity": "16MiB"}, "cxl"],
        "policies": ["telescope-rule", "oracle"],
    },
}


@pytest.fixture(scope="module")
def result() -> tierscope.RunResult:
    return tierscope.run(TIERING, progress=False)


def images(fig: Any) -> list[Any]:
    return [im for ax in fig.axes for im in ax.get_images()]


def test_default_formats_are_png_svg_pdf_and_repeatable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(plot.FORMATS_ENV, raising=False)
    exp = {**TIERING, "monitors": [{"preset": "damon-mod"}], "duration": "400ms"}
    exp["workload"] = {**TIERING["workload"], "phases": [{**TIERING["workload"]["phases"][0]}]}
    exp["workload"]["phases"][0]["duration"] = "400ms"
    exp["tiering"] = {**TIERING["tiering"], "policies": ["oracle"]}
    result = tierscope.run(exp, out=tmp_path / "a", progress=False)
    files = tierscope.outdir.read_manifest(tmp_path / "a")["files"]  # type: ignore[index]
    for stem in ("heatmap-damon-mod", "throughput", "placement"):
        assert {f"{stem}.{fmt}" for fmt in plot.FORMATS} <= set(files)
    # The same figure again: the same bytes (no dates, fixed SVG ids).
    (tmp_path / "b").mkdir()
    plot.placement(result, tmp_path / "b" / "placement.png")
    for fmt in plot.FORMATS:
        name = f"placement.{fmt}"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "placement.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "a" / "placement.pdf").read_bytes().startswith(b"%PDF")


def test_formats_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(plot.FORMATS_ENV, "PDF, png")
    assert plot.figure_formats() == ("pdf", "png")
    monkeypatch.setenv(plot.FORMATS_ENV, "png,jpg")
    with pytest.raises(OutputError, match="unknown figure format jpg; accepted: png, svg, pdf"):
        plot.figure_formats()
    with pytest.raises(OutputError, match="jpg"):
        tierscope.run(TIERING, out="never-written", progress=False)
    assert not Path("never-written").exists()
    monkeypatch.setenv(plot.FORMATS_ENV, "none,png")
    with pytest.raises(OutputError, match=r"unknown figure format none; .* or 'none' alone"):
        plot.figure_formats()


def test_no_figures_writes_the_rest_and_the_report_draws_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(plot.FORMATS_ENV, "None")
    exp = {**TIERING, "duration": "400ms", "monitors": [{"preset": "damon-mod"}]}
    exp["tiering"] = {**TIERING["tiering"], "policies": ["oracle"]}
    tierscope.run(exp, out=tmp_path / "r", progress=False)
    written = {p.name for p in (tmp_path / "r").iterdir()}
    assert not {n for n in written if n.endswith((".png", ".svg", ".pdf"))}, written
    assert {"metrics.json", "arrays-damon-mod.npz", "windows-damon-mod.csv"} <= written
    text = tierscope.write_report(tmp_path / "r").read_text()
    assert 'alt="heatmap of damon-mod" src="data:image/png;base64,' in text


def test_heatmap_panels_share_a_scale_per_quantity(result: tierscope.RunResult) -> None:
    assert [m.feed for m in result.monitors.values()] == ["access_checks"] * 2 + ["samples"]
    fig = plot.heatmap_figure(result)
    reported = images(fig)[:3]
    # damon-mod (40 checks a window) and damon-agg (200) on one 0-100 % scale; PEBS
    # samples on their own, up to the most any region got.
    assert [(im.norm.vmin, im.norm.vmax) for im in reported[:2]] == [(0.0, 100.0)] * 2
    top = float(result.monitors["pebs-mod"].snapshots.nr_accesses.max())
    assert (reported[2].norm.vmin, reported[2].norm.vmax) == (0.0, top)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert "nr_accesses:\n% of the window's checks\nthat found it accessed" in labels
    assert "nr_accesses:\nsampled accesses\nper window" in labels
    # Values above 100 % would mean a wrong denominator.
    for im in reported[:2]:
        assert 0 < im.get_array().max() <= 100.0


def test_truth_is_binary_and_regions_are_named(result: tierscope.RunResult) -> None:
    fig = plot.heatmap_figure(result, "damon-mod")
    truth = images(fig)[-1]
    assert truth.cmap.N == 2
    assert set(np.unique(truth.get_array())) == {0.0, 1.0}
    bar = next(ax for ax in fig.axes if ax.get_ylabel() == "truth")
    assert [t.get_text() for t in bar.get_yticklabels()] == ["not hot", "hot"]
    # The hot region (first in the heap, 8 MiB) and the cold one named on the right.
    assert plot.heap_regions(result) == [("hot", 0, 8 << 20), ("cold", 8 << 20, 64 << 20)]
    for ax in fig.axes[:2]:  # the reported and the truth panel
        (right,) = ax.child_axes
        assert [t.get_text() for t in right.get_yticklabels()] == ["hot", "cold"]
    assert fig.axes[0].get_ylabel() == "offset in heap (MiB)"


def test_an_empty_monitor_gets_its_units_scale(result: tierscope.RunResult) -> None:
    # A threshold no region reaches: nothing reported hot, the scale stays 0..100 %, or
    # 0..1 sample, never matplotlib's -0.1..0.1 of an empty image.
    exp = tierscope.load_experiment({**TIERING, "hot_threshold": 100000})
    empty = tierscope.RunResult(
        exp,
        result.duration_ns,
        result.block_size,
        result.heap,
        result.mappings,
        result.monitors,
        result.policies,
    )
    fig = plot.heatmap_figure(empty)
    norms = [(im.norm.vmin, im.norm.vmax) for im in images(fig)[:3]]
    assert norms == [(0.0, 100.0), (0.0, 100.0), (0.0, 1.0)]
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("nothing reported hot") == 3


@pytest.mark.parametrize(
    "make", [plot.timeline_figure, plot.throughput_figure, plot.placement_figure]
)
def test_legends_are_outside_the_axes(result: tierscope.RunResult, make: Any) -> None:
    fig = make(result)
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert names[0] in (*result.monitors, *result.policies)
    # Drawn, the legend lies below every axes.
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes)


def test_lines_of_equal_runs_stay_visible(result: tierscope.RunResult) -> None:
    fig = plot.placement_figure(result)
    widths = [line.get_linewidth() for line in fig.axes[0].get_lines()[: len(result.policies)]]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(widths)


def test_a_run_shorter_than_a_window(tmp_path: Path) -> None:
    # 100 ms against DAMON's 200 ms aggregation: no window ends; the figure says so and
    # spans the run, on the unit's scale.
    exp = {**TIERING, "duration": "100ms", "monitors": [{"preset": "damon-mod"}]}
    exp.pop("tiering")
    short = tierscope.run(exp, progress=False)
    fig = plot.heatmap_figure(short)
    assert [t.get_text() for t in fig.axes[0].texts] == ["no window ended"]
    assert fig.axes[0].get_xlim() == (0.0, 0.1)
    assert (images(fig)[0].norm.vmin, images(fig)[0].norm.vmax) == (0.0, 100.0)
    plot.save(fig, tmp_path / "short.png", ["png"])


def test_saving_lays_out_once_and_leaves_the_figure_as_it_was(tmp_path: Path) -> None:
    # `save` lays the figure out for its first format and keeps those positions for the
    # others (one layout instead of three): the first format is what it would be alone,
    # every format is written, and the figure keeps its own layout engine.
    exp = {**TIERING, "duration": "400ms", "monitors": [{"preset": "damon-mod"}]}
    exp.pop("tiering")
    result = tierscope.run(exp, progress=False)
    fig = plot.heatmap_figure(result)
    engine = fig.get_layout_engine()
    written = plot.save(fig, tmp_path / "h.png", ["png", "svg", "pdf"])
    assert [p.suffix for p in written] == [".png", ".svg", ".pdf"]
    assert all(p.stat().st_size > 1000 for p in written)
    assert fig.get_layout_engine() is engine
    alone = plot.save(plot.heatmap_figure(result), tmp_path / "alone.png", ["png"])
    assert alone[0].read_bytes() == written[0].read_bytes()


def test_the_report_draws_heatmaps_written_without_png(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(plot.FORMATS_ENV, "svg")
    exp = {**TIERING, "duration": "400ms", "monitors": [{"preset": "damon-mod"}]}
    exp.pop("tiering")
    tierscope.run(exp, out=tmp_path / "r", progress=False)
    assert not list((tmp_path / "r").glob("*.png"))
    assert (tmp_path / "r" / "heatmap-damon-mod.svg").is_file()
    text = tierscope.write_report(tmp_path / "r").read_text()
    assert 'alt="heatmap of damon-mod" src="data:image/png;base64,' in text


def test_a_sweep_with_outputs_checks_the_formats_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(plot.FORMATS_ENV, "png,gif")
    sweep = {"base": TIERING, "axes": [{"path": "seed", "values": [1, 2]}]}
    with pytest.raises(OutputError, match="unknown figure format gif"):
        tierscope.run_sweep(sweep, tmp_path / "s", outputs=True, progress=False)
    assert not (tmp_path / "s").exists()


def test_every_feed_kind_has_a_colour_scale_unit() -> None:
    # The feed kinds of tierscope_core::FeedKind (serialized in snake_case): a new one
    # without a unit here would colour its heatmaps as bare "nr_accesses".
    import re

    source = (Path(__file__).parent.parent / "crates/tierscope-core/src/feed.rs").read_text()
    body = source.split("pub enum FeedKind {", 1)[1].split("\n}", 1)[0]
    variants = re.findall(r"^\s{4}([A-Z]\w*),", body, re.M)
    kinds = {re.sub(r"(?<!^)([A-Z])", r"_\1", v).lower() for v in variants}
    assert "access_checks" in kinds and len(kinds) >= 6
    assert kinds == set(plot.FEED_UNITS)
