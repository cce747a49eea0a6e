"""`tierscope.load(DIR)`: reopen a run directory into the `RunResult` that
`tierscope.run` returned when it wrote it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from tierscope.experiment import config_error, load_experiment
from tierscope.output import monitor_arrays_file, policy_arrays_file
from tierscope.results import Array, RunResult, load_arrays


def load(directory: str | os.PathLike[str]) -> RunResult:
    """Reads DIR/metrics.json, each monitor's arrays-<monitor>.npz and each tiering
    policy run's arrays-policy-<run>.npz. Raises
    `ConfigError` when DIR is not a run directory (or was written by a version that did
    not save arrays)."""
    d = Path(directory)
    metrics_path = d / "metrics.json"
    try:
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise config_error(str(d), f"not a tierscope run directory: {e}") from None
    experiment = load_experiment(metrics["experiment"], source_name=f"{metrics_path} (experiment)")
    arrays = _arrays_of(d, metrics["monitors"], monitor_arrays_file, "monitor")
    policy_arrays = _arrays_of(d, metrics.get("policies") or {}, policy_arrays_file, "policy run")
    return RunResult.from_saved(experiment, metrics, arrays, policy_arrays)


def _arrays_of(
    d: Path, names: Iterable[str], file_of: Callable[[str], str], what: str
) -> dict[str, dict[str, Array]]:
    """Each named run's arrays file in `d`; a missing or unreadable one is a ConfigError
    naming it."""
    out = {}
    for name in names:
        path = d / file_of(name)
        try:
            out[name] = load_arrays(path)
        except (OSError, ValueError) as e:
            raise config_error(
                str(path), f"cannot read {what} {name!r}'s arrays (rerun to write them): {e}"
            ) from None
    return out
