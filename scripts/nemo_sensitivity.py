"""Sensitivity runs for the gaps between `tierscope repro nemo` and the NEMO paper
(issue 26, docs/techniques/NEMO.md "The gaps, pinned"): use case 1 (hot-set recovery) or
use case 2 (THP split candidates) with `--set PATH=VALUE` overrides on the shipped
experiment file (the sweep path syntax of `tierscope run --set`), each setting of one
named assumption a separate run, printed as the repro's table rows.

    python scripts/nemo_sensitivity.py hotset --duration 120 \
        --set 'monitors[1].aggr=1s'
    python scripts/nemo_sensitivity.py hotset --duration 400 \
        --vary 'monitors[0].period=5003,20011,80021'
    python scripts/nemo_sensitivity.py thp --set 'monitors[0].period=599'

    python scripts/nemo_sensitivity.py noisy \
        --set 'tiering.app.compute_ns=24.7' --set 'tiering.app.mlp=75'

`noisy` runs use case 3 (experiments/nemo/noisy-neighbour.toml, the victim alone and each
policy run) and prints each row's p99 and mean increase beside the paper's.

`--vary PATH=V1,V2,...` runs once per value (on top of every `--set`); `--json FILE`
also writes the rows. The documented numbers and their commands are in
docs/techniques/NEMO.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import tierscope
from tierscope.experiment import parse_set
from tierscope.studies import nemo


def _runs(sets: list[str], vary: str | None) -> list[list[tuple[str, str]]]:
    base = parse_set(sets)
    if vary is None:
        return [base]
    path, _, values = vary.partition("=")
    return [[*base, (path.strip(), v.strip())] for v in values.split(",")]


#: The paper's p99 increases of FlexKVS's request latency (section 5.3).
PAPER_NOISY = {
    "unthrottled": 0.22,
    "NEMO (notify emulated, polled)": 0.052,
    "MBM 1 ms": 0.055,
    "MBM 100 ms": 0.13,
}


def noisy(duration_s: float | None, overrides: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Use case 3's rows with the paper's p99 increase beside each."""
    return [
        {**r, "paper": PAPER_NOISY.get(r["technique"])} for r in nemo.noisy(duration_s, overrides)
    ]


def score_shares(buckets: list[int]) -> dict[str, float | None]:
    """The shares of the huge pages whose skewness score ended at 0 and at 16 or more
    (Figure 7a's; the claims ledger's N61 reads the latter)."""
    total = sum(buckets)
    if not total:
        return {"score_0": None, "score_16_up": None}
    return {"score_0": buckets[0] / total, "score_16_up": sum(buckets[16:]) / total}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", choices=("hotset", "thp", "noisy"))
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    ap.add_argument("--vary", metavar="PATH=V1,V2,...", help="one run per value")
    ap.add_argument("--duration", type=float, help="simulated seconds (default: the file's)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args()
    try:
        return _run(args)
    except tierscope.ConfigError as e:
        # A bad --set/--vary path or value: one line, as tierscope's own commands.
        print(f"nemo_sensitivity.py: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    out = []
    for overrides in _runs(args.set, args.vary):
        t0 = time.monotonic()
        if args.case == "hotset":
            rows, _ = nemo.hotset(args.duration, overrides)
            keys = ["technique", "share_before", "to_half_s", "to_80_s", "cpu_percent"]
            keys += ["speedup_over_slow"]
        elif args.case == "noisy":
            rows = noisy(args.duration, overrides)
            keys = ["technique", "p99_increase", "mean_increase", "detection_s", "paper"]
            keys += ["cpu_share"]
        else:
            rows = [
                {**r, **score_shares(r.get("buckets") or [])}
                for r in nemo.thp(args.duration, overrides)
            ]
            keys = ["ratio", "technique", "candidates", "found_95_s", "found_end", "cpu_percent"]
            keys += ["score_0", "score_16_up"]
        label = " ".join(f"{p}={v}" for p, v in overrides) or "(the file as shipped)"
        print(f"## {args.case} {label} ({time.monotonic() - t0:.0f} s wall)")
        print(" | ".join(keys))
        for r in rows:
            print(" | ".join(_fmt(r.get(k)) for k in keys))
        sys.stdout.flush()
        out.append({"overrides": [list(o) for o in overrides], "rows": rows})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
