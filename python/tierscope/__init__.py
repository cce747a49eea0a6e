"""tierscope: hot/cold memory telemetry compared on simulated x86-64 hardware.

The public API, which the `tierscope` CLI uses itself:

    exp = tierscope.load_experiment("experiments/default.toml")   # or a dict
    result = tierscope.run(exp, out="runs/default")
    result.metrics["monitors"]["telescope-bnd"]["precision"]
    result.monitors["telescope-bnd"].windows["recall"]            # numpy array
    result.policies["telescope-rule@damon-mod"].windows["placed"]  # [window, tier], with [tiering]
    again = tierscope.load("runs/default")                         # the same result
    result.monitors_df(), result.snapshots_df()                    # polars DataFrames
    runs = tierscope.expand_sweep("sweep.toml")                    # experiments with ids
    tierscope.load_sweep("runs/sweep", "policies")                 # a sweep's policy table

Figures for notebooks and papers: tierscope.plot (docs/reference/FIGURES.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierscope._core import Cancelled, ConfigError, RunError, Unavailable
from tierscope._core import __version__ as __version__
from tierscope.experiment import Experiment, load_experiment
from tierscope.load import load
from tierscope.output import OutputError
from tierscope.results import MonitorResult, PolicyResult, RunResult, Snapshots, Truth
from tierscope.runner import run

if TYPE_CHECKING:
    from tierscope.report import write_report
    from tierscope.sweep import SweepOutcome, SweepRun, expand_sweep, load_sweep, run_sweep

#: Names imported when first used: sweeps and reports bring pyarrow, which every
#: `tierscope` command paid for at start (`run --help` takes 0.83 of the CPU time without
#: it: docs/results/PERFORMANCE.md, "The test suite").
_LAZY = {
    "write_report": "tierscope.report",
    "SweepOutcome": "tierscope.sweep",
    "SweepRun": "tierscope.sweep",
    "expand_sweep": "tierscope.sweep",
    "load_sweep": "tierscope.sweep",
    "run_sweep": "tierscope.sweep",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tierscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "Cancelled",
    "ConfigError",
    "Experiment",
    "MonitorResult",
    "OutputError",
    "PolicyResult",
    "RunError",
    "RunResult",
    "Snapshots",
    "SweepOutcome",
    "SweepRun",
    "Truth",
    "Unavailable",
    "expand_sweep",
    "load",
    "load_experiment",
    "load_sweep",
    "run",
    "run_sweep",
    "write_report",
]
