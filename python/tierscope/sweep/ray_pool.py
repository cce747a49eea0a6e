"""The Ray executor: the same runs as tasks on a Ray cluster (`--address`, or a local
one started for the sweep). Each task runs one experiment from its normalized document
and returns its metrics; the driver stores the rows exactly as the local executor does,
so a sweep gives the same rows on either. Ray is an optional extra
(`pip install 'tierscope[ray]'`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierscope import outdir
from tierscope.experiment import config_error
from tierscope.sweep.local import OnDone, OnFailed, OnProgress
from tierscope.sweep.processes import run_document
from tierscope.sweep.spec import SweepRun


def run_ray(
    runs: Sequence[SweepRun],
    address: str | None,
    outputs: Path | None,
    on_done: OnDone,
    on_failed: OnFailed,
    on_progress: OnProgress | None = None,
) -> None:
    try:
        import ray
    except ImportError:
        raise config_error(
            "command line",
            "Ray is not installed (pip install 'tierscope[ray]')",
            field="--executor",
        ) from None
    ray.init(
        address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True
    )
    task = ray.remote(num_cpus=1)(run_document)
    command = outdir.command_args()
    pending: dict[Any, SweepRun] = {}
    for r in runs:
        out = str(outputs / r.id) if outputs is not None else None
        pending[task.remote(r.experiment.to_dict(), out, command)] = r
    finished = 0
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                r = pending.pop(ref)
                finished += 1
                try:
                    metrics = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    on_failed(r, str(e.cause) if e.cause is not None else str(e))
                    continue
                on_done(r, metrics, None)
            if on_progress is not None:
                on_progress(finished, 0.0)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
