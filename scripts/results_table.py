"""Prints a markdown table of monitor metrics from tierscope output directories.

Usage: python scripts/results_table.py RUN_DIR [RUN_DIR ...]
Each RUN_DIR is the --out directory of a `tierscope run` (it holds metrics.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = [
    ("precision", "{:.3f}"),
    ("recall", "{:.3f}"),
    ("f1", "{:.3f}"),
    ("cpu_percent", "{:.3f}"),
    ("bits_cleared", "{:,}"),
    ("flushes", "{:,}"),
]


def rows(run_dir: Path) -> list[list[str]]:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    name = metrics["experiment"]["name"]
    out = []
    for monitor, m in metrics["monitors"].items():
        cells = [name, monitor]
        cells += [fmt.format(m[key]) if key in m else "" for key, fmt in COLUMNS]
        out.append(cells)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    header = ["experiment", "monitor"] + [key for key, _ in COLUMNS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for arg in argv:
        path = Path(arg)
        if not (path / "metrics.json").is_file():
            print(f"{path}: no metrics.json (not a tierscope output directory)", file=sys.stderr)
            return 2
        for cells in rows(path):
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
