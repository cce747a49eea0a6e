"""Sweeps: a base experiment, fixed overrides, axes of values and seeds, expanded into
runs with stable ids by the Rust core (crates/tierscope-experiment/src/sweep.rs documents
the format). Expansion is pure; running the runs is the caller's.

    for r in tierscope.expand_sweep("sweeps/rates.toml"):
        tierscope.run(r.experiment, out=f"runs/rates/{r.id}")
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierscope import _core
from tierscope.experiment import Experiment, read_config_file

#: How a dict sweep is named in error messages.
DICT_SOURCE = "<sweep dict>"


@dataclass(frozen=True)
class SweepRun:
    """One run: its id (unique in the sweep, a safe directory name), the swept values by
    axis name (seed last), the monitors pruned for its engine, and the experiment."""

    id: str
    params: dict[str, Any]
    dropped: list[str]
    experiment: Experiment


SweepSource = Mapping[str, Any] | str | os.PathLike[str]


def expand_sweep(
    source: SweepSource,
    *,
    source_name: str | None = None,
    base_dir: Path | None = None,
    overrides: Sequence[tuple[str, str]] = (),
) -> list[SweepRun]:
    """Expands a sweep file (TOML, or JSON when it ends in .json) or dict into its runs.
    A relative `base` path is taken from the file's directory (a dict's: `base_dir`, by
    default the current directory). `overrides`: `(PATH, VALUE)` pairs of the command
    line's `--set`, applied to every run after the sweep's `set` (typed by the config; an
    axis on the same path is refused). Raises `ConfigError` naming file, line and
    field."""
    if isinstance(source, Mapping):
        text, fmt = json.dumps(source, indent=1), "json"
        name = source_name or DICT_SOURCE
        directory = base_dir or Path.cwd()
    else:
        path = Path(source)
        name = source_name or str(path)
        text, fmt = read_config_file(path, name, "sweep")
        directory = path.resolve().parent
    return [
        SweepRun(
            id=r.id,
            params={k: json.loads(v) for k, v in r.params},
            dropped=list(r.dropped),
            experiment=Experiment(r.experiment),
        )
        for r in _core.expand_sweep(text, name, directory, fmt, list(overrides))
    ]
