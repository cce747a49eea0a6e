"""Memory traces of real programs as workloads (docs/models/TRACES.md): lackey's text and the
binary format replay identically on the exact engine, markers become phases, bad traces
and settings exit 2 naming the file, line or field, and a real program traced by valgrind
converts and replays."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent

# A loop over 64 KiB written, then 64 KiB read elsewhere, after a marker.
LINES = ["==1== Lackey, an example Valgrind tool", "# phase fill"]
LINES += [f" S {0x600000 + 64 * i:x},8" for i in range(1024)]
LINES += ["# phase scan"]
LINES += [f" L {0x7ff000000 + 64 * i:x},8" for i in range(1024)]
LINES += [f"I  {0x401000 + i:x},4" for i in range(16)]
LACKEY = "\n".join(LINES) + "\n"

EXPERIMENT = """\
duration = "1s"
warmup = "0s"
[machine]
engine = "{engine}"
[workload]
trace = {{ path = "{path}", format = "{format}" }}
rate = "100K/s"
[[monitors]]
preset = "pml"
[[monitors]]
preset = "telescope-bnd"
"""


def experiment(where: Path, name: str, path: str, fmt: str, engine: str = "exact") -> Path:
    exp = where / f"{name}.toml"
    exp.write_text(EXPERIMENT.format(engine=engine, path=path, format=fmt))
    return exp


def test_lackey_and_binary_replay_alike_and_markers_are_phases(tmp_path: Path) -> None:
    (tmp_path / "t.lackey").write_text(LACKEY)
    conv = run_cli("trace", "convert", "t.lackey", "t.tstrace", cwd=tmp_path)
    assert conv.returncode == 0, conv.stderr
    # 1024 stores + 1024 loads; instruction fetches dropped; 16 + 16 pages of 4 KiB.
    assert "2048 accesses (1024 stores) on 32 pages" in conv.stdout
    assert "phase fill from access 0" in conv.stdout
    assert "phase scan from access 1024" in conv.stdout
    outs = []
    for fmt, path in [("lackey", "t.lackey"), ("binary", "t.tstrace")]:
        exp = experiment(tmp_path, fmt, path, fmt)
        r = run_cli("run", "--quiet", exp, "--out", tmp_path / fmt, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads((tmp_path / fmt / "metrics.json").read_text()))
    assert outs[0]["monitors"] == outs[1]["monitors"]
    pml = outs[0]["monitors"]["pml"]
    # The fill phase (stores) is what the write log sees: its 16 pages in one 2 MiB block.
    assert sum(w["true_hot_bytes"] for w in pml["windows"]) > 0
    assert pml["precision"] == 1.0 and pml["recall"] == 1.0
    # Two phases of 1024 accesses at 100 K/s (10.24 ms each), looping over 1 s.
    assert pml["phase_changes"] >= 8


def test_trace_stats_count_pages_per_phase_and_for_a_model(tmp_path: Path) -> None:
    (tmp_path / "t.lackey").write_text(LACKEY)
    # The fill phase: 1024 stores, 64 on each of 16 pages: 80 % (820 accesses) takes 13.
    r = run_cli("trace", "stats", "t.lackey", "--phase", "fill", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "1024 accesses on 16 pages of 4 KiB; 80 % of the accesses on 13 pages" in r.stdout
    r = run_cli("trace", "stats", "t.lackey", "--phase", "nope", cwd=tmp_path)
    assert r.returncode == 2 and "its phases: fill, scan" in r.stderr, r.stderr
    # The kv model: 1000 items of 192 B (header, key, value rounded to lines) fill 47
    # pages, beside the bucket array that every operation reads (hence fewer for 80 %).
    exp = tmp_path / "kv.toml"
    exp.write_text(
        '[machine]\nengine = "exact"\n[workload]\n'
        'kv = { keys = 1000, value_size = "100B", mix = "ycsb-a", distribution = "uniform",'
        ' duration = "1s" }\n[[monitors]]\npreset = "pml"\n'
    )
    r = run_cli("trace", "stats", "--experiment", exp, "--accesses", "200000", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pages = int(r.stdout.split(" accesses on ")[1].split()[0])
    hot = int(r.stdout.split("80 % of the accesses on ")[1].split()[0])
    assert pages >= 47 and 0 < hot < pages, r.stdout


def test_bad_traces_and_settings_exit_2_with_the_place(tmp_path: Path) -> None:
    (tmp_path / "bad.lackey").write_text(" L 600000,8\n L 600zz0,8\n")
    (tmp_path / "ok.lackey").write_text(LACKEY)
    (tmp_path / "bad.tstrace").write_bytes(b"NOTTRACE" + bytes(16))
    cases = [
        (experiment(tmp_path, "a", "bad.lackey", "lackey"), ["bad.lackey:2", "hexadecimal"]),
        (experiment(tmp_path, "b", "bad.tstrace", "binary"), ["bad.tstrace", "bad magic"]),
        (experiment(tmp_path, "c", "missing.lackey", "lackey"), ["workload.trace.path"]),
        (
            experiment(tmp_path, "d", "ok.lackey", "lackey", engine="stat"),
            ["workload.trace", 'engine = "exact" only'],
        ),
    ]
    for exp, says in cases:
        r = run_cli("run", exp, "--out", tmp_path / "o", cwd=tmp_path)
        assert r.returncode == 2, (exp.name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        for s in says:
            assert s in r.stderr, (exp.name, r.stderr)
    r = run_cli("trace", "convert", "bad.lackey", cwd=tmp_path)
    assert r.returncode == 2 and "bad.lackey:2" in r.stderr, r.stderr


@pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("musl-gcc") is None,
    reason="valgrind or musl-gcc missing (apt-get install valgrind musl-tools)",
)
def test_a_real_program_traced_by_valgrind_replays(tmp_path: Path) -> None:
    exe = tmp_path / "hello"
    subprocess.run(
        ["musl-gcc", "-static", "-O2", "-o", exe, ROOT / "programs" / "raytrace.c", "-lm"],
        check=True,
    )
    subprocess.run(
        ["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-file=rt.lackey", exe, "8", "6"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    conv = run_cli("trace", "convert", "rt.lackey", "rt.tstrace", cwd=tmp_path)
    assert conv.returncode == 0, conv.stderr
    exp = experiment(tmp_path, "rt", "rt.tstrace", "binary")
    r = run_cli("run", "--quiet", exp, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    # The program writes its stack and image data: the write log and its truth agree.
    assert m["monitors"]["pml"]["precision"] == 1.0
