"""`tierscope.load(DIR)`: reopen a run directory into the `RunResult` that
`tierscope.run` returned when it wrote it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tierscope.experiment import config_error, load_experiment
from tierscope.output import monitor_arrays_file, policy_arrays_file
from tierscope.results import RunResult, load_arrays


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
    arrays = {}
    for name in metrics["monitors"]:
        path = d / monitor_arrays_file(name)
        try:
            arrays[name] = load_arrays(path)
        except (OSError, ValueError) as e:
            raise config_error(
                str(path), f"cannot read monitor {name!r}'s arrays (rerun to write them): {e}"
            ) from None
    policy_arrays = {}
    for name in metrics.get("policies") or {}:
        path = d / policy_arrays_file(name)
        try:
            policy_arrays[name] = load_arrays(path)
        except (OSError, ValueError) as e:
            raise config_error(
                str(path), f"cannot read policy run {name!r}'s arrays (rerun to write them): {e}"
            ) from None
    return RunResult.from_saved(experiment, metrics, arrays, policy_arrays)
