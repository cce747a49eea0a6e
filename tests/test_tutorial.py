"""docs/guide/TUTORIAL.md runs as written: its files (fenced blocks with `file=NAME`) are
written and its commands (`sh` blocks, one command per line, `\\` continuing a line) and
Python (`python` blocks) run in order in an empty directory, each succeeding."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "guide" / "TUTORIAL.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    """(language, info after it, body) of every fenced block, in order."""
    return [(m[1], m[2].strip(), m[3]) for m in FENCE.finditer(TUTORIAL.read_text())]


def commands(body: str) -> list[str]:
    return [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]


def test_every_block_is_run() -> None:
    # Each block is a file, shell commands or Python: nothing in the tutorial goes unrun.
    found = blocks()
    assert len(found) >= 8
    for lang, info, _ in found:
        assert lang in ("sh", "python") or info.startswith("file="), (lang, info)


@pytest.mark.figures
def test_the_tutorial_runs_end_to_end(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    ran = []
    for lang, info, body in blocks():
        if info.startswith("file="):
            (tmp_path / info.removeprefix("file=")).write_text(body)
            continue
        if lang == "python":
            argv = [[sys.executable, "-c", body]]
        else:
            argv = [["bash", "-c", c] for c in commands(body)]
        for a in argv:
            proc = subprocess.run(
                a, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert proc.returncode == 0, f"{a[-1]}\n{proc.stdout}\n{proc.stderr}"
            ran.append(a[-1])
    assert any(c.startswith("tierscope sweep sweep.toml --jobs") for c in ran)
    # What the text says each step leaves behind.
    runs = tmp_path / "runs"
    assert (runs / "monitors" / "heatmap-damon-mod.png").is_file()
    assert (runs / "tiering" / "placement.png").is_file()
    assert (runs / "aggr100-vs-200" / "compare.md").is_file()
    assert "monitors[0].aggr" in (runs / "aggr100-vs-200" / "compare.md").read_text()
    text = (runs / "sweep" / "report.html").read_text()
    assert "6 of 6 runs stored" in text and "Accuracy against CPU" in text
    assert (runs / "tiering" / "report.html").is_file()
    assert (runs / "accuracy-cost.pdf").read_bytes().startswith(b"%PDF")
