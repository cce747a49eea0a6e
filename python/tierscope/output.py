"""Writing a run's output directory, all or nothing, through `tierscope.outdir`: the
files are written into a temporary sibling directory and moved in at the end, with a
manifest naming them, so an error or Ctrl-C never leaves a partial directory and an
earlier output is replaced (with `force`) file by file, never a file tierscope did not
write.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tierscope import outdir
from tierscope.export import csv as csv_export
from tierscope.export import damo
from tierscope.outdir import OutputError
from tierscope.plot import heatmap, placement, shared_scales, throughput
from tierscope.results import RunResult, save_arrays, save_policy_arrays

__all__ = [
    "OutputError",
    "monitor_arrays_file",
    "policy_arrays_file",
    "safe_name",
    "write_files",
    "write_output",
    "write_run_dir",
]


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


def write_files(result: RunResult, directory: Path) -> None:
    """Writes metrics.json and, per monitor, windows-<m>.csv, heatmap-<m>.png (and .svg,
    .pdf: `tierscope.plot.figure_formats`), <m>.damon and arrays-<m>.npz (what
    `tierscope.load` reads back) into `directory`; with tiering policy runs, also
    arrays-policy-<run>.npz per run, throughput.png and placement.png (with their vector
    formats). The heatmaps of monitors counting the same quantity share one colour
    scale."""
    _check_unique_files(result)
    text = json.dumps(result.metrics, indent=2, allow_nan=False)
    (directory / "metrics.json").write_text(text + "\n", encoding="utf-8")
    scales = shared_scales(result)
    for name, monitor in result.monitors.items():
        file = safe_name(name)
        csv_export.write_windows(monitor, directory / f"windows-{file}.csv")
        heatmap(result, name, directory / f"heatmap-{file}.png", scales=scales)
        damo.write(monitor, directory / f"{file}.damon")
        save_arrays(monitor, directory / monitor_arrays_file(name))
    if result.policies:
        for name, policy in result.policies.items():
            save_policy_arrays(policy, directory / policy_arrays_file(name))
        throughput(result, directory / "throughput.png")
        placement(result, directory / "placement.png")


def write_run_dir(result: RunResult, directory: Path) -> None:
    """Writes a run's files and their manifest into `directory` (new), inside a staging
    directory of a larger output (validate's kvm/ and exact/, repro nemo's hotset/), so
    the run directory is ours on its own too."""
    directory.mkdir(parents=True)
    write_files(result, directory)
    outdir.write_manifest(directory, "run")


def write_output(result: RunResult, out: str | os.PathLike[str], *, force: bool = False) -> None:
    """Writes all outputs of `result` to `out`, all or nothing (`tierscope.outdir`): an
    absent or empty `out` is created or used; an earlier output is replaced, only its own
    files, with `force`; anything else is refused with `OutputError`."""
    with outdir.claim(out, "run", force=force) as claim, claim.stage() as staging:
        write_files(result, staging)
