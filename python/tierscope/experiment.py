"""Loading experiments from a TOML/JSON file or a dict.

Parsing and validation happen in Rust (one source of truth for the format and its
errors); this module only reads files and chooses the format.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tierscope import _core
from tierscope._core import ConfigError

#: How a dict experiment is named in error messages.
DICT_SOURCE = "<experiment dict>"


class Experiment:
    """A validated experiment, presets expanded. Holds the Rust value that a run needs."""

    def __init__(self, inner: _core.Experiment) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def seed(self) -> int:
        return self._inner.seed

    @property
    def duration_ns(self) -> int:
        return self._inner.duration_ns

    @property
    def hot_threshold(self) -> int:
        return self._inner.hot_threshold

    @property
    def block_size(self) -> int:
        return self._inner.block_size

    @property
    def phase_durations_ns(self) -> list[int]:
        """The workload's phases in order (one pass of its cycle): durations, ns."""
        return list(self._inner.phase_durations_ns)

    @property
    def monitor_names(self) -> list[str]:
        return list(self._inner.monitor_names)

    def to_dict(self) -> dict[str, Any]:
        """The normalized experiment (every default filled in, presets expanded)."""
        loaded: dict[str, Any] = json.loads(self._inner.to_json())
        return loaded

    def __repr__(self) -> str:
        return repr(self._inner)


def dict_to_json(source: Mapping[str, Any]) -> str:
    """The JSON text a dict experiment is parsed from. One value per line, so that the
    line of an error identifies the key at fault."""
    return json.dumps(source, indent=1)


def config_error(
    file: str, message: str, *, field: str = "", line: int | None = None
) -> ConfigError:
    """A `ConfigError` raised from Python, shaped like those raised by Rust:
    `file[:line]: [field: ]message`."""
    where = f"{file}:{line}" if line is not None else file
    text = f"{where}: {field}: {message}" if field else f"{where}: {message}"
    err = ConfigError(text)
    err.file, err.line, err.field, err.message = file, line, field, message
    return err


ExperimentSource = Experiment | Mapping[str, Any] | str | os.PathLike[str]


def read_config_file(path: Path, name: str, what: str) -> tuple[str, str]:
    """The text of a TOML or JSON file (JSON when it ends in .json) and its format;
    `ConfigError` naming `name` when it cannot be read or is larger than the limit of
    docs/reference/EXPERIMENTS.md ("Limits"), checked on its metadata and while reading (a device or
    a pipe reports no size)."""
    limit = _core.limits()["config_file_bytes"]
    too_large = f"the {what} file is larger than {limit >> 20} MiB (the limit)"
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > limit:
                raise config_error(name, too_large)
            data = f.read(limit + 1)
        if len(data) > limit:
            raise config_error(name, too_large)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise config_error(name, f"cannot read the {what} file: {reason}") from None
    return text, "json" if path.suffix.lower() == ".json" else "toml"


#: `(PATH, VALUE)` overrides, as `--set PATH=VALUE` gives them.
Overrides = Sequence[tuple[str, str]]


def parse_set(items: Sequence[str] | None) -> list[tuple[str, str]]:
    """`--set PATH=VALUE` options as `(PATH, VALUE)` pairs; `ConfigError` naming the
    option for one without `=` or a path."""
    pairs = []
    for item in items or []:
        path, eq, value = item.partition("=")
        if not eq or not path.strip():
            raise config_error(
                "command line",
                f"`{item}`: expected PATH=VALUE (e.g. seed=3 or monitors[0].aggr=100ms)",
                field="--set",
            )
        pairs.append((path.strip(), value))
    return pairs


def load_experiment(
    source: ExperimentSource, *, source_name: str | None = None, overrides: Overrides = ()
) -> Experiment:
    """Loads an experiment from a file path (TOML, or JSON when it ends in .json), a
    dict in the same layout as the file, or returns an `Experiment` unchanged.

    Relative paths inside a file (the MASIM config) are resolved against the file's
    directory; inside a dict, against the current directory. `source_name` replaces the
    name used in error messages. Raises `ConfigError` with a one-line message naming the
    file, line and field.

    `overrides`: `(PATH, VALUE)` pairs set on the experiment before it is checked (the
    command line's `--set`), with the sweep path syntax (`seed`, `monitors[0].aggr`,
    `tiering.policies[NAME].period`) and VALUE typed by the config (a string where the
    experiment holds a string, else read as a TOML value: `3`, `0.5`, `true`, `[1, 2]`);
    applied by the sweep expansion's path setter. An error in an overridden field names
    the override: `command line: --set seed=x: seed: ...`.
    """
    if overrides:
        return _overridden(source, source_name, overrides)
    if isinstance(source, Experiment):
        return source
    if isinstance(source, Mapping):
        text = dict_to_json(source)
        name = source_name or DICT_SOURCE
        return Experiment(_core.parse_experiment(text, name, Path.cwd(), "json"))
    path = Path(source)
    name = source_name or str(path)
    text, fmt = read_config_file(path, name, "experiment")
    return Experiment(_core.parse_experiment(text, name, path.resolve().parent, fmt))


def _overridden(
    source: ExperimentSource, source_name: str | None, overrides: Overrides
) -> Experiment:
    """The experiment with `overrides` set: a sweep of one run whose base is the
    experiment (the binding's expansion sets the paths and types the values)."""
    base: Any
    if isinstance(source, Experiment):
        source = source.to_dict()
    if isinstance(source, Mapping):
        base, name, directory = dict(source), source_name or DICT_SOURCE, Path.cwd()
    else:
        path = Path(source)
        name = source_name or str(path)
        read_config_file(path, name, "experiment")  # readable, within the limit
        base, directory = str(path.resolve()), path.resolve().parent
    text = json.dumps({"base": base}, indent=1)
    (run,) = _core.expand_sweep(text, name, directory, "json", list(overrides))
    return Experiment(run.experiment)
