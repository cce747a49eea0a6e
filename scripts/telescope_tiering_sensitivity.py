"""Sensitivity run for the p95 latency rows of the Telescope paper's Table 4 (claims T128,
T129, T132, T133, T136, T137, T140, T141, T144, T145, T148, T149, T152, T153, T156, T157,
T174-T181; docs/models/TIERING.md section 7.2, "The paper's 40 minutes").

Our `p95_op_ms` is an operation's service time: the application's CPU time plus its
item's memory time at the window's loaded latencies. The paper's is the load generator's:
Table 3 runs 170 client threads, each with one request outstanding, so a request also waits
behind the others queued at the server. Read as a closed loop without think time on
`--server-threads` FIFO servers (Redis serves one request at a time), Little's law gives
each window's response time as `clients / (server_threads x ops per second)`; with 170
clients a response is the sum of about 170 service times, so its spread is small beside
the spread over windows and the p95 over operations is the p95 of the windows' response
times, each window weighted by its operations. Only the latency's definition changes: the
runs, placements and service times are the store's own.

    python scripts/telescope_tiering_sensitivity.py STORE [STORE ...]
    python scripts/telescope_tiering_sensitivity.py runs/repro-telescope-tiering --server-threads 4
    python scripts/telescope_tiering_sensitivity.py runs/repro-telescope-tiering --get-hits 0
    python scripts/telescope_tiering_sensitivity.py --gaussian-hits 62

`--get-hits H` is one named assumption about what a memtier operation moves
(docs/models/TIERING.md section 7.2, "What a memtier operation does"): the share of
memtier's GETs that find their item. The simulated access stream is the operations that
move an item (every line of it: SETs and GETs that hit); at memtier's default `--ratio`
1:10 (SET:GET) each of them comes with `10 (1 - H) / (1 + 10 H)` GETs that miss, which
the kv model reads as one bucket access each (a hash lookup that finds nothing), at the
window's mean time per access. The closed loop then mixes both: each of the `clients`
requests a request waits for is an item operation with probability `p = (1 + 10 H) / 11`,
so a response is `K` item service times plus `clients - K` miss service times, with `K`
binomial (one more for an item operation's own), and the p95 is taken over that mixture
in every window. The default, 1, is every operation moving its item (the store holds every
key memtier reads): the closed loop as above, unchanged. The YCSB experiment is left as
it is (its reads are of loaded keys).

STORE is a `tierscope repro telescope-tiering` output directory (its runs/base=NAME), or
a directory holding `tierscope run` outputs of the experiments in STORE/NAME;
windows before the experiment's warm-up are left out, as its summary leaves them out.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

#: Table 4's p95 latencies (ms): experiment -> monitor -> (Memcached, Redis).
TABLE4_P95_MS: dict[str, dict[str, tuple[float, float]]] = {
    "ycsb-hotspot-2t": {
        "damon-mod": (881.0, 850.0),
        "pebs-agg": (976.0, 757.0),
        "telescope-bnd": (867.0, 696.0),
        "telescope-flx": (824.0, 741.0),
    },
    "memtier-gaussian-1t": {
        "damon-mod": (11.2, 59.13),
        "pebs-agg": (11.3, 57.5),
        "telescope-bnd": (10.8, 54.01),
        "telescope-flx": (10.5, 55.55),
    },
}

#: The claims ledger's tolerance for a latency (python/tierscope/studies/claims/).
TOLERANCE = 0.10


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value with at least `q` of the weight at or below it."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q * cum[-1])])


def counted(arrays: dict[str, np.ndarray], app_ns: float) -> np.ndarray:
    """The windows the summary counts (those after the warm-up, which metrics.json does
    not record): the last windows whose application time adds up to the summary's."""
    tail = np.cumsum(arrays["windows.app_ns"][::-1])[::-1]
    first = int(np.argmin(np.abs(tail - app_ns)))
    if abs(tail[first] - app_ns) > 1e-6 * app_ns:
        raise ValueError("no run of last windows adds up to the summary's app_ns")
    keep = np.zeros(len(tail), dtype=bool)
    keep[first:] = True
    return keep


#: memtier_benchmark's default `--ratio` (SET:GET), memtier_benchmark.cpp's usage text.
MEMTIER_RATIO = (1, 10)


def item_share(get_hits: float, ratio: tuple[int, int] = MEMTIER_RATIO) -> float:
    """The share of memtier's operations that move an item (SETs, and GETs that hit) when
    a share `get_hits` of its GETs find their item."""
    if not 0.0 <= get_hits <= 1.0:
        raise ValueError(f"get_hits must be in [0, 1], not {get_hits}")
    sets, gets = ratio
    return (sets + gets * get_hits) / (sets + gets)


def gaussian_get_hits(
    ops_per_s: float,
    seconds: float,
    keys: int = 200_000,
    stddev: float = 100.0,
    ratio: tuple[int, int] = MEMTIER_RATIO,
) -> float:
    """The share of memtier's GETs that find their item when the store starts empty: SETs
    and GETs both draw `--key-pattern G:G` (obj_gen.cpp: median the range's centre, a
    draw outside the range redrawn, the key its floor), so a GET of key k at time t hits
    once a SET has drawn k: averaged over a run of `seconds` at `ops_per_s`, a GET of k
    misses with probability (1 - exp(-x)) / x, x = the SETs' rate on k times `seconds`.
    Table 3: 200K keys, standard deviation 100. A store loaded first hits every time."""
    median = keys / 2 + 0.5
    edges = np.arange(math.floor(median - 20 * stddev), math.ceil(median + 20 * stddev) + 1)
    cdf = np.array([0.5 * (1 + math.erf((e - median) / (stddev * math.sqrt(2)))) for e in edges])
    p = np.diff(cdf)
    p /= p.sum()
    sets, gets = ratio
    x = ops_per_s * sets / (sets + gets) * seconds * p
    missed = np.where(x > 1e-12, -np.expm1(-x) / np.maximum(x, 1e-300), 1.0)
    return float(1.0 - np.sum(p * missed))


def binomial_pmf(n: int, p: float) -> np.ndarray:
    """P(K = k) for k = 0..n, K binomial(n, p)."""
    if p >= 1.0:
        out = np.zeros(n + 1)
        out[n] = 1.0
        return out
    k = np.arange(n + 1)
    log_comb = np.array(
        [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in k]
    )
    return np.exp(log_comb + k * math.log(p) + (n - k) * math.log1p(-p))


def closed_loop_p95_ms(
    arrays: dict[str, np.ndarray],
    keep: np.ndarray,
    per_op: float,
    clients: int,
    threads: int,
    share: float = 1.0,
) -> float:
    """p95 (ms) of the windows' closed-loop response times, weighted by operations.

    `share` is the share of operations that move an item (`per_op` accesses each); the
    others are misses of one access. With `share` = 1 every response in a window is
    `clients` item service times; below it a response is `K` item and `clients - K` miss
    service times, `K` binomial as the module's text says."""
    accesses = arrays["windows.accesses"][keep]
    app_ns = arrays["windows.app_ns"][keep]
    ops = accesses / per_op
    item_ns = app_ns / ops
    if share >= 1.0:
        response_ms = clients * item_ns / threads / 1e6
        return weighted_percentile(response_ms, ops, 0.95)
    if share <= 0.0:
        raise ValueError("no operation moves an item: nothing of the run is left")
    miss_ns = app_ns / accesses
    # Every (window, K) pair is an atom of the mixture: an item operation waits for its
    # own service and K - 1 items among the other clients - 1 requests, a miss for K items
    # among clients - 1; all operations of the window (item and miss) weigh.
    others = binomial_pmf(clients - 1, share)
    k = np.arange(clients + 1)
    pk = np.zeros(clients + 1)
    pk[1:] += share * others
    pk[:-1] += (1.0 - share) * others
    all_ops = ops / share
    response_ms = (
        (k[None, :] * item_ns[:, None] + (clients - k)[None, :] * miss_ns[:, None]) / threads / 1e6
    )
    weights = all_ops[:, None] * pk[None, :]
    return weighted_percentile(response_ms.ravel(), weights.ravel(), 0.95)


def rows(store: Path, clients: int, threads: int, get_hits: float = 1.0) -> list[dict[str, Any]]:
    out = []
    for name, paper in TABLE4_P95_MS.items():
        # A repro store's run, or a `tierscope run` output directory named after it.
        run = store / "runs" / f"base={name}"
        if not run.is_dir():
            run = store / name
        if not (run / "metrics.json").is_file():
            print(f"{run}: no metrics.json (not run)", file=sys.stderr)
            continue
        metrics = json.loads((run / "metrics.json").read_text())
        for label, p in metrics["policies"].items():
            monitor = p.get("monitor")
            if monitor not in paper:
                continue
            s = p["summary"]
            arrays = dict(np.load(run / f"arrays-policy-{label.replace('@', '_')}.npz"))
            keep = counted(arrays, s["app_ns"])
            # Accesses per operation, from the summary's operations per second of
            # application time over the counted windows.
            per_op = arrays["windows.accesses"][keep].sum() / (
                s["ops_per_s"] * arrays["windows.app_ns"][keep].sum() / 1e9
            )
            share = item_share(get_hits) if name.startswith("memtier") else 1.0
            loop = closed_loop_p95_ms(arrays, keep, per_op, clients, threads, share)
            out.append(
                {
                    "experiment": name,
                    "monitor": monitor,
                    "item_share": share,
                    "service_p95_ms": s["op_latency_ns"][1] / 1e6,
                    "closed_loop_p95_ms": loop,
                    "paper_memcached_ms": paper[monitor][0],
                    "paper_redis_ms": paper[monitor][1],
                }
            )
    return out


def verdict(ours: float, paper: float) -> str:
    return "within 10 %" if abs(ours - paper) <= TOLERANCE * paper else f"{ours / paper:.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="*", type=Path)
    ap.add_argument("--clients", type=int, default=170, help="Table 3: 170 threads")
    ap.add_argument("--server-threads", type=int, default=1, help="FIFO servers (Redis: 1)")
    ap.add_argument(
        "--get-hits",
        type=float,
        default=1.0,
        help="share of memtier's GETs that find their item (default 1: every operation "
        "moves its item; 0: only the SETs of memtier's 1:10 do)",
    )
    ap.add_argument(
        "--gaussian-hits",
        type=float,
        metavar="OPS_PER_S",
        help="print the share of memtier's GETs that hit over a 40-minute run at OPS_PER_S "
        "from an empty store (Table 3's Gaussian) and exit",
    )
    args = ap.parse_args(argv)
    if args.gaussian_hits is not None:
        if not args.gaussian_hits > 0:
            ap.error(f"--gaussian-hits must be a positive rate, not {args.gaussian_hits:g}")
        hits = gaussian_get_hits(args.gaussian_hits, 2400.0)
        print(f"{args.gaussian_hits:g} ops/s, 2,400 s, empty store: GETs hitting {hits:.4f}")
        return 0
    if not args.stores:
        ap.error("name at least one store (a repro telescope-tiering output directory)")
    if not 0.0 <= args.get_hits <= 1.0:
        ap.error(f"--get-hits must be in [0, 1], not {args.get_hits}")
    missing = [str(s) for s in args.stores if not s.is_dir()]
    if missing:
        ap.error(f"not a directory (a repro telescope-tiering store): {', '.join(missing)}")
    for store in args.stores:
        print(
            f"{store}: {args.clients} clients, {args.server_threads} server thread(s), "
            f"memtier GETs hitting {args.get_hits:g} "
            f"(item operations {item_share(args.get_hits):.3f} of memtier's)"
        )
        print(
            f"{'experiment':20} {'monitor':14} {'service p95':>11} {'closed loop':>11} "
            f"{'Memcached':>18} {'Redis':>18}"
        )
        for r in rows(store, args.clients, args.server_threads, args.get_hits):
            loop, mc, rd = r["closed_loop_p95_ms"], r["paper_memcached_ms"], r["paper_redis_ms"]
            print(
                f"{r['experiment']:20} {r['monitor']:14} {r['service_p95_ms']:11.2f} "
                f"{loop:11.1f} {mc:7.1f} {verdict(loop, mc):>10} {rd:7.1f} {verdict(loop, rd):>10}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
