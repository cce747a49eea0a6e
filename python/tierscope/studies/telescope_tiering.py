"""`tierscope repro telescope-tiering`: the shape of the Telescope paper's section 6.3
(memcached and Redis at 1-2 TB on DRAM + Optane, tiering driven by DAMON, PEBS and
Telescope with the paper's rule), on the statistical engine: experiments/tiering/.

The experiments run as one sweep over named bases stored in DIR (resumable, any executor);
each run's outputs go to DIR/runs/base=NAME. They run 120 s simulated (the shape); with
`paper_length` the paper's 40 minutes, telemetry counted from 150 s (`PAPER_LENGTH`).
Printed and written to DIR/repro.md and DIR/repro.json: per policy run, the speed-up over
everything on the slow tier, the gap to the oracle, the fast tier's hit ratio, GB promoted
and the p95 operation latency, beside Table 4's data migrated and the paper's throughput
improvements (Figure 13).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tierscope.data import experiments_dir
from tierscope.studies import trends, write_tables
from tierscope.texttable import align

#: Where the experiment files live (shipped with the package: `tierscope.data`).
TIERING_DIR = experiments_dir() / "tiering"

#: Experiment file stem -> (what the paper calls it, the Table 4 column it matches).
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "memtier-gaussian-1t": ("Memcached with memtier, 1 TB (Fig. 12c)", "Memcached MT"),
    "ycsb-hotspot-2t": ("Redis with YCSB hotspot, 2 TB (Fig. 12b)", "Redis YCSB"),
}

#: Table 4: data migrated (GB) per (column, monitor), the paper's approximations.
TABLE4_MIGRATED_GB: dict[tuple[str, str], str] = {
    ("Memcached MT", "damon-mod"): "0",
    ("Memcached MT", "pebs-agg"): "~0",
    ("Memcached MT", "telescope-bnd"): "~94",
    ("Memcached MT", "telescope-flx"): "~108",
    ("Redis YCSB", "damon-mod"): "0",
    ("Redis YCSB", "pebs-agg"): "~0.15",
    ("Redis YCSB", "telescope-bnd"): "~34",
    ("Redis YCSB", "telescope-flx"): "~28",
}

#: The paper's throughput claims (section 6.3.3, abstract): Telescope 5.6-34.4 % over no
#: tiering; DAMON below the baseline (overheads, nothing migrated); PEBS marginal.
PAPER_IMPROVEMENT: dict[str, str] = {
    "damon-mod": "< 0 (nothing migrated)",
    "pebs-agg": "marginal",
    "telescope-bnd": "5.6-34.4 %",
    "telescope-flx": "5.6-34.4 %",
}


#: `quick`: every run this long (simulated), with a 1 s warm-up, to check the pipeline
#: (the claims ledger's quick variant); the numbers are not the documented ones.
QUICK_DURATION = "6s"

#: `paper_length`: the paper's runs (section 6.3: 40 minutes, telemetry started after
#: 150 s) as (duration, warm-up), instead of the experiment files' 120 s and 30 s.
PAPER_LENGTH = ("2400s", "150s")


#: `app`: which application model the experiments use: `default` (purely memory-bound,
#: experiments/tiering/NAME.toml) or `measured` (on real memcached and Redis here,
#: experiments/tiering/measured/NAME.toml; docs/models/TIERING.md section 4.1): the
#: folder under TIERING_DIR, looked up at run time (tests point TIERING_DIR elsewhere).
APP_MODELS = {"default": ".", "measured": "measured"}


def lengths(quick: bool = False, paper_length: bool = False) -> tuple[str, str] | None:
    """(duration, warm-up) every run is given, or None for the experiment files' own."""
    if quick:
        return (QUICK_DURATION, "1s")
    return PAPER_LENGTH if paper_length else None


def sweep(quick: bool = False, app: str = "default", paper_length: bool = False) -> dict[str, Any]:
    """Both experiments as one sweep over named bases (run ids `base=NAME`)."""
    folder = TIERING_DIR / APP_MODELS[app]
    out: dict[str, Any] = {"bases": {n: str(folder / f"{n}.toml") for n in EXPERIMENTS}}
    length = lengths(quick, paper_length)
    if length is not None:
        duration, warmup = length
        out["set"] = {"duration": duration, "warmup": warmup, "workload.kv.duration": duration}
    return out


def _check_lengths(
    out: Path, names: list[str], folder: Path, length: tuple[str, str] | None
) -> None:
    """Refuses a store whose runs have another length than asked (run ids name only the
    experiment, so a store of 120 s runs would otherwise be read as the 40-minute ones)."""
    from tierscope import OutputError, load, load_experiment

    for n in names:
        want = (
            load_experiment(folder / f"{n}.toml").duration_ns
            if length is None
            else int(length[0].removesuffix("s")) * 1_000_000_000
        )
        got = load(out / "runs" / f"base={n}").metrics["duration_ns"]
        if got != want:
            raise OutputError(
                f"{out}: its {n} ran {got / 1e9:g} s simulated, not the {want / 1e9:g} s "
                "asked (another length); choose another --out"
            )


def rows_for(name: str, metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per policy run of one experiment's metrics.json."""
    column = EXPERIMENTS[name][1]
    rows = []
    for run, p in metrics.get("policies", {}).items():
        s, m = p["summary"], p["migration"]
        monitor = p["monitor"]
        latency = s.get("op_latency_ns")
        rows.append(
            {
                "experiment": name,
                "run": run,
                "monitor": monitor,
                "speedup_over_slow": s["speedup_over_slow"],
                "gap_to_oracle": s["gap_to_oracle"],
                "fast_hit_ratio": s["fast_hit_ratio"],
                "promoted_gb": m["promoted_bytes"] / 1e9,
                "p95_op_ms": None if latency is None else latency[1] / 1e6,
                "paper_migrated_gb": TABLE4_MIGRATED_GB.get((column, monitor or ""), ""),
                "paper_improvement": PAPER_IMPROVEMENT.get(monitor or "", ""),
            }
        )
    return rows


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def format_table(rows: list[dict[str, Any]]) -> str:
    t = [
        (
            "experiment",
            "run",
            "speed-up",
            "gap to oracle",
            "fast hits",
            "GB promoted",
            "p95 op ms",
            "paper GB migrated",
            "paper throughput gain",
        )
    ]
    t += [
        (
            r["experiment"],
            r["run"],
            _num(r["speedup_over_slow"], ".3f"),
            _num(r["gap_to_oracle"], ".3f"),
            _num(r["fast_hit_ratio"], ".3f"),
            f"{r['promoted_gb']:.1f}",
            _num(r["p95_op_ms"], ".1f"),
            r["paper_migrated_gb"] or "-",
            r["paper_improvement"] or "-",
        )
        for r in rows
    ]
    return align(t)


def main(
    out: Path,
    *,
    only: list[str] | None,
    executor: str,
    jobs: int,
    progress: bool,
    quick: bool = False,
    app: str = "default",
    paper_length: bool = False,
) -> int:
    """Runs the experiments named by `only` (default both) into the store `out` and
    writes the tables; `quick`: every run `QUICK_DURATION` long; `paper_length`: every
    run `PAPER_LENGTH`; `app`: APP_MODELS."""
    from tierscope import load, run_sweep
    from tierscope.experiment import config_error

    names = only or list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise config_error(
            "command line",
            f"--only: unknown experiment {unknown[0]!r} (expected one of {', '.join(EXPERIMENTS)})",
        )
    if quick and paper_length:
        raise config_error("command line", "--quick and --paper-length: give one of them")
    # Here, not at the top: the sweep store brings pyarrow into every CLI call.
    from tierscope.sweep.store import claim_store

    # DIR (a sweep store, with the tables beside it) is claimed and locked throughout.
    with claim_store(out, adopt=("repro.md", "repro.json")) as claim:
        outcome = run_sweep(
            sweep(quick, app, paper_length),
            out,
            executor=executor,
            jobs=jobs,
            outputs=True,
            progress=progress,
            source_name="repro telescope-tiering",
            only=[f"base={n}" for n in names],
        )
        outcome.raise_if_failed("experiments")
        _check_lengths(out, names, TIERING_DIR / APP_MODELS[app], lengths(quick, paper_length))
        rows: list[dict[str, Any]] = []
        for n in names:
            rows += rows_for(n, load(out / "runs" / f"base={n}").metrics)
        text = format_table(rows)
        print(text)
        print(
            f"\n{len(names)} experiments ({outcome.skipped} already stored) in "
            f"{outcome.wall_s:.0f} s wall; outputs in {out}/runs/base=NAME"
        )
        with claim.stage() as staging:
            doc = {
                "rows": rows,
                "derived": trends.applied(trends.tiering, rows),
                "wall_s": outcome.run_wall_s,
            }
            write_tables(staging, text + "\n", doc, indent=2)
    return 0
