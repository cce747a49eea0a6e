"""The share of a tiering run's accesses served from the fast tier, per stretch of its run:
when a policy's placement settles, and where.

Reads `arrays-policy-*.npz` of `tierscope run`'s output directory (`windows.served`: per
performance-model window, the accesses each tier served) and prints, per policy, the
fast tier's share of each `--every` windows' accesses and of the last window.

    tierscope run experiments/fidelity/damon-sampling-tiering.toml -o runs/dst-each
    python3 scripts/dram_share.py runs/dst-each --every 50
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


class BadRun(Exception):
    """An output directory or arrays file this script cannot read."""


def shares(path: Path, every: int) -> list[tuple[int, float]]:
    """(first window, fast tier's share) per `every` windows of one policy's arrays."""
    try:
        served = np.load(path)["windows.served"]
    except (OSError, ValueError, KeyError) as e:
        raise BadRun(f"{path}: not a policy's arrays with `windows.served` ({e})") from e
    if served.ndim != 2 or len(served) == 0:
        shape = served.shape
        raise BadRun(f"{path}: `windows.served` has shape {shape}, expected (windows, tiers)")
    rows = []
    for start in range(0, len(served), every):
        chunk = served[start : start + every]
        rows.append((start, float(chunk[:, 0].sum() / chunk.sum())))
    last = served[-1]
    rows.append((len(served) - 1, float(last[0] / last.sum())))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a `tierscope run` output directory")
    ap.add_argument("--every", type=int, default=50, help="windows per row (default 50)")
    args = ap.parse_args()
    if args.every < 1:
        ap.error("--every must be at least 1")
    files = sorted(args.run.glob("arrays-policy-*.npz"))
    try:
        if not files:
            raise BadRun(f"{args.run}: no arrays-policy-*.npz (a run with [tiering]?)")
        for f in files:
            policy = f.stem.removeprefix("arrays-policy-")
            cells = "  ".join(f"{start}: {share:.3f}" for start, share in shares(f, args.every))
            print(f"{policy}  fast tier's share from window  {cells}")
    except BadRun as e:
        print(f"dram_share.py: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
