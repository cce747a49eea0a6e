"""Writing a run's output directory, all or nothing.

Everything is written into a temporary sibling directory that is renamed to the target
at the end, so an error or Ctrl-C never leaves a partial directory. An existing target is
replaced only when it looks like an earlier tierscope output (it has metrics.json) or is
empty; anything else is refused, so a typo in --out cannot delete unrelated data.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from tierscope.export import csv as csv_export
from tierscope.export import damo
from tierscope.plot import heatmap, placement, throughput
from tierscope.results import RunResult, save_arrays, save_policy_arrays


class OutputError(Exception):
    """The output directory cannot be written (it exists and is not a tierscope output)."""


def safe_name(name: str) -> str:
    """A monitor or policy-run name usable in a file name (`telescope-rule@damon-mod` ->
    `telescope-rule_damon-mod`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "monitor"


def monitor_arrays_file(name: str) -> str:
    """The file of a monitor's arrays in a run directory."""
    return f"arrays-{safe_name(name)}.npz"


def policy_arrays_file(name: str) -> str:
    """The file of a policy run's arrays in a run directory."""
    return f"arrays-policy-{safe_name(name)}.npz"


def _check_unique_files(result: RunResult) -> None:
    # Two names mapping to one file would silently overwrite each other's arrays.
    owner: dict[str, str] = {}
    named = [(f"monitor {m!r}", monitor_arrays_file(m)) for m in result.monitors]
    named += [(f"policy run {p!r}", policy_arrays_file(p)) for p in result.policies]
    for who, file in named:
        if file in owner:
            raise OutputError(
                f"{owner[file]} and {who} would both be written to {file}; rename one"
            )
        owner[file] = who


def check_target(out: Path) -> None:
    """Raises `OutputError` unless `out` is absent, empty, or an earlier output."""
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir() or out.is_symlink():
        raise OutputError(f"{out}: exists and is not a directory; choose another --out")
    if (out / "metrics.json").is_file() or not any(out.iterdir()):
        return
    raise OutputError(
        f"{out}: exists and does not look like a tierscope output (no metrics.json); "
        "refusing to replace it, choose another --out"
    )


def write_files(result: RunResult, directory: Path) -> None:
    """Writes metrics.json and, per monitor, windows-<m>.csv, heatmap-<m>.png,
    <m>.damon and arrays-<m>.npz (what `tierscope.load` reads back) into `directory`;
    with tiering policy runs, also arrays-policy-<run>.npz per run, throughput.png and
    placement.png."""
    _check_unique_files(result)
    text = json.dumps(result.metrics, indent=2, allow_nan=False)
    (directory / "metrics.json").write_text(text + "\n", encoding="utf-8")
    hot_threshold = result.experiment.hot_threshold
    for name, monitor in result.monitors.items():
        file = safe_name(name)
        csv_export.write_windows(monitor, directory / f"windows-{file}.csv")
        heatmap(monitor, result.heap, hot_threshold, directory / f"heatmap-{file}.png")
        damo.write(monitor, directory / f"{file}.damon")
        save_arrays(monitor, directory / monitor_arrays_file(name))
    if result.policies:
        for name, policy in result.policies.items():
            save_policy_arrays(policy, directory / policy_arrays_file(name))
        throughput(result, directory / "throughput.png")
        placement(result, directory / "placement.png")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_output(result: RunResult, out: Path) -> None:
    """Writes all outputs of `result` to `out`, atomically (see the module comment)."""
    out = Path(out)
    check_target(out)
    parent = out.absolute().parent
    created = [p for p in [parent, *parent.parents] if not p.exists()]
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; outputs are shared
        write_files(result, tmp)
        check_target(out)  # again: something may have appeared while we wrote
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
            out.rename(old / "previous")
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in created:  # innermost first: only directories this call made, if empty
            try:
                p.rmdir()
            except OSError:
                break
        raise
