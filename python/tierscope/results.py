"""What a run returns: per monitor, numpy arrays of its windows, snapshots and truth;
per tiering policy run, numpy arrays of its performance windows; and the metrics in the
layout of `metrics.json`.

The Rust side (crates/tierscope-py/src/convert.rs) sends the monitors' arrays as
little-endian bytes; the dtypes below must match it. Policy runs' windows are few and
come as lists of dicts, turned into arrays here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tierscope.experiment import Experiment

WINDOW_DTYPES: dict[str, str] = {
    "start_ns": "<u8",
    "end_ns": "<u8",
    "precision": "<f8",
    "recall": "<f8",
    "f1": "<f8",
    "reported_hot_bytes": "<u8",
    "true_hot_bytes": "<u8",
    "nr_regions": "<u4",
    "cycles": "<f8",
}
SNAPSHOT_DTYPES: dict[str, str] = {
    "offsets": "<u8",
    "start_ns": "<u8",
    "end_ns": "<u8",
    "start": "<u8",
    "end": "<u8",
    "nr_accesses": "<u4",
    "age": "<u4",
}
TRUTH_DTYPES: dict[str, str] = {"offsets": "<u8", "start": "<u8", "end": "<u8"}
#: Per-window columns of a policy run: one value per window.
POLICY_WINDOW_DTYPES: dict[str, str] = {
    "end_ns": "<u8",
    "accesses": "<f8",
    "app_ns": "<f8",
    "all_fast_ns": "<f8",
    "all_slow_ns": "<f8",
}
#: Per-window, per-tier columns of a policy run: arrays of shape (windows, tiers).
POLICY_TIER_DTYPES: dict[str, str] = {
    "served": "<f8",
    "latency_ns": "<f8",
    "placed": "<u8",
    "copied": "<f8",
}

Array = npt.NDArray[Any]


def _arrays(raw: dict[str, bytes], dtypes: dict[str, str]) -> dict[str, Array]:
    # frombuffer shares the bytes object's memory: no copy, read-only arrays.
    return {key: np.frombuffer(raw[key], dtype=dtype) for key, dtype in dtypes.items()}


@dataclass(frozen=True)
class Snapshots:
    """Every snapshot of one monitor, flattened: window `i` owns regions
    `offsets[i]:offsets[i + 1]` of `start`, `end`, `nr_accesses` and `age`."""

    offsets: Array
    start_ns: Array
    end_ns: Array
    start: Array
    end: Array
    nr_accesses: Array
    age: Array

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def regions(self, i: int) -> dict[str, Array]:
        """The regions of window `i`: start, end (addresses), nr_accesses, age."""
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return {
            "start": self.start[lo:hi],
            "end": self.end[lo:hi],
            "nr_accesses": self.nr_accesses[lo:hi],
            "age": self.age[lo:hi],
        }


@dataclass(frozen=True)
class Truth:
    """The truly hot blocks of each window, flattened like `Snapshots`: half-open
    intervals `[start, end)` of block numbers (address // block_size)."""

    offsets: Array
    start: Array
    end: Array
    block_size: int

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def intervals(self, i: int) -> tuple[Array, Array]:
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.start[lo:hi], self.end[lo:hi]


def _finite_or_none(v: Any) -> Any:
    # metrics.json must be strict JSON, which has no NaN or infinity.
    return None if isinstance(v, float) and not math.isfinite(v) else v


@dataclass(frozen=True)
class MonitorResult:
    name: str
    kind: str
    #: sample, aggr and ops_update, in nanoseconds.
    intervals: dict[str, int]
    #: Means after warm-up and totals (precision, recall, f1, cycles, cpu_percent, ...).
    summary: dict[str, Any]
    #: Raw cost counters (entries_read, bits_cleared, flushes_page, ...).
    cost: dict[str, int]
    #: Counters of the workload's side of the machine (accesses, TLB hits, walks, ...).
    machine: dict[str, int]
    #: The workload's modelled slowdown by cause (extra walks, shootdowns, ...).
    impact: dict[str, Any]
    #: Real CPU time of the monitor's wake-ups on the run thread, ns, on the kvm engine
    #: (0 on the simulated engines, whose outputs stay reproducible).
    monitor_cpu_ns: int
    #: Per-window series, one array per column (keys of `WINDOW_DTYPES`).
    windows: dict[str, Array]
    snapshots: Snapshots
    truth: Truth
    #: How a real program ended (exit status, time, system calls); None for synthetic
    #: workloads.
    program: str | None = None
    #: The real program's exit status (8 bits); None when it was stopped at the run's end
    #: or for synthetic workloads.
    program_status: int | None = None
    #: On the kvm engine: the guards' figures and verdict (valid, invalid_reason,
    #: rate_requested, rate_achieved, windows_stretched, the ACCESSED probe, ...;
    #: docs/models/KVM.md); None on the simulated engines.
    kvm: dict[str, Any] | None = None
    #: What its snapshots' `nr_accesses` count: access_checks, samples, counter_reads,
    #: hint_faults or writes (docs/models/TIERING.md, feed kinds); None in a run directory
    #: written before it was recorded.
    feed: str | None = None

    @property
    def valid(self) -> bool:
        """False when the kvm engine fell short of what was asked (docs/models/KVM.md); the
        scores are kept all the same."""
        return bool(self.kvm.get("valid", True)) if self.kvm else True

    @property
    def invalid_reason(self) -> str | None:
        """Why the run is not valid (one line with the numbers), None when it is."""
        return None if self.valid or not self.kvm else self.kvm.get("invalid_reason")

    @property
    def nr_windows(self) -> int:
        return len(self.windows["start_ns"])

    def window_records(self) -> list[dict[str, Any]]:
        """The per-window series as a list of dicts (the layout of metrics.json)."""
        columns = {k: v.tolist() for k, v in self.windows.items()}
        return [
            {k: _finite_or_none(columns[k][i]) for k in columns} for i in range(self.nr_windows)
        ]

    def metrics(self) -> dict[str, Any]:
        """This monitor's entry of metrics.json: the summary fields first (precision,
        recall, f1, cycles, cpu_percent, bits_cleared, entries_read, ...), valid and
        invalid_reason, then kind, feed, intervals, cost, machine, impact, monitor_cpu_ns, on
        kvm the guards' figures (`kvm`), and windows."""
        out: dict[str, Any] = {k: _finite_or_none(v) for k, v in self.summary.items()}
        out["valid"] = self.valid
        out["invalid_reason"] = self.invalid_reason
        out["kind"] = self.kind
        if self.feed is not None:
            out["feed"] = self.feed
        out["intervals"] = dict(self.intervals)
        out["cost"] = dict(self.cost)
        out["machine"] = dict(self.machine)
        out["impact"] = dict(self.impact)
        out["monitor_cpu_ns"] = self.monitor_cpu_ns
        if self.program is not None:
            out["program"] = self.program
            out["program_status"] = self.program_status
        if self.kvm is not None:
            out["kvm"] = {k: _finite_or_none(v) for k, v in self.kvm.items()}
        out["windows"] = self.window_records()
        return out


@dataclass(frozen=True)
class PolicyResult:
    """One run of a tiering policy: `name` is the policy's name, or `policy@monitor` for a
    policy fed by a monitor (one run per monitor)."""

    name: str
    #: The policy's name in the experiment (`policies[i].name`, default its type).
    policy: str
    #: Its type: telescope-rule, damos, oracle, static.
    kind: str
    #: The monitor feeding it, None for policies fed by nothing (static) or the truth
    #: (oracle).
    monitor: str | None
    #: app_ns, all_fast_ns, all_slow_ns, throughput, speedup_over_slow, gap_to_oracle
    #: (None without an oracle), fast_hit_ratio, migration_cpu_ns, monitor_cpu_ns.
    summary: dict[str, Any]
    #: promoted_bytes, demoted_bytes, pages, rounds, refused_bytes, shootdowns, cpu_ns,
    #: stall_ns, splits and collapses (of huge pages).
    migration: dict[str, Any]
    #: Per performance window: the keys of `POLICY_WINDOW_DTYPES` as 1-D arrays and of
    #: `POLICY_TIER_DTYPES` as 2-D arrays indexed [window, tier] (tier 0 the fastest).
    windows: dict[str, Array]
    #: The neighbour tenant (`[tiering.neighbour]`), None without one: name, telemetry,
    #: bandwidth, served_bandwidth, on_phases, detected, detection_ns, start_quota,
    #: readings, telemetry_cpu_ns, bandwidth_error.
    neighbour: dict[str, Any] | None = None

    @property
    def nr_windows(self) -> int:
        return len(self.windows["end_ns"])

    @property
    def nr_tiers(self) -> int:
        return int(self.windows["served"].shape[1])

    @classmethod
    def from_raw(cls, raw: dict[str, Any], nr_tiers: int) -> PolicyResult:
        """From one entry of the Rust result's "policies" list; `nr_tiers` shapes the 2-D
        arrays when there is no window."""
        ws: list[dict[str, Any]] = raw["windows"]
        windows = {
            k: np.array([w[k] for w in ws], dtype=dt) for k, dt in POLICY_WINDOW_DTYPES.items()
        }
        for k, dt in POLICY_TIER_DTYPES.items():
            windows[k] = np.array([w[k] for w in ws], dtype=dt).reshape(len(ws), nr_tiers)
        return cls(
            name=raw["name"],
            policy=raw["policy"],
            kind=raw["kind"],
            monitor=raw["monitor"],
            summary=dict(raw["summary"]),
            migration=dict(raw["migration"]),
            windows=windows,
            neighbour=raw.get("neighbour"),
        )

    def metrics(self) -> dict[str, Any]:
        """This run's entry of metrics.json: policy, kind, monitor, summary and migration
        (the windows are in arrays-policy-<name>.npz)."""
        out = {
            "policy": self.policy,
            "kind": self.kind,
            "monitor": self.monitor,
            "summary": {k: _finite_or_none(v) for k, v in self.summary.items()},
            "migration": dict(self.migration),
        }
        if self.neighbour is not None:
            out["neighbour"] = {k: _finite_or_none(v) for k, v in self.neighbour.items()}
        return out


#: The columns of `MonitorResult.metrics()` that are not summary fields.
_NOT_SUMMARY = (
    "kind",
    "feed",
    "intervals",
    "cost",
    "machine",
    "impact",
    "monitor_cpu_ns",
    "program",
    "program_status",
    "valid",
    "invalid_reason",
    "kvm",
    "windows",
)


class RunResult:
    """The outcome of `tierscope.run` (or `tierscope.load`): `.metrics` (the metrics.json
    document), `.monitors[name]` (a `MonitorResult` with numpy arrays) and, for an
    experiment with `[tiering]`, `.policies[run name]` (a `PolicyResult`). The same as
    polars DataFrames: `monitors_df()` and `policies_df()` (a sweep's tables for one
    run), `windows_df()`, `snapshots_df()`, `truth_df()` (addresses in bytes in both) and
    `policy_windows_df()`."""

    def __init__(
        self,
        experiment: Experiment,
        duration_ns: int,
        block_size: int,
        heap: dict[str, int],
        mappings: list[dict[str, Any]],
        monitors: dict[str, MonitorResult],
        policies: dict[str, PolicyResult] | None = None,
    ) -> None:
        self.experiment = experiment
        self.duration_ns = duration_ns
        self.block_size = block_size
        #: The workload's memory: {"start", "end"} addresses.
        self.heap = heap
        self.mappings = mappings
        self.monitors = monitors
        #: Tiering policy runs by name (empty without `[tiering]`), in the run's order.
        self.policies: dict[str, PolicyResult] = policies or {}
        self._metrics: dict[str, Any] | None = None

    @classmethod
    def from_raw(cls, experiment: Experiment, raw: dict[str, Any]) -> RunResult:
        """From the dict the Rust run returns (crates/tierscope-py/src/convert.rs)."""
        monitors = {}
        for m in raw["monitors"]:
            monitors[m["name"]] = MonitorResult(
                name=m["name"],
                kind=m["kind"],
                intervals=m["intervals"],
                summary=m["summary"],
                cost=m["cost"],
                machine=m["machine"],
                impact=m.get("impact", {}),
                monitor_cpu_ns=m.get("monitor_cpu_ns", 0),
                windows=_arrays(m["windows"], WINDOW_DTYPES),
                snapshots=Snapshots(**_arrays(m["snapshots"], SNAPSHOT_DTYPES)),
                truth=Truth(**_arrays(m["truth"], TRUTH_DTYPES), block_size=raw["block_size"]),
                program=m.get("program"),
                program_status=m.get("program_status"),
                kvm=m.get("kvm"),
                feed=m.get("feed"),
            )
        policies = {}
        raw_policies = raw.get("policies") or []
        n_tiers = nr_tiers(experiment) if raw_policies else 0
        for p in raw_policies:
            policies[p["name"]] = PolicyResult.from_raw(p, n_tiers)
        return cls(
            experiment,
            raw["duration_ns"],
            raw["block_size"],
            raw["heap"],
            raw["mappings"],
            monitors,
            policies,
        )

    @classmethod
    def from_saved(
        cls,
        experiment: Experiment,
        metrics: dict[str, Any],
        arrays: dict[str, dict[str, Array]],
        policy_arrays: dict[str, dict[str, Array]] | None = None,
    ) -> RunResult:
        """From a run directory's metrics.json, each monitor's saved arrays
        (`save_arrays`) and each policy run's (`save_policy_arrays`)."""
        block_size = metrics["block_size"]
        monitors = {}
        for name, m in metrics["monitors"].items():
            saved = arrays[name]

            def pick(prefix: str, dtypes: dict[str, str], a: dict[str, Array] = saved) -> dict:
                return {k: a[f"{prefix}.{k}"].astype(dt) for k, dt in dtypes.items()}

            monitors[name] = MonitorResult(
                name=name,
                kind=m["kind"],
                intervals=m["intervals"],
                summary={k: v for k, v in m.items() if k not in _NOT_SUMMARY},
                cost=m["cost"],
                machine=m["machine"],
                impact=m["impact"],
                monitor_cpu_ns=m["monitor_cpu_ns"],
                windows=pick("windows", WINDOW_DTYPES),
                snapshots=Snapshots(**pick("snapshots", SNAPSHOT_DTYPES)),
                truth=Truth(**pick("truth", TRUTH_DTYPES), block_size=block_size),
                program=m.get("program"),
                program_status=m.get("program_status"),
                kvm=m.get("kvm"),
                feed=m.get("feed"),
            )
        policies = {}
        for name, p in (metrics.get("policies") or {}).items():
            saved = (policy_arrays or {})[name]
            dtypes = POLICY_WINDOW_DTYPES | POLICY_TIER_DTYPES
            policies[name] = PolicyResult(
                name=name,
                policy=p["policy"],
                kind=p["kind"],
                monitor=p["monitor"],
                summary=dict(p["summary"]),
                migration=dict(p["migration"]),
                windows={k: saved[f"windows.{k}"].astype(dt) for k, dt in dtypes.items()},
                neighbour=p.get("neighbour"),
            )
        return cls(
            experiment,
            metrics["duration_ns"],
            block_size,
            metrics["heap"],
            metrics["mappings"],
            monitors,
            policies,
        )

    @property
    def metrics(self) -> dict[str, Any]:
        """The metrics.json document. Keys are stable: more may be added, none renamed."""
        if self._metrics is None:
            self._metrics = {
                "experiment": self.experiment.to_dict(),
                "duration_ns": self.duration_ns,
                "block_size": self.block_size,
                "heap": dict(self.heap),
                "mappings": self.mappings,
                "monitors": {name: m.metrics() for name, m in self.monitors.items()},
                "policies": {name: p.metrics() for name, p in self.policies.items()},
            }
        return self._metrics

    # --- tables (polars DataFrames) ------------------------------------------------

    def _monitors(self, monitor: str | None) -> list[MonitorResult]:
        if monitor is None:
            return list(self.monitors.values())
        if monitor not in self.monitors:
            raise KeyError(f"no monitor {monitor!r}; the run has {', '.join(self.monitors)}")
        return [self.monitors[monitor]]

    def windows_df(self) -> Any:
        """Every monitor's windows, one row each: monitor, window (0, 1, ...), then the
        columns of `WINDOW_DTYPES` (times in ns, sizes in bytes)."""
        import polars as pl

        frames = [
            pl.DataFrame(
                {"monitor": m.name, "window": np.arange(m.nr_windows, dtype=np.uint32)}
                | {k: m.windows[k] for k in WINDOW_DTYPES}
            )
            for m in self.monitors.values()
        ]
        return pl.concat(frames) if frames else pl.DataFrame()

    def snapshots_df(self, monitor: str | None = None) -> Any:
        """The regions the monitors (or `monitor`) reported, one row each: monitor,
        window, the window's start_ns and end_ns, the region's start_addr and end_addr
        (bytes, half-open), nr_accesses and age."""
        import polars as pl

        frames = []
        for m in self._monitors(monitor):
            s = m.snapshots
            window = np.repeat(
                np.arange(len(s), dtype=np.uint32), np.diff(s.offsets.astype(np.int64))
            )
            frames.append(
                pl.DataFrame(
                    {
                        "monitor": m.name,
                        "window": window,
                        "start_ns": s.start_ns[window],
                        "end_ns": s.end_ns[window],
                        "start_addr": s.start,
                        "end_addr": s.end,
                        "nr_accesses": s.nr_accesses,
                        "age": s.age,
                    }
                )
            )
        return pl.concat(frames)

    def truth_df(self, monitor: str | None = None) -> Any:
        """The truly hot memory of each window, per monitor (or `monitor`): monitor,
        window, start_addr and end_addr in bytes like `snapshots_df` (the truth's block
        numbers times `block_size`)."""
        import polars as pl

        frames = []
        for m in self._monitors(monitor):
            t = m.truth
            window = np.repeat(
                np.arange(len(t), dtype=np.uint32), np.diff(t.offsets.astype(np.int64))
            )
            bs = np.uint64(t.block_size)
            frames.append(
                pl.DataFrame(
                    {
                        "monitor": m.name,
                        "window": window,
                        "start_addr": t.start * bs,
                        "end_addr": t.end * bs,
                    }
                )
            )
        return pl.concat(frames)

    def policies_df(self) -> Any:
        """One row per tiering policy run, in the columns of a sweep's policy table
        (`tierscope.load_sweep(DIR, "policies")` without run_id and parameters):
        policy_run, policy, policy_kind, monitor, speedup_over_slow, gap_to_oracle, ...,
        promoted_bytes, demoted_bytes, .... Empty without `[tiering]`."""
        import polars as pl
        import pyarrow as pa

        from tierscope.sweep.store import POLICY_COLUMNS, policy_row

        rows = [policy_row(name, p.metrics()) for name, p in self.policies.items()]
        return pl.from_arrow(pa.Table.from_pylist(rows, schema=pa.schema(POLICY_COLUMNS)))

    def monitors_df(self) -> Any:
        """One row per monitor, in the columns of a sweep's monitor table
        (`tierscope.load_sweep(DIR)` without run_id and parameters): monitor, kind,
        precision, recall, f1, cycles, cpu_percent, ...."""
        import polars as pl
        import pyarrow as pa

        from tierscope.sweep.store import MONITOR_COLUMNS, monitor_row

        rows = [monitor_row(name, m.metrics()) for name, m in self.monitors.items()]
        return pl.from_arrow(pa.Table.from_pylist(rows, schema=pa.schema(MONITOR_COLUMNS)))

    def policy_windows_df(self) -> Any:
        """Every policy run's performance windows, one row per window and tier: policy_run,
        window, tier (its name, fastest first), the window's end_ns, accesses, app_ns,
        all_fast_ns and all_slow_ns, and the tier's served (accesses), latency_ns,
        placed_bytes (heap on the tier at the window's end) and copied_bytes."""
        import polars as pl

        names = [t.get("name", str(i)) for i, t in enumerate(tiers(self.experiment))]
        frames = []
        for name, p in self.policies.items():
            w, n = p.windows, p.nr_tiers
            frames.append(
                pl.DataFrame(
                    {
                        "policy_run": name,
                        "window": np.repeat(np.arange(p.nr_windows, dtype=np.uint32), n),
                        "tier": np.tile(np.array(names[:n], dtype=object), p.nr_windows),
                    }
                    | {k: np.repeat(w[k], n) for k in POLICY_WINDOW_DTYPES}
                    | {
                        "served": w["served"].ravel(),
                        "latency_ns": w["latency_ns"].ravel(),
                        "placed_bytes": w["placed"].ravel(),
                        "copied_bytes": w["copied"].ravel(),
                    }
                )
            )
        return pl.concat(frames) if frames else pl.DataFrame()

    def __repr__(self) -> str:
        policies = f", policies={list(self.policies)}" if self.policies else ""
        return (
            f"RunResult(experiment={self.experiment.name!r}, monitors={list(self.monitors)}"
            f"{policies})"
        )


def tiers(experiment: Experiment) -> list[dict[str, Any]]:
    """The experiment's memory tiers, fastest first, as normalized (name, capacity in
    bytes, latency_ns, bandwidth, queueing); empty without `[tiering]`."""
    tiering = experiment.to_dict().get("tiering") or {}
    found: list[dict[str, Any]] = tiering.get("tiers") or []
    return found


def nr_tiers(experiment: Experiment) -> int:
    return len(tiers(experiment))


def save_arrays(m: MonitorResult, path: Path) -> None:
    """Writes the monitor's windows, snapshots and truth arrays as one .npz file (keys
    `windows.<column>`, `snapshots.<column>`, `truth.<column>`)."""
    snap = m.snapshots
    columns: dict[str, Array] = {f"windows.{k}": v for k, v in m.windows.items()}
    columns |= {f"snapshots.{k}": getattr(snap, k) for k in SNAPSHOT_DTYPES}
    columns |= {f"truth.{k}": getattr(m.truth, k) for k in TRUTH_DTYPES}
    with path.open("wb") as f:
        np.savez_compressed(f, **columns)  # type: ignore[arg-type]


def save_policy_arrays(p: PolicyResult, path: Path) -> None:
    """Writes a policy run's per-window arrays as one .npz file (keys `windows.<column>`;
    the per-tier columns are 2-D, [window, tier])."""
    columns = {f"windows.{k}": v for k, v in p.windows.items()}
    with path.open("wb") as f:
        np.savez_compressed(f, **columns)  # type: ignore[arg-type]


def load_arrays(path: Path) -> dict[str, Array]:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}
