"""Checks that two output trees hold the same numbers: every metrics.json under OLD is
compared with the one at the same relative path under NEW (or, for a repro directory,
at runs/base=NAME/), field by field in `monitors`, `heap`, `mappings`, `duration_ns` and
`block_size` (per-window series included), plus repro.json's quality and cost rows.
Keys only NEW has are listed, not counted as differences. Exit status 1 on a difference.

    .venv/bin/python scripts/compare_outputs.py OLD NEW

Used to check that a reshape changed no result (the same seeds before and after).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def walk(a: Any, b: Any, path: str, diffs: list[str], new: set[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            if k not in b:
                diffs.append(f"{path}.{k}: missing in NEW")
            elif k not in a:
                new.add(f"{path}.{k}")
            else:
                walk(a[k], b[k], f"{path}.{k}", diffs, new)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            walk(x, y, f"{path}[{i}]", diffs, new)
    elif a != b:
        diffs.append(f"{path}: {a!r} vs {b!r}")


def main() -> int:
    old, new = Path(sys.argv[1]), Path(sys.argv[2])
    total = 0
    for a_path in sorted(old.rglob("metrics.json")):
        rel = a_path.relative_to(old)
        b_path = new / rel
        if not b_path.is_file():
            b_path = new / "runs" / f"base={rel.parent.name}" / "metrics.json"
        a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
        diffs: list[str] = []
        added: set[str] = set()
        for key in ("monitors", "duration_ns", "block_size", "heap", "mappings"):
            walk(a[key], b[key], key, diffs, added)
        print(
            f"{rel}: {len(diffs)} differences"
            + (f"; new keys {sorted(added)[:3]}" if added else "")
        )
        for d in diffs[:5]:
            print("   ", d)
        total += len(diffs)
    for repro in sorted(old.rglob("repro.json")):
        a = json.loads(repro.read_text())
        b = json.loads((new / repro.relative_to(old)).read_text())
        diffs = []
        walk(a["quality"], b["quality"], "quality", diffs, set())
        walk(a["cost"], b["cost"], "cost", diffs, set())
        print(f"{repro.relative_to(old)}: {len(diffs)} differences in quality and cost rows")
        total += len(diffs)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
