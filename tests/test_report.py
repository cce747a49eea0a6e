"""`tierscope report`: self-contained HTML for a run and a sweep, checked as a file (every
image inline and decodable, nothing fetched from the network) and rendered in headless
Chromium (every image decoded, no console error, a screenshot a person can look at)."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib import image as mpimg

import tierscope
from conftest import run_cli
from test_sweep import sweep_file

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


def test_report_of_something_else_is_refused(tmp_path: Path) -> None:
    proc = run_cli("report", tmp_path, cwd=tmp_path)
    assert proc.returncode == 2 and "neither a run directory" in proc.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it)")
@pytest.mark.parametrize("kind", ["run", "sweep"])
def test_reports_render_in_chromium(kind: str, run_dir: Path, sweep_dir: Path) -> None:
    d = run_dir if kind == "run" else sweep_dir
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
