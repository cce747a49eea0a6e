"""Issue 27, items 2, 3 and 6: `--set PATH=VALUE` overrides (and --seed / --duration on
experiment files) on run, sweep and tune; `tierscope compare RUN [RUN...]` across runs,
written only where --out says; did-you-mean on names, `-o`, the default output
directory, and tune's cost with its unit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tierscope
from conftest import run_cli
from tierscope import ConfigError, expand_sweep
from tierscope.experiment import load_experiment


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def one_line_error(proc, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_run_with_overrides_and_file_flags(workdir: Path) -> None:
    proc = run_cli(
        "run",
        "tiny.toml",
        "--set",
        "seed=3",
        "--set",
        "monitors[0].aggr=100ms",
        "--duration",
        "1s",
        "-o",
        "out",
        "--quiet",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    exp = metrics(workdir / "out")["experiment"]
    assert exp["seed"] == 3 and exp["duration"] == "1s"
    assert exp["monitors"][0]["aggr"] == "100ms"
    # --seed on a file sets its seed; --set comes after it and wins.
    proc = run_cli(
        "run", "tiny.toml", "--seed", "5", "--set", "seed=6", "--set", "duration=1s",
        "--out", "out2", "--quiet", cwd=workdir,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert metrics(workdir / "out2")["experiment"]["seed"] == 6


@pytest.mark.parametrize(
    ("setting", "needles"),
    [
        ("seed=three", ["command line: --set seed=three: seed:"]),
        ("monitors[9].aggr=1s", ["--set monitors[9].aggr", "item [9] of a list of 2"]),
        ("monitors[0].agr=1s", ["--set monitors[0].agr=1s", "did you mean `aggr`?"]),
        ("monitors[0].aggr=soon", ["--set monitors[0].aggr=soon", "monitors[0].aggr"]),
        ("seed", ["--set", "expected PATH=VALUE"]),
    ],
)
def test_a_bad_override_is_one_line_naming_it(
    workdir: Path, setting: str, needles: list[str]
) -> None:
    proc = run_cli("run", "tiny.toml", "--set", setting, "--out", "out", cwd=workdir)
    one_line_error(proc, *needles)
    assert not (workdir / "out").exists()


def test_overrides_reach_sweeps_and_the_api(workdir: Path) -> None:
    exp = load_experiment(workdir / "tiny.toml", overrides=[("seed", "9")])
    assert exp.seed == 9
    sweep = {
        "base": str(workdir / "tiny.toml"),
        "axes": [{"path": "duration", "values": ["1s", "2s"]}],
    }
    runs = expand_sweep(sweep, overrides=[("monitors[damon-mod].sample", "10ms")])
    assert [r.experiment.to_dict()["monitors"][0]["sample"] for r in runs] == ["10ms", "10ms"]
    with pytest.raises(ConfigError, match="the command line sets it"):
        expand_sweep(sweep, overrides=[("duration", "3s")])
    (workdir / "s.json").write_text(json.dumps(sweep))
    proc = run_cli("sweep", "s.json", "--dry-run", "--set", "seed=4", cwd=workdir)
    assert proc.returncode == 0 and "2 runs" in proc.stderr, proc.stderr


def test_compare_two_runs_side_by_side_never_into_the_inputs(workdir: Path) -> None:
    for out, seed in (("a", "1"), ("b", "2")):
        proc = run_cli(
            "run", "tiny.toml", "--set", f"seed={seed}", "--set", "duration=1s",
            "--out", out, "--quiet", cwd=workdir,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    before = {p: sorted(x.name for x in (workdir / p).iterdir()) for p in ("a", "b")}
    proc = run_cli("compare", "a", "b", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    monitors = text.split("\n\n")[0].splitlines()
    assert monitors[0] == "monitors:" and monitors[1].split()[:3] == ["run", "monitor", "kind"]
    assert [r.split()[:2] for r in monitors[3:]] == [
        ["a", "damon-mod"],
        ["a", "telescope-bnd"],
        ["b", "damon-mod"],
        ["b", "telescope-bnd"],
    ]
    settings = text.split("settings that differ:\n")[1].split("\n\n")[0].splitlines()
    assert settings[0].split() == ["setting", "a", "b"]
    assert [s.split() for s in settings[2:]] == [["seed", "1", "2"]]
    assert "monitors against the first run that has them:" in text
    changes = text.split("monitors against the first run that has them:\n")[1].splitlines()
    assert changes[0].split()[:3] == ["monitor", "run", "against"]
    assert [c.split()[:3] for c in changes[2:]] == [
        ["damon-mod", "b", "a"],
        ["telescope-bnd", "b", "a"],
    ]
    # Nothing was written into the inputs.
    assert {p: sorted(x.name for x in (workdir / p).iterdir()) for p in ("a", "b")} == before
    # --out writes there, and only there; never inside an input.
    proc = run_cli("compare", "a", "b", "--out", "cmp", "--format", "json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((workdir / "cmp" / "compare.json").read_text())
    assert doc["runs"] == ["a", "b"] and doc["settings"] == [{"setting": "seed", "a": 1, "b": 2}]
    assert json.loads(proc.stdout) == doc
    assert (workdir / "cmp" / "compare.md").read_text().startswith("### monitors")
    one_line_error(run_cli("compare", "a", "b", "-o", "a/cmp", cwd=workdir), "inside the input a")
    # One run: its tables as before, nothing written.
    proc = run_cli("compare", "a", cwd=workdir)
    assert proc.returncode == 0 and proc.stdout.split()[:2] == ["monitor", "kind"]
    assert {p: sorted(x.name for x in (workdir / p).iterdir()) for p in ("a", "b")} == before


def test_compare_reads_a_sweep_store(workdir: Path) -> None:
    sweep = {"base": "tiny.toml", "set": {"duration": "1s"}, "seeds": [1, 2]}
    (workdir / "s.json").write_text(json.dumps(sweep))
    proc = run_cli("sweep", "s.json", "-o", "sw", "--jobs", "1", "--quiet", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("compare", "sw", "--format", "json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["runs"] == ["sw/seed=1", "sw/seed=2"]
    assert doc["settings"] == [{"setting": "seed", "sw/seed=1": 1, "sw/seed=2": 2}]
    assert not list((workdir / "sw").glob("compare*"))


def test_run_without_out_writes_a_timestamped_directory(workdir: Path) -> None:
    proc = run_cli("run", "tiny.toml", "--set", "duration=1s", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    (made,) = (workdir / "runs").iterdir()
    assert re.fullmatch(r"tiny-\d{8}-\d{6}", made.name), made.name
    assert f"outputs in runs/{made.name}" in proc.stderr
    assert (made / "metrics.json").is_file()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["rn", "tiny.toml"], ["unknown command `rn` (did you mean `run`?)"]),
        (["run", "--masim", "tiny.cfg", "--monitor", "damon-md"], ["did you mean `damon-mod`?"]),
        (["run", "--masim", "tiny.cfg", "--engine", "stats"], ["did you mean `stat`?"]),
        (
            ["run", "--masim", "tiny.cfg", "--tiers", "dramm:32MiB,cxl", "--policy", "oracle"],
            ["did you mean `dram`?"],
        ),
        (
            ["run", "--masim", "tiny.cfg", "--tiers", "dram:32MiB,cxl", "--policy", "oracel"],
            ["did you mean `oracle`?"],
        ),
        (["run", "tiny.toml", "--set", "monitors[0].sampel=1ms"], ["did you mean `sample`?"]),
        (["run"], ["give an EXPERIMENT file or --masim FILE"]),
    ],
)
def test_names_get_did_you_mean_in_one_line(
    workdir: Path, args: list[str], needles: list[str]
) -> None:
    one_line_error(run_cli(*args, "-o", "out", cwd=workdir), *needles)


def test_tune_prints_its_cost_with_a_unit(workdir: Path) -> None:
    proc = run_cli("tune", "--workload", "strided", "--stop", "trials:2", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "cost (ns of run time)" in proc.stdout
    chosen = next(x for x in proc.stdout.splitlines() if x.startswith("chosen:"))
    assert re.search(r"\(cost [0-9.e+]+ ns, -?[0-9.]+ % slower than all-fast\)", chosen), chosen


def test_the_cli_starts_without_the_sweep_store() -> None:
    # Every command starts a Python process: pyarrow and matplotlib load only in the
    # commands that use them (sweeps and their stores, figures), not at the start of all.
    code = (
        "import sys, tierscope.cli; tierscope.cli.build_parser(); "
        "print(sorted(m for m in ('pyarrow', 'matplotlib', 'polars', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    assert tierscope.load_sweep.__module__ == "tierscope.sweep.store"
    assert {"run_sweep", "write_report"} <= set(dir(tierscope))
