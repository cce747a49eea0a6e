"""Snapshots as a damo record file, readable by `damo report heatmap/access --input FILE`.

Format (docs/reference/EXPERIMENTS.md, and damo's `_damo_records.py`): a list of records, stored as
zlib-compressed JSON (damo's default `json_compressed`; damo recognises plain JSON only
when `file -b` says exactly "JSON data", so the compressed form is the portable one). Times
are nanoseconds, intervals microseconds, one snapshot per aggregation window.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from tierscope.results import MonitorResult


def _us(ns: int) -> int | float:
    return ns // 1000 if ns % 1000 == 0 else ns / 1000


def records(monitor: MonitorResult) -> list[dict[str, Any]]:
    """The damo record list (one record, target 0) of one monitor's snapshots."""
    snaps = monitor.snapshots
    start, end = snaps.start.tolist(), snaps.end.tolist()
    nr_accesses, age = snaps.nr_accesses.tolist(), snaps.age.tolist()
    offsets = snaps.offsets.tolist()
    snapshots = []
    for i in range(len(snaps)):
        regions = [
            {
                "start": start[j],
                "end": end[j],
                "nr_accesses": {"samples": nr_accesses[j], "percent": None},
                "age": {"usec": None, "aggr_intervals": age[j]},
            }
            for j in range(offsets[i], offsets[i + 1])
        ]
        snapshots.append(
            {
                "start_time": int(snaps.start_ns[i]),
                "end_time": int(snaps.end_ns[i]),
                "regions": regions,
                "total_bytes": None,
            }
        )
    return [_record(monitor, snapshots)]


def _record(monitor: MonitorResult, snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """The damo record of `monitor` holding `snapshots` (target 0)."""
    iv = monitor.intervals
    return {
        "kdamond_idx": None,
        "context_idx": None,
        "scheme_idx": None,
        "intervals": {
            "sample_us": _us(iv["sample"]),
            "aggr_us": _us(iv["aggr"]),
            "ops_update_us": _us(iv["ops_update"]),
        },
        "target_id": 0,
        "snapshots": snapshots,
    }


#: One region of `records` as `text` writes it (json.dumps' compact form of its dict).
_REGION = (
    '{"start":%d,"end":%d,"nr_accesses":{"samples":%d,"percent":null},'
    '"age":{"usec":null,"aggr_intervals":%d}}'
)
_SNAPSHOT = '{"start_time":%d,"end_time":%d,"regions":[%s],"total_bytes":null}'


def text(monitor: MonitorResult) -> str:
    """`records(monitor)` as compact JSON, character for character what
    `json.dumps(records(monitor), separators=(",", ":"))` gives, without building a dict
    per region: a 5 TB run holds hundreds of thousands of them, and the dicts cost five
    times the text (tests/test_api.py compares the two)."""
    snaps = monitor.snapshots
    columns = (snaps.start, snaps.end, snaps.nr_accesses, snaps.age)
    regions = list(map(_REGION.__mod__, zip(*(c.tolist() for c in columns), strict=True)))
    offsets = snaps.offsets.tolist()
    starts, ends = snaps.start_ns.tolist(), snaps.end_ns.tolist()
    snapshots = [
        _SNAPSHOT % (starts[i], ends[i], ",".join(regions[offsets[i] : offsets[i + 1]]))
        for i in range(len(snaps))
    ]
    # The record with no snapshot ends in `"snapshots":[]}`: they go between those brackets.
    head = json.dumps(_record(monitor, []), separators=(",", ":"))
    return "[" + head[: -len("]}")] + ",".join(snapshots) + "]}]"


def write(monitor: MonitorResult, path: Path) -> None:
    """Writes the monitor's snapshots to `path` as a compressed damo record."""
    path.write_bytes(zlib.compress(text(monitor).encode(), 6))


def read(path: Path) -> list[dict[str, Any]]:
    """Reads a record written by `write` (for tests and quick inspection)."""
    loaded: list[dict[str, Any]] = json.loads(zlib.decompress(path.read_bytes()))
    return loaded
