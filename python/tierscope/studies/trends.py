"""Values the papers' trend claims are about ("DAMON degrades with the footprint",
"Telescope flips fewer bits than DAMON in every microbenchmark", "NEMO recovers 5x
faster"), derived from a study's own rows: each study writes them under `derived` in its
repro.json, where the claims ledger (docs/results/CLAIMS.md) reads them. Nothing here is tuned: each
value is a difference, a ratio, a mean, a minimum or a maximum of the rows, as its
docstring says.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Row = dict[str, Any]

#: Monitor name prefixes that name a technique (presets are `technique-variant`).
TECHNIQUES = ("damon", "pebs", "telescope", "scan")


def technique(monitor: str | None) -> str | None:
    """`damon-mod` -> `damon`; None for a monitor of no paper technique."""
    head = (monitor or "").split("-", 1)[0]
    return head if head in TECHNIQUES else None


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _min(xs: Iterable[float | None]) -> float | None:
    vs = [x for x in xs if x is not None]
    return min(vs) if vs else None


def _max(xs: Iterable[float | None]) -> float | None:
    vs = [x for x in xs if x is not None]
    return max(vs) if vs else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _mean(xs: Iterable[float | None]) -> float | None:
    vs = [x for x in xs if x is not None]
    return statistics.fmean(vs) if vs else None


# Telescope, section 6.2 -------------------------------------------------------------------

#: Table 2's experiments (the paper's cycle counts).
TABLE2 = ("multiphase-5t", "multiphase-5t-thp", "subtb-1g", "subtb-10g", "subtb-100g")
#: The 5 TB microbenchmarks of the abstract.
FIVE_TB = ("multiphase-5t", "needle-5t")
SUBTB = ("subtb-1g", "subtb-10g", "subtb-100g")


def telescope(quality: Sequence[Row], cost: Sequence[Row]) -> dict[str, Any]:
    """From `repro telescope`'s rows (one run per experiment; the needle's seed means are
    rows with a `base`):

    - `technique`: per experiment and technique, the least and greatest precision and
      recall over its variants (`pr_min`: the lowest of both, `pr_max`: the highest);
    - `telescope_5t_pr_min`: the lowest precision or recall of both Telescope variants on
      the 5 TB microbenchmarks (the needle's seed means where they were run);
    - `telescope_5t_cpu_percent`: the mean CPU % of both variants on them;
    - `footprint`: per monitor, SubTB 1 GB's precision and recall minus 10 GB's and 100 GB's
      (positive: it degrades as the footprint grows);
    - `page_size`: per monitor of an experiment run with 4 KiB and 2 MiB pages, cycles
      with 4 KiB over those with 2 MiB, and precision and recall with 2 MiB minus 4 KiB;
    - `damon_over_telescope`: per experiment, the fewer of DAMON-MOD's and -AGG's cycles
      (bits flipped) over the more of Telescope-BND's and -FLX's, and their least over
      Table 2's experiments (cycles) or all (bits);
    - `mean_cpu_percent`: per monitor and per technique, the mean CPU % over the
      experiments; `app_slowdown`: the greatest and the mean slowdown of the workload;
    - `subtb_telescope_f1_margin`: over SubTB 1, 10 and 100 GB (4 KiB), the least of the
      best Telescope F1 minus the best F1 of DAMON, PEBS and linear scanning.
    """
    plain = [r for r in quality if "base" not in r]
    by = {(r["experiment"], r["monitor"]): r for r in plain}
    cost_by = {(r["experiment"], r["monitor"]): r for r in cost}
    experiments = list(dict.fromkeys(r["experiment"] for r in plain))

    tech_rows = []
    for e in experiments:
        for t in TECHNIQUES:
            rs = [r for r in plain if r["experiment"] == e and technique(r["monitor"]) == t]
            if not rs:
                continue
            p = [r["precision"] for r in rs]
            rc = [r["recall"] for r in rs]
            tech_rows.append(
                {
                    "experiment": e,
                    "technique": t,
                    "monitors": [r["monitor"] for r in rs],
                    "precision_min": min(p),
                    "precision_max": max(p),
                    "recall_min": min(rc),
                    "recall_max": max(rc),
                    "pr_min": min(p + rc),
                    "pr_max": max(p + rc),
                }
            )

    tele = ("telescope-bnd", "telescope-flx")
    five: list[float] = []
    for e in FIVE_TB:
        seeds = [r for r in quality if r.get("base") == e and r["monitor"] in tele]
        rs = seeds or [by[(e, m)] for m in tele if (e, m) in by]
        five += [min(r["precision"], r["recall"]) for r in rs]
    cpu5 = [cost_by[(e, m)]["cpu_percent"] for e in FIVE_TB for m in tele if (e, m) in cost_by]

    def value(e: str, m: str, k: str) -> float | None:
        r = by.get((e, m))
        return None if r is None else float(r[k])

    footprint = []
    for m in dict.fromkeys(r["monitor"] for r in plain if r["experiment"] == "subtb-1g"):
        row: Row = {"monitor": m}
        for k in ("precision", "recall"):
            base = value("subtb-1g", m, k)
            for e, label in (("subtb-10g", "10g"), ("subtb-100g", "100g")):
                other = value(e, m, k)
                row[f"{k}_drop_{label}"] = None if base is None or other is None else base - other
        footprint.append(row)

    page_size = []
    for e in experiments:
        if e.endswith("-thp") or f"{e}-thp" not in experiments:
            continue
        for m in [r["monitor"] for r in plain if r["experiment"] == e]:
            if (f"{e}-thp", m) not in by:
                continue
            small, huge = cost_by.get((e, m)), cost_by.get((f"{e}-thp", m))
            page_size.append(
                {
                    "experiment": e,
                    "monitor": m,
                    "gcycles_4k_over_2m": _ratio(
                        small and small["gcycles"], huge and huge["gcycles"]
                    ),
                    "precision_2m_minus_4k": by[(f"{e}-thp", m)]["precision"]
                    - by[(e, m)]["precision"],
                    "recall_2m_minus_4k": by[(f"{e}-thp", m)]["recall"] - by[(e, m)]["recall"],
                }
            )

    def damon_over_telescope(e: str, k: str, damon_k: str | None = None) -> float | None:
        # DAMON's side may read another key: its bits flipped are a range under window
        # sampling, and "DAMON flips more" is only shown by its lower end. One DAMON's
        # value unknown (a run of a build before that key) leaves the fewer unknown.
        damons = [
            cost_by[(e, m)].get(damon_k or k)
            for m in ("damon-mod", "damon-agg")
            if (e, m) in cost_by
        ]
        damon = None if None in damons else _min(damons)
        tel = _max(cost_by[(e, m)][k] for m in tele if (e, m) in cost_by)
        return _ratio(damon, tel)

    ratios = [
        {
            "experiment": e,
            "gcycles": damon_over_telescope(e, "gcycles"),
            "bits_flipped": damon_over_telescope(e, "bits_flipped", "bits_flipped_at_least"),
            "bits_flipped_upper": damon_over_telescope(e, "bits_flipped"),
        }
        for e in experiments
    ]

    mean_cpu: list[Row] = []
    monitors = list(dict.fromkeys(r["monitor"] for r in cost))
    for m in monitors:
        mine = [r["cpu_percent"] for r in cost if r["monitor"] == m]
        mean_cpu.append({"monitor": m, "cpu_percent": _mean(mine)})
    for t in TECHNIQUES:
        vs = [r["cpu_percent"] for r in cost if technique(r["monitor"]) == t]
        if vs:
            mean_cpu.append({"technique": t, "cpu_percent": statistics.fmean(vs)})

    slowdown: list[Row] = []
    for m in monitors:
        mine = [r.get("app_slowdown") for r in cost if r["monitor"] == m]
        slowdown.append({"monitor": m, "max": _max(mine), "mean": _mean(mine)})
    for t in TECHNIQUES:
        mine = [r.get("app_slowdown") for r in cost if technique(r["monitor"]) == t]
        if mine:
            slowdown.append({"technique": t, "max": _max(mine), "mean": _mean(mine)})

    margins = []
    for e in SUBTB:
        rs = [r for r in plain if r["experiment"] == e]
        best_tel = _max(
            _f1(r["precision"], r["recall"]) for r in rs if technique(r["monitor"]) == "telescope"
        )
        best_other = _max(
            _f1(r["precision"], r["recall"])
            for r in rs
            if technique(r["monitor"]) in ("damon", "pebs", "scan")
        )
        if best_tel is not None and best_other is not None:
            margins.append(best_tel - best_other)

    return {
        "technique": tech_rows,
        "telescope_5t_pr_min": _min(five),
        "telescope_5t_cpu_percent": _mean(cpu5),
        "footprint": footprint,
        "page_size": page_size,
        "damon_over_telescope": ratios,
        "damon_over_telescope_min": {
            "gcycles_table2": _min(r["gcycles"] for r in ratios if r["experiment"] in TABLE2),
            "bits_flipped": _min(r["bits_flipped"] for r in ratios),
            "bits_flipped_upper": _min(r["bits_flipped_upper"] for r in ratios),
        },
        "mean_cpu_percent": mean_cpu,
        "app_slowdown": slowdown,
        "subtb_telescope_f1_margin": _min(margins),
    }


# Telescope, section 6.3 -------------------------------------------------------------------

#: The monitors whose snapshots drive the Telescope rule in section 6.3.
TIERING_MONITORS = ("damon-mod", "pebs-agg", "telescope-bnd", "telescope-flx")


def tiering(rows: Sequence[Row]) -> dict[str, Any]:
    """From `repro telescope-tiering`'s rows (one per policy run):

    - `monitors`: per monitor driving the rule, and for `telescope` (both variants), the
      least and greatest speed-up, GB promoted and p95 operation latency over the
      experiments;
    - `telescope_over_others`: per experiment, the lower of the Telescope variants'
      speed-ups over the higher of DAMON's and PEBS's (`speedup`), and the lower of their
      p95 latencies over the lower of DAMON's and PEBS's (`p95`); and the least speed-up
      ratio and greatest latency ratio over the experiments.
    """
    driven = [r for r in rows if r.get("monitor") in TIERING_MONITORS]

    def span(rs: list[Row], name: str) -> Row:
        out: Row = {}
        for k, label in (
            ("speedup_over_slow", "speedup"),
            ("promoted_gb", "promoted_gb"),
            ("p95_op_ms", "p95_op_ms"),
        ):
            out[f"{label}_min"] = _min(r[k] for r in rs)
            out[f"{label}_max"] = _max(r[k] for r in rs)
        return out

    monitors: list[Row] = []
    for m in TIERING_MONITORS:
        rs = [r for r in driven if r["monitor"] == m]
        if rs:
            monitors.append({"monitor": m, **span(rs, m)})
    tel = [r for r in driven if technique(r["monitor"]) == "telescope"]
    if tel:
        monitors.append({"technique": "telescope", **span(tel, "telescope")})

    per_exp = []
    for e in dict.fromkeys(r["experiment"] for r in driven):
        rs = [r for r in driven if r["experiment"] == e]
        t = [r for r in rs if technique(r["monitor"]) == "telescope"]
        o = [r for r in rs if technique(r["monitor"]) != "telescope"]
        per_exp.append(
            {
                "experiment": e,
                "speedup": _ratio(
                    _min(r["speedup_over_slow"] for r in t), _max(r["speedup_over_slow"] for r in o)
                ),
                "p95": _ratio(_min(r["p95_op_ms"] for r in t), _min(r["p95_op_ms"] for r in o)),
            }
        )
    return {
        "monitors": monitors,
        "telescope_over_others": per_exp,
        "telescope_over_others_speedup_min": _min(r["speedup"] for r in per_exp),
        "telescope_over_others_p95_max": _max(r["p95"] for r in per_exp),
    }


# Cori ---------------------------------------------------------------------------------


def cori(rows: Sequence[Row], table_i: dict[str, int]) -> dict[str, Any]:
    """From `repro cori`'s rows (one per workload, seed and scheduler):

    - `table_i_slowdown_pct`: the mean slowdown over the best of all of Table I's periods,
      and per period (`by_period`) the mean; per scheduler (`schedulers`) the period (in
      requests) with the lowest mean, Cori's mean slowdown and Thermostat's over it, and
      the mean trials of Cori and each baseline (base-right's over base-left's and back);
    - `cori_slowdown_pct`: the mean of Cori's choices' slowdowns (cases where Cori chose);
      `cori_best_slowdown_pct`: that of its best candidates';
    - trials to get within 3 % of the best: per method (Cori, base-left, base-right,
      base-random), the mean over the cases where it got there and how many never did;
      the baselines' mean over all their cases that got there, and that over Cori's mean;
      Cori's mean per scheduler;
    - `best_period_spread`: the largest best period over the smallest; and the median over
      workloads and seeds of the reactive scheduler's best period over the predictive's.
    """
    periods = list(table_i)
    t1 = [r["table_i_slowdown_pct"][k] for r in rows for k in periods]
    by_period = [
        {
            "period": k,
            "requests": table_i[k],
            "slowdown_pct": _mean(r["table_i_slowdown_pct"][k] for r in rows),
        }
        for k in periods
    ]
    schedulers = []
    for s in dict.fromkeys(r["scheduler"] for r in rows):
        rs = [r for r in rows if r["scheduler"] == s]
        means = {k: _mean(r["table_i_slowdown_pct"][k] for r in rs) for k in periods}
        lowest = min(periods, key=lambda k: (means[k] if means[k] is not None else 1e300))
        cori_slowdown = _mean(r["cori_slowdown_pct"] for r in rs)
        left = _mean(r["left_to_3pct"] for r in rs)
        right = _mean(r["right_to_3pct"] for r in rs)
        schedulers.append(
            {
                "scheduler": s,
                "table_i_lowest_mean_period": lowest,
                "table_i_lowest_mean_requests": table_i[lowest],
                "cori_slowdown_pct": cori_slowdown,
                "thermostat_over_cori_slowdown": _ratio(means.get("Thermostat"), cori_slowdown),
                "cori_trials_mean": _mean(r["cori_to_3pct"] for r in rs),
                "left_trials_mean": left,
                "right_trials_mean": right,
                "random_trials_mean": _mean(r["random_to_3pct"] for r in rs),
                "right_over_left_trials": _ratio(right, left),
                "left_over_right_trials": _ratio(left, right),
            }
        )
    methods = {"cori": "cori_to_3pct", "left": "left_to_3pct", "right": "right_to_3pct"}
    methods["random"] = "random_to_3pct"
    trials = [
        {
            "method": name,
            "mean": _mean(r[k] for r in rows),
            "never": sum(r[k] is None for r in rows),
            "cases": len(rows),
        }
        for name, k in methods.items()
    ]
    base = _mean(r[k] for r in rows for n, k in methods.items() if n != "cori")
    cori_mean = _mean(r["cori_to_3pct"] for r in rows)
    best = [r["best_period"] for r in rows]
    pairs: dict[tuple[str, int], dict[str, int]] = {}
    for r in rows:
        pairs.setdefault((r["workload"], r["seed"]), {})[r["scheduler"]] = r["best_period"]
    reactive_over_predictive = [
        p["history"] / p["oracle"] for p in pairs.values() if "history" in p and "oracle" in p
    ]
    return {
        "table_i_slowdown_pct": _mean(t1),
        "by_period": by_period,
        "schedulers": schedulers,
        "cori_slowdown_pct": _mean(r["cori_slowdown_pct"] for r in rows),
        "cori_best_slowdown_pct": _mean(r.get("cori_best_slowdown_pct") for r in rows),
        "trials": trials,
        "baselines_trials_mean": base,
        "baselines_over_cori_trials": _ratio(base, cori_mean),
        "best_period_spread": _ratio(_max(best), _min(best)),
        "reactive_over_predictive_best_period": (
            statistics.median(reactive_over_predictive) if reactive_over_predictive else None
        ),
    }


# NEMO ---------------------------------------------------------------------------------


def _pick(rows: Sequence[Row], **want: Any) -> Row | None:
    hits = [r for r in rows if all(r.get(k) == v for k, v in want.items())]
    return hits[0] if len(hits) == 1 else None


def _get(row: Row | None, key: str) -> float | None:
    return None if row is None else row.get(key)


def nemo(report: dict[str, Any]) -> dict[str, Any]:
    """From `repro nemo`'s tables:

    - hot-set recovery: HeMem-PEBS's seconds over HeMem-NEMO's to 50 % and to 80 % of the
      accesses on the fast tier; HeMem-NEMO's speed-up over all-slow over HeMem-PEBS's
      (the whole run), and its telemetry CPU over HeMem-PEBS's;
    - THP split candidates: per fast-tier ratio, MEMTIS-PEBS's seconds to 95 % of the
      candidates over MEMTIS-NEMO's, and the candidates MEMTIS-NEMO found at the end over
      MEMTIS-PEBS's; per ratio and technique, the share of huge pages whose score ended at
      16 or more, and at 0; MEMTIS-PEBS's (and MEMTIS-NEMO's) seconds at 1:8 over 1:2;
    - MEMTIS end to end: per fast-tier ratio, MEMTIS-NEMO's speed-up over all-slow over
      MEMTIS-PEBS's (both splitting), and each one's over its HugeOnly run (what splitting
      gains); the greatest NEMO-over-PEBS; NEMO's splitting gain at 1:8 over 1:2;
    - noisy neighbour: MBM's telemetry CPU at 1 ms over NEMO's (notify emulated by polls,
      the paper's prototype), NEMO's p99 increase over MBM's at 1 ms, MBM's detection time
      at 100 ms over 1 ms; the worst bandwidth error of any technique.
    """
    hot = report["hotset"]
    pebs = _pick(hot, technique="hemem@pebs-hemem")
    nemo_row = _pick(hot, technique="hemem@nemo-hotset")
    thp = report["thp"]
    ratios = list(dict.fromkeys(r["ratio"] for r in thp))

    def thp_get(ratio: str, t: str, k: str) -> float | None:
        return _get(_pick(thp, ratio=ratio, technique=t), k)

    thp_rows = [
        {
            "ratio": ratio,
            "pebs_over_nemo_95": _ratio(
                thp_get(ratio, "memtis-pebs", "found_95_s"),
                thp_get(ratio, "memtis-nemo", "found_95_s"),
            ),
            "nemo_over_pebs_found_end": _ratio(
                thp_get(ratio, "memtis-nemo", "found_end"),
                thp_get(ratio, "memtis-pebs", "found_end"),
            ),
        }
        for ratio in ratios
    ]
    scores = []
    for r in thp:
        buckets = r.get("buckets") or []
        total = sum(buckets)
        scores.append(
            {
                "ratio": r["ratio"],
                "technique": r["technique"],
                "share_score_16_up": _ratio(float(sum(buckets[16:])), float(total)),
                "share_score_0": _ratio(float(buckets[0]) if buckets else None, float(total)),
            }
        )

    def growth(t: str) -> float | None:
        return _ratio(thp_get("1:8", t, "found_95_s"), thp_get("1:2", t, "found_95_s"))

    e2e = report.get("memtis") or []

    def e2e_get(ratio: str, t: str) -> float | None:
        return _get(_pick(e2e, ratio=ratio, technique=t), "speedup_over_slow")

    memtis_rows = [
        {
            "ratio": ratio,
            "nemo_over_pebs": _ratio(
                e2e_get(ratio, "memtis@nemo-memtis"), e2e_get(ratio, "memtis@pebs-memtis")
            ),
            "nemo_split_gain": _ratio(
                e2e_get(ratio, "memtis@nemo-memtis"), e2e_get(ratio, "memtis-hugeonly@nemo-memtis")
            ),
            "pebs_split_gain": _ratio(
                e2e_get(ratio, "memtis@pebs-memtis"), e2e_get(ratio, "memtis-hugeonly@pebs-memtis")
            ),
        }
        for ratio in dict.fromkeys(r["ratio"] for r in e2e)
    ]
    gain = {r["ratio"]: r["nemo_split_gain"] for r in memtis_rows}
    noisy = report["noisy"]
    mbm = _pick(noisy, technique="MBM 1 ms")
    mbm100 = _pick(noisy, technique="MBM 100 ms")
    polled = _pick(noisy, technique="NEMO (notify emulated, polled)")
    errors = [r["bandwidth_error"] for r in noisy if r.get("bandwidth_error") is not None]
    return {
        "hotset_pebs_over_nemo_half": _ratio(_get(pebs, "to_half_s"), _get(nemo_row, "to_half_s")),
        "hotset_pebs_over_nemo_80": _ratio(_get(pebs, "to_80_s"), _get(nemo_row, "to_80_s")),
        "hotset_nemo_over_pebs_speedup": _ratio(
            _get(nemo_row, "speedup_over_slow"), _get(pebs, "speedup_over_slow")
        ),
        "hotset_nemo_over_pebs_cpu": _ratio(
            _get(nemo_row, "cpu_percent"), _get(pebs, "cpu_percent")
        ),
        "thp": thp_rows,
        "thp_pebs_over_nemo_max": _max(r["pebs_over_nemo_95"] for r in thp_rows),
        "thp_scores": scores,
        "thp_1_8_over_1_2": [
            {"technique": t, "ratio": growth(t)} for t in ("memtis-pebs", "memtis-nemo")
        ],
        "memtis": memtis_rows,
        "memtis_nemo_over_pebs_max": _max(r["nemo_over_pebs"] for r in memtis_rows),
        "memtis_nemo_split_gain_1_8_over_1_2": _ratio(gain.get("1:8"), gain.get("1:2")),
        "noisy_mbm_1ms_over_nemo_cpu": _ratio(_get(mbm, "cpu_share"), _get(polled, "cpu_share")),
        "noisy_nemo_over_mbm_1ms_p99": _ratio(
            _get(polled, "p99_increase"), _get(mbm, "p99_increase")
        ),
        "noisy_mbm_100ms_over_1ms_detection": _ratio(
            _get(mbm100, "detection_s"), _get(mbm, "detection_s")
        ),
        "noisy_bandwidth_error_max": max(errors) if errors else None,
    }


def applied(f: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """`f(*args)`, or `{"error": ...}` when the rows lack what it needs (a study run with
    --only): the tables are still written."""
    try:
        return f(*args)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
