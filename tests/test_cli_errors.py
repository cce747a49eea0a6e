"""Bad input: one line on stderr naming file, line and field; exit status 2; no
traceback; no output directory (nor temporary sibling) left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import leftovers, run_cli
from tierscope.cli import INTERRUPTED


def assert_bad_input(proc, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def assert_nothing_written(workdir: Path, out: str = "out") -> None:
    assert not (workdir / out).exists()
    assert leftovers(workdir, out) == []


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("hot, 1, 4096, lots, ro", "probability"),
        ("hot, 2, 4096, 1, ro", "random"),
        ("hot, 1, 4096, 1, rx", "mode"),
        ("warm, 1, 4096, 1, ro", "region"),
    ],
)
def test_malformed_masim_line(workdir: Path, line: str, field: str) -> None:
    cfg = workdir / "bad.cfg"
    cfg.write_text(f"cold, 56MiB\nhot, 8MiB\n\nphase\n1000\n{line}\n")
    proc = run_cli("run", "--masim", cfg, "--monitor", "damon-mod", "--out", "out", cwd=workdir)
    # The message points into the MASIM file, at line 6, and names the field.
    assert_bad_input(proc, "bad.cfg:6:", field)
    assert_nothing_written(workdir)


def test_malformed_masim_size(workdir: Path) -> None:
    cfg = workdir / "bad.cfg"
    cfg.write_text("hot, 8 parsecs\n\nphase\n1000\nhot, 1, 4096, 1\n")
    proc = run_cli("run", "--masim", cfg, "--out", "out", cwd=workdir)
    assert_bad_input(proc, "bad.cfg:1:", "size")
    assert_nothing_written(workdir)


def test_unknown_preset(workdir: Path) -> None:
    proc = run_cli(
        "run", "--masim", "tiny.cfg", "--monitor", "damon-fast", "--out", "out", cwd=workdir
    )
    assert_bad_input(proc, "preset", "damon-fast", "damon-mod")
    assert_nothing_written(workdir)


def test_unknown_preset_in_file_names_the_line(workdir: Path) -> None:
    text = (workdir / "tiny.toml").read_text().replace('"telescope-bnd"', '"telescope-xyz"')
    (workdir / "bad.toml").write_text(text)
    proc = run_cli("run", "bad.toml", "--out", "out", cwd=workdir)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "telescope-xyz" in t)
    assert_bad_input(proc, f"bad.toml:{line}:", "monitors[1].preset")
    assert_nothing_written(workdir)


def test_unknown_field_in_experiment(workdir: Path) -> None:
    text = (workdir / "tiny.toml").read_text().replace('rate = "1M/s"', 'rat = "1M/s"')
    (workdir / "bad.toml").write_text(text)
    proc = run_cli("run", "bad.toml", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "bad.toml:", "rat")
    assert_nothing_written(workdir)


@pytest.mark.parametrize(
    ("monitor", "field", "needle"),
    [
        # NEMO merges a state's copies across controllers in any order: only
        # associative and commutative operators (paper section 3.1).
        ('type = "nemo_rule"\nop = "set"', "monitors[2].op", "not associative and commutative"),
        ('type = "nemo_rule"\nread_effect = "div"', "monitors[2].read_effect", "commutative"),
        # Over the prototype controller's 1,136 KiB of telemetry SRAM.
        ('type = "nemo_rule"\nstates = 100000', "monitors[2].states", "bytes of SRAM"),
        ('preset = "nemo-hotset"\npipelines = 8\nentries = 16384', "monitors[2].states", "SRAM"),
        # The statistical engine has expected states for counting rules only.
        ('type = "nemo_rule"\nop = "xor"', "monitors[2].op", "statistical engine"),
    ],
)
def test_bad_nemo_rules(workdir: Path, monitor: str, field: str, needle: str) -> None:
    text = (workdir / "tiny.toml").read_text() + f"\n[[monitors]]\n{monitor}\n"
    if "xor" in monitor:
        text = text.replace("[workload]", '[machine]\nengine = "stat"\n\n[workload]')
    (workdir / "bad.toml").write_text(text)
    proc = run_cli("run", "bad.toml", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "bad.toml:", field, needle)
    assert_nothing_written(workdir)


def test_missing_masim_file(workdir: Path) -> None:
    proc = run_cli("run", "--masim", "nope.cfg", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "nope.cfg")
    assert_nothing_written(workdir)


def test_missing_experiment_file(workdir: Path) -> None:
    proc = run_cli("run", "nope.toml", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "nope.toml", "cannot read")
    assert_nothing_written(workdir)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--rate", "10 per fortnight"), ("--duration", "5"), ("--page-size", "1GiB")],
)
def test_bad_units(workdir: Path, option: str, value: str) -> None:
    proc = run_cli("run", "--masim", "tiny.cfg", option, value, "--out", "out", cwd=workdir)
    assert_bad_input(proc, value, f"command line: {option}:")
    assert_nothing_written(workdir)


def test_experiment_and_quick_form_are_exclusive(workdir: Path) -> None:
    proc = run_cli("run", "tiny.toml", "--masim", "tiny.cfg", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "--masim")
    proc = run_cli("run", "tiny.toml", "--monitor", "damon-mod", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "--monitor")
    proc = run_cli("run", "tiny.toml", "--rate", "3M/s", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "--rate", "quick form")
    assert_nothing_written(workdir)


def test_refuses_to_replace_a_foreign_directory(workdir: Path) -> None:
    precious = workdir / "out" / "thesis.tex"
    precious.parent.mkdir()
    precious.write_text("years of work")
    for force in ([], ["--force"]):
        proc = run_cli("run", "tiny.toml", "--out", "out", *force, cwd=workdir)
        assert_bad_input(proc, "out: exists and was not written by tierscope")
        assert precious.read_text() == "years of work"
        assert leftovers(workdir, "out") == []


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help(workdir: Path, argv: list[str]) -> None:
    proc = run_cli(*argv, cwd=workdir)
    assert proc.returncode == 0
    assert "run" in proc.stdout
    if argv[0] == "run":
        for option in (
            "--masim",
            "--monitor",
            "--rate",
            "--duration",
            "--page-size",
            "--engine",
            "--seed",
            "--out",
            "--threads",
            "--paging-levels",
            "--host-page-size",
        ):
            assert option in proc.stdout
        # Every preset and engine of the registry, with its help line.
        from tierscope import _core

        for p in _core.monitor_presets():
            assert f"{p['name']} " in proc.stdout and p["help"][:30] in proc.stdout, p
        for e in _core.engines():
            assert e["help"] in proc.stdout, e


def test_bad_paging_levels_names_the_option(workdir: Path) -> None:
    proc = run_cli(
        "run", "--masim", "tiny.cfg", "--paging-levels", "3", "--out", "out", cwd=workdir
    )
    assert_bad_input(proc, "command line: --paging-levels: machine.paging_levels:", "4 or 5")
    assert_nothing_written(workdir)


def test_bad_host_page_size_names_the_option(workdir: Path) -> None:
    proc = run_cli(
        "run", "--masim", "tiny.cfg", "--host-page-size", "64KiB", "--out", "out", cwd=workdir
    )
    assert_bad_input(
        proc, "command line: --host-page-size: machine.host_page_size:", "not supported"
    )
    assert_nothing_written(workdir)


def test_monitor_the_engine_cannot_run_names_the_option(workdir: Path) -> None:
    # The statistical engine has no write log (exact has simulated PML, kvm KVM's log).
    proc = run_cli(
        "run",
        "--masim",
        "tiny.cfg",
        "--engine",
        "stat",
        "--monitor",
        "pml",
        "--out",
        "out",
        cwd=workdir,
    )
    assert_bad_input(proc, "command line: --monitor: monitors[0].preset:", "write log")
    assert_nothing_written(workdir)


def test_ctrl_c_cancels_and_leaves_nothing(workdir: Path) -> None:
    # A shell starts background jobs with SIGINT ignored, and Python keeps it ignored:
    # restore the default so the child behaves as in a terminal.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tierscope",
            "run",
            "--masim",
            "tiny.cfg",
            "--duration",
            "3600s",
            "--out",
            "out",
        ],
        cwd=workdir,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    assert "0%" in proc.stderr.readline()  # the run has started
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert err.strip() == f"tierscope: {INTERRUPTED}"
    assert_nothing_written(workdir)
