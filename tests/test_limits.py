"""Issue 28, input limits: inputs that panicked, aborted, ran without end or were silently
changed give one line naming the file, line and field (or the option), exit status 2,
and leave no output behind (docs/reference/EXPERIMENTS.md, "Limits")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import leftovers, run_cli
from tierscope import _core

#: A run on the statistical engine, with a density pattern to edit.
EXPERIMENT = """\
duration = "100ms"
warmup = "0s"

[machine]
engine = "stat"

[workload]
rate = "1M/s"
regions = [{ name = "a", size = "64MiB" }]
phases = [{ name = "p", duration = "100ms", patterns = [{ region = "a", kind = "random" }] }]

[[monitors]]
preset = "damon-mod"
"""


def assert_one_line(proc, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def run_masim(workdir: Path, text: str, *options: str):
    cfg = workdir / "w.cfg"
    cfg.write_text(text)
    proc = run_cli(
        "run", "--masim", cfg, "--monitor", "damon-mod", *options, "--out", "out", cwd=workdir
    )
    assert not (workdir / "out").exists() and leftovers(workdir, "out") == []
    return proc


def run_experiment(workdir: Path, text: str, name: str = "e.toml", *options: str):
    (workdir / name).write_text(text)
    proc = run_cli("run", name, "--out", "out", *options, cwd=workdir)
    assert not (workdir / "out").exists() and leftovers(workdir, "out") == []
    return proc


def test_region_of_two_to_the_64_bytes(workdir: Path) -> None:
    # Was a panic in page_table.rs:389 (index out of bounds).
    proc = run_masim(workdir, "a, 18446744073709551615\n\np\n10\na, 1, 4096, 1\n")
    assert_one_line(proc, "w.cfg:1:", "size", "64.0 PiB")


@pytest.mark.parametrize(
    ("regions", "engine"),
    [("a, 8PiB\nb, 8PiB\n", "exact"), ("a, 2PiB\n", "exact")],
)
def test_exact_engine_heap_past_host_memory(workdir: Path, regions: str, engine: str) -> None:
    # Two 8 PiB regions aborted on an allocation of 2 TB; 256 TiB aborted, 64 TiB ran
    # for minutes: the exact engine's heap is bounded by the host's memory.
    proc = run_masim(workdir, f"{regions}\np\n10\na, 1, 4096, 1\n", "--engine", engine)
    assert_one_line(proc, "workload", "MemAvailable", "exact engine would hold about")


def test_256_tib_exact_heap(workdir: Path) -> None:
    meminfo = Path("/proc/meminfo").read_text()
    avail = int(next(ln for ln in meminfo.splitlines() if ln.startswith("MemAvailable")).split()[1])
    if avail * 1024 * 3 // 4 > 34 << 30:
        pytest.skip("this host holds the 34 GiB page table of a 256 TiB heap")
    proc = run_masim(workdir, "a, 256TiB\n\np\n10\na, 1, 4096, 1\n")
    assert_one_line(proc, "about 34.", "MemAvailable")


def test_tune_scale_of_a_billion(workdir: Path) -> None:
    # Asked for an 8 TB allocation.
    proc = run_cli("tune", "--workload", "random", "--scale", "1000000000", cwd=workdir)
    assert_one_line(proc, "command line", "scale 1000000000 is out of range: 1 to 100")


def test_zero_clock_refused_before_anything_is_written(workdir: Path) -> None:
    # Was a traceback in the summary table, after the outputs were written.
    proc = run_experiment(workdir, EXPERIMENT + "\n[cost]\ncpu_hz = 0\n")
    assert_one_line(proc, "e.toml:16:", "cost.cpu_hz")


def test_negative_cost(workdir: Path) -> None:
    proc = run_experiment(workdir, EXPERIMENT + "\n[cost]\nentry_read = -5\n")
    assert_one_line(proc, "e.toml:16:", "cost.entry_read")


def test_negative_threads(workdir: Path) -> None:
    # Was an OverflowError traceback.
    proc = run_experiment(workdir, EXPERIMENT, "e.toml", "--threads", "-1")
    assert_one_line(proc, "threads", "-1")


@pytest.mark.parametrize("how", ["masim", "experiment", "sweep", "cori-trace", "lackey"])
def test_devices_are_not_read_without_end(workdir: Path, how: str) -> None:
    # `--masim /dev/zero` read until the host ran out of memory.
    zero = "/dev/zero"
    args = {
        "masim": ("run", "--masim", zero, "--out", "out"),
        "experiment": ("run", zero, "--out", "out"),
        "sweep": ("sweep", zero, "--dry-run"),
        "cori-trace": ("tune", "--trace", zero),
        "lackey": ("trace", "convert", zero),
    }[how]
    proc = run_cli(*args, cwd=workdir)
    line = assert_one_line(proc, zero)
    assert "larger than" in line or "longer than 4096 bytes" in line, line


def test_sweep_of_a_billion_seeds(workdir: Path) -> None:
    # `--dry-run` ran the host out of memory.
    (workdir / "e.toml").write_text(EXPERIMENT)
    (workdir / "s.toml").write_text('base = "e.toml"\nseeds = { from = 1, to = 1000000000 }\n')
    proc = run_cli("sweep", "s.toml", "--dry-run", cwd=workdir)
    assert_one_line(proc, "s.toml:2:", "seeds", "limit of 100000")


def test_two_axes_on_one_path(workdir: Path) -> None:
    # Rows named one value while the run used the other.
    (workdir / "e.toml").write_text(EXPERIMENT)
    (workdir / "s.toml").write_text(
        'base = "e.toml"\n'
        '[[axes]]\npath = "monitors[damon-mod].sample"\nvalues = ["5ms", "10ms"]\n'
        '[[axes]]\nname = "again"\npath = "monitors[0].sample"\nvalues = ["1ms"]\n'
    )
    proc = run_cli("sweep", "s.toml", "--dry-run", cwd=workdir)
    assert_one_line(proc, "s.toml:5:", "axes[1]", "axes[0] also sets")


def test_long_phase_and_huge_stride_in_masim(workdir: Path) -> None:
    # 2^64 - 1 ms became 584 years; a stride of 2^64 became 2^64 - 1.
    proc = run_masim(workdir, "a, 1GiB\n\np\n18446744073709551615\na, 1, 4096, 1\n")
    assert_one_line(proc, "w.cfg:4:", "duration", "30 days")
    proc = run_masim(workdir, "a, 1GiB\n\np\n10\na, 0, 18446744073709551616, 1\n")
    assert_one_line(proc, "w.cfg:5:", "stride", "out of range")


def test_a_thousand_day_run(workdir: Path) -> None:
    # Grew by megabytes a second until the host ran out of memory.
    proc = run_experiment(workdir, EXPERIMENT.replace('"100ms"\nwarmup', '"24000h"\nwarmup'))
    assert_one_line(proc, "e.toml:1:", "duration", "30 days")


@pytest.mark.parametrize(
    ("pattern", "field"),
    [
        ('kind = "gaussian", sigma = nan', "sigma"),
        ('kind = "zipf", exponent = inf', "exponent"),
    ],
)
def test_nan_and_inf_parameters(workdir: Path, pattern: str, field: str) -> None:
    # Became null, read as absent: the run used the default.
    text = EXPERIMENT.replace('kind = "random"', pattern)
    proc = run_experiment(workdir, text)
    assert_one_line(proc, "e.toml:10:", "nan and inf are refused")


def test_duplicate_json_keys(workdir: Path) -> None:
    # The last one won; TOML refuses them.
    import tomllib

    doc = {"seed": 1, **tomllib.loads(EXPERIMENT)}
    lines = json.dumps(doc, indent=1).splitlines()
    text = "\n".join([*lines[:2], ' "seed": 2,', *lines[2:]])
    proc = run_experiment(workdir, text, "e.json")
    assert_one_line(proc, "e.json:3:", "duplicate key `seed`")


def test_limits_table_in_the_docs_matches_the_code() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "reference" / "EXPERIMENTS.md").read_text()
    table = docs.split("## Limits", 1)[1].split("\n## ", 1)[0]
    for name, value in _core.limits().items():
        assert f"`{name}`" in table, name
        row = next(ln for ln in table.splitlines() if f"`{name}`" in ln)
        assert f"{value:,}" in row, (name, value, row)
