"""`tierscope measure apps`: the application model's inputs (`[tiering] app`: CPU time per
access `compute_ns`, memory-level parallelism `mlp`) measured on real Redis and memcached
running natively here, written with their provenance to experiments/tiering/apps/.

How each input is measured or derived (docs/models/TIERING.md section 4.1):
- **Server CPU time per operation** `c`: utime + stime of the server process over a run
  of the mix at the experiment's value size, divided by the operations answered; the
  median of `reps` runs, interleaved between a store far larger than the last-level cache
  (`large`) and one that fits in it (`small`), so both see the same neighbours' load.
- **Memory latency here** `L`: a dependent pointer chase (programs/chase.c), over as many
  bytes as each store.
- **Accesses per operation** `A`: the key-value model's count (the bucket and every line of
  the item). Checked, not set, by the valgrind trace (lackey.py): the store lines an
  operation touches in user space.
- **Memory-level parallelism**: the store's memory time per operation is
  `d = c_large - c_small`, the median of the paired runs' differences (each pair run back
  to back, so both see the same neighbours), made of `A` accesses each waiting
  `L_large - L_small` more than in the smaller store, `mlp` at a time:
  `mlp = A (L_large - L_small) / d`. A median at or below 0 is not resolved (no memory
  time seen): `mlp` is then the lower bound given by the interval's upper end.
- **The most memory-bound reading** (`[app_bound]`): the same with `d` at the upper end of
  the median's distribution-free interval (the second-largest of 7 pairs: about 88 %
  confidence), the tiering gains it gives an upper bound for what the measurement allows.
- **CPU time per access** `compute_ns = c_large / A - L_large / mlp`: what is left of the
  large store's time once the memory time is taken out, so that the model at this host's
latency gives the measured `c_large` again (by construction: not a check)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from tierscope.apps import lackey, loadgen
from tierscope.apps.servers import Server, ServerSpec, free_port, missing

LINE = 64
#: The key-value model's item header and key (crates/tierscope-core/src/workload/kv.rs).
HEADER, KEY = 56, 32
REPO = Path(__file__).resolve().parents[3]


def model_accesses_per_op(value_size: int) -> int:
    """The kv model's accesses per operation for a GET or SET: its bucket and every line of
    the item (header + key + value, whole lines)."""
    return 1 + -(-(HEADER + KEY + value_size) // LINE)


@dataclass(frozen=True)
class AppPlan:
    """One measured application model: `server` driven by `mix` at `value_size`, the
    large store `keys` keys, the cache-sized one `small_keys`; traced under valgrind with
    `trace_value` bytes over `trace_keys` keys for `trace_ops` operations."""

    name: str
    server: str
    mix: str
    value_size: int
    keys: int
    small_keys: int
    distribution: str
    used_by: tuple[str, ...]
    trace_value: int = 1000
    trace_keys: int = 400
    trace_ops: int = 300

    def load(self, keys: int) -> loadgen.Load:
        return loadgen.Load(
            keys=keys,
            value_size=self.value_size,
            mix=self.mix,
            distribution=self.distribution,
            connections=2,
        )


#: The paper's settings (Telescope section 6.3, Table 3): memcached with memtier's 1:10
#: SET:GET on 5 MB values; Redis with YCSB-B on 2 MB values (also TPP's YCSB-B here).
#: Keys are uniform in the large store so that it stays far beyond the cache (a Gaussian
#: or hotspot over a few hundred keys would fit its hot part in the 32 MiB L3).
PLANS = (
    AppPlan(
        "memcached-memtier",
        "memcached",
        "memtier",
        5_000_000,
        100,
        2,
        "uniform",
        ("experiments/tiering/measured/memtier-gaussian-1t.toml",),
    ),
    AppPlan(
        "redis-ycsb-b",
        "redis",
        "ycsb-b",
        2_000_000,
        250,
        4,
        "uniform",
        (
            "experiments/tiering/measured/ycsb-hotspot-2t.toml",
            "experiments/tiering/measured/tpp-vs-telemetry-64g.toml",
        ),
    ),
)


#: The sizes of an AppPlan a measurement file records (`--quick` changes them).
PLAN_SIZES = ("value_size", "keys", "small_keys", "trace_value", "trace_keys", "trace_ops")


@dataclass
class Measured:
    plan: AppPlan
    reps: int
    seconds: float
    c_large: list[float] = field(default_factory=list)
    c_small: list[float] = field(default_factory=list)
    ops_large: list[float] = field(default_factory=list)
    latency_large: float = math.nan
    latency_small: float = math.nan
    trace: lackey.OpStats | None = None
    benchmark: dict[str, float] = field(default_factory=dict)

    @property
    def accesses(self) -> int:
        return model_accesses_per_op(self.plan.value_size)

    def derive(self) -> Derived:
        return derive(
            self.accesses, self.c_large, self.c_small, self.latency_large, self.latency_small
        )


@dataclass(frozen=True)
class Derived:
    """The model's inputs from one measurement (module docstring): `mlp` and `compute_ns`
    from the median paired difference `stall_ns` (`resolved` False when it was not above
    0 and the interval's upper end was used), and the most memory-bound reading
    `bound_mlp`, `bound_compute_ns` from the interval's upper end `stall_high_ns`."""

    mlp: float
    compute_ns: float
    resolved: bool
    stall_ns: float
    stall_high_ns: float
    bound_mlp: float
    bound_compute_ns: float


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """(low, median, high): the median and the distribution-free interval between the
    second-smallest and second-largest values (about 88 % for 7, 97 % for 10); the
    extremes when there are fewer than 5."""
    v = sorted(values)
    k = 1 if len(v) >= 5 else 0
    return v[k], statistics.median(v), v[-1 - k]


def derive(
    accesses: int,
    c_large: list[float],
    c_small: list[float],
    latency_large: float,
    latency_small: float,
) -> Derived:
    """The model's inputs from CPU ns per operation over the large and the small store's
    paired runs and the dependent-load latency over each store's size."""
    large = statistics.median(c_large)
    _, diff, high = median_interval([a - b for a, b in zip(c_large, c_small, strict=True)])
    lat = max(1.0, latency_large - latency_small)
    resolved = diff > 0
    high = max(high, diff, 1.0)

    def model(stall: float) -> tuple[float, float]:
        mlp = max(1.0, accesses * lat / stall)
        return mlp, max(0.0, large / accesses - latency_large / mlp)

    mlp, compute = model(diff if resolved else high)
    bound_mlp, bound_compute = model(high)
    return Derived(mlp, compute, resolved, diff, high, bound_mlp, bound_compute)


def chase_latency(mib: int, loads: int, workdir: Path) -> float:
    """ns per dependent load over `mib` MiB (programs/chase.c, built here with gcc)."""
    exe = workdir / "chase"
    if not exe.exists():
        subprocess.run(
            ["gcc", "-O2", "-o", str(exe), str(REPO / "programs" / "chase.c")], check=True
        )
    out = subprocess.run(
        [str(exe), str(mib), str(loads)], check=True, capture_output=True, text=True
    ).stdout
    return float(out.split()[1])


def measure_cpu(plan: AppPlan, reps: int, seconds: float) -> Measured:
    """Server CPU per operation over the large and the small store, interleaved."""
    m = Measured(plan, reps, seconds)
    big = plan.load(plan.keys)
    small = replace(plan.load(plan.small_keys), seed=2)
    memory = (plan.keys * (plan.value_size + 4096) >> 20) * 2 + 64
    spec = ServerSpec(
        plan.server, free_port(), max_value=max(8 << 20, plan.value_size * 2), memory_mib=memory
    )
    with Server(spec) as server:
        loadgen.fill(spec.port, spec.protocol, big)
        for _ in range(reps):
            for load, out in ((big, m.c_large), (small, m.c_small)):
                c0, t0 = server.cpu_ns(), time.monotonic()
                n = loadgen.run(spec.port, spec.protocol, load, seconds=seconds)
                dt, c = time.monotonic() - t0, server.cpu_ns() - c0
                out.append(c / max(n, 1))
                if load is big:
                    m.ops_large.append(n / dt)
    return m


def redis_benchmark(plan: AppPlan, requests: int) -> dict[str, float]:
    """redis-benchmark's own client on GETs of the plan's values: its requests per second
    and the server's CPU per request, a check that our generator does not change the
    server's cost per operation."""
    spec = ServerSpec("redis", free_port())
    out: dict[str, float] = {}
    with Server(spec) as server:
        base = [
            "redis-benchmark",
            "-p",
            str(spec.port),
            "-d",
            str(plan.value_size),
            "-r",
            str(plan.keys),
            "-c",
            "2",
            "-q",
            "--csv",
        ]
        subprocess.run(
            [*base, "-n", str(plan.keys * 4), "-t", "set"], check=True, capture_output=True
        )
        c0 = server.cpu_ns()
        res = subprocess.run(
            [*base, "-n", str(requests), "-t", "get"], check=True, capture_output=True, text=True
        ).stdout
        out["cpu_ns_per_get"] = (server.cpu_ns() - c0) / requests
        for row in res.splitlines():
            cells = [c.strip('"') for c in row.split(",")]
            if cells and cells[0] == "GET":
                out["gets_per_s"] = float(cells[1])
    return out


def trace_ops(plan: AppPlan, workdir: Path, ops: int | None = None) -> lackey.OpStats:
    """The server under valgrind lackey: fill `trace_keys` items of `trace_value` bytes
    over one connection, run `trace_ops` operations of the mix, then cut the trace into
    operations at the replies."""
    log = workdir / f"{plan.name}.lackey"
    n_ops = ops or plan.trace_ops
    hard = 1024
    # valgrind keeps 12 descriptors for itself and refuses a change of the hard limit:
    # memcached sets both limits to its connection limit, so that must be valgrind's.
    spec = ServerSpec(plan.server, free_port(), memory_mib=256, max_conns=hard - 12)
    prefix = [
        "valgrind",
        "--tool=lackey",
        "--trace-mem=yes",
        "--trace-syscalls=yes",
        f"--log-file={log}",
    ]
    load = loadgen.Load(
        keys=plan.trace_keys,
        value_size=plan.trace_value,
        mix=plan.mix,
        distribution="uniform",
        connections=1,
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    with Server(spec, prefix=prefix, ready_timeout=600, preexec=limit):
        loadgen.fill(spec.port, spec.protocol, load)
        loadgen.run(spec.port, spec.protocol, load, ops=n_ops)
    with open(log, errors="replace") as f:
        op_lines, accesses = lackey.split_ops(f, skip=plan.trace_keys, count=n_ops)
    log.unlink()
    return lackey.op_stats(op_lines, accesses)


def provenance() -> dict[str, str]:
    load = os.getloadavg()
    model = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()}-core VM ({model}), {platform.system()} "
        f"{platform.release()}, load average {load[0]:.1f} (shared with other jobs)",
        "redis": _version(["redis-server", "--version"]),
        "memcached": _version(["memcached", "-V"]),
    }


def _version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "missing"


def write_app(m: Measured, path: Path, command: str, prov: dict[str, str]) -> None:
    """experiments/tiering/apps/NAME.toml: `[app]` for `[tiering] app = { from = ... }`,
    every number with where it came from."""
    d = m.derive()
    p = m.plan

    def runs(v: list[float]) -> str:
        return ", ".join(f"{x / 1e3:.1f}" for x in v)

    lines = [
        f"# The application model of {p.server} under {loadgen.MIXES[p.mix][1]}, "
        f"{p.value_size:,}-byte values, measured natively by",
        f"#   {command}",
        f"# on {prov['date']}: {prov['machine']}.",
        f"# {prov['redis'] if p.server == 'redis' else prov['memcached']}; loopback, "
        f"our closed-loop client (python/tierscope/apps/loadgen.py, {p.load(1).connections} "
        "connections, one request outstanding each).",
        "# Derivation: python/tierscope/apps/measure.py and docs/models/TIERING.md section 4.1.",
        f"# Used by: {', '.join(p.used_by)}.",
        "#",
        f"# Server CPU per operation (utime + stime / operations), {m.reps} run(s) of "
        f"{m.seconds:g} s each, in us:",
        "#   (paired: the large store's run, then the small one's)",
        f"#   large store ({p.keys} keys, {p.keys * p.value_size / 1e6:,.0f} MB): "
        f"{runs(m.c_large)}; median {statistics.median(m.c_large) / 1e3:.1f}",
        f"#   small store ({p.small_keys} keys, {p.small_keys * p.value_size / 1e6:,.0f} MB): "
        f"{runs(m.c_small)}; median {statistics.median(m.c_small) / 1e3:.1f}",
        f"#   operations per second (large store; bounded by our Python client on 2 shared "
        f"cores): {statistics.median(m.ops_large):,.0f}",
        f"# Dependent-load latency here (programs/chase.c): {m.latency_large:.0f} ns over the "
        f"large store's size, {m.latency_small:.0f} ns over the small one's.",
        f"# Accesses per operation (the kv model's bucket + item lines): {m.accesses:,}.",
    ]
    pairs = [a - b for a, b in zip(m.c_large, m.c_small, strict=True)]
    lines.append(
        f"# Memory time per operation: the median of the pairs' differences "
        f"({runs(pairs)} us), {statistics.median(pairs) / 1e3:.1f} us"
        + (
            f"; the interval's upper end {d.stall_high_ns / 1e3:.1f} us ([app_bound])."
            if d.resolved
            else f", not above 0: mlp is the lower bound from the interval's upper end "
            f"{d.stall_high_ns / 1e3:.1f} us."
        )
    )
    if m.benchmark:
        lines.append(
            f"# redis-benchmark's own client, GETs of the same values: "
            f"{m.benchmark.get('gets_per_s', math.nan):,.0f} requests/s, server CPU "
            f"{m.benchmark['cpu_ns_per_get'] / 1e3:.1f} us per GET."
        )
    if m.trace is not None:
        t = m.trace
        lines += [
            f"# valgrind lackey, {t.ops} operations over {p.trace_keys} keys of "
            f"{p.trace_value} bytes: {t.data_accesses:,.0f} data accesses per operation, "
            f"of them {t.store_lines:.1f} distinct store lines",
            f"#   on {t.store_pages:.1f} pages in {t.store_runs:.1f} runs of adjacent lines "
            f"({t.shared_lines} lines shared by more than 5 % of the operations); the kv "
            f"model counts {model_accesses_per_op(p.trace_value)} lines on 2 pages",
            "#   (lackey sees user space only: a value the kernel copies is not in it).",
        ]
    lines += [
        "",
        "# What was measured, for `derive` (python/tierscope/apps/measure.py) to check.",
        "[measured]",
        f"accesses_per_op = {m.accesses}",
        f"cpu_ns_per_op_large = [{', '.join(f'{x:.0f}' for x in m.c_large)}]",
        f"cpu_ns_per_op_small = [{', '.join(f'{x:.0f}' for x in m.c_small)}]",
        f"latency_ns_large = {m.latency_large:.1f}",
        f"latency_ns_small = {m.latency_small:.1f}",
        f"ops_per_s_large = [{', '.join(f'{x:.1f}' for x in m.ops_large)}]",
        f"run_seconds = {m.seconds:g}",
        *(f"{k} = {getattr(p, k)}" for k in PLAN_SIZES),
        f"command = {json.dumps(command)}",
        *(f"{k} = {json.dumps(v)}" for k, v in prov.items()),
        *(f"benchmark_{k} = {v:.1f}" for k, v in m.benchmark.items()),
        *(
            f"traced_{k} = {v:.4g}"
            for k, v in (dataclasses.asdict(m.trace) if m.trace else {}).items()
        ),
        "",
        "[app]",
        f"compute_ns = {d.compute_ns:.4g}",
        f"mlp = {d.mlp:.4g}",
        "line_bytes = 64",
        "",
        "# The most memory-bound reading: the memory time at the interval's upper end.",
        "[app_bound]",
        f"compute_ns = {d.bound_compute_ns:.4g}",
        f"mlp = {d.bound_mlp:.4g}",
        "line_bytes = 64",
        "",
    ]
    path.write_text("\n".join(lines))


def rederive(path: Path) -> None:
    """Writes PATH again from its own `[measured]` table (the derivation changed, the
    measurement did not): PATH's stem names its plan in PLANS."""
    t = tomllib.loads(path.read_text())["measured"]
    plan = next(p for p in PLANS if p.name == path.stem)
    plan = replace(plan, **{k: t[k] for k in PLAN_SIZES})
    m = Measured(plan, len(t["cpu_ns_per_op_large"]), t["run_seconds"])
    m.c_large, m.c_small = t["cpu_ns_per_op_large"], t["cpu_ns_per_op_small"]
    m.ops_large = t["ops_per_s_large"]
    m.latency_large, m.latency_small = t["latency_ns_large"], t["latency_ns_small"]
    m.benchmark = {k[10:]: v for k, v in t.items() if k.startswith("benchmark_")}
    traced = {k[7:]: v for k, v in t.items() if k.startswith("traced_")}
    if traced:
        traced["ops"] = int(traced["ops"])
        traced["shared_lines"] = int(traced["shared_lines"])
        traced["store_footprint_pages"] = int(traced["store_footprint_pages"])
        m.trace = lackey.OpStats(**traced)
    prov = {k: t[k] for k in ("date", "machine", "redis", "memcached")}
    write_app(m, path, t["command"], prov)


def measure_apps(
    out: Path,
    quick: bool = False,
    trace: bool = True,
    plans: tuple[AppPlan, ...] = PLANS,
    command: str = "",
) -> list[Path]:
    """Measures every plan and writes OUT/NAME.toml for each; returns the paths."""
    needed = ["redis-server", "memcached", "gcc"] + (["valgrind"] if trace else [])
    if lacking := missing(*needed):
        raise RuntimeError(f"missing: {', '.join(lacking)} (make measure-apps installs them)")
    reps, seconds = (1, 0.5) if quick else (7, 2.0)
    out.mkdir(parents=True, exist_ok=True)
    prov = provenance()
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for plan in plans:
            if quick:
                plan = replace(
                    plan, value_size=65536, keys=16, small_keys=2, trace_ops=20, trace_keys=20
                )
            m = measure_cpu(plan, reps, seconds)
            loads = 200_000 if quick else 5_000_000
            large_mib = max(1, plan.keys * plan.value_size >> 20)
            small_mib = max(1, plan.small_keys * plan.value_size >> 20)
            m.latency_large = chase_latency(large_mib, loads, work)
            m.latency_small = chase_latency(small_mib, loads, work)
            if plan.server == "redis" and shutil.which("redis-benchmark"):
                m.benchmark = redis_benchmark(plan, 20 if quick else 400)
            if trace:
                m.trace = trace_ops(plan, work)
            # At the precision the file keeps, so that `rederive` gives the same file.
            m.c_large, m.c_small = [round(x) for x in m.c_large], [round(x) for x in m.c_small]
            m.ops_large = [round(x, 1) for x in m.ops_large]
            m.latency_large, m.latency_small = round(m.latency_large, 1), round(m.latency_small, 1)
            path = out / f"{plan.name}.toml"
            write_app(m, path, command, prov)
            written.append(path)
    return written
