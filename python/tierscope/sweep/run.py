"""Running a sweep: expand it, skip the runs the store already holds, run the rest on an
executor (local by default, Ray on request), store each run's rows as it finishes."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from tierscope.outdir import Claim
from tierscope.output import write_output
from tierscope.plot import figure_formats
from tierscope.progress import ProgressBar
from tierscope.results import RunResult
from tierscope.sweep.local import run_local
from tierscope.sweep.processes import run_processes
from tierscope.sweep.spec import SweepRun, SweepSource, expand_sweep
from tierscope.sweep.store import Store, claim_store


@dataclass
class SweepOutcome:
    """What a call to `run_sweep` did."""

    #: Runs this call was to run (all of the sweep's, or those of `only`).
    runs: int
    #: Of those, runs already stored before this call (a resumed sweep).
    skipped: int
    done: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    #: Wall time of each run done here, from its start to its result (local executor):
    #: the sweep's overhead is what its wall time spends beyond them.
    run_wall_s: dict[str, float] = field(default_factory=dict)

    def raise_if_failed(self, what: str) -> None:
        """Raises `RunError` naming how many `what` failed and the first one's error."""
        if self.failed:
            from tierscope._core import RunError

            first_id, message = next(iter(self.failed.items()))
            raise RunError(f"{len(self.failed)} {what} failed; {first_id}: {message}")


def run_sweep(
    source: SweepSource,
    out: str | os.PathLike[str],
    *,
    executor: str = "local",
    jobs: int = 0,
    address: str | None = None,
    outputs: bool = False,
    progress: bool = True,
    source_name: str | None = None,
    only: Collection[str] | None = None,
    overrides: Sequence[tuple[str, str]] = (),
) -> SweepOutcome:
    """Runs every run of the sweep not yet in the store at `out`. `jobs`: runs at once on
    the local executor (0: one per core). `outputs`: also write each run's full outputs
    (metrics.json, heatmaps, damo records) to out/runs/<id>. Failed runs are reported in
    the outcome and not stored, so a later call retries them. `only`: run just these run
    ids (the others stay pending). `overrides`: `(PATH, VALUE)` pairs of `--set`, applied
    to every run (`expand_sweep`); the store records them and is resumed only with the
    same ones.

    The store is claimed and locked for the whole call (`claim_store`): another sweep on
    it is refused with `OutputError` while this one runs, and so is a directory holding
    anything but this sweep's store."""
    runs = expand_sweep(source, source_name=source_name, overrides=overrides)
    if outputs:
        figure_formats()  # an unknown format in TIERSCOPE_FIGURES: refused before any run
    if only is not None:
        unknown = sorted(set(only) - {r.id for r in runs})
        if unknown:
            raise ValueError(f"no run {unknown[0]!r} in the sweep")
    with claim_store(out) as claim:
        return _run_claimed(
            claim,
            source,
            runs,
            executor,
            jobs,
            address,
            outputs,
            progress,
            source_name,
            only,
            [f"{p}={v}" for p, v in overrides],
        )


def _run_claimed(
    claim: Claim,
    source: SweepSource,
    runs: list[SweepRun],
    executor: str,
    jobs: int,
    address: str | None,
    outputs: bool,
    progress: bool,
    source_name: str | None,
    only: Collection[str] | None,
    overrides: list[str],
) -> SweepOutcome:
    directory = claim.target
    name = source_name or (str(source) if not isinstance(source, dict) else "<sweep dict>")
    store = Store(claim, name, [{"id": r.id, "params": r.params} for r in runs], overrides)
    done = store.done()
    selected = [r for r in runs if only is None or r.id in only]
    pending = [r for r in selected if r.id not in done]
    outcome = SweepOutcome(runs=len(selected), skipped=len(selected) - len(pending))
    t0 = time.monotonic()
    started: dict[str, float] = {}
    bar = ProgressBar(f"sweep {directory.name}") if progress and pending else None

    def on_done(r: SweepRun, metrics: dict, result: RunResult | None) -> None:
        if r.id in started:
            outcome.run_wall_s[r.id] = time.monotonic() - started[r.id]
        if outputs and result is not None:
            # The store's runs/ is ours: an earlier output of a run that was stopped
            # before its rows were stored is replaced.
            write_output(result, directory / "runs" / r.id, force=True)
        store.write({"id": r.id, "params": r.params}, metrics)
        outcome.done += 1

    def on_failed(r: SweepRun, message: str) -> None:
        outcome.failed[r.id] = message
        print(f"tierscope: run {r.id} failed: {message}", file=sys.stderr)

    def on_progress(finished: int, partial: float) -> None:
        if bar is not None:
            bar.update(int(1000 * (finished + partial)), 1000 * len(pending))

    try:
        if executor == "ray":
            from tierscope.sweep.ray_pool import run_ray

            run_ray(
                pending,
                address,
                directory / "runs" if outputs else None,
                on_done,
                on_failed,
                on_progress,
            )
        else:
            n = jobs if jobs > 0 else (os.cpu_count() or 1)

            def on_start(r: SweepRun) -> None:
                started[r.id] = time.monotonic()

            if outputs and n > 1 and len(pending) > 1:
                # Outputs are drawn under the GIL: written by worker processes, not one
                # after another on this thread (tierscope.sweep.processes).
                run_processes(
                    pending, n, directory / "runs", on_done, on_failed, on_progress, on_start
                )
            else:
                run_local(pending, n, on_done, on_failed, on_progress, on_start)
    finally:
        if bar is not None:
            bar.close()
        outcome.wall_s = time.monotonic() - t0
    return outcome
