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

from tierscope._core import Cancelled, ConfigError, RunError, Unavailable
from tierscope._core import __version__ as __version__
from tierscope.experiment import Experiment, load_experiment
from tierscope.load import load
from tierscope.output import OutputError
from tierscope.report import write_report
from tierscope.results import MonitorResult, PolicyResult, RunResult, Snapshots, Truth
from tierscope.runner import run
from tierscope.sweep import SweepOutcome, SweepRun, expand_sweep, load_sweep, run_sweep

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
