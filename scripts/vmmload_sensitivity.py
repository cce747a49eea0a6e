"""Where a CPU-bound program's slowdown under the micro-VM goes (the claims ledger's V1, V15,
V27: raytrace at the paper's 2560x1440, issue 25).

The paper's c-ray loses < 0.6 % under vmmload on bare metal, 'mostly induced by occasional
vm exit events'. Ours is measured on a host that is itself a VM whose /dev/kvm is PVM, a
shadow-paging hypervisor, so every exit of the micro-VM crosses two levels. This script
counts the exits (KVM's vCPU statistics, `run_program --stats`) and prices them:

- raytrace WxH, natively and in the VM: the slowdown (median of the pair ratios, wall
  and CPU time of the process), the vCPU's exits (`exits`, of which `pf_taken`: shadow
  page faults, one per first touch of a guest page);
- raytrace 8x8: start-up (creating the VM, loading the program) against the native start;
- touch_pages N and 1 (programs/touch_pages.c): what one first touch adds in the VM,
  ((VM N - VM 1) - (native N - native 1)) / (N - 1), this host's price of a fault exit.

It then gives the slowdown with each of raytrace's exits at a bare-metal exit's cost instead
(the one assumption changed): the measured VM time less exits x (this host's price - bare
metal's) over the native time. The bare-metal price is the same bound repro vmmload uses
for a system call (`BARE_METAL_EXIT_CYCLES`, 2,528 cycles, an exit to user space; a shadow
or EPT fault handled in the kernel costs less), so the projection is conservative.

`--poll-us` lists the VM variants: 0 runs run_program as repro vmmload does (its waiting
thread sleeps until the program ends); N > 0 makes the waiting thread look every N us
instead (run_program's `--poll-us`; 200 us is what it did before, each look a wake-up that
takes CPU time and, on a busy host, interrupts the guest). Runs alternate native and VM
variants, `--pairs` rounds. Per variant the parts are given on the wall clock and on the
process's CPU time (user + system, all threads): on a loaded 2-core host the wall clock
mostly measures the scheduler. Prints a table and, with `--json`, writes the numbers.

    python scripts/vmmload_sensitivity.py [--pairs 7] [--size 2560x1440] [--poll-us 0,200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tierscope.studies.vmmload import (
    BARE_METAL_EXIT_CYCLES,
    BARE_METAL_HZ,
    build_program,
    build_vm_runner,
    tree_root,
)


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    stats: dict[str, int]


def run(cmd: list[str], cwd: Path) -> Run:
    """One run: wall time, the process's user + system CPU time (wait4's resource usage;
    stderr goes to a file so the child can be reaped with it) and the vCPU statistics
    run_program printed (empty for a native run)."""
    with tempfile.TemporaryFile("w+") as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errf)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read()
    if p.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` exited {p.returncode}: {err.strip()[:200]}")
    return Run(wall, ru.ru_utime + ru.ru_stime, vcpu_stats(err))


def vcpu_stats(report: str) -> dict[str, int]:
    """run_program's `--stats` line: `run_program: vcpu stats name=value ...`."""
    for line in report.splitlines():
        if line.startswith("run_program: vcpu stats"):
            pairs = (kv.split("=", 1) for kv in line.split()[3:])
            return {k: int(v) for k, v in pairs}
    return {}


def median_ratio(vm: list[Run], native: list[Run], attr: str) -> float:
    return statistics.median(
        getattr(b, attr) / getattr(a, attr) for a, b in zip(native, vm, strict=True)
    )


def med(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def med_stat(runs: list[Run], name: str) -> float:
    return statistics.median(r.stats.get(name, 0) for r in runs)


def parts(
    runs: dict[str, dict[str, list[Run]]], v: str, attr: str, touch: int, bare_us: float
) -> dict[str, float]:
    """Variant `v`'s raytrace slowdown on `attr` (wall_s or cpu_s) and its parts, from
    medians: start-up (the 8x8 runs' difference), the exits past start-up at this host's
    price of one (touch_pages N against 1), the rest; and the slowdown with every exit at
    bare metal's `bare_us` instead (the one assumption changed)."""
    nat, ray = runs["raytrace"]["native"], runs["raytrace"][v]

    def added(case: str) -> float:
        return med(runs[case][v], attr) - med(runs[case]["native"], attr)

    exit_us = (added("touch-n") - added("touch-1")) / (touch - 1) * 1e6
    native_s = med(nat, attr)
    added_s = med(ray, attr) - native_s
    startup_s = added("start-up")
    exits = med_stat(ray, "exits")
    exit_s = (exits - med_stat(runs["start-up"][v], "exits")) * exit_us * 1e-6
    return {
        "native_s": native_s,
        "vm_s": med(ray, attr),
        "slowdown_pct": (median_ratio(ray, nat, attr) - 1) * 100,
        "exit_us": exit_us,
        "startup_pct": startup_s / native_s * 100,
        "exits_pct": exit_s / native_s * 100,
        "rest_pct": (added_s - startup_s - exit_s) / native_s * 100,
        "bare_metal_exits_pct": (added_s - exits * (exit_us - bare_us) * 1e-6) / native_s * 100,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--size", default="2560x1440", help="raytrace's image (default 2560x1440)")
    ap.add_argument("--touch", type=int, default=4096, help="pages touch_pages touches")
    ap.add_argument(
        "--poll-us",
        default="0",
        help="comma-separated polling intervals of run_program's waiting thread in us, one "
        "VM variant each; 0: it sleeps until told (repro vmmload's; the default)",
    )
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    try:
        w, h = (str(int(v)) for v in args.size.split("x"))
        polls = [int(p) for p in args.poll_us.split(",")]
    except ValueError:
        ap.error(f"--size WxH and --poll-us N,N,... take integers: {args.size!r}, {args.poll_us!r}")
    if any(p < 0 for p in polls):
        ap.error(f"--poll-us: intervals are 0 or more microseconds, got {args.poll_us!r}")
    root = tree_root()
    vm = str(build_vm_runner(root))
    bare_us = BARE_METAL_EXIT_CYCLES / BARE_METAL_HZ * 1e6
    load_before = os.getloadavg()
    cases = {
        "raytrace": ("raytrace", [w, h]),
        "start-up": ("raytrace", ["8", "8"]),
        "touch-n": ("touch_pages", [str(args.touch)]),
        "touch-1": ("touch_pages", ["1"]),
    }
    runs: dict[str, dict[str, list[Run]]] = {
        c: {v: [] for v in ["native", *map(str, polls)]} for c in cases
    }
    with tempfile.TemporaryDirectory(prefix="tierscope-vmmload-sens-") as d:
        tmp = Path(d)
        exes = {p: build_program(root, p, tmp) for p in ("raytrace", "touch_pages")}
        for _ in range(args.pairs):
            for c, (prog, argv) in cases.items():
                cmd = [str(exes[prog]), *argv]
                runs[c]["native"].append(run(cmd, tmp))
                for poll in polls:
                    flags = ["--poll-us", str(poll)] if poll > 0 else []
                    vm_cmd = [vm, *flags, "--stats", *cmd]
                    runs[c][str(poll)].append(run(vm_cmd, tmp))
    out: dict[str, object] = {
        "size": args.size,
        "pairs": args.pairs,
        "touch_pages": args.touch,
        "bare_metal_exit_us": bare_us,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "variants": {},
    }
    print(
        f"raytrace {args.size}, {args.pairs} rounds; load {out['load_before']} -> "
        f"{out['load_after']}"
    )
    for poll in polls:
        v = str(poll)
        ray = runs["raytrace"][v]
        row: dict[str, object] = {
            "poll_us": poll,
            "exits": med_stat(ray, "exits"),
            "pf_taken": med_stat(ray, "pf_taken"),
            "irq_exits": med_stat(ray, "irq_exits"),
        }
        what = "sleeps until told" if poll == 0 else f"looks every {poll} us"
        print(
            f"VM whose waiting thread {what}: {row['exits']:.0f} exits ({row['pf_taken']:.0f} "
            f"page faults, {row['irq_exits']:.0f} interrupts)"
        )
        for attr, label in (("wall_s", "wall clock"), ("cpu_s", "CPU time")):
            p = parts(runs, v, attr, args.touch, bare_us)
            row[attr] = p
            print(
                f"  {label}: native {p['native_s']:.3f} s, VM {p['vm_s']:.3f} s, slowdown "
                f"{p['slowdown_pct']:+.1f} % (median of pairs); one first touch adds "
                f"{p['exit_us']:.1f} us; parts: start-up {p['startup_pct']:+.1f} points, "
                f"exits past start-up {p['exits_pct']:+.1f}, the rest {p['rest_pct']:+.1f}; "
                f"every exit at bare metal's {bare_us:.2f} us: "
                f"{p['bare_metal_exits_pct']:+.1f} %"
            )
        out["variants"][v] = row  # type: ignore[index]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
