"""What the CLI says about the kvm engine's guards (docs/models/KVM.md, "Guards against silently
wrong results"): the ACCESSED probe's answer, once per process, and one warning line per
monitor whose run is invalid. Runs on the simulated engines carry no guards and print
nothing."""

from __future__ import annotations

import sys
from typing import TextIO

from tierscope.results import RunResult

_probe_reported = False


def report(result: RunResult, *, quiet: bool = False, file: TextIO | None = None) -> int:
    """Writes to `file` (stderr) the probe's line (the first time in this process that a
    run carries it, and not when `quiet`) and, whatever `quiet`, one warning line per
    invalid monitor. Returns the number of invalid monitors."""
    global _probe_reported
    out = file if file is not None else sys.stderr
    guarded = [m for m in result.monitors.values() if m.kvm is not None]
    if guarded and not _probe_reported:
        line = guarded[0].kvm.get("accessed_probe") if guarded[0].kvm else None
        if line:
            _probe_reported = True
            if not quiet:
                print(f"tierscope: kvm: ACCESSED probe: {line}", file=out)
    invalid = [m for m in guarded if not m.valid]
    for m in invalid:
        print(f"tierscope: warning: {m.name}: invalid run: {m.invalid_reason}", file=out)
    return len(invalid)
