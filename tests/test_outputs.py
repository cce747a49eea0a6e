"""Outputs never delete or replace a file tierscope did not write (tierscope.outdir):
manifests, --force replacing only our files, a lock per output and per sweep store,
a killed writer's temporaries cleaned by the next, and one line (exit 2) for a full
disk, a read-only directory, `--out .` and a corrupt store file."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tierscope
from conftest import leftovers, run_cli
from tierscope import outdir
from tierscope.cli import main as cli_main

QUICK = ("--masim", "tiny.cfg", "--monitor", "damon-mod", "--rate", "1M/s", "--quiet")


def quick_run(*extra: str) -> list[str]:
    """A one-monitor quick-form run of 1 s (about half a second)."""
    return ["run", *QUICK, "--duration", "1s", *extra]


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Runs the CLI in this process (so monkeypatches apply): exit status and stderr."""
    status = cli_main(argv)
    return status, capsys.readouterr().err


def one_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def snapshot(d: Path) -> dict[str, bytes]:
    """Every file under `d`, by relative path."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def manifest(d: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((d / outdir.MANIFEST).read_text())
    return doc


def ours_only(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()} - {outdir.MANIFEST}


# --- whose directory --------------------------------------------------------------------


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_user_directory_with_a_metrics_json_is_never_touched(
    workdir: Path, force: list[str]
) -> None:
    # The case: any metrics.json (even `{}`) made the whole directory "ours".
    out = workdir / "out"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    (out / "thesis.tex").write_text("years of work")
    (out / "tiny.toml").write_text((workdir / "tiny.toml").read_text())
    before = snapshot(out)
    proc = run_cli(*quick_run("--out", "out", *force), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "out: exists and was not written by tierscope")
    assert snapshot(out) == before
    assert leftovers(workdir, "out") == []


def test_force_replaces_our_files_and_keeps_the_users(workdir: Path) -> None:
    assert run_cli("run", "tiny.toml", "--out", "out", "--quiet", cwd=workdir).returncode == 0
    out = workdir / "out"
    first = manifest(out)
    assert first["kind"] == "run" and first["command"][:2] == ["tierscope", "run"]
    assert set(first["files"]) == ours_only(out)
    (out / "thesis.tex").write_text("years of work")
    (out / "tiny.toml").write_text("my copy of the experiment")
    # Without --force: refused, nothing changes.
    before = snapshot(out)
    proc = run_cli(*quick_run("--out", "out"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "out: holds an earlier tierscope output", "--force")
    assert snapshot(out) == before
    # With --force: our files replaced (telescope-bnd's gone), the user's kept.
    proc = run_cli(*quick_run("--out", "out", "--force"), cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert (out / "thesis.tex").read_text() == "years of work"
    assert (out / "tiny.toml").read_text() == "my copy of the experiment"
    assert not (out / "heatmap-telescope-bnd.png").exists()
    assert list(json.loads((out / "metrics.json").read_text())["monitors"]) == ["damon-mod"]
    assert set(manifest(out)["files"]) == ours_only(out) - {"thesis.tex", "tiny.toml"}
    assert leftovers(workdir, "out") == []


def test_a_file_of_ours_by_name_but_not_in_the_manifest_is_refused(workdir: Path) -> None:
    # Our manifest, but the user put a file where ours would go: refused, even with --force.
    out = workdir / "out"
    assert run_cli(*quick_run("--out", "out"), cwd=workdir).returncode == 0
    (out / "windows-damon-agg.csv").write_text("the user's own csv")
    before = snapshot(out)
    argv = ["run", *QUICK, "--monitor", "damon-agg", "--duration", "1s", "--out", "out"]
    proc = run_cli(*argv, "--force", cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "windows-damon-agg.csv exists and was not written by tierscope")
    assert snapshot(out) == before
    assert leftovers(workdir, "out") == []


@pytest.mark.parametrize(
    "entry", ["../victim.txt", "/tmp/victim.txt", "sub/../../victim.txt", "./metrics.json"]
)
def test_a_manifest_naming_files_outside_is_not_ours(workdir: Path, entry: str) -> None:
    (workdir / "victim.txt").write_text("keep")
    out = workdir / "out"
    out.mkdir()
    doc = outdir.manifest_document("run", ["metrics.json"])
    doc["files"].append(entry)
    (out / outdir.MANIFEST).write_text(json.dumps(doc))
    proc = run_cli(*quick_run("--out", "out", "--force"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "not written by tierscope")
    assert (workdir / "victim.txt").read_text() == "keep"


def test_no_write_through_a_symbolic_link_inside_ours(workdir: Path) -> None:
    # A validate-like output whose kvm/ became a link elsewhere: --force must not remove
    # the files at the link's end.
    elsewhere = workdir / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "metrics.json").write_text("the user's")
    out = workdir / "out"
    out.mkdir()
    (out / "kvm").symlink_to(elsewhere)
    doc = outdir.manifest_document("validate", ["kvm/metrics.json"])
    (out / outdir.MANIFEST).write_text(json.dumps(doc))
    with outdir.claim(out, "validate", force=True) as claim:
        with pytest.raises(outdir.OutputError, match="kvm is not a directory tierscope wrote"):
            with claim.stage() as staging:
                (staging / "validate.json").write_text("{}")
    assert (elsewhere / "metrics.json").read_text() == "the user's"


def test_out_dot_and_root(workdir: Path) -> None:
    # `--out .` in a directory holding the experiment (and a metrics.json): refused.
    (workdir / "metrics.json").write_text("{}")
    before = snapshot(workdir)
    proc = run_cli("run", "tiny.toml", "--out", ".", cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, ".: exists and was not written by tierscope")
    assert snapshot(workdir) == before
    # In an empty directory, `--out .` writes there (it used to be a traceback).
    empty = workdir / "empty"
    empty.mkdir()
    argv = quick_run("--out", ".")
    argv[argv.index("tiny.cfg")] = "../tiny.cfg"
    proc = run_cli(*argv, cwd=empty)
    assert proc.returncode == 0, proc.stderr
    assert (empty / "metrics.json").is_file() and (empty / outdir.MANIFEST).is_file()
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".")] == []
    proc = run_cli(*quick_run("--out", "/"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "cannot write /")


def test_an_absent_out_in_new_directories_and_an_empty_one(workdir: Path) -> None:
    assert run_cli(*quick_run("--out", "a/b/out"), cwd=workdir).returncode == 0
    assert (workdir / "a" / "b" / "out" / "metrics.json").is_file()
    (workdir / "empty").mkdir()
    assert run_cli(*quick_run("--out", "empty"), cwd=workdir).returncode == 0
    assert set(manifest(workdir / "empty")["files"]) == ours_only(workdir / "empty")
    assert leftovers(workdir / "a" / "b", "out") == leftovers(workdir, "empty") == []


# --- the lock ---------------------------------------------------------------------------


def start_first_writer(workdir: Path, *argv: str) -> subprocess.Popen[str]:
    """Starts a CLI run that lasts a few seconds and returns once it holds its lock (its
    progress bar has started, which happens after the claim)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tierscope", *argv],
        cwd=workdir,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "0%" in line or "%" in line, line + proc.stderr.read()
    return proc


def test_a_second_writer_of_one_out_is_refused_and_the_first_finishes(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    first = start_first_writer(workdir, "run", *QUICK[:-1], "--duration", "6s", "--out", "out")
    try:
        status, err = cli(quick_run("--out", "out"), capsys)
        assert status == 2
        one_line(err, f"out: another tierscope (pid {first.pid}) is writing it")
        # The API too, with or without force.
        with pytest.raises(tierscope.OutputError, match=f"pid {first.pid}"):
            tierscope.run(workdir / "tiny.toml", out=workdir / "out", force=True)
    finally:
        _, rest = first.communicate(timeout=120)
    assert first.returncode == 0, rest
    # The first writer's result is whole: its manifest names every file, all there.
    out = workdir / "out"
    m = manifest(out)
    assert m["command"][-4:] == ["--duration", "6s", "--out", "out"]
    assert set(m["files"]) == ours_only(out)
    assert json.loads((out / "metrics.json").read_text())["duration_ns"] == 6_000_000_000
    assert leftovers(workdir, "out") == []


def test_a_stale_lock_file_does_not_block(workdir: Path) -> None:
    # A killed writer leaves its lock file; nobody holds the lock any more.
    (workdir / ".out.tierscope.lock").write_text("999999\n")
    assert run_cli(*quick_run("--out", "out"), cwd=workdir).returncode == 0
    assert leftovers(workdir, "out") == []


def test_nested_claims_of_one_target_share_the_lock(tmp_path: Path) -> None:
    with outdir.claim(tmp_path / "s", "sweep", resume=True) as a:
        with outdir.claim(tmp_path / "s", "sweep", resume=True) as b:
            b.put("x.txt", b"x")
        a.put("y.txt", b"y")
    assert manifest(tmp_path / "s")["files"] == ["x.txt", "y.txt"]
    assert leftovers(tmp_path, "s") == []


# --- a killed writer --------------------------------------------------------------------

KILLER = """\
import os, signal, sys
import tierscope.output
from tierscope.cli import main

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[1] == "write":
    tierscope.output.heatmap = die
else:  # die on the N-th file moved into the target while committing
    import tierscope.outdir
    real, calls = os.replace, [0]

    def replace(src, dst):
        calls[0] += 1
        if calls[0] == int(sys.argv[1]):
            die()
        return real(src, dst)

    tierscope.outdir.os.replace = replace
main(sys.argv[2:])
"""


def killed(workdir: Path, when: str, *argv: str) -> None:
    (workdir / "killer.py").write_text(KILLER)
    proc = subprocess.run(
        [sys.executable, "killer.py", when, *argv], cwd=workdir, capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_a_killed_writers_staging_is_cleaned_by_the_next(workdir: Path) -> None:
    killed(workdir, "write", *quick_run("--out", "out"))
    stale = leftovers(workdir, "out")
    assert len([p for p in stale if ".tierscope-stage-" in p.name]) == 1, stale
    assert not (workdir / "out").exists()
    # Not ours (no marker), though named like ours: kept. An old version's .tmp too.
    decoy = workdir / ".out.tierscope-stage-abcd1234"
    decoy.mkdir()
    (decoy / "data.txt").write_text("someone's")
    (workdir / ".out.tmp-zzz").mkdir()
    assert run_cli(*quick_run("--out", "out"), cwd=workdir).returncode == 0
    assert sorted(p.name for p in leftovers(workdir, "out")) == [decoy.name, ".out.tmp-zzz"]
    assert (decoy / "data.txt").read_text() == "someone's"
    assert set(manifest(workdir / "out")["files"]) == ours_only(workdir / "out")


def test_a_writer_killed_while_committing_never_loses_track_of_ours(workdir: Path) -> None:
    assert run_cli("run", "tiny.toml", "--out", "out", "--quiet", cwd=workdir).returncode == 0
    out = workdir / "out"
    old = set(manifest(out)["files"])
    (out / "thesis.tex").write_text("years of work")
    # os.replace: 1 the union manifest, 2.. old files aside, then new files in: die
    # with some old files moved aside and some new ones in.
    killed(workdir, "12", *quick_run("--out", "out", "--force"))
    union = set(manifest(out)["files"])
    assert old <= union and "metrics.json" in union and "thesis.tex" not in union
    # Refused without --force (ours); with it, the old output's files are all gone.
    assert run_cli(*quick_run("--out", "out"), cwd=workdir).returncode == 2
    assert run_cli(*quick_run("--out", "out", "--force"), cwd=workdir).returncode == 0
    assert (out / "thesis.tex").read_text() == "years of work"
    assert ours_only(out) == set(manifest(out)["files"]) | {"thesis.tex"}
    assert not (out / "heatmap-telescope-bnd.png").exists()
    assert leftovers(workdir, "out") == []


# --- the system refuses -----------------------------------------------------------------


def enospc(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_one_line_and_leaves_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tierscope.output

    monkeypatch.chdir(workdir)
    monkeypatch.setattr(tierscope.output, "heatmap", enospc)
    status, err = cli(quick_run("--out", "deep/out"), capsys)
    assert status == 2
    assert one_line(err) == "tierscope: error: cannot write deep/out: No space left on device"
    assert not (workdir / "deep").exists()


def test_a_full_disk_while_replacing_keeps_the_earlier_output(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    assert cli(["run", "tiny.toml", "--out", "out", "--quiet"], capsys)[0] == 0
    before = snapshot(workdir / "out")
    real, calls = os.replace, [0]

    def replace(src: Any, dst: Any) -> None:
        calls[0] += 1
        if calls[0] == 6:  # old files moved aside, some new ones in
            enospc()
        real(src, dst)

    monkeypatch.setattr(outdir.os, "replace", replace)
    status, err = cli(quick_run("--out", "out", "--force"), capsys)
    assert calls[0] >= 6 and status == 2
    one_line(err, "cannot write out: No space left on device")
    assert snapshot(workdir / "out") == before
    assert leftovers(workdir, "out") == []


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_read_only_directory_is_one_line(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    code: int,
) -> None:
    # As the file system answers for a read-only mount (or, not as root, a directory
    # without write permission): simulated, as this test may run as root.
    monkeypatch.chdir(workdir)
    real_open, real_mkdir = os.open, os.mkdir
    ro = workdir / "ro"
    ro.mkdir()

    def refuse(path: Any) -> None:
        if Path(path).absolute().parent == ro:
            raise OSError(code, os.strerror(code), str(path))

    def fake_open(path: Any, *args: Any, **kwargs: Any) -> int:
        refuse(path)
        return real_open(path, *args, **kwargs)

    def fake_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        refuse(path)
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
    status, err = cli(quick_run("--out", "ro/out"), capsys)
    assert status == 2
    assert one_line(err) == f"tierscope: error: cannot write ro/out: {os.strerror(code)}"
    assert list(ro.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_really_read_only_directory_is_one_line(workdir: Path) -> None:
    ro = workdir / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        proc = run_cli(*quick_run("--out", "ro/out"), cwd=workdir)
    finally:
        ro.chmod(0o755)
    assert proc.returncode == 2
    one_line(proc.stderr, "cannot write ro/out: Permission denied")


def test_a_file_where_a_directory_should_be(workdir: Path) -> None:
    (workdir / "plain").write_text("a file")
    proc = run_cli(*quick_run("--out", "plain/out"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "cannot write plain/out: ")
    proc = run_cli(*quick_run("--out", "plain"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "plain: exists and is not a directory")
    assert (workdir / "plain").read_text() == "a file"


# --- sweep stores -----------------------------------------------------------------------

SWEEP_BASE = """\
name = "tiny"
duration = "1s"
[workload]
masim = "tiny.cfg"
rate = "1M/s"
[[monitors]]
preset = "damon-mod"
"""


def sweep_file(d: Path, seeds: int) -> None:
    (d / "base.toml").write_text(SWEEP_BASE)
    (d / "sweep.toml").write_text(f'base = "base.toml"\nseeds = {{ from = 1, to = {seeds} }}\n')


def test_a_second_sweep_on_a_locked_store_is_refused(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    sweep_file(workdir, seeds=6)
    first = subprocess.Popen(
        [sys.executable, "-m", "tierscope", "sweep", "sweep.toml", "--out", "out", "--jobs", "1"],
        cwd=workdir,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (workdir / "out" / "sweep.json").exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        status, err = cli(["sweep", "sweep.toml", "--out", "out", "--jobs", "1"], capsys)
        assert status == 2
        one_line(err, f"out: another tierscope (pid {first.pid}) is writing it")
        assert first.poll() is None, "the first sweep is still running"
    finally:
        _, rest = first.communicate(timeout=120)
    assert first.returncode == 0, rest
    assert tierscope.load_sweep(workdir / "out").height == 6
    assert manifest(workdir / "out")["kind"] == "sweep"
    assert leftovers(workdir, "out") == []


def test_a_store_from_before_manifests_resumes(workdir: Path) -> None:
    sweep_file(workdir, seeds=2)
    assert tierscope.run_sweep(workdir / "sweep.toml", workdir / "out", progress=False).done == 2
    (workdir / "out" / outdir.MANIFEST).unlink()
    (workdir / "out" / "monitors" / "seed=2.parquet").unlink()
    outcome = tierscope.run_sweep(workdir / "sweep.toml", workdir / "out", progress=False)
    assert (outcome.skipped, outcome.done) == (1, 1)
    assert manifest(workdir / "out")["files"] == ["sweep.json"]
    # A store is resumed, never replaced: not even with --force by another command.
    before = snapshot(workdir / "out")
    proc = run_cli(*quick_run("--out", "out", "--force"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "out: holds a tierscope sweep store")
    assert snapshot(workdir / "out") == before


def test_a_corrupt_parquet_file_is_named(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    sweep_file(workdir, seeds=2)
    assert cli(["sweep", "sweep.toml", "--out", "out", "--quiet"], capsys)[0] == 0
    (workdir / "out" / "monitors" / "seed=2.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(tierscope.OutputError, match=r"seed=2\.parquet: not a readable Parquet"):
        tierscope.load_sweep(workdir / "out")
    status, err = cli(["report", "out"], capsys)
    assert status == 2
    one_line(err, "out/monitors/seed=2.parquet: not a readable Parquet file", "remove it")
    (workdir / "out" / "sweep.json").write_text("{")
    status, err = cli(["sweep", "sweep.toml", "--out", "out"], capsys)
    assert status == 2
    one_line(err, "sweep.json: cannot read it")


def test_a_full_disk_in_a_sweep_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tierscope.sweep.store

    monkeypatch.chdir(workdir)
    sweep_file(workdir, seeds=1)
    monkeypatch.setattr(tierscope.sweep.store.pq, "write_table", enospc)
    status, err = cli(["sweep", "sweep.toml", "--out", "out", "--quiet"], capsys)
    assert status == 2
    one_line(err, "cannot write out: No space left on device")
    assert list((workdir / "out" / "monitors").iterdir()) == []


# --- other commands ---------------------------------------------------------------------


def test_report_and_trace_convert_replace_a_file_only_with_force(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    assert cli(quick_run("--out", "out"), capsys)[0] == 0
    # Into the run directory: recorded in its manifest, replaced freely afterwards.
    assert cli(["report", "out"], capsys)[0] == 0
    assert "report.html" in manifest(workdir / "out")["files"]
    assert cli(["report", "out"], capsys)[0] == 0
    # To a file of the user's: refused, unless --force.
    (workdir / "mine.html").write_text("mine")
    status, err = cli(["report", "out", "--out", "mine.html"], capsys)
    assert status == 2
    one_line(err, "mine.html: exists; give --force")
    assert (workdir / "mine.html").read_text() == "mine"
    assert cli(["report", "out", "--out", "mine.html", "--force"], capsys)[0] == 0
    assert (workdir / "mine.html").read_text().startswith("<!DOCTYPE html>")
    # A report.html tierscope did not write, in a directory of ours: refused likewise.
    (workdir / "out" / "report.html").unlink()
    doc = manifest(workdir / "out")
    doc["files"].remove("report.html")
    (workdir / "out" / outdir.MANIFEST).write_text(json.dumps(doc))
    (workdir / "out" / "report.html").write_text("mine too")
    status, err = cli(["report", "out"], capsys)
    assert status == 2
    one_line(err, "report.html exists and was not written by tierscope")
    assert (workdir / "out" / "report.html").read_text() == "mine too"
    (workdir / "t.lackey").write_text(" L 04021000,8\n S 04022000,8\n")
    (workdir / "t.bin").write_text("mine")
    status, err = cli(["trace", "convert", "t.lackey", "t.bin"], capsys)
    assert status == 2
    one_line(err, "t.bin: exists; give --force")
    assert (workdir / "t.bin").read_text() == "mine"
    assert cli(["trace", "convert", "t.lackey", "t.bin", "--force"], capsys)[0] == 0
    assert (workdir / "t.bin").read_bytes() != b"mine"
    assert leftovers(workdir, "t.bin") == leftovers(workdir, "mine.html") == []


@pytest.mark.figures
def test_tune_out_is_claimed_like_a_run(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    tune = ["tune", "--workload", "strided", "--stop", "trials:2", "--out", "out"]
    assert cli(tune, capsys)[0] == 0
    out = workdir / "out"
    assert manifest(out)["kind"] == "tune"
    assert set(manifest(out)["files"]) == {"trials.csv", "curve.csv", "tune.json", "tune.png"}
    (out / "notes.md").write_text("mine")
    status, err = cli(tune, capsys)
    assert status == 2
    one_line(err, "out: holds an earlier tierscope output")
    assert cli([*tune, "--force"], capsys)[0] == 0
    assert (out / "notes.md").read_text() == "mine"
    (workdir / "foreign").mkdir()
    (workdir / "foreign" / "tune.json").write_text("{}")
    status, err = cli([*tune[:-1], "foreign", "--force"], capsys)
    assert status == 2
    one_line(err, "foreign: exists and was not written by tierscope")


def test_a_planted_lock_link_is_refused(workdir: Path) -> None:
    # The lock file is truncated when taken: never through a link planted beside DIR.
    victim = workdir / "victim.txt"
    victim.write_text("keep")
    (workdir / ".out.tierscope.lock").symlink_to(victim)
    proc = run_cli(*quick_run("--out", "out"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "cannot write out: Too many levels of symbolic links")
    (workdir / ".out.tierscope.lock").unlink()
    os.link(victim, workdir / ".out.tierscope.lock")
    proc = run_cli(*quick_run("--out", "out"), cwd=workdir)
    assert proc.returncode == 2
    one_line(proc.stderr, "lock file", "is not a plain file")
    assert victim.read_text() == "keep" and not (workdir / "out").exists()
