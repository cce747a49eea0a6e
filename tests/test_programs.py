"""Real programs through the CLI: `[workload] program = [...]` on the kvm engine. A static
C program (programs/hello.c, built with Debian's musl-gcc) prints the same as natively
under `tierscope run`, its writes reach the pml monitor, it reaches only its working
directory and its inputs, a faulting program ends the run with one line and exit 1, a
failing one exits 1 with its outputs written, and bad program settings exit 2 naming the
field. Skipped where KVM or musl-gcc is missing (`make musl` installs it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from tierscope import _core

ROOT = Path(__file__).resolve().parent.parent
KVM_REASON = _core.kvm_unavailable()
needs_kvm = pytest.mark.skipif(KVM_REASON is not None, reason=f"KVM: {KVM_REASON}")
needs_musl = pytest.mark.skipif(
    shutil.which("musl-gcc") is None, reason="musl-gcc is missing (make musl installs it)"
)

EXPERIMENT = """\
name = "program"
warmup = "0s"

[machine]
engine = "kvm"

[workload]
program = ["./{exe}", {args}]
memory = "256MiB"
{extra}

[[monitors]]
preset = "pml"
"""


def host_available_memory() -> int:
    """MemAvailable of /proc/meminfo, bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable in /proc/meminfo")


def build(name: str, where: Path) -> Path:
    exe = where / name
    subprocess.run(
        ["musl-gcc", "-static", "-O2", "-o", exe, ROOT / "programs" / f"{name}.c", "-lm"],
        check=True,
    )
    return exe


def experiment(where: Path, exe: str, *args: str, extra: str = "") -> Path:
    text = EXPERIMENT.format(exe=exe, args=", ".join(json.dumps(a) for a in args), extra=extra)
    path = where / f"{exe}.toml"
    path.write_text(text)
    return path


@needs_kvm
@needs_musl
def test_a_program_prints_what_it_prints_natively(tmp_path: Path) -> None:
    exe = build("hello", tmp_path)
    native = subprocess.run([exe, "one", "two words"], capture_output=True, text=True)
    assert native.returncode == 0
    exp = experiment(tmp_path, "hello", "one", "two words")
    r = run_cli("run", "--quiet", exp, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == native.stdout
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    pml = metrics["monitors"]["pml"]
    assert "exited with status 0" in pml["program"]
    # The truth is the write log (the 8 MiB buffer and more), and the pml monitor's
    # report of written blocks found some of it: precision 1 by construction, as both
    # read the same log (docs/models/PROGRAMS.md).
    assert pml["windows"], "no window closed"
    assert sum(w["true_hot_bytes"] for w in pml["windows"]) >= 8 << 20
    assert sum(w["reported_hot_bytes"] for w in pml["windows"]) > 0
    assert pml["precision"] == 1.0


@needs_kvm
@needs_musl
def test_the_calls_tierscope_performs_answer_as_linux_does(tmp_path: Path) -> None:
    # stat/fstat/lstat, lseek, pread, readv, a private file mapping, getcwd, uname,
    # clocks, getrandom, brk growth and a failing open: the program prints only what is
    # the same natively (sizes, contents, checks).
    exe = build("calls", tmp_path)
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(200)) * 30)
    native = subprocess.run([exe, "data.bin"], capture_output=True, text=True, cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    exp = experiment(tmp_path, "calls", "data.bin", extra='inputs = ["data.bin"]')
    r = run_cli("run", "--quiet", exp, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == native.stdout
    assert "readv matches 1" in r.stdout and "brk grew 1" in r.stdout


@needs_kvm
@needs_musl
def test_a_faulting_program_ends_the_run_with_one_line(tmp_path: Path) -> None:
    build("misbehave", tmp_path)
    exp = experiment(tmp_path, "misbehave", "segv")
    r = run_cli("run", "--quiet", exp, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "about to fault\n"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "unmapped address 0x70000000" in lines[0]
    assert not (tmp_path / "out").exists()


@needs_kvm
@needs_musl
def test_enosys_and_efault_are_reported_and_the_program_goes_on(tmp_path: Path) -> None:
    build("misbehave", tmp_path)
    for mode, says in [("enosys", "unsupported (ENOSYS): 999 x1"), ("badptr", "EFAULT")]:
        exp = experiment(tmp_path, "misbehave", mode)
        r = run_cli("run", exp, "--out", tmp_path / mode, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        line = next(x for x in r.stderr.splitlines() if x.startswith("pml: "))
        assert "exited with status 0" in line and says in line, line


@needs_kvm
@needs_musl
def test_a_program_reaches_only_its_working_directory_and_inputs(tmp_path: Path) -> None:
    # programs/escape.c tries /etc, /etc/shadow, ../ escapes, symbolic links out,
    # /proc/self/mem and /proc/self/environ, and exits 0 only when all were refused.
    build("escape", tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (work / "link-abs").symlink_to(victim)
    (work / "link-rel").symlink_to("../victim")
    exp = experiment(tmp_path, "escape", extra='workdir = "work"')
    r = run_cli("run", "--quiet", exp, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "REACHED" not in r.stdout and r.stdout.count("blocked") == 12, r.stdout
    assert victim.read_text() == "keep me"
    assert not Path("/etc/tierscope-escape").exists()
    assert (work / "made-here").read_text() == "ok\n"
    # An input opens read-only at its name; the same file is out of reach otherwise.
    build("calls", tmp_path)
    (tmp_path / "data.bin").write_bytes(bytes(range(200)) * 30)
    exp = experiment(tmp_path, "calls", "data.bin")
    r = run_cli("run", "--quiet", exp, "--out", tmp_path / "out2", cwd=tmp_path)
    assert r.returncode == 1 and "stat: No such file" in r.stdout + r.stderr, r.stderr


@needs_kvm
@needs_musl
def test_a_failing_program_fails_the_run_and_its_outputs_are_kept(tmp_path: Path) -> None:
    build("misbehave", tmp_path)
    exp = experiment(tmp_path, "misbehave", "exit", "1000")
    r = run_cli("run", exp, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 1
    # exit(1000) is status 232 under Linux too.
    assert "tierscope: the program failed: exit status 232 (monitor pml)" in r.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["monitors"]["pml"]["program_status"] == 232


def test_bad_program_settings_name_the_field(tmp_path: Path) -> None:
    (tmp_path / "prog").write_text("not a program")
    cases = [
        ('program = []', "kvm", "workload.program", "empty list"),
        ('program = ["./missing"]', "kvm", "workload.program", "is not a file"),
        ('program = ["./prog"]', "exact", "workload.program", 'engine = "kvm" only'),
        ('program = ["./prog"]\nenv = ["NOEQUALS"]', "kvm", "workload.env", "NAME=value"),
        ('program = ["./prog"]\nmemory = "1MiB"', "kvm", "workload.memory", "16MiB"),
        ('masim = "x.cfg"\nenv = ["A=1"]', "kvm", "workload.env", "only with `program"),
        ('masim = "x.cfg"\nworkdir = "."', "kvm", "workload.workdir", "only with `program"),
        ('program = ["./prog"]\nworkdir = "nowhere"', "kvm", "workload.workdir", "not a dir"),
        ('program = ["./prog"]\ninputs = ["../x"]', "kvm", "workload.inputs[0]", "inside this"),
        ('program = ["./prog"]\ninputs = ["gone.bin"]', "kvm", "workload.inputs[0]", "not a file"),
        (
            'program = ["./prog"]\ninputs = [{ file = "prog", name = ".." }]',
            "kvm",
            "workload.inputs[0].name",
            "names no file",
        ),
    ]
    if 1 << 40 > host_available_memory() * 3 // 4:
        # `memory` is bounded by what the host could give, not only by the 1 TiB maximum.
        cases.append(('program = ["./prog"]\nmemory = "1TiB"', "kvm", "workload.memory", "host"))
    for workload, engine, field, says in cases:
        text = (
            f'[machine]\nengine = "{engine}"\n[workload]\n{workload}\n'
            '[[monitors]]\npreset = "pml"\n'
        )
        exp = tmp_path / "bad.toml"
        exp.write_text(text)
        r = run_cli("run", exp, "--out", tmp_path / "o", cwd=tmp_path)
        assert r.returncode == 2, (workload, r.stderr)
        assert field in r.stderr and says in r.stderr, (workload, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
