"""What one walk of the kernel's page-table walker costs on this machine: the time of
`mincore()` on one page of a populated 4 KiB-page heap (a random page each call) less that
of `mincore()` on an address in a hole, measured by a small C loop compiled here with `cc`.

Both calls take the syscall, the temporary page mincore allocates, the mmap lock and the
VMA lookup; only the first goes on to `walk_page_range` from the PGD to the PTE table and
its `pmd_entry` callback, the path the kernel's DAMON takes twice per region and sample
(mm/damon/vaddr.c: `damon_va_mkold`, `damon_va_young`). So the difference is one such
walk, and (difference x `--cpu-hz` - the cost model's `entry_read`) / 4 levels is what the
cost model's `walk_step` would be if this machine's walk were the paper's. It is not: this
machine is a virtual machine (guest page tables under nested paging, so the walker's own
loads that miss the TLB take two-dimensional walks) with retpolines on the walker's
indirect calls, so it reads above a bare-metal host's. Prints each repetition's
nanoseconds per call of the three loops (`getppid` for scale) and the medians.

It is a reference for the sensitivity run of Table 2's cycles (issue 25;
docs/models/COST_MODEL.md, "Table 2's cycles over seeds"), not a calibration.

    python scripts/kernel_walk_cost.py
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t state = 88172645463325252ULL;
static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

int main(int argc, char **argv) {
    size_t len = (size_t)atol(argv[1]) << 30, pages = len >> 12;
    long calls = atol(argv[2]);
    char *heap = mmap(NULL, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    char *hole = mmap(NULL, 1 << 21, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap == MAP_FAILED || hole == MAP_FAILED) return 1;
    munmap(hole, 1 << 21);
    madvise(heap, len, MADV_NOHUGEPAGE); /* 4 KiB pages: a walk to the PTE table */
    for (size_t i = 0; i < len; i += 4096) heap[i] = 1;
    unsigned char v;
    long sink = 0;
    double t0 = now();
    for (long i = 0; i < calls; i++) sink += syscall(SYS_getppid);
    double t1 = now();
    for (long i = 0; i < calls; i++) sink += mincore(hole, 4096, &v);
    double t2 = now();
    for (long i = 0; i < calls; i++) sink += mincore(heap + ((next() % pages) << 12), 4096, &v);
    double t3 = now();
    printf("%.1f %.1f %.1f %ld\n", (t1 - t0) / calls, (t2 - t1) / calls, (t3 - t2) / calls,
           sink & 1);
    return 0;
}
"""


def measure(gib: int, calls: int, repeats: int) -> list[tuple[float, float, float]]:
    """(getppid, mincore on a hole, mincore on a random heap page) in ns per call, one
    triple per repetition."""
    cc = shutil.which("cc")
    if cc is None:
        raise SystemExit("no C compiler (cc) on PATH: install gcc (apt-get install gcc)")
    out = []
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "walk.c", Path(d) / "walk"
        src.write_text(SOURCE)
        subprocess.run([cc, "-O2", "-o", str(exe), str(src)], check=True)
        for _ in range(repeats):
            text = subprocess.run(
                [str(exe), str(gib), str(calls)], check=True, capture_output=True, text=True
            ).stdout.split()
            out.append((float(text[0]), float(text[1]), float(text[2])))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=4, help="heap size (default 4 GiB)")
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--cpu-hz", type=float, default=2.1e9)
    ap.add_argument("--entry-read", type=float, default=20.0, help="the cost model's entry_read")
    args = ap.parse_args(argv)
    if min(args.gib, args.calls, args.repeats) < 1:
        print("kernel_walk_cost: --gib, --calls and --repeats need at least 1", file=sys.stderr)
        return 2
    try:
        runs = measure(args.gib, args.calls, args.repeats)
    except subprocess.CalledProcessError:
        print(f"kernel_walk_cost: could not map a {args.gib} GiB heap", file=sys.stderr)
        return 1
    for g, h, r in runs:
        print(f"getppid {g:.0f} ns, mincore hole {h:.0f} ns, mincore random page {r:.0f} ns")
    walk = statistics.median(r - h for _, h, r in runs)
    cycles = walk * args.cpu_hz / 1e9
    print(
        f"median walk (random page - hole) {walk:.0f} ns = {cycles:.0f} cycles at "
        f"{args.cpu_hz / 1e9:g} GHz; per level {(cycles - args.entry_read) / 4:.0f} cycles"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
