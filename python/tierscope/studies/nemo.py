"""`tierscope repro nemo`: the three use cases of the NEMO paper (section 5) beside its
numbers, and the SRAM it needs at terabyte scale (section 6.1's formula). Everything is
modelled (docs/techniques/NEMO.md says how, and where ours and the paper's differ):

1. Hot-set recovery (5.1): experiments/nemo/hotset-recovery.toml, HeMem fed by PEBS or by
   NEMO's per-huge-page counters; seconds after the hot set moves until the fast tier
   serves 50 % and 80 % of the accesses; each technique's CPU.
2. THP split candidates (5.2): experiments/nemo/thp-split.toml, MEMTIS's skewness score
   fed by PEBS or by NEMO's per-4 KiB counters swept 112 huge pages per 500 ms; seconds
   until 95 % of the split candidates are scored within one bucket of the truth, at fast
   tiers of 1:2 and 1:8; each technique's CPU.
2b. MEMTIS end to end (5.2, Figure 6): experiments/nemo/memtis-split-1to8.toml at fast
   tiers of 1:2, 1:4 and 1:8, MEMTIS fed by PEBS or NEMO, with and without splits; each
   run's speed-up over all-slow and its telemetry CPU.
3. Noisy neighbour (5.3): experiments/nemo/noisy-neighbour.toml, a key-value victim and
   a streaming neighbour ([tiering.neighbour]) on the CXL tier, the neighbour throttled by
   the `throttle` policy from NEMO's per-tenant counter polled every 1 ms or MBM polled at
   1-100 ms; the victim's p99 request latency (the application model) against the victim
   alone, the telemetry's CPU, the time to a cut. Full runs add the exact engine's rows.
4. Beyond the paper: the state SRAM a sweep of 1 TB and 5 TB in 1 s needs.

Writes DIR/repro.md and DIR/repro.json (and DIR/hotset: the use case 1 run's outputs).
"""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from tierscope import _core, outdir
from tierscope.data import experiments_dir
from tierscope.experiment import Overrides, load_experiment
from tierscope.output import write_run_dir
from tierscope.results import RunResult
from tierscope.runner import run
from tierscope.studies import trends, write_tables
from tierscope.texttable import align

#: Where the experiment files live (shipped with the package: `tierscope.data`).
NEMO_DIR = experiments_dir() / "nemo"

#: The paper's numbers each table stands beside.
PAPER = {
    "hotset": "HeMem-PEBS recovers in 324 s, HeMem-NEMO in 67 s (4.8x), NEMO at 0.89 % CPU",
    "thp": "95 % of the split candidates: MEMTIS-NEMO ~150 s at every ratio, MEMTIS-PEBS up "
    "to 10.4x slower as the fast tier shrinks (1:6, 1:8); MEMTIS-NEMO 1.67 % CPU for NEMO",
    "memtis": "Silo's throughput, MEMTIS-NEMO over MEMTIS-PEBS: +13 % at 1:8 (up to 1.13x); "
    "the gain of NEMO's splits over NEMO-HugeOnly widens as the fast tier shrinks",
    "noisy": "p99 increase: unthrottled +22 %, NEMO +5.2 % at 0.09 % CPU, MBM 1 ms +5.5 % at "
    "32 % CPU, MBM 100 ms +13 % at 0.7 % CPU; bandwidth within 0.1 %",
}

#: Seconds of the noisy neighbour on the exact engine in a full run (two on-phases).
NOISY_EXACT_S = 2.0

#: Fast-tier shares of the THP case: 1:2 and 1:8.
THP_RATIOS = {"1:2": 1 / 3, "1:8": 1 / 9}

#: Fast-tier capacities of the MEMTIS end-to-end runs: 1/3, 1/5 and 1/9 of the 2,290 MiB
#: heap of experiments/nemo/memtis-split-1to8.toml (its sweep file has the same).
MEMTIS_RATIOS = {"1:2": "763MiB", "1:4": "458MiB", "1:8": "254MiB"}
#: Quick: the store at 1/8 of its size (a 288 MiB heap), 1:2 and 1:8, 4 s.
MEMTIS_QUICK = {"1:2": "96MiB", "1:8": "32MiB"}


def hotset(
    duration_s: float | None, overrides: Overrides = ()
) -> tuple[list[dict[str, Any]], RunResult]:
    """Use case 1: per policy, the fast tier's share per window and when it recovers;
    and the run. `overrides`: `--set` pairs on the experiment (scripts/nemo_sensitivity.py)."""
    doc = _document("hotset-recovery.toml", duration_s)
    exp = load_experiment(doc, source_name="hotset-recovery.toml", overrides=overrides)
    shift_at = dict(overrides).get("workload.kv.shift_at", doc["workload"]["kv"]["shift_at"])
    shift_s = _seconds(shift_at)
    result = run(exp, progress=False)
    rows = []
    for name, p in result.policies.items():
        served = p.windows["served"].astype(float)
        share = served[:, 0] / np.maximum(served.sum(axis=1), 1.0)
        end_s = p.windows["end_ns"] / 1e9
        before = share[(end_s > shift_s - 10) & (end_s <= shift_s)]
        after = [(t, s) for t, s in zip(end_s, share, strict=True) if t > shift_s]
        rows.append(
            {
                "technique": name,
                "share_before": float(before.mean()) if len(before) else None,
                "to_half_s": _first(after, 0.5, shift_s),
                "to_80_s": _first(after, 0.8, shift_s),
                "cpu_percent": _cpu(p.summary, result.experiment.duration_ns),
                "speedup_over_slow": p.summary.get("speedup_over_slow"),
            }
        )
    return rows, result


def memtis(quick: bool, overrides: Overrides = ()) -> list[dict[str, Any]]:
    """Use case 2 end to end: per fast-tier ratio and policy run, the speed-up over
    all-slow, the fast tier's hit ratio, the huge pages split and the telemetry CPU."""
    rows = []
    for ratio, capacity in (MEMTIS_QUICK if quick else MEMTIS_RATIOS).items():
        sets = [("tiering.tiers[0].capacity", capacity)]
        if quick:
            sets += [("workload.kv.keys", "1500000"), ("warmup", "1s")]
        doc = _document("memtis-split-1to8.toml", 4.0 if quick else None)
        exp = load_experiment(
            doc, source_name="memtis-split-1to8.toml", overrides=[*sets, *overrides]
        )
        result = run(exp, progress=False)
        for name, p in result.policies.items():
            rows.append(
                {
                    "ratio": ratio,
                    "technique": name,
                    "speedup_over_slow": p.summary.get("speedup_over_slow"),
                    "fast_hit_ratio": p.summary.get("fast_hit_ratio"),
                    "splits": p.migration.get("splits"),
                    "cpu_percent": _cpu(p.summary, result.experiment.duration_ns),
                }
            )
    return rows


#: The noisy-neighbour experiment's policy runs, by the technique names of the paper's
#: rows (the claims ledger's keys name them).
NOISY_RUNS = {
    "unthrottled": "unthrottled",
    "nemo-1ms": "NEMO (notify emulated, polled)",
    "mbm-1ms": "MBM 1 ms",
    "mbm-10ms": "MBM 10 ms",
    "mbm-100ms": "MBM 100 ms",
}


def noisy(
    duration_s: float | None, overrides: Overrides = (), engine: str | None = None
) -> list[dict[str, Any]]:
    """Use case 3: the victim alone (the file without its neighbour), then one row per
    policy run: the victim's request latency (p50, p99; the application model), its p99 and
    mean increase over alone, the neighbour's bandwidth, the telemetry's CPU, the time to a
    cut. `engine` replaces the file's; `overrides`: `--set` pairs (those on the neighbour
    or the policies are left out of the alone run)."""
    doc = _document("noisy-neighbour.toml", duration_s)
    sets = [*overrides, *([("machine.engine", engine)] if engine else [])]
    alone_doc = copy.deepcopy(doc)
    del alone_doc["tiering"]["neighbour"]
    alone_doc["tiering"]["policies"] = [{"type": "static", "name": "alone"}]
    alone_sets = [s for s in sets if not s[0].startswith(("tiering.neighbour", "tiering.policies"))]
    name = "noisy-neighbour.toml"
    alone = run(load_experiment(alone_doc, source_name=name, overrides=alone_sets), progress=False)
    result = run(load_experiment(doc, source_name=name, overrides=sets), progress=False)
    base = alone.policies["alone"].summary
    duration_ns = result.experiment.duration_ns
    engine_name = result.experiment.to_dict()["machine"]["engine"]

    def row(technique: str, summary: dict[str, Any], nb: dict[str, Any] | None) -> dict[str, Any]:
        p50, _, p99 = summary["op_latency_ns"]
        nb = nb or {}
        cpu_ns = nb.get("telemetry_cpu_ns")
        detection_ns = nb.get("detection_ns")
        return {
            "technique": technique,
            "engine": engine_name,
            "victim_p50_ns": p50,
            "victim_p99_ns": p99,
            "p99_increase": p99 / base["op_latency_ns"][2] - 1.0,
            "mean_increase": summary["app_ns"] / base["app_ns"] - 1.0,
            "neighbour_gib_s": nb.get("bandwidth", 0.0) / 2**30,
            "cpu_share": None if cpu_ns is None else cpu_ns / duration_ns,
            "detection_s": None if detection_ns is None else detection_ns * 1e-9,
            "detected": nb.get("detected"),
            "on_phases": nb.get("on_phases"),
            "start_quota": nb.get("start_quota"),
            "bandwidth_error": nb.get("bandwidth_error"),
        }

    rows = [row("victim alone", base, None)]
    for run_name, p in result.policies.items():
        rows.append(row(NOISY_RUNS.get(run_name, run_name), p.summary, p.neighbour))
    return rows


def _document(name: str, duration_s: float | None) -> dict[str, Any]:
    """An experiment file of experiments/nemo as a dict, its run (and its key-value
    workload's) length replaced by `duration_s` when given."""
    with open(NEMO_DIR / name, "rb") as f:
        doc = tomllib.load(f)
    if duration_s is not None:
        doc["duration"] = f"{duration_s}s"
        doc["workload"]["kv"]["duration"] = f"{duration_s}s"
    return doc


def _seconds(text: str) -> float:
    units = {"ms": 1e-3, "s": 1.0, "min": 60.0}
    for u in ("ms", "min", "s"):
        if text.endswith(u):
            return float(text[: -len(u)]) * units[u]
    return float(text)


def _first(after: list[tuple[float, float]], level: float, shift_s: float) -> float | None:
    return next((t - shift_s for t, s in after if s >= level), None)


def _cpu(summary: dict[str, Any], duration_ns: int) -> float | None:
    ns = summary.get("monitor_cpu_ns")
    return None if ns is None else 100.0 * ns / duration_ns


def thp(duration_s: float | None, overrides: Overrides = ()) -> list[dict[str, Any]]:
    """Use case 2 at each fast-tier ratio. `overrides`: `--set` pairs on the experiment."""
    exp = load_experiment(
        _document("thp-split.toml", duration_s), source_name="thp-split.toml", overrides=overrides
    )
    names = {share: ratio for ratio, share in THP_RATIOS.items()}
    rows = _core.nemo_thp_split(exp._inner, list(THP_RATIOS.values()))
    return [{"ratio": names[r["fast_share"]], **r} for r in rows]


def sram_table() -> list[dict[str, Any]]:
    """SRAM for a 1 s sweep. State: |SRAM| = M x tau x W / (T x G) (section 6.1, T = 1 s).
    Translation: keys are huge-page numbers indexing the table directly (as the `nemo`
    monitors program it), so the table needs an entry per 2 MiB of M, each the state
    index's bits plus a valid bit (sram.rs)."""
    rows = []
    for m_name, m in (("1 TB", 10**12), ("5 TB", 5 * 10**12)):
        for g_name, g, tau in (("2 MiB", 2 << 20, 0.010), ("4 KiB", 4096, 0.5)):
            for w in (8, 2):
                state = m * tau * w / (1.0 * g)
                states = math.ceil(state / w)
                entries = 1 << math.ceil(math.log2(math.ceil(m / (2 << 20))))
                table = entries * (math.ceil(math.log2(max(states, 2))) + 1) / 8
                rows.append(
                    {
                        "memory": m_name,
                        "granularity": g_name,
                        "tau_s": tau,
                        "width_bytes": w,
                        "sram_bytes": state,
                        "table_bytes": table,
                        "prototype_sram": (state + table) / (8 * 142 * 1024),
                    }
                )
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [align([header, *rows])]


def _size(b: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{b:.0f} B"


def _fmt(v: Any, f: str) -> str:
    return "-" if v is None else format(v, f)


def render(report: dict[str, Any]) -> str:
    lines = ["# NEMO (paper section 5) in tierscope", ""]
    lines += ["## Use case 1: hot-set recovery", f"Paper: {PAPER['hotset']}.", ""]
    lines += _table(
        ["technique", "share before", "to 0.5 (s)", "to 0.8 (s)", "cpu %"],
        [
            [
                r["technique"],
                _fmt(r["share_before"], ".2f"),
                _fmt(r["to_half_s"], ".0f"),
                _fmt(r["to_80_s"], ".0f"),
                _fmt(r["cpu_percent"], ".2f"),
            ]
            for r in report["hotset"]
        ],
    )
    lines += ["", "## Use case 2: THP split candidates", f"Paper: {PAPER['thp']}.", ""]
    lines += _table(
        ["ratio", "technique", "candidates", "95 % found (s)", "found", "exact", "false", "cpu %"],
        [
            [
                r["ratio"],
                r["technique"],
                str(r["candidates"]),
                _fmt(r["found_95_s"], ".0f"),
                _fmt(r["found_end"], ".3f"),
                _fmt(r["exact_end"], ".3f"),
                str(r["false_candidates"]),
                _fmt(r["cpu_percent"], ".2f"),
            ]
            for r in report["thp"]
        ],
    )
    lines += ["", "## Use case 2 end to end: MEMTIS (Figure 6)", f"Paper: {PAPER['memtis']}.", ""]
    lines += _table(
        ["ratio", "technique", "speed-up over all-slow", "fast hit ratio", "splits", "cpu %"],
        [
            [
                r["ratio"],
                r["technique"],
                _fmt(r["speedup_over_slow"], ".3f"),
                _fmt(r["fast_hit_ratio"], ".3f"),
                _fmt(r["splits"], "d"),
                _fmt(r["cpu_percent"], ".2f"),
            ]
            for r in report["memtis"]
        ],
    )
    lines += ["", "## Use case 3: noisy neighbour", f"Paper: {PAPER['noisy']}.", ""]
    lines += _table(
        [
            "engine",
            "technique",
            "victim p50 (ns)",
            "victim p99 (ns)",
            "p99 increase",
            "mean increase",
            "neighbour GiB/s",
            "cpu %",
            "detection (ms)",
            "quota at start",
            "bw error",
        ],
        [
            [
                r["engine"],
                r["technique"],
                _fmt(r["victim_p50_ns"], ".0f"),
                _fmt(r["victim_p99_ns"], ".0f"),
                _fmt(100 * r["p99_increase"], "+.1f") + " %",
                _fmt(100 * r["mean_increase"], "+.1f") + " %",
                _fmt(r["neighbour_gib_s"], ".2f"),
                _fmt(None if r["cpu_share"] is None else 100 * r["cpu_share"], ".4f"),
                _fmt(None if r["detection_s"] is None else 1e3 * r["detection_s"], ".1f"),
                _fmt(r["start_quota"], ".2f"),
                _fmt(r["bandwidth_error"], ".4f"),
            ]
            for r in [*report["noisy"], *report.get("noisy_exact", [])]
        ],
    )
    lines += ["", "## Beyond the paper: state SRAM for a 1 s sweep (section 6.1)", ""]
    lines += _table(
        ["memory", "granularity", "tau", "width", "state SRAM", "table", "x prototype"],
        [
            [
                r["memory"],
                r["granularity"],
                f"{r['tau_s'] * 1e3:.0f} ms",
                f"{r['width_bytes']} B",
                _size(r["sram_bytes"]),
                _size(r["table_bytes"]),
                f"{r['prototype_sram']:.2f}",
            ]
            for r in report["sram"]
        ],
    )
    return "\n".join(lines) + "\n"


def main(out: Path, quick: bool = False, force: bool = False) -> dict[str, Any]:
    """Runs the three use cases into `out` (the hot-set run's outputs in out/hotset, the
    tables in repro.json and repro.md, all written at the end: `tierscope.outdir`, an
    earlier output replaced only with `force`); `quick` shortens them (for tests)."""
    with outdir.claim(out, "repro-nemo", force=force) as claim:
        hot_rows, hot_run = hotset(60.0 if quick else None)
        report = {
            "paper": PAPER,
            "hotset": hot_rows,
            "thp": thp(20.0 if quick else None),
            "memtis": memtis(quick),
            "noisy": noisy(2.0 if quick else None),
            "sram": sram_table(),
        }
        if not quick:
            # The same setup on the exact engine, shorter (every request through the TLBs
            # and NEMO's driver): the engines agree in direction.
            report["noisy_exact"] = noisy(NOISY_EXACT_S, engine="exact")
        report["derived"] = trends.applied(trends.nemo, report)
        text = render(report)
        with claim.stage() as staging:
            write_run_dir(hot_run, staging / "hotset")
            write_tables(staging, text, report)
    print(text, end="")
    return report
