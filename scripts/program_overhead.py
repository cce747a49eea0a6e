"""Slowdown of real programs under the kvm engine (vmmload's Figure 3 shape).

Builds programs/raytrace.c (CPU-bound), programs/md5.c (system-call-heavy: read(2) in
CHUNK-byte pieces) and programs/getpid_loop.c (nothing but calls) with musl-gcc, then
runs each natively and inside the micro-VM (the `run_program` example: the loader,
host-performed system calls, KVM's dirty log on, no monitor), alternating native and VM
runs, and prints per case the median wall times and the median of the per-pair ratios
(VM / native). Wall time includes creating the VM.

    python scripts/program_overhead.py [--runs 7] [--md5-mib 256]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(name: str, out: Path) -> Path:
    exe = out / name
    src = ROOT / "programs" / f"{name}.c"
    subprocess.run(["musl-gcc", "-static", "-O2", "-o", exe, src, "-lm"], check=True)
    return exe


def wall(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=cwd)
    return time.perf_counter() - t0, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="pairs per case (default 7)")
    ap.add_argument("--md5-mib", type=int, default=256, help="size of md5's input, MiB")
    args = ap.parse_args()
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "tierscope-kvm", "--example", "run_program"],
        cwd=ROOT,
        check=True,
    )
    vm = str(ROOT / "target" / "release" / "examples" / "run_program")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ray, md5, loop = build("raytrace", tmp), build("md5", tmp), build("getpid_loop", tmp)
        data = tmp / "input.bin"
        # Deterministic contents: a repeating byte pattern.
        data.write_bytes(bytes(range(256)) * (args.md5_mib * 4096))
        cases = [
            ("raytrace 3200x2400 (CPU-bound)", [str(ray), "3200", "2400"]),
            # Relative: the program's working directory (all it can reach) is `tmp`.
            ("md5, 4 KiB reads (syscall-heavy)", [str(md5), data.name, "4096"]),
            ("md5, 64 KiB reads", [str(md5), data.name, "65536"]),
            ("md5, 1 MiB reads", [str(md5), data.name, "1048576"]),
            ("getpid x 100,000 (one call's round trip)", [str(loop), "100000"]),
        ]
        print(
            "| program | native s (median) | under tierscope s (median) "
            "| slowdown (median of pairs) |"
        )
        print("| --- | ---: | ---: | ---: |")
        for name, cmd in cases:
            native, guest, ratios = [], [], []
            for _ in range(args.runs):
                a, out_a = wall(cmd, tmp)
                b, out_b = wall([vm, *cmd], tmp)
                if out_a != out_b:
                    print(f"{name}: outputs differ: {out_a!r} vs {out_b!r}", file=sys.stderr)
                    return 1
                native.append(a)
                guest.append(b)
                ratios.append(b / a)
            slow = (statistics.median(ratios) - 1) * 100
            print(
                f"| {name} | {statistics.median(native):.3f} | {statistics.median(guest):.3f} "
                f"| {slow:+.1f} % |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
