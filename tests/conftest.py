"""Shared fixtures: a tiny MASIM workload and a helper that runs the CLI as a user would
(a separate process, so exit codes and stderr are the real ones)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

# No figure files by default: drawing them costs about 0.5 s of CPU per PNG (more than most
# of the suite's runs) and every run directory has several. Tests that read the figures a
# run writes say so with `@pytest.mark.figures` (PNG), or pass `PNG_FIGURES` to `run_cli`
# in a fixture shared wider than one test; test_figures.py checks the formats themselves.
# The CLI subprocesses inherit this.
os.environ.setdefault("TIERSCOPE_FIGURES", "none")
#: The environment of a run whose PNG figures a test reads.
PNG_FIGURES = {"TIERSCOPE_FIGURES": "png"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "figures: the test reads the PNG figures runs write (TIERSCOPE_FIGURES=png)"
    )


@pytest.fixture(autouse=True)
def _png_figures_when_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    # Autouse, so it runs before the test's other function-scoped fixtures (run directories).
    if request.node.get_closest_marker("figures") is None:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIERSCOPE_FIGURES", "png")
        yield


# 64 MiB heap: 8 MiB hot (random loads), the rest never touched after initialisation.
TINY_MASIM = """\
# regions
cold, 56MiB
hot, 8MiB

# phases
only phase
2000
hot, 1, 4096, 1, ro
"""

TINY_EXPERIMENT = """\
name = "tiny"
seed = 7
duration = "2s"

[workload]
masim = "tiny.cfg"
rate = "1M/s"

[[monitors]]
preset = "damon-mod"

[[monitors]]
preset = "telescope-bnd"
"""


def run_cli(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`tierscope ARGS` in `cwd`, with `env` added to this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "tierscope", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tiny.cfg").write_text(TINY_MASIM)
    (tmp_path / "tiny.toml").write_text(TINY_EXPERIMENT)
    return tmp_path


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (the scripts are not a package). It is registered in
    `sys.modules` first: a dataclass looks its module up by name while being built."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def leftovers(directory: Path, name: str) -> list[Path]:
    """Temporary siblings a failed run might have left next to its output dir."""
    return [p for p in directory.iterdir() if p.name.startswith(f".{name}.")]


def maturin() -> Path | None:
    """The maturin of this environment (the one `make build` uses), or None."""
    path = Path(sys.executable).parent / "maturin"
    return path if path.is_file() else None


def _ledger_missing() -> str | None:
    """Why `tierscope repro claims --quick` cannot run here (it runs every quick repro,
    vmmload's on KVM with musl-gcc, cori-programs' under valgrind), or None."""
    from tierscope import _core

    kvm = _core.kvm_unavailable()
    if kvm is not None:
        return f"KVM: {kvm}"
    for tool in ("musl-gcc", "valgrind"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (make musl)"
    return None


#: Why the quick ledger cannot run here, or None.
LEDGER_MISSING = _ledger_missing()


@dataclass
class QuickLedger:
    """One `tierscope repro claims --quick --out DIR/claims` of the session."""

    base: Path
    proc: subprocess.CompletedProcess[str]
    wall_s: float

    @property
    def out(self) -> Path:
        return self.base / "claims"

    def measurement(self, name: str) -> Path:
        """DIR/claims/NAME: that repro's own output, run with the ledger's quick arguments."""
        assert self.proc.returncode == 0, self.proc.stderr[-2000:]
        return self.out / name


@pytest.fixture(scope="session")
def quick_ledger(tmp_path_factory: pytest.TempPathFactory) -> QuickLedger:
    """The quick ledger, run once per session: its own test reads it, and so do the tests
    of the repros it runs (each measurement is that repro's output), so the suite runs
    each quick repro once. Readers must not write into it."""
    if LEDGER_MISSING is not None:
        pytest.skip(LEDGER_MISSING)
    base = tmp_path_factory.mktemp("ledger")
    t0 = time.monotonic()
    proc = run_cli("repro", "claims", "--quick", "--out", base / "claims", cwd=base)
    return QuickLedger(base, proc, time.monotonic() - t0)
