"""A digest of what shipped experiments produce, to show a change of structure leaves
behaviour alone: run it before and after, and compare the two files.

Runs each experiment of `CASES` (every simulated engine, every monitor and policy, NEMO,
Cori's periodic policy, a trace, a sweep and Cori's tuner) with its duration capped, and
hashes the outputs: the metrics (minus real-time measurements) and every array of every
monitor and policy run. The kvm engine runs in real time, so its outputs are not
reproducible: its case records only the shape of the result (monitors, windows' keys).

    python scripts/digest_outputs.py --out before.json
    ... change ...
    python scripts/digest_outputs.py --out after.json --compare before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import tierscope
from tierscope.experiment import load_experiment

ROOT = Path(__file__).resolve().parent.parent

#: (experiment, duration cap in seconds). Together: engines exact and stat (kvm below),
#: monitors damon, telescope, scan, pebs, split-hint, pruned-walk, nemo, nemo_rule,
#: numa_hint, pml; policies telescope-rule, damos, hemem, memtis, colloid, tpp, periodic,
#: oracle, static; a trace; THP; 5-level paging.
CASES: list[tuple[str, float]] = [
    ("default.toml", 3),
    ("heap-1g.toml", 3),
    ("heap-10g-1m.toml", 3),
    ("heap-64g-thp.toml", 3),
    ("telescope-flush.toml", 3),
    ("densities.toml", 3),
    ("baselines/pebs-large-hot.toml", 3),
    ("baselines/scan-cost-1g.toml", 3),
    ("baselines/flush-small.toml", 3),
    ("fidelity/two-hot-64g.toml", 3),
    ("paper/multiphase-5t.toml", 30),
    ("paper/needle-5t-thp.toml", 20),
    ("paper/petabyte-1p.toml", 10),
    ("paper/subtb-100g.toml", 20),
    ("split-hint/sparse-hot.toml", 5),
    ("split-hint/phase-hop.toml", 20),
    ("pruned-walk/sparse-4k.toml", 5),
    ("pruned-walk/large-hot.toml", 10),
    ("nemo/hotset-recovery.toml", 20),
    ("nemo/beside-telescope-100g.toml", 20),
    ("tiering/colloid-antagonist.toml", 10),
    ("tiering/cori-periodic.toml", 2),
    ("tiering/memtier-gaussian-1t.toml", 30),
    ("tiering/tpp-vs-telemetry-64g.toml", 30),
    ("tiering/ycsb-hotspot-2t.toml", 30),
    ("traces/kv-like-redis-benchmark.toml", 3),
]

#: Real-time measurements that differ run to run even on the simulated engines, and the
#: kvm engine's verdict on its own real-time run (always valid on the simulated ones).
VOLATILE = {"monitor_cpu_ns", "valid", "invalid_reason", "kvm"}
#: The experiment as given, echoed into metrics.json: input, not behaviour (a new field
#: with its default changes the echo, not what runs).
ECHO = "experiment"


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _hash_arrays(h: Any, arrays: dict[str, Any]) -> None:
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        h.update(key.encode())
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())


def digest(result: tierscope.RunResult) -> str:
    h = hashlib.sha256()
    metrics = {k: v for k, v in result.metrics.items() if k != ECHO}
    h.update(json.dumps(_scrub(metrics), sort_keys=True).encode())
    for name, m in sorted(result.monitors.items()):
        h.update(name.encode())
        _hash_arrays(h, m.windows)
        _hash_arrays(h, vars(m.snapshots))
        _hash_arrays(h, {k: v for k, v in vars(m.truth).items() if k != "block_size"})
    for name, p in sorted(result.policies.items()):
        h.update(name.encode())
        _hash_arrays(h, {k: v for k, v in vars(p).items() if isinstance(v, np.ndarray)})
    return h.hexdigest()


def capped(path: Path, cap_s: float) -> dict[str, Any]:
    doc = load_experiment(path).to_dict()
    cap_ns = int(cap_s * 1e9)
    duration = load_experiment(path).duration_ns
    if duration > cap_ns:
        doc["duration"] = f"{cap_ns}ns"
    return doc


def run_cases() -> dict[str, str]:
    out = {}
    for name, cap in CASES:
        result = tierscope.run(capped(ROOT / "experiments" / name, cap), progress=False)
        out[name] = digest(result)
        print(f"{name}: {out[name][:16]}", file=sys.stderr)
    return out


def sweep_case() -> str:
    from tierscope.sweep import load_sweep, run_sweep

    spec = {
        "base": str(ROOT / "experiments" / "heap-1g.toml"),
        "set": {"duration": "2s"},
        "axes": [{"path": "monitors[0].aggr", "values": ["100ms", "200ms"]}],
        "seeds": [1, 2],
    }
    with tempfile.TemporaryDirectory() as d:
        run_sweep(spec, Path(d) / "s", progress=False)
        df = load_sweep(Path(d) / "s").sort(["run_id", "monitor"])
    cols = [c for c in df.columns if c not in VOLATILE and not c.startswith("wall")]
    return hashlib.sha256(df.select(cols).write_csv().encode()).hexdigest()


def tune_case() -> str:
    from tierscope import cori

    # Tune the first monitor's aggregation interval of a short run by its f1 score (the
    # shape of `tierscope tune`): one run per candidate.
    path = ROOT / "experiments" / "heap-1g.toml"
    doc = capped(path, 2)

    def cost(value: object) -> float:
        d = json.loads(json.dumps(doc))
        d["monitors"][0]["aggr"] = f"{value}ns"
        r = tierscope.run(d, progress=False)
        return 1.0 - float(next(iter(r.metrics["monitors"].values()))["f1"])

    t = cori.tune_experiment(path, "monitors[0].aggr", cost, values=[100_000_000, 200_000_000])
    return hashlib.sha256(json.dumps(t.as_json(), sort_keys=True).encode()).hexdigest()


def kvm_case() -> str:
    from tierscope import _core

    if _core.kvm_unavailable() is not None:
        return "skipped: " + str(_core.kvm_unavailable())
    result = tierscope.run(capped(ROOT / "experiments" / "kvm-16g.toml", 1), progress=False)
    shape = {n: sorted(m.windows) for n, m in result.monitors.items()}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the digests (JSON)")
    ap.add_argument("--compare", type=Path, help="an earlier digest file to compare with")
    args = ap.parse_args()
    digests = run_cases()
    for name, fn in [("sweep", sweep_case), ("tune", tune_case), ("kvm shape", kvm_case)]:
        digests[name] = fn()
        print(f"{name}: {digests[name][:16]}", file=sys.stderr)
    args.out.write_text(json.dumps(digests, indent=1) + "\n")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = [k for k in sorted(set(before) | set(digests)) if before.get(k) != digests.get(k)]
    for k in differ:
        print(f"differs: {k}", file=sys.stderr)
    print(f"{len(digests) - len(differ)} of {len(digests)} identical", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
