"""An installed wheel works outside the tree (issue 24, item 5): the wheel maturin builds
(reusing target/ from `maturin develop --release`: seconds), installed without network
into a fresh venv outside the tree, runs `tierscope run` on a shipped experiment,
`tierscope repro telescope-tiering --quick` (a quick repro reading shipped experiments) and
`tierscope tune` from a directory outside the tree.

The fresh venv has no numpy, polars, matplotlib or pyarrow of its own: a .pth file appends
this environment's site-packages to its path (a plain path line: the editable install's
own .pth there is not read), so they resolve, while `tierscope` itself is the wheel's copy.
"""

from __future__ import annotations

import filecmp
import json
import os
import resource
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import maturin
from test_tune import EXPERIMENT as TUNE_EXPERIMENT
from test_tune import PERIOD

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Installed:
    """The wheel installed in a fresh venv: its `tierscope` script, the environment to run
    it in, a working directory outside the tree, and each step's seconds."""

    venv: Path
    tierscope: Path
    env: dict[str, str]
    work: Path
    seconds: dict[str, float]

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        t0, cpu0 = time.monotonic(), _children_cpu()
        proc = subprocess.run(
            [str(self.tierscope), *map(str, args)],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        step = " ".join(map(str, args[:2]))
        self.seconds[step] = time.monotonic() - t0
        self.seconds[f"{step} (cpu)"] = _children_cpu() - cpu0
        return proc

    def python(self, code: str) -> str:
        proc = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", code],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return proc.stdout


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: a step's cost on a
    shared machine, where wall time also counts the waits."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tool = maturin()
    if tool is None:
        pytest.skip(f"maturin is not installed beside {sys.executable} (`make venv` installs it)")
    base = tmp_path_factory.mktemp("wheel")
    assert not base.is_relative_to(ROOT), "the venv must be outside the tree"
    seconds: dict[str, float] = {}

    t0, cpu0 = time.monotonic(), _children_cpu()
    wheels = base / "wheels"
    # The profile the extension in .venv was built with (`make test` builds it with
    # test-release), so the wheel reuses its artifacts.
    profile = os.environ.get("TIERSCOPE_BUILD_PROFILE", "release")
    argv = [str(tool), "build", "--profile", profile, "--interpreter", sys.executable]
    build = subprocess.run(
        [*argv, "-o", str(wheels)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    _check(build, "maturin build")
    seconds["maturin build"] = time.monotonic() - t0
    seconds["maturin build (cpu)"] = _children_cpu() - cpu0
    (wheel,) = wheels.glob("tierscope-*.whl")

    t0 = time.monotonic()
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # This environment's pip installs into the new venv; --no-index: no network.
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    _check(
        subprocess.run(
            [*pip, "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True
        ),
        "pip install",
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "tierscope-test-deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    seconds["venv + install"] = time.monotonic() - t0

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = base / "work"
    work.mkdir()
    inst = Installed(venv, venv / "bin" / "tierscope", env, work, seconds)
    yield inst
    print("\nwheel test, seconds per step:", json.dumps(seconds, indent=1))


def test_the_wheel_is_imported_with_its_experiments(installed: Installed) -> None:
    out = installed.python(
        "import tierscope, tierscope.data\n"
        "print(tierscope.__file__)\n"
        "print(tierscope.data.experiments_dir())\n"
        # A shipped experiment names its MASIM config relative to itself.
        "tierscope.load_experiment(tierscope.data.experiment('default.toml'))\n"
    )
    module, experiments = (Path(line) for line in out.splitlines())
    assert module.is_relative_to(installed.venv), module
    assert experiments.is_relative_to(installed.venv), experiments
    # The wheel's copy is the tree's experiments/, file for file.
    ours = sorted(p.relative_to(experiments) for p in experiments.rglob("*") if p.is_file())
    tree = ROOT / "experiments"
    assert ours == sorted(p.relative_to(tree) for p in tree.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(experiments, tree, [str(p) for p in ours], False)
    assert not mismatch and not errors
    assert {"paper", "nemo", "tiering"} <= {p.parts[0] for p in ours}
    # The studies' data too: the claims ledger's files.
    claims = module.parent / "studies" / "claims"
    tree_claims = ROOT / "python" / "tierscope" / "studies" / "claims"
    assert {p.name for p in claims.glob("*.toml")} == {p.name for p in tree_claims.glob("*.toml")}


def test_run_a_shipped_experiment(installed: Installed) -> None:
    data = Path(installed.python("import tierscope.data as d; print(d.experiments_dir())").strip())
    proc = installed.run(
        "run", "--masim", data / "multiphase-64g.cfg", "--monitor", "damon-mod",
        "--monitor", "telescope-bnd", "--rate", "1M/s", "--duration", "2s",
        "--out", "run", "--quiet",
    )  # fmt: skip
    _check(proc, "tierscope run")
    metrics = json.loads((installed.work / "run" / "metrics.json").read_text())
    assert set(metrics["monitors"]) == {"damon-mod", "telescope-bnd"}
    assert (installed.work / "run" / "tierscope-manifest.json").is_file()


def test_repro_telescope_tiering_quick(installed: Installed) -> None:
    # Reads experiments/tiering/ from the package data.
    proc = installed.run("repro", "telescope-tiering", "--quick", "--out", "repro", "--quiet")
    _check(proc, "tierscope repro")
    rows = json.loads((installed.work / "repro" / "repro.json").read_text())["rows"]
    experiments = {r["experiment"] for r in rows}
    assert experiments == {"memtier-gaussian-1t", "ycsb-hotspot-2t"}, experiments
    for name in experiments:
        runs = {r["run"]: r for r in rows if r["experiment"] == name}
        assert {"oracle", "static", "telescope-rule@telescope-bnd"} <= set(runs)
        assert runs["static"]["speedup_over_slow"] == pytest.approx(1.0)
        assert all(r["gap_to_oracle"] >= 1.0 - 1e-9 for r in runs.values())


def test_tune_an_experiment(installed: Installed) -> None:
    (installed.work / "exp.toml").write_text(TUNE_EXPERIMENT)
    _check(installed.run("tune", "exp.toml", "--param", PERIOD, "--out", "tune"), "tune")
    summary = json.loads((installed.work / "tune" / "tune.json").read_text())
    assert summary["trials"] and summary["chosen"] == min(summary["trials"], key=lambda t: t[1])
