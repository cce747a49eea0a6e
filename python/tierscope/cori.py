"""Cori's method for choosing how often something periodic acts (Doudali et al., IPDPS
2021; docs/techniques/CORI.md): find the workload's dominant reuse, try multiples of it shortest
first, stop when the runtime settles, keep the best.

Two sources of reuse:
- a trace of page accesses (cori-sim's format, or a generated workload): cori-sim's
  per-page reuse histogram, and its runtime model as the cost of each period;
- an experiment file: the paper's practical alternative, loop markers. The workload's
  phases are its loops: each phase contributes a bar at its duration, as high as the
  number of times it runs in the experiment; the cost of a period is one run of the
  experiment with the tuned parameter set to it.

The tuner, the dominant reuse (Eq. 1) and the candidates (Eq. 2) are the Rust crate's
(tierscope-cori), reached through the binding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierscope import _core
from tierscope.experiment import ConfigError

#: Cori's stopping rules (docs/techniques/CORI.md, "The Tuner"): a trial within 3 % of the
#: best before it, or two trials in a row without a new best.
CORI_STOPS: tuple[tuple[str, float], ...] = (("within", 3.0), ("no-gain", 2.0))


@dataclass
class Tuning:
    """A tuning run: what was tuned, the bars and the dominant reuse it started from, the
    candidate values in trial order, the trials made (value, cost), the chosen one, and
    (when asked for) the exhaustive curve over a grid."""

    what: str
    unit: str
    bars: list[tuple[int, float]]
    dominant_reuse: int | None
    candidates: list[Any]
    trials: list[tuple[Any, float]]
    chosen: tuple[Any, float] | None
    curve: list[tuple[int, float]] = field(default_factory=list)
    #: Cost of the run with everything on the fast tier (trace tuning), for slowdowns.
    reference: float | None = None
    #: The cost is a score (larger is better): trials and curve hold it as it is.
    maximize: bool = False
    #: What the cost counts, for printing: "ns" (a runtime), or a monitor's summary key.
    cost_unit: str = "ns"

    def as_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "unit": self.unit,
            "bars": self.bars,
            "dominant_reuse": self.dominant_reuse,
            "candidates": self.candidates,
            "trials": self.trials,
            "chosen": self.chosen,
            "curve": self.curve,
            "reference": self.reference,
            "maximize": self.maximize,
        }


def parse_stop(text: str) -> tuple[str, float]:
    """`within:3`, `no-gain:2`, `trials:5` -> a stopping rule; ValueError otherwise."""
    kind, _, value = text.partition(":")
    if kind not in ("within", "no-gain", "trials") or not value:
        raise ValueError(f"bad stopping rule `{text}`: expected within:PCT, no-gain:K or trials:N")
    try:
        return kind, float(value.rstrip("%"))
    except ValueError:
        raise ValueError(f"bad stopping rule `{text}`: `{value}` is not a number") from None


def tune_trace(
    trace: Any,
    *,
    scheduler: str = "history",
    count_quantum: int = 20,
    fast_ratio: float = 0.2,
    bucket: int = 1000,
    stops: Sequence[tuple[str, float]] = CORI_STOPS,
    grid_timestep: int | None = None,
) -> Tuning:
    """Tunes the period (in requests) of cori-sim's scheduler on `trace` (a
    `_core.CoriTrace`), its model the cost; with `grid_timestep`, also the exhaustive
    curve over `timestep, 2 timestep, ...` up to half the trace."""

    def cost(period: int) -> float:
        r: float = trace.model(period, scheduler, count_quantum, fast_ratio)["runtime_ns"]
        return r

    bars = trace.bars(bucket)
    dr = _core.cori_dominant_reuse(bars)
    candidates = _core.cori_candidates(dr, trace.requests) if dr is not None else []
    return _tune(
        what=f"{scheduler} scheduler period",
        unit="requests",
        bars=bars,
        dominant_reuse=dr,
        candidates=candidates,
        cost=cost,
        stops=stops,
        grid=_core.cori_baseline("right", grid_timestep, trace.requests, 0)
        if grid_timestep
        else [],
        reference=trace.model(0, scheduler, count_quantum, fast_ratio)["all_fast_ns"],
    )


def loop_bars(phases_ns: Sequence[int], duration_ns: int) -> list[tuple[int, float]]:
    """Bars of the loop-duration histogram of an experiment's workload: one per distinct
    phase duration (ns), as high as the times phases of that duration start within
    `duration_ns` (the phases repeat in order)."""
    if not phases_ns or min(phases_ns) <= 0:
        return []
    counts: dict[int, float] = {}
    start = 0
    while start < duration_ns:
        for d in phases_ns:
            if start >= duration_ns:
                break
            counts[d] = counts.get(d, 0.0) + 1.0
            start += d
    return sorted(counts.items())


def tune_experiment(
    path: Path,
    param: str,
    cost: Callable[[Any], float],
    *,
    values: Sequence[Any] | None = None,
    stops: Sequence[tuple[str, float]] = CORI_STOPS,
    grid_timestep: int | None = None,
    unit: str = "ns",
    overrides: Sequence[tuple[str, str]] = (),
) -> Tuning:
    """Tunes `param` (a config path: a duration in ns, or values as given with `unit`
    "raw") of the experiment at `path` with `cost(value)` (one run each): candidates from
    the phases' loop-duration histogram, or `values` when given (tried in that order).
    `overrides`: `--set` pairs applied to the experiment first (`load_experiment`)."""
    from tierscope.experiment import load_experiment

    exp = load_experiment(path, overrides=overrides)
    duration = exp.duration_ns
    bars = loop_bars(exp.phase_durations_ns, duration)
    dr = _core.cori_dominant_reuse(bars) if bars else None
    candidates: list[Any]
    if values is not None:
        candidates = list(values)
    else:
        candidates = _core.cori_candidates(dr, duration) if dr is not None else []
        if not candidates:
            raise ConfigError(
                f"{path}: no loop of the workload is shorter than half the run "
                f"({duration} ns), so Cori has no candidate: give --values"
            )
    return _tune(
        what=param,
        unit=unit,
        bars=bars,
        dominant_reuse=dr,
        candidates=candidates,
        cost=cost,
        stops=stops,
        grid=_core.cori_baseline("right", grid_timestep, duration, 0) if grid_timestep else [],
    )


def _tune(
    *,
    what: str,
    unit: str,
    bars: list[tuple[int, float]],
    dominant_reuse: int | None,
    candidates: list[Any],
    cost: Callable[[Any], float],
    stops: Sequence[tuple[str, float]],
    grid: list[int],
    reference: float | None = None,
) -> Tuning:
    """Runs the tuner over `candidates` in order, then `cost` at every `grid` value."""
    # The tuner orders numbers: it tries the candidates' positions, so values may be
    # anything the parameter takes (sizes as text, say).
    trials_at, chosen_at = _core.cori_tune(
        list(range(len(candidates))), lambda i: cost(candidates[i]), list(stops)
    )
    return Tuning(
        what=what,
        unit=unit,
        bars=bars,
        dominant_reuse=dominant_reuse,
        candidates=candidates,
        trials=[(candidates[i], c) for i, c in trials_at],
        chosen=(candidates[chosen_at[0]], chosen_at[1]) if chosen_at else None,
        curve=[(p, cost(p)) for p in grid],
        reference=reference,
    )
