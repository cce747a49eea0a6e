"""Files shipped with the package: the experiment files (the repository's `experiments/`),
which `tierscope repro` and the studies read and a user may run.

One copy: in the source tree `tierscope/data/experiments` is a symbolic link to the
repository's `experiments/` directory; a wheel built by maturin holds the files themselves
(`[tool.maturin] include` in pyproject.toml follows the link), so an installed wheel finds
them here, outside any checkout:

    from tierscope.data import experiments_dir
    tierscope.run(experiments_dir() / "default.toml", out="runs/default")
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def experiments_dir() -> Path:
    """The directory of the shipped experiment files, resolved (in a source tree: the
    repository's `experiments/`). Experiment files name their MASIM configs relative to
    themselves, so they run from wherever this directory is."""
    root = files(__name__) / "experiments"
    if not isinstance(root, Path):
        # A zipped install (zipimport): the Rust core reads experiments by path.
        raise RuntimeError(
            f"tierscope's experiment files are not on the file system ({root}); install "
            "the package unpacked, as pip does"
        )
    return root.resolve()


def experiment(name: str) -> Path:
    """A shipped experiment file by its path under `experiments/`, e.g.
    `experiment("paper/needle-5t.toml")`; FileNotFoundError when there is none."""
    path = experiments_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"no shipped experiment {name!r} in {experiments_dir()}")
    return path
