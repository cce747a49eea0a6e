"""`tierscope repro cori-programs`: the Cori paper's Figure 1 (Table I's periods and Cori's
choice against the best period) and Figure 5 (trials to within 3 % of the best) on traces
of real programs, as the paper made them (docs/techniques/CORI.md, "Real programs").

The paper traced Rodinia, Coral-2 and ParTI! applications with Intel Pin, keeping the
last-level cache misses of a simulated cache hierarchy (section II-B). Here small C
implementations of six of its kernels (programs/cori/: backprop, kmeans, lud, hotspot,
bfs, bptree; our own code of the algorithms Rodinia implements) are built static, run under
valgrind lackey on reduced inputs, and their loads and stores go through one last-level
cache (`LLC`) into cori-sim's model, exactly as `tierscope repro cori` runs the generated
traces. Each kernel also runs through a larger cache and through none (every load and
store a request): the cache's size is our assumption, the paper gives none.

Writes DIR/repro.md, DIR/repro.json (rows as `repro cori`'s, per cache; `derived` is the
main cache's summary, `sensitivity` the others'), DIR/figure3-KERNEL.png (the main cache's
reuse bars above both schedulers' curves, as `repro cori` draws them) and
DIR/traces/KERNEL.trace (the main cache's misses in cori-sim's format, for `tierscope tune
--trace`). Needs the source tree
(programs/cori/), a C compiler (musl-gcc, else gcc; `make musl` installs it) and valgrind.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierscope import Unavailable, _core, outdir
from tierscope.studies import cori, trends, write_tables

#: The main last-level cache: 64 KiB, 16 ways (64 B lines, LRU). Chosen before any run
#: so that every reduced input below is 1.5 to 20 times larger than it, as the paper's
#: inputs were larger than its (unstated) simulated cache.
LLC: tuple[int, int] = (64 << 10, 16)
#: The sensitivity runs: a 4x smaller and a 4x larger cache. (No cache at all, every load
#: and store a request, makes kmeans' and lud's traces millions of requests long: hours
#: of model runs.)
SENSITIVITY: dict[str, tuple[int, int] | None] = {
    "llc-16KiB": (16 << 10, 16),
    "llc-256KiB": (256 << 10, 16),
}
#: Lines of a 4 KiB page.
LINES_PER_PAGE = 64
MAIN = "llc-64KiB"


@dataclass(frozen=True)
class Kernel:
    """A program of programs/cori/ and the inputs it is traced on."""

    name: str
    #: The paper's application (Table II) whose algorithm it implements.
    like: str
    args: tuple[str, ...]
    #: A small input for `--quick` (None: left out of it).
    quick: tuple[str, ...] | None
    #: The input in words, beside the original's.
    input: str


KERNELS: tuple[Kernel, ...] = (
    Kernel(
        "backprop",
        "backprop (Rodinia)",
        ("8192",),
        ("2048",),
        "8,192 input units, 16 hidden (Rodinia's default run: 65,536)",
    ),
    Kernel(
        "kmeans",
        "kmeans (Rodinia)",
        ("1024", "34", "5", "100"),
        None,
        "1,024 points x 34 features, 5 clusters, to convergence "
        "(Rodinia: kdd_cup, 494,020 points x 34)",
    ),
    Kernel(
        "lud",
        "lud (Rodinia)",
        ("160",),
        None,
        "160 x 160 floats (Rodinia's inputs: 64 x 64 to 8,000 x 8,000)",
    ),
    Kernel(
        "hotspot",
        "hotspot (Rodinia)",
        ("128", "128", "20"),
        None,
        "128 x 128 grid, 20 steps (Rodinia's inputs: 64 x 64 to 1,024 x 1,024)",
    ),
    Kernel(
        "bfs",
        "bfs (Rodinia)",
        ("16384", "6"),
        None,
        "16,384 nodes, 6 edges each (Rodinia: graph1MW_6, 1 M nodes)",
    ),
    Kernel(
        "bptree",
        "bptree (Rodinia)",
        ("65536", "2000"),
        None,
        "2,000 lookups in a tree of 65,536 keys, 256 per node (Rodinia: mil.txt, 1 M keys)",
    ),
)


class Missing(Unavailable):
    """A tool or the source tree is missing: the study cannot run here (one line; the CLI
    exits 2)."""


def tree_root() -> Path:
    """The source tree this package runs from (programs/cori/)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "programs" / "cori").is_dir():
        raise Missing(f"repro cori-programs needs the source tree: no programs/cori above {root}")
    return root


def compiler() -> list[str]:
    """musl-gcc, static (a few hundred accesses of start-up), else gcc, static."""
    for cc in ("musl-gcc", "gcc"):
        if shutil.which(cc) is not None:
            return [cc, "-static", "-O2"]
    raise Missing("repro cori-programs needs musl-gcc or gcc (`make musl`)")


def missing() -> str | None:
    """Why the study cannot run here, or None."""
    try:
        tree_root()
        compiler()
    except Missing as e:
        return str(e)
    if shutil.which("valgrind") is None:
        return "repro cori-programs needs valgrind (`make musl` installs it)"
    return None


def build(root: Path, name: str, out: Path) -> Path:
    exe = out / name
    src = root / "programs" / "cori" / f"{name}.c"
    cmd = [*compiler(), "-o", str(exe), str(src), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"could not build {src.name}: {r.stderr.strip()[:300]}")
    return exe


def trace(
    exe: Path, args: tuple[str, ...], caches: list[tuple[int, int] | None]
) -> tuple[int, list[Any], str]:
    """Runs `exe args` under valgrind lackey and reads its output back: the loads and
    stores, one trace per cache, and the program's output. The program runs as
    `./NAME`, copied into a fresh directory of the temporary directory (its path always
    as long), with an empty environment: its start-up walks its arguments and
    environment, and valgrind puts the program's path on its stack, whose addresses shift
    with their sizes; anything else would make the trace depend on the caller's."""
    with tempfile.TemporaryDirectory(prefix="cori-programs-") as tmp:
        work = Path(tmp)
        shutil.copy2(exe, work / exe.name)
        log = work / f"{exe.name}.lackey"
        valgrind = shutil.which("valgrind") or "valgrind"
        cmd = [valgrind, "--tool=lackey", "--trace-mem=yes", f"--log-file={log}"]
        run = [*cmd, f"./{exe.name}", *args]
        r = subprocess.run(run, capture_output=True, text=True, check=False, cwd=work, env={})
        if r.returncode != 0:
            shown = " ".join(run)
            raise RuntimeError(f"`{shown}` exited {r.returncode}: {r.stderr.strip()[:300]}")
        accesses, traces = _core.CoriTrace.from_lackey(log, caches)
    return accesses, traces, r.stdout.strip()


def label(cache: tuple[int, int] | None) -> str:
    return "none" if cache is None else f"llc-{cache[0] >> 10}KiB"


def run(
    kernels: tuple[Kernel, ...], quick: bool, timestep: int, random_seeds: int, work: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Builds, traces and evaluates every kernel: the rows (one per kernel, cache and
    scheduler), what each program did, and the main cache's traces by kernel."""
    root = tree_root()
    caches = [LLC, *SENSITIVITY.values()]
    rows: list[dict[str, Any]] = []
    programs: list[dict[str, Any]] = []
    main_traces: dict[str, Any] = {}
    for k in kernels:
        args = k.quick if quick else k.args
        if args is None:
            continue
        exe = build(root, k.name, work)
        t0 = time.perf_counter()
        accesses, traces, output = trace(exe, args, caches)
        wall = time.perf_counter() - t0
        programs.append(
            {
                "kernel": k.name,
                "like": k.like,
                "args": list(args),
                "input": k.input,
                "output": output,
                "accesses": accesses,
                "requests": {label(c): t.requests for c, t in zip(caches, traces, strict=True)},
                "pages": {label(c): t.pages for c, t in zip(caches, traces, strict=True)},
                "trace_wall_s": round(wall, 1),
            }
        )
        main_traces[k.name] = traces[0]
        for cache, t in zip(caches, traces, strict=True):
            # A trace with no more requests than its pages have lines is the cold misses
            # of a cache that holds the data: nothing comes from memory twice, so there
            # is nothing for a scheduler to do (and a trace shorter than two timesteps has
            # no period to tune).
            if t.requests <= t.pages * LINES_PER_PAGE or t.requests < 2 * timestep:
                continue
            head = {"workload": k.name, "seed": 1, "llc": label(cache)}
            rows.extend(cori.evaluate_trace(head, t, timestep, random_seeds))
    return rows, programs, main_traces


def format_programs(programs: list[dict[str, Any]]) -> str:
    from tierscope.texttable import align

    names = [MAIN, *SENSITIVITY]
    requests = [f"requests ({n})" for n in names]
    table = [["kernel", "input", "loads+stores", *requests, "pages", "lackey (s)"]]
    for p in programs:
        table.append(
            [
                p["kernel"],
                " ".join(p["args"]),
                f"{p['accesses']:,}",
                *(f"{p['requests'][n]:,}" for n in names),
                f"{p['pages'][MAIN]:,}",
                f"{p['trace_wall_s']:g}",
            ]
        )
    return align(table)


def main(
    out: Path,
    *,
    quick: bool = False,
    timestep: int = 1000,
    random_seeds: int = 10,
    force: bool = False,
) -> int:
    reason = missing()
    if reason is not None:
        raise Missing(reason)
    with outdir.claim(out, "repro-cori-programs", force=force) as claim:
        with tempfile.TemporaryDirectory(prefix="cori-programs-") as tmp:
            rows, programs, traces = run(KERNELS, quick, timestep, random_seeds, Path(tmp))
        slim = [{k: v for k, v in r.items() if k not in ("curve", "bars")} for r in rows]
        parts = [
            f"Real programs under valgrind lackey, through a {LLC[0] >> 10} KiB {LLC[1]}-way "
            "last-level cache" + (" (--quick: backprop on a small input only)" if quick else ""),
            format_programs(programs),
        ]
        for name in (MAIN, *SENSITIVITY):
            these = [r for r in rows if r["llc"] == name]
            parts.append(f"=== cache: {name}")
            parts.append(cori.format_tables(these))
        text = "\n\n".join(parts)
        print(text)
        by_cache = {
            name: trends.applied(trends.cori, [r for r in slim if r["llc"] == name], cori.TABLE_I)
            for name in (MAIN, *SENSITIVITY)
        }
        doc = {
            "paper": cori.PAPER,
            "quick": quick,
            "llc": {"bytes": LLC[0], "ways": LLC[1]},
            "programs": programs,
            "rows": slim,
            "derived": by_cache[MAIN],
            "sensitivity": {name: by_cache[name] for name in SENSITIVITY},
        }
        with claim.stage() as staging:
            for name in traces:
                these = [r for r in rows if r["llc"] == MAIN and r["workload"] == name]
                if these:
                    cori.plot_figure3(these, staging / f"figure3-{name}.png")
            (staging / "traces").mkdir()
            for name, t in traces.items():
                t.write(staging / "traces" / f"{name}.trace")
            write_tables(staging, text + "\n", doc)
    print(f"\nwrote {out}/repro.md, repro.json, figure3-*.png, traces/")
    return 0
