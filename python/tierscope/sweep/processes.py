"""The local executor with worker processes, for sweeps that write each run's outputs.

A run's outputs (heatmaps, damo records) are drawn and formatted in Python, under the GIL,
and can cost more CPU than its simulation: written on the calling thread, one run after
another, they were the whole critical path of `tierscope repro telescope`'s main sweep
(docs/results/PERFORMANCE.md, "Sweeps: time outside the runs"). Here each of `jobs`
worker processes runs one experiment from its document and writes its outputs, as a Ray
task does (`run_document`), so outputs are written on every core; the caller stores each
run's rows as it finishes, exactly as the in-process executor does.

Workers are spawned, not forked: the caller may hold running Rust threads (another
sweep's, Ray's), which a fork would copy without their state. Ctrl-C, or an error in the
caller, cancels the runs in flight (each worker's progress callback sees a shared flag
and cancels its run) and joins the workers before it propagates.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from tierscope import _core, outdir
from tierscope.sweep.local import OnDone, OnFailed, OnProgress
from tierscope.sweep.spec import SweepRun

#: Seconds between the caller's looks at the runs in flight (progress, finished runs).
POLL_S = 0.1

# A worker's view of the caller's shared state (set by `_init_worker`): each slot's
# fraction done, and whether to cancel.
_progress: Any = None
_cancel: Any = None


class _CancelledByCaller(Exception):
    """Raised in a worker's progress callback when the caller asked to cancel."""


def _init_worker(progress: Any, cancel: Any) -> None:
    global _progress, _cancel
    _progress, _cancel = progress, cancel
    # Ctrl-C reaches the whole process group: the caller handles it (it raises the flag
    # the runs see), so an idle worker does not die printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_document(
    doc: dict[str, Any],
    out: str | None,
    command: list[str] | None,
    progress: Callable[[int, int], None] | bool = False,
) -> dict[str, Any]:
    """One run in a worker process (this executor's, or a Ray task): the experiment
    document in, its metrics out; with `out`, its full outputs written there, their
    manifest naming the caller's `command` (`outdir.command_args`). The sweep store's
    runs/ is the sweep's own: an earlier output of a run that was stopped before its rows
    were stored is replaced."""
    import tierscope
    from tierscope import outdir

    if command is not None:
        outdir.set_command(command)
    return tierscope.run(doc, out=out, progress=progress, threads=1, force=True).metrics


def _run_in_slot(
    doc: dict[str, Any], out: str | None, command: list[str] | None, slot: int
) -> dict[str, Any]:
    def report(done: int, total: int) -> None:
        if _cancel.value:
            raise _CancelledByCaller
        _progress[slot] = done / total if total else 0.0

    return run_document(doc, out, command, report)


def run_processes(
    runs: Sequence[SweepRun],
    jobs: int,
    outputs: Path | None,
    on_done: OnDone,
    on_failed: OnFailed,
    on_progress: OnProgress | None = None,
    on_start: Callable[[SweepRun], None] | None = None,
) -> None:
    """Runs `runs`, up to `jobs` at once, each in a worker process that writes its outputs
    to `outputs`/<run id> (none when `outputs` is None); `on_done` gets each run's
    metrics (and no result: it stayed in the worker)."""
    context = multiprocessing.get_context("spawn")
    command = outdir.command_args()
    progress = context.Array("d", jobs, lock=False)
    cancel = context.Value("b", 0, lock=False)
    queue = list(reversed(runs))  # pop() from the end keeps the sweep's order
    free = list(reversed(range(jobs)))
    active: dict[Future[dict[str, Any]], tuple[SweepRun, int]] = {}
    finished = 0
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_init_worker, initargs=(progress, cancel)
    ) as pool:
        try:
            while queue or active:
                while queue and free:
                    r, slot = queue.pop(), free.pop()
                    progress[slot] = 0.0
                    if on_start is not None:
                        on_start(r)
                    out = str(outputs / r.id) if outputs is not None else None
                    doc = r.experiment.to_dict()
                    future = pool.submit(_run_in_slot, doc, out, command, slot)
                    active[future] = (r, slot)
                ended, _ = wait(active, timeout=POLL_S, return_when=FIRST_COMPLETED)
                for future in ended:
                    r, slot = active.pop(future)
                    free.append(slot)
                    finished += 1
                    try:
                        metrics = future.result()
                    except _core.RunError as e:
                        on_failed(r, str(e))
                        continue
                    on_done(r, metrics, None)
                if on_progress is not None:
                    on_progress(finished, sum(progress[slot] for _, slot in active.values()))
        except BaseException:
            # The pool's exit then waits for the workers, whose runs see the flag within
            # a poll and stop.
            cancel.value = 1
            for future in active:
                future.cancel()
            raise
