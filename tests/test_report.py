"""`tierscope report`: self-contained HTML for a run and a sweep, with and without
[tiering], checked as a file (every image inline and decodable, nothing fetched from the
network) and rendered in headless Chromium (every image decoded, no console error, a
screenshot a person can look at)."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib import image as mpimg

import tierscope
from conftest import run_cli
from test_sweep import POLICY_RUNS, sweep_file, tiering_sweep_file
from tierscope.report.html import fmt

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Flags for a root, offline, headless Chromium (its own profile per call).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def inline_images(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]


#: The alt text of the images a tiering run's report adds, and a tiering sweep's.
TIERING_RUN_IMAGES = (
    "throughput per window of each policy run",
    "fast-tier bytes per window of each policy run",
)
TIERING_SWEEP_IMAGES = ("speed-up over all-slow against capacity",)


def images_by_alt(text: str) -> dict[str, bytes]:
    found = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)"', text)
    return {alt: base64.b64decode(data) for alt, data in found}


def check_file(report: Path, min_images: int) -> None:
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "http://" not in text and "https://" not in text, "the page must open offline"
    images = inline_images(text)
    assert len(images) >= min_images
    for data in images:
        img = mpimg.imread(io.BytesIO(data), format="png")
        assert img.shape[0] > 50 and img.shape[1] > 50
        assert img.std() > 0, "a blank image"
    assert text.count("<img") == len(images), "every image is inline"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    sweep_file(tmp_path)
    out = tmp_path / "run"
    tierscope.run(tmp_path / "base.toml", out=out, progress=False)
    return out


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    out = tmp_path / "sweep"
    tierscope.run_sweep(sweep_file(tmp_path, seeds=3), out, progress=False)
    return out


@pytest.fixture
def tiering_run_dir(tmp_path: Path) -> Path:
    tiering_sweep_file(tmp_path)
    out = tmp_path / "tiering-run"
    tierscope.run(tmp_path / "tiers.toml", out=out, progress=False)
    return out


@pytest.fixture
def tiering_sweep_dir(tmp_path: Path) -> Path:
    out = tmp_path / "tiering-sweep"
    tierscope.run_sweep(tiering_sweep_file(tmp_path, seeds=2), out, jobs=2, progress=False)
    return out


def test_run_report(run_dir: Path) -> None:
    proc = run_cli("report", run_dir, cwd=run_dir)
    assert proc.returncode == 0, proc.stderr
    report = run_dir / "report.html"
    # Cost bars, timelines and one heatmap per monitor.
    check_file(report, min_images=4)
    text = report.read_text()
    for needle in ("damon-mod", "telescope-bnd", "precision", "Heatmaps"):
        assert needle in text


def test_sweep_report(sweep_dir: Path) -> None:
    target = tierscope.write_report(sweep_dir)
    check_file(target, min_images=1)
    text = target.read_text()
    assert "6 of 6 runs stored" in text and "precision p10" in text


@pytest.mark.figures
def test_tiering_run_report(tiering_run_dir: Path) -> None:
    proc = run_cli("report", tiering_run_dir, cwd=tiering_run_dir)
    assert proc.returncode == 0, proc.stderr
    report = tiering_run_dir / "report.html"
    # Cost bars, timelines, throughput, fast-tier bytes, one heatmap.
    check_file(report, min_images=5)
    text = report.read_text()
    assert "Tiering: policy runs" in text and "speed-up over all-slow" in text
    images = images_by_alt(text)
    for alt in TIERING_RUN_IMAGES:
        assert alt in images, alt
    # The throughput image is the figure `tierscope run` wrote as throughput.png, at the
    # report's resolution: the same shape.
    shot = mpimg.imread(io.BytesIO(images[TIERING_RUN_IMAGES[0]]), format="png")
    written = mpimg.imread(tiering_run_dir / "throughput.png")
    assert shot.shape[1] / shot.shape[0] == pytest.approx(written.shape[1] / written.shape[0], 0.02)
    # One table row per policy run, with its numbers as in metrics.json.
    policies = tierscope.load(tiering_run_dir).metrics["policies"]
    table = text.split("Tiering: policy runs")[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    assert len(rows) == len(POLICY_RUNS)
    for name, row in zip(POLICY_RUNS, rows, strict=True):
        cells = re.findall(r"<td>([^<]*)</td>", row)
        s, mig = policies[name]["summary"], policies[name]["migration"]
        assert cells[0] == name and cells[1] == policies[name]["kind"]
        assert cells[3] == fmt(s["speedup_over_slow"])
        assert cells[4] == fmt(s["gap_to_oracle"]) and cells[5] == fmt(s["fast_hit_ratio"])
        assert cells[6] == fmt(mig["promoted_bytes"] / 1e9)
        assert cells[8] == fmt(s["migration_cpu_ns"] / 1e6)


def test_tiering_run_report_shows_ops_per_s_when_there_are_operations(
    tiering_run_dir: Path,
) -> None:
    text = tierscope.write_report(tiering_run_dir).read_text()
    assert "<th>ops/s</th>" not in text
    # A workload with operations (key-value, GUPS) has ops_per_s in each summary.
    path = tiering_run_dir / "metrics.json"
    doc = json.loads(path.read_text())
    for i, p in enumerate(doc["policies"].values()):
        p["summary"]["ops_per_s"] = 1000.0 * (i + 1)
    path.write_text(json.dumps(doc))
    text = tierscope.write_report(tiering_run_dir).read_text()
    assert "<th>ops/s</th>" in text
    table = text.split("Tiering: policy runs")[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    assert [re.findall(r"<td>([^<]*)</td>", r)[-1] for r in rows] == ["1000", "2000", "3000"]


def test_tiering_sweep_report(tiering_sweep_dir: Path) -> None:
    target = tierscope.write_report(tiering_sweep_dir)
    # Precision and recall against capacity, speed-up against capacity.
    check_file(target, min_images=2)
    text = target.read_text()
    assert "4 of 4 runs stored" in text and "precision p10" in text
    assert "Tiering: per parameter set and policy run, over seeds" in text
    images = images_by_alt(text)
    for alt in TIERING_SWEEP_IMAGES:
        assert alt in images, alt
    # The table: one row per capacity and policy run, over the 2 seeds, monitor rows
    # apart (their table counts 2 seeds per capacity, not 8 rows).
    table = text.split("over seeds</h2>")[2].split("</table>")[0]
    rows = [re.findall(r"<td>([^<]*)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table)]
    assert [r[:3] for r in rows[1:]] == [
        [c, run, "2"] for c in ("4MiB", "32MiB") for run in POLICY_RUNS
    ]
    monitors = text.split("over seeds</h2>")[1].split("</table>")[0]
    assert monitors.count("<td>damon-mod</td>") == 2 and "<td>8</td>" not in monitors


def test_report_of_something_else_is_refused(tmp_path: Path) -> None:
    proc = run_cli("report", tmp_path, cwd=tmp_path)
    assert proc.returncode == 2 and "neither a run directory" in proc.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it)")
@pytest.mark.parametrize(
    ("kind", "images"),
    [
        ("run_dir", ()),
        ("sweep_dir", ()),
        ("tiering_run_dir", TIERING_RUN_IMAGES),
        ("tiering_sweep_dir", TIERING_SWEEP_IMAGES),
    ],
)
def test_reports_render_in_chromium(
    kind: str, images: tuple[str, ...], request: pytest.FixtureRequest
) -> None:
    d: Path = request.getfixturevalue(kind)
    report = tierscope.write_report(d)
    url = report.resolve().as_uri()
    assert CHROMIUM is not None
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={d / 'profile-dom'}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None
    assert 'data-images="ok"' in body.group(0), body.group(0)
    # Each image as the browser decoded it: its alt text and its size.
    decoded = re.findall(r'<img alt="([^"]*)"[^>]*? data-decoded="([^"]*)"', dom.stdout)
    assert len(decoded) == len(inline_images(report.read_text())), decoded
    for alt, size in decoded:
        w, h = (int(v) for v in size.split("x"))
        assert w > 50 and h > 50, (alt, size)
    for alt in images:
        assert alt in dict(decoded), (alt, decoded)
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [], console
    shot = d / "report.png"
    subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={d / 'profile-shot'}",
            "--window-size=1200,1600",
            f"--screenshot={shot}",
            url,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    img = mpimg.imread(shot)
    assert img.shape[:2] == (1600, 1200) and img.std() > 0.01
    print(f"screenshot: {shot}")
