"""Running an experiment: start it on a Rust thread, poll its progress (which keeps
Ctrl-C working: Python handles signals between polls), collect the result and optionally
write the output directory."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from tierscope import _core
from tierscope.experiment import ExperimentSource, load_experiment
from tierscope.output import check_target, write_output
from tierscope.progress import ProgressBar
from tierscope.results import RunResult

#: Called with (simulated ns done summed over monitors, total).
ProgressCallback = Callable[[int, int], None]

#: Seconds between progress polls.
POLL_S = 0.05


def run(
    experiment: ExperimentSource,
    out: str | os.PathLike[str] | None = None,
    progress: bool | ProgressCallback = True,
    threads: int = 0,
) -> RunResult:
    """Runs an experiment (a path, a dict, or a loaded `Experiment`) and returns its
    result. With `out`, also writes metrics.json, CSVs, heatmaps and damo records there
    (all or nothing). `progress`: True draws a bar on stderr, a callable receives
    `(done, total)`, False is silent. `threads`: worker threads, 0 for one per core.

    Raises `ConfigError` for bad input, `OutputError` when `out` may not be replaced,
    `RunError` when the run fails; on KeyboardInterrupt the run is cancelled and joined
    before the interrupt propagates.
    """
    exp = load_experiment(experiment)
    if out is not None:
        check_target(Path(out))  # fail before spending minutes on the run
    bar = ProgressBar(f"running {exp.name}") if progress is True else None
    report: ProgressCallback | None = (
        bar.update if bar is not None else progress if callable(progress) else None
    )

    handle = _core.start_run(exp._inner, threads)
    try:
        while not handle.done():
            if report is not None:
                report(*handle.progress())
            time.sleep(POLL_S)
        if report is not None:
            report(*handle.progress())
    except BaseException:
        # Ctrl-C (or an error in a progress callback): stop the run and wait for its
        # thread, so nothing keeps running behind the caller's back.
        handle.cancel()
        with contextlib.suppress(_core.RunError):
            handle.result()
        raise
    finally:
        if bar is not None:
            bar.close()
    result = RunResult.from_raw(exp, handle.result())
    if out is not None:
        write_output(result, Path(out))
    return result
