"""Sweeps: expansion (`spec`, by the Rust core), the result store (`store`), executors
(`local`, `ray_pool`) and running them (`run`)."""

from tierscope.sweep.run import SweepOutcome, run_sweep
from tierscope.sweep.spec import SweepRun, expand_sweep
from tierscope.sweep.store import load_sweep

__all__ = ["SweepOutcome", "SweepRun", "expand_sweep", "load_sweep", "run_sweep"]
