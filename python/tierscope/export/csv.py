"""Per-window series as CSV, one row per aggregation window."""

from __future__ import annotations

import csv
from pathlib import Path

from tierscope.results import WINDOW_DTYPES, MonitorResult


def write_windows(monitor: MonitorResult, path: Path) -> None:
    """Columns: the keys of `WINDOW_DTYPES` (times in ns, sizes in bytes)."""
    columns = list(WINDOW_DTYPES)
    data = [monitor.windows[c].tolist() for c in columns]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(zip(*data, strict=True))
