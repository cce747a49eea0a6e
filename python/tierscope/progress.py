"""A dependency-free progress bar for stderr.

On a terminal it redraws one line; otherwise (CI logs, pipes) it prints a line each time
another 10% is done, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.last_decile = -1
        self.drawn = False

    def update(self, done: int, total: int) -> None:
        fraction = min(1.0, done / total) if total > 0 else 1.0
        elapsed = time.monotonic() - self.started
        if self.tty:
            filled = round(fraction * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            eta = f" eta {elapsed * (1 - fraction) / fraction:6.1f}s" if 0 < fraction < 1 else ""
            self.stream.write(f"\r{self.label} [{bar}] {fraction:6.1%} {elapsed:6.1f}s{eta}")
            self.stream.flush()
            self.drawn = True
            return
        decile = int(fraction * 10)
        if decile > self.last_decile:
            self.last_decile = decile
            self.stream.write(f"{self.label}: {decile * 10:3d}% ({elapsed:.1f}s)\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
