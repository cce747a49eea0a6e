"""Memory tiering from Python: the `[tiering]` policy runs in the API's results, the run
directory (metrics.json, arrays-policy-<run>.npz, throughput.png, placement.png),
`tierscope.load`, `tierscope compare`, the table `tierscope run` prints, and the quick
form's --tiers / --policy / --placement with their errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tierscope
from conftest import PNG_FIGURES, leftovers, run_cli
from tierscope.cli import compare
from tierscope.results import POLICY_TIER_DTYPES, POLICY_WINDOW_DTYPES

# Random accesses to a 16 MiB hot region between two cold 128 MiB regions; the fast tier
# (64 MiB) starts out holding the beginning of the first cold region (first touch in
# heap order), so the hot region starts on the slow tier and a policy must promote it.
# 2 s at 2M/s: about a second of wall time.
TIERING_EXPERIMENT = """\
name = "tiers"
seed = 5
duration = "2s"
warmup = "0s"

[workload]
rate = "2M/s"
regions = [
    { name = "cold_top", size = "128MiB" },
    { name = "hot", size = "16MiB" },
    { name = "cold_bottom", size = "128MiB" },
]
phases = [
    { name = "p", duration = "2s", patterns = [{ region = "hot", kind = "random", mode = "rw" }] },
]

[[monitors]]
preset = "damon-mod"

[[monitors]]
preset = "telescope-bnd"

[tiering]
tiers = [{ preset = "dram", capacity = "64MiB" }, "cxl"]
policies = ["telescope-rule", "oracle", "static"]
"""

RUNS = ["telescope-rule@damon-mod", "telescope-rule@telescope-bnd", "oracle", "static"]
HEAP = (128 + 16 + 128) << 20
SUMMARY_KEYS = {
    "app_ns",
    "all_fast_ns",
    "all_slow_ns",
    "throughput",
    "speedup_over_slow",
    "gap_to_oracle",
    "fast_hit_ratio",
    "migration_cpu_ns",
    "monitor_cpu_ns",
    "ops_per_s",
    "op_latency_ns",
}
MIGRATION_KEYS = {
    "promoted_bytes",
    "demoted_bytes",
    "pages",
    "rounds",
    "refused_bytes",
    "shootdowns",
    "cpu_ns",
    "stall_ns",
    "splits",
    "collapses",
}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The experiment run through `tierscope run`: (its output directory, stdout)."""
    d = tmp_path_factory.mktemp("tiering")
    (d / "tiers.toml").write_text(TIERING_EXPERIMENT)
    proc = run_cli("run", "tiers.toml", "--out", "out", cwd=d, env=PNG_FIGURES)
    assert proc.returncode == 0, proc.stderr
    return d / "out", proc.stdout


def metrics_of(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "metrics.json").read_text())
    return doc


# --- the API -------------------------------------------------------------------------


def test_api_run_gives_policy_results(tmp_path: Path) -> None:
    (tmp_path / "tiers.toml").write_text(TIERING_EXPERIMENT)
    result = tierscope.run(tmp_path / "tiers.toml", out=tmp_path / "out", progress=False)
    assert list(result.policies) == RUNS
    for name, p in result.policies.items():
        assert isinstance(p, tierscope.PolicyResult) and p.name == name
        assert set(p.summary) == SUMMARY_KEYS and set(p.migration) == MIGRATION_KEYS
        w = p.windows
        # 100 ms performance windows over 2 s.
        assert p.nr_windows == 20 and p.nr_tiers == 2
        for key, dtype in POLICY_WINDOW_DTYPES.items():
            assert w[key].shape == (20,) and w[key].dtype == np.dtype(dtype), key
        for key, dtype in POLICY_TIER_DTYPES.items():
            assert w[key].shape == (20, 2) and w[key].dtype == np.dtype(dtype), key
        assert np.all(np.diff(w["end_ns"].astype(np.int64)) == 100_000_000)
        # Every access is served by some tier; the heap is always wholly placed; the
        # fast tier never holds more than its capacity.
        np.testing.assert_allclose(w["served"].sum(axis=1), w["accesses"], rtol=1e-9)
        assert np.all(w["placed"].sum(axis=1) == HEAP)
        assert np.all(w["placed"][:, 0] <= 64 << 20)
        # The summary is the windows' totals (plus migration stalls, none here).
        assert p.summary["app_ns"] == pytest.approx(w["app_ns"].sum() + p.migration["stall_ns"])
        assert p.summary["fast_hit_ratio"] == pytest.approx(
            w["served"][:, 0].sum() / w["accesses"].sum()
        )
        assert p.monitor == (name.split("@")[1] if "@" in name else None)
        assert p.policy == name.split("@")[0] == p.kind
    rule = result.policies["telescope-rule@telescope-bnd"]
    static = result.policies["static"]
    # The hot region starts slow: never migrating is all-slow, the rule promotes it.
    assert static.summary["speedup_over_slow"] == pytest.approx(1.0)
    assert static.windows["placed"][0, 0] == 64 << 20
    assert rule.migration["promoted_bytes"] >= 16 << 20
    assert rule.windows["served"][-1, 0] / rule.windows["accesses"][-1] > 0.95
    assert rule.summary["speedup_over_slow"] > 1.5
    assert result.policies["oracle"].summary["gap_to_oracle"] == pytest.approx(1.0)
    # metrics carries the summaries and migrations, keyed by run.
    m = result.metrics["policies"]
    assert list(m) == RUNS
    assert m["static"]["summary"] == static.summary
    assert m["telescope-rule@telescope-bnd"]["monitor"] == "telescope-bnd"


def test_load_round_trips_policy_arrays(tmp_path: Path) -> None:
    (tmp_path / "tiers.toml").write_text(TIERING_EXPERIMENT)
    out = tmp_path / "out"
    result = tierscope.run(tmp_path / "tiers.toml", out=out, progress=False)
    again = tierscope.load(out)
    assert again.metrics == result.metrics
    assert list(again.policies) == RUNS
    for name, p in result.policies.items():
        a = again.policies[name]
        assert (a.policy, a.kind, a.monitor) == (p.policy, p.kind, p.monitor)
        assert a.summary == p.summary and a.migration == p.migration
        assert set(a.windows) == set(p.windows)
        for k, v in p.windows.items():
            assert a.windows[k].dtype == v.dtype and a.windows[k].shape == v.shape, k
            assert np.array_equal(a.windows[k], v), k
    # A missing policy array is an error naming the file, not a silent empty result.
    (out / "arrays-policy-telescope-rule_damon-mod.npz").unlink()
    with pytest.raises(tierscope.ConfigError, match="arrays-policy-telescope-rule_damon-mod"):
        tierscope.load(out)


def test_runs_without_tiering_have_no_policies(tmp_path: Path) -> None:
    text = TIERING_EXPERIMENT.split("[tiering]")[0]
    (tmp_path / "plain.toml").write_text(text)
    result = tierscope.run(tmp_path / "plain.toml", out=tmp_path / "out", progress=False)
    assert result.policies == {} and result.metrics["policies"] == {}
    assert not list((tmp_path / "out").glob("arrays-policy-*"))
    assert not (tmp_path / "out" / "throughput.png").exists()
    # A run directory written before policies existed (no "policies" key) still loads.
    path = tmp_path / "out" / "metrics.json"
    doc = json.loads(path.read_text())
    del doc["policies"]
    path.write_text(json.dumps(doc))
    assert tierscope.load(tmp_path / "out").policies == {}


# --- the CLI -------------------------------------------------------------------------


def test_cli_run_writes_policy_outputs(cli_run: tuple[Path, str]) -> None:
    out, _ = cli_run
    m = metrics_of(out)
    assert list(m["policies"]) == RUNS
    for name, p in m["policies"].items():
        assert set(p) == {"policy", "kind", "monitor", "summary", "migration"}, name
        assert set(p["summary"]) == SUMMARY_KEYS and set(p["migration"]) == MIGRATION_KEYS
        file = out / f"arrays-policy-{name.replace('@', '_')}.npz"
        with np.load(file) as data:
            assert data["windows.served"].shape == (20, 2)
    for name in ("telescope-rule@damon-mod", "telescope-rule@telescope-bnd"):
        assert m["policies"][name]["summary"]["speedup_over_slow"] > 1.5, name
        assert m["policies"][name]["migration"]["promoted_bytes"] > 0, name
    assert m["policies"]["static"]["summary"]["speedup_over_slow"] == pytest.approx(1.0)
    for png in ("throughput.png", "placement.png"):
        data = (out / png).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, png
    # The tiering table is in the normalized experiment, and it loads back.
    tiering = m["experiment"]["tiering"]
    assert [t["name"] for t in tiering["tiers"]] == ["dram", "cxl"]
    assert tiering["tiers"][0]["capacity"] == 64 << 20
    assert tierscope.load_experiment(m["experiment"]).to_dict() == m["experiment"]


def test_run_prints_a_policy_table(cli_run: tuple[Path, str]) -> None:
    out, stdout = cli_run
    monitors, policies = stdout.strip().split("\n\n")
    assert [line.split()[0] for line in monitors.splitlines()[1:]] == [
        "damon-mod",
        "telescope-bnd",
    ]
    header, *lines = policies.splitlines()
    assert header.startswith("policy run") and "speed-up over slow" in header
    assert [line.split()[0] for line in lines] == RUNS
    # Speed-up over slow is the second column, as in metrics.json.
    m = metrics_of(out)["policies"]
    for line in lines:
        name, speedup = line.split()[:2]
        assert speedup == f"{m[name]['summary']['speedup_over_slow']:.3f}"


def test_compare_prints_policy_rows(cli_run: tuple[Path, str], capsys: Any) -> None:
    out, _ = cli_run
    cmp = out.parent / f"{out.name}-compare"
    assert compare.main([str(out), "--out", str(cmp), "--force"]) == 0
    text = capsys.readouterr().out
    monitor_table, policy_table = text.strip().split("\n\n")
    assert monitor_table.splitlines()[0].split()[:2] == ["monitor", "kind"]
    header, rule, *lines = policy_table.splitlines()
    assert header.split()[:3] == ["policy", "run", "kind"] and "gap to oracle" in header
    assert set(rule) <= {"-", " "}
    assert [line.split()[0] for line in lines] == RUNS
    m = metrics_of(out)["policies"]
    oracle = next(line.split() for line in lines if line.startswith("oracle"))
    assert oracle[1:4] == [
        "oracle",
        f"{m['oracle']['summary']['speedup_over_slow']:.3f}",
        "1.000",
    ]
    assert not list(out.glob("compare*")), "compare writes only where --out says"
    rows = json.loads((cmp / "compare.json").read_text())["policies"]
    assert [r["run"] for r in rows] == RUNS
    rule = rows[1]
    mig = m["telescope-rule@telescope-bnd"]["migration"]
    assert rule["promoted_gb"] == pytest.approx(mig["promoted_bytes"] / 1e9)
    assert rule["migration_cpu_ms"] == pytest.approx(mig["cpu_ns"] / 1e6)
    md = (cmp / "compare.md").read_text()
    assert "| policy run | kind | speed-up over slow |" in md
    # compare.json holds what --format json prints: the monitor and policy rows.
    assert [r["monitor"] for r in json.loads((cmp / "compare.json").read_text())["monitors"]] == [
        "damon-mod",
        "telescope-bnd",
    ]
    assert compare.main([str(out), "--format", "json", "--no-write"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in doc["policies"]] == RUNS and len(doc["monitors"]) == 2


def test_compare_policy_rows_from_metrics() -> None:
    doc = {
        "policies": {
            "static": {
                "policy": "static",
                "kind": "static",
                "monitor": None,
                "summary": {"speedup_over_slow": 1.0, "gap_to_oracle": None, "fast_hit_ratio": 0},
                "migration": {"promoted_bytes": 3_000_000_000, "demoted_bytes": 0, "cpu_ns": 0},
            }
        }
    }
    (row,) = compare.policy_rows(doc)
    assert row["promoted_gb"] == 3.0 and row["gap_to_oracle"] is None
    table = compare.format_table([row], compare.POLICY_COLUMNS)
    cells = ["static", "static", "1.000", "-", "0.000", "3.000", "0.000", "0.0"]
    assert table.splitlines()[2].split() == cells
    assert compare.policy_rows({"monitors": {}}) == []


# --- the quick form ------------------------------------------------------------------


@pytest.mark.figures
def test_quick_form_tiering(workdir: Path) -> None:
    proc = run_cli(
        "run",
        "--masim",
        "tiny.cfg",
        "--monitor",
        "damon-mod",
        "--tiers",
        "dram:16MiB, cxl",
        "--policy",
        "telescope-rule",
        "--policy",
        "oracle",
        "--placement",
        "all-slow",
        "--duration",
        "1s",
        "--rate",
        "2M/s",
        "--out",
        "out",
        "--quiet",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    m = metrics_of(workdir / "out")
    tiering = m["experiment"]["tiering"]
    assert [(t["name"], t["capacity"]) for t in tiering["tiers"]] == [
        ("dram", 16 << 20),
        ("cxl", m["heap"]["end"] - m["heap"]["start"]),
    ]
    assert tiering["placement"] == "all-slow"
    assert [p["name"] for p in tiering["policies"]] == ["telescope-rule", "oracle"]
    assert list(m["policies"]) == ["telescope-rule@damon-mod", "oracle"]
    assert m["policies"]["telescope-rule@damon-mod"]["summary"]["speedup_over_slow"] > 1.5
    assert (workdir / "out" / "placement.png").is_file()


def assert_bad_input(proc: Any, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    line: str = lines[0]
    return line


@pytest.mark.parametrize(
    ("tiers", "needles"),
    [
        ("dram", ["tiering.tiers:", "2 to 8 tiers"]),
        ("warp:1GiB,cxl", ["tiering.tiers[0].preset:", "warp", "dram"]),
        ("dram:lots,cxl", ["tiering.tiers[0].capacity:", "lots"]),
        ("dram:1MiB,cxl:1MiB", ["tiering.tiers:", "less than the workload's heap"]),
    ],
)
def test_bad_tiers_names_the_option(workdir: Path, tiers: str, needles: list[str]) -> None:
    proc = run_cli(
        "run", "--masim", "tiny.cfg", "--tiers", tiers, "--policy", "oracle", "--out", "out",
        cwd=workdir,
    )  # fmt: skip
    assert_bad_input(proc, "command line: --tiers: ", *needles)
    assert not (workdir / "out").exists() and leftovers(workdir, "out") == []


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--policy", "lru"], ["command line: --policy: tiering.policies[0]:", "lru"]),
        # A policy with settings needs a table, which only an experiment file has.
        (["--policy", "damos"], ["command line: --policy: tiering.policies[0]:", "table"]),
        ([], ["command line: --policy: tiering.policies:", "at least one"]),
        (
            ["--policy", "oracle", "--placement", "nowhere"],
            ["command line: --placement: tiering.placement:", "nowhere"],
        ),
        (
            ["--policy", "oracle", "--engine", "kvm"],
            ["command line: --tiers: tiering:", "no memory tiers"],
        ),
    ],
)
def test_bad_policy_or_placement_names_the_option(
    workdir: Path, args: list[str], needles: list[str]
) -> None:
    proc = run_cli(
        "run", "--masim", "tiny.cfg", "--tiers", "dram:16MiB,cxl", *args, "--out", "out",
        cwd=workdir,
    )  # fmt: skip
    assert_bad_input(proc, *needles)
    assert not (workdir / "out").exists()


@pytest.mark.parametrize("option", [["--policy", "oracle"], ["--placement", "all-slow"]])
def test_tiering_options_need_tiers(workdir: Path, option: list[str]) -> None:
    proc = run_cli("run", "--masim", "tiny.cfg", *option, "--out", "out", cwd=workdir)
    assert_bad_input(proc, f"command line: {option[0]}: needs --tiers")


def test_tiering_options_are_quick_form_only(workdir: Path) -> None:
    proc = run_cli("run", "tiny.toml", "--tiers", "dram:16MiB,cxl", "--out", "out", cwd=workdir)
    assert_bad_input(proc, "--tiers", "only for the quick form")


def test_unknown_policy_in_file_names_line_and_field(tmp_path: Path) -> None:
    text = TIERING_EXPERIMENT.replace('"oracle", "static"]', '"oracle",\n    "lru",\n]')
    (tmp_path / "bad.toml").write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if '"lru"' in t)
    proc = run_cli("run", "bad.toml", "--out", "out", cwd=tmp_path)
    assert_bad_input(proc, f"bad.toml:{line}: tiering.policies[2]:", "`lru` is not a policy")
    assert not (tmp_path / "out").exists()


def test_help_explains_the_tiering_options(workdir: Path) -> None:
    proc = run_cli("run", "--help", cwd=workdir)
    assert proc.returncode == 0
    for text in ("--tiers", "--policy", "--placement", "dram:256MiB,cxl", "policy@monitor"):
        assert text in proc.stdout, text


def test_help_lists_tiering_registries_from_the_binding(workdir: Path) -> None:
    from tierscope import _core

    proc = run_cli("run", "--help", cwd=workdir)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    for p in _core.policies():
        line = next(x for x in lines if x.split()[:1] == [p["name"]])
        assert p["help"].split()[0] in line
        assert ("needs settings" in line) == p["needs_settings"]
    assert {p["name"] for p in _core.policies()} >= {"telescope-rule", "damos", "oracle"}
    for t in _core.tier_presets():
        assert any(x.split()[:1] == [t["name"]] for x in lines), t["name"]
    assert ", ".join(_core.placements()) in proc.stdout
    assert _core.placements()[0] == "first-touch-fast"


def test_clashing_array_files_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    # A monitor called `policy-oracle` and the oracle policy would share
    # arrays-policy-oracle.npz.
    text = TIERING_EXPERIMENT.replace(
        '[[monitors]]\npreset = "damon-mod"',
        '[[monitors]]\npreset = "damon-mod"\nname = "policy-oracle"',
    )
    assert 'name = "policy-oracle"' in text
    (tmp_path / "clash.toml").write_text(text)
    proc = run_cli("run", "clash.toml", "--out", "out", "--quiet", cwd=tmp_path)
    assert_bad_input(proc, "would both be written to arrays-policy-oracle.npz")
    assert not (tmp_path / "out").exists()
