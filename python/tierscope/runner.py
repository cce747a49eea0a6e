"""Running an experiment: start it on a Rust thread, poll its progress (which keeps
Ctrl-C working: Python handles signals between polls), collect the result and optionally
write the output directory."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from tierscope import _core, outdir
from tierscope.experiment import Experiment, ExperimentSource, load_experiment
from tierscope.output import write_files
from tierscope.plot import figure_formats
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
    force: bool = False,
) -> RunResult:
    """Runs an experiment (a path, a dict, or a loaded `Experiment`) and returns its
    result. With `out`, also writes metrics.json, CSVs, heatmaps and damo records there
    (all or nothing, with a manifest naming them: `tierscope.outdir`). `out` is claimed
    and locked before the run starts: an absent or empty directory is used; an earlier
    tierscope output is refused unless `force` (then only its files are replaced);
    anything else is refused. `progress`: True draws a bar on stderr, a callable
    receives `(done, total)`, False is silent. `threads`: worker threads, 0 for one per
    core.

    Raises `ConfigError` for bad input, `OutputError` when `out` may not be written
    (not ours, in use by another tierscope, or an OSError such as a full disk),
    `RunError` when the run fails; on KeyboardInterrupt the run is cancelled and joined
    before the interrupt propagates.
    """
    exp = load_experiment(experiment)
    if out is None:
        return _run(exp, progress, threads)
    # Claimed before the run, and the figure formats checked: refused at once, not after
    # minutes of running.
    figure_formats()
    with outdir.claim(Path(out), "run", force=force) as claim:
        result = _run(exp, progress, threads)
        with claim.stage() as staging:
            write_files(result, staging)
    return result


def _run(exp: Experiment, progress: bool | ProgressCallback, threads: int) -> RunResult:
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
    return RunResult.from_raw(exp, handle.result())
