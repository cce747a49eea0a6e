"""`tierscope repro vmmload`: the vmmload paper's Figure 3 (section 5.1), the slowdown of
real programs run in a minimal VM whose system calls the host performs, beside native runs.

What `scripts/program_overhead.py` measures, as a study writing DIR/repro.json: each
program of programs/ is built static with musl-gcc and run natively and in tierscope's
micro-VM (the kvm crate's `run_program` example: the loader, host-performed system calls,
KVM's dirty log on, no monitor), native and VM runs alternating. Per case: the median wall
times, the median of the per-pair ratios as the slowdown, and the system calls the VM
performed (run_program's report). Wall time includes creating the VM.

Cases: raytrace at the paper's c-ray resolution (2560x1440: CPU-bound); md5 of a file read
in 4 KiB, 16 KiB, 64 KiB and 1 MiB pieces (the paper's md5 reads 4.3 GiB in 280,078 calls:
about 16 KiB per call, so `md5-16k` is its setting); getpid in a loop (one call's round
trip), and with one call (start-up only). Derived: the rank correlation of the md5 cases'
system calls and slowdowns (the paper: the slowdown follows the calls), the round trip per
call, one exit's cost against a native call (the two getpid runs' difference per extra
call), and each md5 case's slowdown had every call cost a bare-metal exit
(`BARE_METAL_EXIT_CYCLES`; docs/models/PROGRAMS.md, "Exit cost").

Needs the source tree (programs/ and the kvm crate, built with cargo), musl-gcc and
/dev/kvm; without one of them it stops with one line saying which. `quick`: one pair per
case, a 16 MiB input, a 640x360 image and 10,000 calls (checks the pipeline; the numbers
are not the documented ones). Outputs are written at the end (`tierscope.outdir`); an
earlier output is replaced only with `force`.
"""

from __future__ import annotations

import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierscope import RunError, Unavailable, _core, outdir
from tierscope.studies import write_tables
from tierscope.texttable import align

#: The paper's numbers the rows stand beside (section 5.1).
PAPER = {
    "cpu_bound": "c-ray (2560x1440, 3676 system calls): less than 0.6 % slowdown",
    "md5": "md5 of a 4.3 GiB file (280,078 system calls, mostly reads): around 18 %",
}

#: Native and VM runs per case (scripts/program_overhead.py's default); 1 with `quick`.
PAIRS = 7

#: The paper's md5: 4.3 GiB in 280,078 calls, about 16 KiB per read.
PAPER_MD5_CHUNK = 16384

#: An exit to user space on bare metal, the kernel's part: 2,528 cycles from the KVM_RUN
#: ioctl's entry to its return around one guest run (AMD SVM; four samples of 2,528-2,576
#: cycles posted to LKML in December 2020 with the vmsave/vmload host-state patch,
#: https://lkml.iu.edu/hypermail/linux/kernel/2012.2/00527.html). A lower bound on what
#: one call costs a VMM on bare metal: the VMM's own handling comes on top.
BARE_METAL_EXIT_CYCLES = 2528

#: Cycles to seconds for the bare-metal figure: the cost model's clock
#: (docs/models/COST_MODEL.md, `cpu_hz`), so 2,528 cycles are 1.2 us.
BARE_METAL_HZ = 2.1e9


class StudyError(RunError):
    """A build or a run failed (one line; the CLI exits 1)."""


class Missing(Unavailable):
    """A prerequisite is missing on this host (one line; the CLI exits 2)."""


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    program: str
    args: tuple[str, ...]


def cases(quick: bool) -> list[Case]:
    w, h = ("640", "360") if quick else ("2560", "1440")
    calls = "10000" if quick else "100000"
    chunks = (("4k", 4096), ("16k", PAPER_MD5_CHUNK), ("64k", 65536), ("1m", 1 << 20))
    md5 = [
        Case(f"md5-{label}", f"md5, {label} reads", "md5", ("input.bin", str(chunk)))
        for label, chunk in chunks
    ]
    return [
        Case("raytrace", f"raytrace {w}x{h} (CPU-bound)", "raytrace", (w, h)),
        *md5,
        Case("getpid", f"getpid x {int(calls):,} (one call's round trip)", "getpid_loop", (calls,)),
        # The same program with one call: what the getpid row spends on anything but its
        # calls (starting the process, creating the VM), subtracted to get one exit's cost.
        Case("getpid-1", "getpid x 1 (start-up only)", "getpid_loop", ("1",)),
    ]


def tree_root() -> Path:
    """The source tree this package runs from (programs/ and the Rust workspace)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "programs").is_dir() or not (root / "Cargo.toml").is_file():
        raise Missing(
            "repro vmmload needs the source tree (programs/ and the kvm crate): "
            f"not found above {Path(__file__).parent}"
        )
    return root


def _check_host() -> None:
    for tool in ("musl-gcc", "cargo"):
        if shutil.which(tool) is None:
            raise Missing(f"repro vmmload needs {tool} (`make musl` installs musl-gcc)")
    reason = _core.kvm_unavailable()
    if reason is not None:
        raise Missing(f"repro vmmload needs KVM: {reason}")


#: run_program is built in a target directory of its own, so that the study does not wait
#: for the workspace's lock while other builds hold it (the first build takes minutes,
#: later ones rebuild only what changed).
TARGET = Path("target") / "repro-vmmload"


def build_vm_runner(root: Path) -> Path:
    """The kvm crate's run_program example, built (release) by cargo in `TARGET`."""
    target = root / TARGET
    r = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "tierscope-kvm", "--example", "run_program"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "CARGO_TARGET_DIR": str(target)},
    )
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise StudyError(f"cargo could not build run_program: {last}")
    return target / "release" / "examples" / "run_program"


def build_program(root: Path, name: str, out: Path) -> Path:
    exe = out / name
    src = root / "programs" / f"{name}.c"
    cmd = ["musl-gcc", "-static", "-O2", "-o", str(exe), str(src), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise StudyError(f"musl-gcc could not build {src.name}: {r.stderr.strip()[:200]}")
    return exe


def _wall(cmd: list[str], cwd: Path) -> tuple[float, str, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise StudyError(f"`{' '.join(cmd)}` exited {r.returncode}: {r.stderr.strip()[:200]}")
    return elapsed, r.stdout, r.stderr


_CALL_LINE = re.compile(r"^\s+([a-z_0-9]+)\s+(\d+)$")


def syscalls(report: str) -> dict[str, int]:
    """The system calls run_program's report (its stderr) lists, by name."""
    out = {}
    for line in report.splitlines():
        m = _CALL_LINE.match(line)
        if m:
            out[m[1]] = int(m[2])
    return out


def measure(case: Case, exe: Path, vm: Path, cwd: Path, runs: int) -> dict[str, Any]:
    """`runs` pairs of a native and a VM run of `case`, alternating."""
    cmd = [str(exe), *case.args]
    native, guest, ratios = [], [], []
    calls: dict[str, int] = {}
    for _ in range(runs):
        a, out_a, _ = _wall(cmd, cwd)
        b, out_b, report = _wall([str(vm), *cmd], cwd)
        if out_a != out_b:
            raise StudyError(f"{case.name}: outputs differ: {out_a!r} vs {out_b!r}")
        native.append(a)
        guest.append(b)
        ratios.append(b / a)
        calls = syscalls(report)
    total = sum(calls.values())
    return {
        "case": case.name,
        "what": case.what,
        "argv": [case.program, *case.args],
        "pairs": runs,
        "native_s": statistics.median(native),
        "vm_s": statistics.median(guest),
        "slowdown_pct": (statistics.median(ratios) - 1) * 100,
        "syscalls": total,
        "syscalls_by_name": calls,
        "added_us_per_call": (statistics.median(guest) - statistics.median(native))
        / max(total, 1)
        * 1e6,
    }


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    for r, i in enumerate(order):
        ranks[i] = float(r)
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (no ties expected; None for fewer than 2 points)."""
    if len(xs) < 2:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    return statistics.correlation(rx, ry)


def exit_cost(many: dict[str, Any], one: dict[str, Any]) -> dict[str, float]:
    """One system call's cost natively and in the VM, from the getpid loop run with many
    calls and with one: the difference of the two runs' median times per extra call, so
    that starting the process and creating the VM cancel out. `exit_us` is what the VM
    adds to a call: the exit to tierscope and back (the host performs the same getpid)."""
    calls = many["syscalls_by_name"].get("getpid", 0) - one["syscalls_by_name"].get("getpid", 0)
    if calls <= 0:
        raise StudyError("the getpid runs made no extra getpid calls")
    native = (many["native_s"] - one["native_s"]) / calls * 1e6
    vm = (many["vm_s"] - one["vm_s"]) / calls * 1e6
    bare = BARE_METAL_EXIT_CYCLES / BARE_METAL_HZ * 1e6
    return {
        "native_call_us": native,
        "vm_call_us": vm,
        "exit_us": vm - native,
        "exit_over_native_call": (vm - native) / native if native > 0 else math.inf,
        "bare_metal_exit_us": bare,
    }


def bare_metal_slowdown_pct(row: dict[str, Any], exit_us: float, bare_us: float) -> float:
    """The row's slowdown had each of its calls cost a bare-metal exit instead of this
    host's: the measured slowdown less calls x (this host's exit - bare metal's) over the
    native time."""
    saved_s = row["syscalls"] * (exit_us - bare_us) * 1e-6
    return row["slowdown_pct"] - saved_s / row["native_s"] * 100


def derived(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Values the paper's trends are about, from the rows."""
    md5 = [r for r in rows if r["case"].startswith("md5-")]
    by = {r["case"]: r for r in rows}
    out: dict[str, Any] = {
        # The paper: the slowdown follows the system calls (section 5.1).
        "md5_calls_slowdown_rank_correlation": spearman(
            [float(r["syscalls"]) for r in md5], [r["slowdown_pct"] for r in md5]
        ),
        "call_round_trip_us": by["getpid"]["added_us_per_call"] if "getpid" in by else None,
    }
    if "getpid" in by and "getpid-1" in by:
        cost = exit_cost(by["getpid"], by["getpid-1"])
        out["exit"] = cost
        out["bare_metal_slowdown_pct"] = {
            r["case"]: bare_metal_slowdown_pct(r, cost["exit_us"], cost["bare_metal_exit_us"])
            for r in md5
        }
    return out


def render(report: dict[str, Any]) -> str:
    t = [["case", "native s", "in the VM s", "slowdown (median of pairs)", "system calls"]]
    for r in report["rows"]:
        t.append(
            [
                r["what"],
                f"{r['native_s']:.3f}",
                f"{r['vm_s']:.3f}",
                f"{r['slowdown_pct']:+.1f} %",
                f"{r['syscalls']:,}",
            ]
        )
    d = report["derived"]
    rho = d["md5_calls_slowdown_rank_correlation"]
    rho_text = "-" if rho is None else f"{rho:.2f}"
    lines = [
        "# vmmload (paper section 5.1, Figure 3) in tierscope",
        "",
        align(t),
        "",
        f"md5: rank correlation of system calls and slowdown {rho_text}; "
        f"one call's round trip adds {d['call_round_trip_us']:.1f} us",
        f"paper: {PAPER['cpu_bound']}; {PAPER['md5']}",
        *_exit_lines(d),
        f"host: {report['host']['machine']}, load average {report['host']['load_before']} "
        f"before, {report['host']['load_after']} after; {report['wall_s']:.0f} s wall",
    ]
    return "\n".join(lines) + "\n"


def _exit_lines(d: dict[str, Any]) -> list[str]:
    if "exit" not in d:
        return []
    e = d["exit"]
    bare = ", ".join(f"{k} {v:+.1f} %" for k, v in d["bare_metal_slowdown_pct"].items())
    return [
        f"one getpid: {e['native_call_us']:.2f} us natively, {e['vm_call_us']:.2f} us in the "
        f"VM: an exit adds {e['exit_us']:.2f} us ({e['exit_over_native_call']:.0f}x the "
        f"native call; this host is itself a VM, so each exit crosses two levels)",
        f"with a bare-metal exit ({BARE_METAL_EXIT_CYCLES:,} cycles = "
        f"{e['bare_metal_exit_us']:.2f} us) the md5 slowdowns would be: {bare}",
    ]


def main(out: Path, *, quick: bool = False, force: bool = False) -> int:
    """Runs the cases into `out` (repro.json, repro.md). Raises Missing (one line) when a
    prerequisite is missing, StudyError when a build or a run fails."""
    t0 = time.monotonic()
    root = tree_root()
    _check_host()
    pairs = 1 if quick else PAIRS
    md5_mib = 16 if quick else 256
    with outdir.claim(out, "repro-vmmload", force=force) as claim:
        vm = build_vm_runner(root)
        load_before = [round(x, 2) for x in os.getloadavg()]
        with tempfile.TemporaryDirectory(prefix="tierscope-vmmload-") as d:
            tmp = Path(d)
            exes = {p: build_program(root, p, tmp) for p in ("raytrace", "md5", "getpid_loop")}
            # Deterministic contents: a repeating byte pattern.
            (tmp / "input.bin").write_bytes(bytes(range(256)) * (md5_mib * 4096))
            rows = []
            for case in cases(quick):
                rows.append(measure(case, exes[case.program], vm, tmp, pairs))
                print(f"{case.what}: {rows[-1]['slowdown_pct']:+.1f} %", flush=True)
        report = {
            "paper": PAPER,
            "quick": quick,
            "md5_input_mib": md5_mib,
            "rows": rows,
            "derived": derived(rows),
            "host": {
                "machine": platform.processor() or platform.machine(),
                "load_before": load_before,
                "load_after": [round(x, 2) for x in os.getloadavg()],
            },
            "wall_s": time.monotonic() - t0,
        }
        text = render(report)
        with claim.stage() as staging:
            write_tables(staging, text, report)
    print(text, end="")
    return 0
