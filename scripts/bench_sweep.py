"""The sweep executor's overhead: a sweep of N short runs (a 64 MiB heap, two monitors,
1 s simulated each) on the local executor, and the share of its wall time spent outside
the runs: 1 - (sum of run wall times / jobs) / sweep wall time.

    .venv/bin/python scripts/bench_sweep.py [N] [JOBS]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import tierscope

BASE = """\
name = "short"
duration = "1s"
warmup = "200ms"
[workload]
rate = "1M/s"
regions = [{ name = "cold", size = "56MiB" }, { name = "hot", size = "8MiB" }]
phases = [{ name = "p", duration = "1s",
            patterns = [{ region = "hot", kind = "random", mode = "ro" }] }]
[[monitors]]
preset = "damon-mod"
[[monitors]]
preset = "telescope-bnd"
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "base.toml").write_text(BASE)
        (Path(d) / "sweep.toml").write_text(
            f'base = "base.toml"\nseeds = {{ from = 1, to = {n} }}\n'
        )
        o = tierscope.run_sweep(Path(d) / "sweep.toml", Path(d) / "out", jobs=jobs, progress=False)
        inside = sum(o.run_wall_s.values()) / jobs
        print(
            f"{o.done} runs, {jobs} jobs: wall {o.wall_s:.2f} s, runs {inside:.2f} s per job, "
            f"mean run {sum(o.run_wall_s.values()) / max(o.done, 1) * 1e3:.0f} ms, "
            f"overhead {100 * (1 - inside / o.wall_s):.1f}% of the wall time"
        )


if __name__ == "__main__":
    main()
