"""The CPU time a polling thread spends per wake-up when it sleeps 1 ms between polls,
measured on this machine: a small C loop (compiled here with `cc`) that sleeps with
`clock_nanosleep` for `--interval-us` and does nothing else, its user + system time from
`getrusage` over `--polls` wake-ups, repeated `--repeats` times; prints each repetition's
nanoseconds per wake-up and their median, and the median in cycles at `--cpu-hz` (the
cost model's 2.1 GHz).

It is an input for the sensitivity run of the NEMO ledger's N82 (docs/techniques/NEMO.md,
"The gaps, pinned", item 6): the noisy-neighbour controller polls NEMO's counter every
1 ms, and our cost model charges each poll its one state read only, not the thread's
wake-up.

    python scripts/poll_wakeup_cost.py
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
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_ns(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e9 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e3;
}

int main(int argc, char **argv) {
    long polls = atol(argv[1]), interval_ns = atol(argv[2]) * 1000;
    struct timespec t = {interval_ns / 1000000000, interval_ns % 1000000000};
    double start = cpu_ns();
    for (long i = 0; i < polls; i++) clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
    printf("%.1f\n", (cpu_ns() - start) / polls);
    return 0;
}
"""


def measure(polls: int, interval_us: int, repeats: int) -> list[float]:
    """Nanoseconds of CPU per wake-up, one value per repetition."""
    cc = shutil.which("cc")
    if cc is None:
        raise SystemExit("no C compiler (cc) on PATH: install gcc (apt-get install gcc)")
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "wake.c", Path(d) / "wake"
        src.write_text(SOURCE)
        subprocess.run([cc, "-O2", "-o", str(exe), str(src)], check=True)
        return [
            float(
                subprocess.run(
                    [str(exe), str(polls), str(interval_us)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(repeats)
        ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polls", type=int, default=2000)
    ap.add_argument("--interval-us", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpu-hz", type=float, default=2.1e9)
    args = ap.parse_args(argv)
    values = measure(args.polls, args.interval_us, args.repeats)
    median = statistics.median(values)
    print("ns per wake-up:", ", ".join(f"{v:.0f}" for v in values))
    print(
        f"median {median:.0f} ns = {median * args.cpu_hz / 1e9:.0f} cycles at "
        f"{args.cpu_hz / 1e9:g} GHz"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
