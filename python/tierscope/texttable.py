"""Plain-text tables for the terminal: the first column left-aligned, the rest right."""

from __future__ import annotations

from collections.abc import Sequence


def align(rows: Sequence[Sequence[str]]) -> str:
    """Joins `rows` (the first one is the header) into aligned lines."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
    return "\n".join(lines)
