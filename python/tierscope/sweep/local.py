"""The local executor: up to `jobs` runs at once on this machine, each on its own Rust
thread, driven from the calling thread (no worker processes: a run costs its simulation
and nothing else). Ctrl-C cancels the runs in flight and joins them. A sweep that writes
each run's outputs runs them in worker processes instead (`tierscope.sweep.processes`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence

from tierscope import _core
from tierscope.results import RunResult
from tierscope.sweep.spec import SweepRun

#: Seconds between polls of the runs in flight.
POLL_S = 0.01

#: Called with each finished run, its metrics.json document and (local runs) its result.
OnDone = Callable[[SweepRun, dict, RunResult | None], None]
#: Called with each failed run and the error's message.
OnFailed = Callable[[SweepRun, str], None]
#: Called with (runs finished, fraction of the runs in flight done).
OnProgress = Callable[[int, float], None]


def run_local(
    runs: Sequence[SweepRun],
    jobs: int,
    on_done: OnDone,
    on_failed: OnFailed,
    on_progress: OnProgress | None = None,
    on_start: Callable[[SweepRun], None] | None = None,
) -> None:
    queue = list(runs)
    queue.reverse()  # pop() from the end keeps the sweep's order
    active: list[tuple[SweepRun, _core.RunHandle]] = []
    finished = 0

    def fill() -> None:
        while queue and len(active) < jobs:
            r = queue.pop()
            if on_start is not None:
                on_start(r)
            active.append((r, _core.start_run(r.experiment._inner, 1)))

    try:
        while queue or active:
            fill()
            ended = [(r, h) for r, h in active if h.done()]
            # Out of `active` before their results are taken (if storing one fails, the
            # runs still in flight are cancelled below, not these), and their slots given
            # to the next runs first: handing a result over (writing a run's outputs can
            # take longer than its simulation) then overlaps the simulations instead of
            # leaving a core idle.
            ended_handles = {id(h) for _, h in ended}
            active = [(r, h) for r, h in active if id(h) not in ended_handles]
            fill()
            for r, h in ended:
                finished += 1
                try:
                    result = RunResult.from_raw(r.experiment, h.result())
                except _core.Cancelled:
                    raise
                except _core.RunError as e:
                    on_failed(r, str(e))
                    continue
                on_done(r, result.metrics, result)
            if on_progress is not None:
                partial = 0.0
                for _, h in active:
                    done, total = h.progress()
                    partial += done / total if total else 0.0
                on_progress(finished, partial)
            if len(active) == jobs or not queue:
                time.sleep(POLL_S)
    except BaseException:
        for _, h in active:
            h.cancel()
        for _, h in active:
            with contextlib.suppress(_core.RunError):
                h.result()
        raise
