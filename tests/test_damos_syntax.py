"""DAMOS schemes in damo's syntax (issue 27, item 1): every line and JSON scheme below is
taken from damo's documentation and usage pages (cited beside it: damo's USAGE.md and
scripts/ in its repository, damonitor/damo at df6d55f, the README on PyPI that damo
3.4.3 ships as its METADATA, and `damo args damon --help` of damo 3.4.3). Each is either
modelled with damo's meaning, checked here against `damo args damon --format json` on
the same line (values, and the `nr_accesses` / age bounds damo would give the kernel,
from damo's own conversion), or refused with one line naming the option; a scheme that
could never match is an error naming the file, line and field.

damo is a dev dependency (installed in .venv); without it these tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tierscope import ConfigError, _core
from tierscope.experiment import load_experiment

DAMO = Path(sys.executable).parent / "damo"
pytestmark = pytest.mark.skipif(not DAMO.exists(), reason="damo is not installed beside python")

ULONG_MAX = 2**64 - 1
MODEL = "model"

#: (where damo documents it, the line, MODEL or a piece of tierscope's one-line refusal).
LINES: list[tuple[str, str, str]] = [
    # USAGE.md, "damo args damon", "Multiple kdamonds": the two kdamonds.json schemes.
    ("USAGE.md: damo args damon --add", "--damos_action migrate_hot 0", MODEL),
    ("USAGE.md: damo args damon --add", "--damos_action migrate_cold 1", MODEL),
    ("USAGE.md: damo args damon --replace", "--damos_action pageout", "not modelled"),
    ("USAGE.md: damo args damon", "--damos_action stat", "not modelled"),
    # USAGE.md, "Partial DAMOS Parameters Update": two schemes on one line.
    (
        "USAGE.md: Partial DAMOS Parameters Update",
        "--damos_action lru_prio --damos_access_rate 50% max --damos_age 5s max "
        "--damos_action lru_deprio --damos_access_rate 0% 0% --damos_age 5s max",
        "`--damos_action lru_prio` is not modelled",
    ),
    (
        "USAGE.md: Partial DAMOS Parameters Update, as tiering actions",
        "--damos_action migrate_hot 0 --damos_access_rate 50% max --damos_age 5s max "
        "--damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_age 5s max",
        MODEL,
    ),
    # scripts/mem_tier.sh: demotion (node 0 to 1) and promotion (1 to 0), with and
    # without their `young` filters (page-level checks at apply time: not modelled).
    (
        "scripts/mem_tier.sh: demotion",
        "--damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_apply_interval 1s "
        "--damos_quota_interval 1s --damos_quota_space 200MB "
        "--damos_quota_goal node_mem_free_bp 0.5% 0 --damos_filter reject young",
        "the young filter is not modelled",
    ),
    (
        "scripts/mem_tier.sh: demotion without its filter",
        "--damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_apply_interval 1s "
        "--damos_quota_interval 1s --damos_quota_space 200MB "
        "--damos_quota_goal node_mem_free_bp 0.5% 0",
        MODEL,
    ),
    (
        "scripts/mem_tier.sh: promotion without its filter",
        "--damos_action migrate_hot 0 --damos_access_rate 5% max --damos_apply_interval 1s "
        "--damos_quota_interval 1s --damos_quota_space 200MB "
        "--damos_quota_goal node_mem_used_bp 99.7% 0",
        MODEL,
    ),
    (
        "scripts/mem_tier.sh: promotion",
        "--damos_action migrate_hot 0 --damos_access_rate 5% max --damos_apply_interval 1s "
        "--damos_quota_interval 1s --damos_quota_space 200MB "
        "--damos_quota_goal node_mem_used_bp 99.7% 0 --damos_filter allow young",
        "the young filter is not modelled",
    ),
    # The PyPI README (damo's METADATA): options before the action, as damo allows.
    (
        "README (PyPI): damo start ... --damos_action pageout",
        "--damos_access_rate 0 0 --damos_sz_region 4K max --damos_age 60s max "
        "--damos_action pageout",
        "`--damos_action pageout` is not modelled",
    ),
    (
        "README (PyPI), demoting instead of paging out",
        "--damos_access_rate 0 0 --damos_sz_region 4K max --damos_age 60s max "
        "--damos_action migrate_cold 1",
        MODEL,
    ),
    # USAGE.md, "--damos_filter Option Format" and "Old --damos_filter Format".
    ("USAGE.md: --damos_filter", "--damos_action migrate_hot 0 --damos_filter allow anon", MODEL),
    (
        "USAGE.md: --damos_filter",
        "--damos_action migrate_hot 0 --damos_filter reject none addr 1234 56678",
        "the addr filter is not modelled",
    ),
    (
        "USAGE.md: --damos_filter",
        "--damos_action migrate_hot 0 --damos_filter reject memcg user.slice/workloads/foo",
        "the memcg filter is not modelled",
    ),
    (
        "USAGE.md: Old --damos_filter Format",
        "--damos_action migrate_cold 1 --damos_filter anon nomatching reject",
        MODEL,
    ),
    # `damo args damon --help` (damo 3.4.3): the quota, age and interval options.
    (
        "--help: --damos_quotas <time (ms)> [<size (bytes)> [<reset interval (ms)> ...",
        "--damos_action migrate_hot 0 --damos_quotas 0 1G 1000",
        MODEL,
    ),
    (
        "--help: --damos_quotas <time (ms)> ...",
        "--damos_action migrate_hot 0 --damos_quotas 100 1G 1000",
        "a time quota is not modelled",
    ),
    (
        "--help: --damos_quota_interval <milliseconds>",
        "--damos_action migrate_cold 1 --damos_quota_interval 1000 --damos_quota_space 1G",
        MODEL,
    ),
    (
        "--help: --damos_age <min> <max> (microseconds); issue 27's line",
        "--damos_action migrate_cold 1 --damos_access_rate 0 0 --damos_age 1000000 max",
        MODEL,
    ),
    (
        "--help: --damos_apply_interval <microseconds>",
        "--damos_action migrate_hot 0 --damos_apply_interval 200000",
        MODEL,
    ),
    (
        "--help: --damos_wmarks <metric (none|free_mem_rate)> ...",
        "--damos_action migrate_hot 0 --damos_wmarks none 5000000 0 0 0",
        MODEL,
    ),
    (
        "--help: --damos_wmarks <metric (none|free_mem_rate)> ...",
        "--damos_action migrate_hot 0 --damos_wmarks free_mem_rate 5000000 800 500 200",
        "`--damos_wmarks free_mem_rate` is not modelled",
    ),
    (
        "--help: --damos_quota_weights <permil> <permil> <permil>",
        "--damos_action migrate_hot 0 --damos_quota_interval 1s --damos_quota_space 1G "
        "--damos_quota_weights 0 1 1",
        "`--damos_quota_weights` is not modelled",
    ),
    (
        "--help: --damos_quota_goal <metric> should be {user_input,some_mem_psi_us,...}",
        "--damos_action migrate_hot 0 --damos_quota_interval 1s "
        "--damos_quota_goal some_mem_psi_us 1000",
        "`--damos_quota_goal some_mem_psi_us` is not modelled",
    ),
    (
        "--help: --damos_action ... multiple destination nodes input",
        "--damos_action migrate_hot 0 30 1 70",
        "several destinations",
    ),
    (
        "--help: --damos_scheme, mark start of options for a scheme",
        "--damos_scheme --damos_action migrate_cold 1 --damos_access_rate 0% 0% "
        "--damos_quota_interval 1s --damos_quota_goal node_mem_free_bp 0.5% 0 "
        "--damos_scheme --damos_action migrate_hot 0 --damos_access_rate 5% max "
        "--damos_quota_interval 1s --damos_quota_goal node_mem_used_bp 99.7% 0",
        MODEL,
    ),
]

#: Lines damo accepts whose scheme could never match: (where, line, field message).
NEVER: list[tuple[str, str, str]] = [
    ("README (PyPI): --damos_age 60s max, in a 10 s run", "--damos_age 60s max", "beyond the run"),
    ("USAGE.md: access rate", "--damos_access_rate 50% 5%", "min 50% is above max 5%"),
    ("USAGE.md: access rate", "--damos_access_rate 150% max", "above 100%"),
    ("USAGE.md: --damos_filter reject ...", "--damos_filter reject anon", "reject every page"),
    ("--help: --damos_sz_region <min> <max>", "--damos_sz_region 2M 4K", "is above max"),
    (
        "scripts/mem_tier.sh: a goal of 0",
        "--damos_quota_interval 1s --damos_quota_goal node_mem_used_bp 0 0",
        "never apply",
    ),
]


def damo(*args: str, raw: bool = True) -> dict[str, Any]:
    proc = subprocess.run(
        [str(DAMO), "args", "damon", *args, "--format", "json", *(["--raw"] if raw else [])],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0 and proc.stdout.strip(), (args, proc.stdout, proc.stderr)
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def schemes_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for kd in doc["kdamonds"] for c in kd["contexts"] for s in c["schemes"]]


def _big(v: Any) -> Any:
    """damo prints `max` as 2^64 - 1 or, after a float, 2^64: both mean no bound."""
    if isinstance(v, str) and v.split(" ")[0].isdigit() and int(v.split(" ")[0]) >= ULONG_MAX:
        return "max " + " ".join(v.split(" ")[1:])
    return v


def modelled_view(s: dict[str, Any]) -> dict[str, Any]:
    """The keys tierscope models, from a scheme of damo's raw JSON."""
    ap = s["access_pattern"]
    q = s["quotas"]
    return {
        "action": s["action"],
        "target_nid": s["target_nid"],
        "access_pattern": {
            k: {e: _big(ap[k][e]) for e in ("min", "max")}
            for k in ("sz_bytes", "nr_accesses", "age")
        },
        "apply_interval_us": s["apply_interval_us"],
        "quotas": {
            "time_ms": q["time_ms"],
            "sz_bytes": q["sz_bytes"],
            "reset_interval_ms": q["reset_interval_ms"],
            "goals": [{k: g[k] for k in ("metric", "nid", "target_value")} for g in q["goals"]],
        },
        "filters": [
            {k: f[k] for k in ("filter_type", "matching", "allow", "damon_target_idx")}
            for f in s["filters"]
        ],
    }


def damo_bounds(human: dict[str, Any], sample_us: int, aggr_us: int) -> dict[str, Any]:
    """The nr_accesses (samples) and age (aggregation intervals) bounds damo writes to the
    kernel for a scheme of its human-readable JSON, by damo's own conversion."""
    import damo as damo_pkg

    sys.path.insert(0, str(Path(damo_pkg.__file__).parent))
    import _damon  # type: ignore[import-not-found]

    pattern = _damon.Damos.from_kvpairs(human).access_pattern
    iv = _damon.DamonIntervals(sample_us, aggr_us, 1_000_000)
    c = pattern.converted_for_units(_damon.unit_samples, _damon.unit_aggr_intervals, iv)
    return {
        "nr_accesses": [min(int(x.samples), ULONG_MAX) for x in c.nr_acc_min_max],
        "age": [min(int(x.aggr_intervals), ULONG_MAX) for x in c.age_min_max],
    }


def check_against_damo(text: str, form: str, damo_args: list[str]) -> None:
    """tierscope's reading of `text` equals damo's on every modelled key, and so do the
    kernel bounds at damo's default intervals (5 ms / 100 ms) and damon-mod's (5 / 200)."""
    ours = _core.damos_schemes(text, form)
    theirs = [modelled_view(s) for s in schemes_of(damo(*damo_args))]
    assert [modelled_view(s) for s in ours] == theirs, text
    human = schemes_of(damo(*damo_args, raw=False))
    for sample_us, aggr_us in [(5_000, 100_000), (5_000, 200_000)]:
        got = _core.damos_schemes(text, form, (sample_us * 1000, aggr_us * 1000))
        for g, h in zip(got, human, strict=True):
            assert g["bounds"] == damo_bounds(h, sample_us, aggr_us), (text, aggr_us)


@pytest.mark.parametrize(
    ("where", "line", "expect"), LINES, ids=[f"{i}" for i in range(len(LINES))]
)
def test_damo_lines(where: str, line: str, expect: str) -> None:
    # damo itself accepts every line of the table.
    damo(*line.split())
    if expect == MODEL:
        check_against_damo(line, "line", line.split())
    else:
        with pytest.raises(ValueError) as e:
            _core.damos_schemes(line, "line")
        message = str(e.value)
        assert expect in message and "\n" not in message, (where, message)
        assert "--damos_" in message, f"the refusal names the option: {message}"


def test_the_table_is_large_enough() -> None:
    assert len(LINES) + len(NEVER) >= 20
    assert sum(1 for _, _, e in LINES if e == MODEL) >= 10


#: damo's JSON schemes: (where, the JSON text or the damo options printing it, MODEL or a
#: piece of the refusal).
def json_cases() -> list[tuple[str, str, str]]:
    human_stat = {
        # damo's tests/unit/test_damo_schemes_input.py, `human_readable_damos_kv`.
        "action": "stat",
        "access_pattern": {
            "sz_bytes": {"min": "min", "max": "min"},
            "nr_accesses": {"min": "0 samples", "max": "0 samples"},
            "age": {"min": "0 aggr_intervals", "max": "0 aggr_intervals"},
        },
        "quotas": {
            "time_ms": "0s",
            "sz_bytes": "0B",
            "reset_interval_ms": "0us",
            "weights": {"sz_permil": 0, "nr_accesses_permil": 0, "age_permil": 0},
        },
        "watermarks": {
            "metric": "none",
            "interval_us": "0us",
            "high_permil": 0,
            "mid_permil": 0,
            "low_permil": 0,
        },
    }
    as_migration = {
        **human_stat,
        "action": "migrate_cold",
        "target_nid": 1,
        "access_pattern": {
            "sz_bytes": {"min": "4 KiB", "max": "max"},
            "nr_accesses": {"min": "0 samples", "max": "2 samples"},
            "age": {"min": "3 aggr_intervals", "max": "max aggr_intervals"},
        },
    }
    # damo's tests/schemes/prcl_damos.json.
    prcl = [
        {
            "access_pattern": {
                "sz_bytes": {"min": "min", "max": "max"},
                "nr_accesses_unit": "percent",
                "nr_accesses": {"min": "min", "max": "min"},
                "age_unit": "usec",
                "age": {"min": "1s", "max": "max"},
            },
            "action": "pageout",
        }
    ]
    mem_tier = (
        "--damos_action migrate_cold 1 --damos_access_rate 0% 0% --damos_apply_interval 1s "
        "--damos_quota_interval 1s --damos_quota_space 200MB "
        "--damos_quota_goal node_mem_free_bp 0.5% 0"
    )
    return [
        # USAGE.md, "damo args damon": `damo args damon --damos_action migrate_hot 0
        # --out kdamonds.json` writes this document.
        ("USAGE.md: damo args damon --out kdamonds.json", "--damos_action migrate_hot 0", MODEL),
        ("scripts/mem_tier.sh: demotion, as damo prints it", mem_tier, MODEL),
        (
            "damo tests: human-readable scheme input",
            json.dumps(human_stat),
            "`stat` is not modelled",
        ),
        ("damo tests: the same scheme as a migration", json.dumps(as_migration), MODEL),
        ("damo tests/schemes/prcl_damos.json", json.dumps(prcl), "`pageout` is not modelled"),
    ]


@pytest.mark.parametrize(("where", "source", "expect"), json_cases(), ids=lambda x: str(x)[:24])
def test_damo_json_schemes(where: str, source: str, expect: str) -> None:
    if source.startswith("--"):
        # The kdamonds document damo prints for these options, as users copy it.
        text = json.dumps(damo(*source.split(), raw=False))
    else:
        # A scheme (or list) in a kdamonds document, for damo to read back.
        doc = damo("--damos_action", "stat", raw=False)
        parsed = json.loads(source)
        doc["kdamonds"][0]["contexts"][0]["schemes"] = (
            parsed if isinstance(parsed, list) else [parsed]
        )
        text = json.dumps(doc)
    if expect == MODEL:
        check_against_damo(text, "json", [text])
    else:
        damo(text)  # damo accepts it
        with pytest.raises(ValueError) as e:
            _core.damos_schemes(text, "json")
        assert expect in str(e.value) and "\n" not in str(e.value), str(e.value)


EXPERIMENT = """\
name = "damos"
duration = "10s"
[machine]
engine = "stat"
[workload]
rate = "1M/s"
regions = [{{ name = "a", size = "64MiB" }}]
phases = [{{ name = "p", duration = "10s", patterns = [{{ region = "a", kind = "random" }}] }}]
[[monitors]]
preset = "damon-mod"
[tiering]
tiers = [{{ preset = "dram", capacity = "32MiB" }}, "cxl"]
policies = [
  "static",
  {{ type = "damos", damo = "--damos_action migrate_hot 0 {options}" }},
]
"""


@pytest.mark.parametrize(("where", "options", "says"), NEVER, ids=[n[1] for n in NEVER])
def test_a_scheme_that_never_matches_is_an_error(
    tmp_path: Path, where: str, options: str, says: str
) -> None:
    line = f"--damos_action migrate_hot 0 {options}"
    damo(*line.split())  # damo accepts it
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.format(options=options))
    with pytest.raises(ConfigError) as e:
        load_experiment(path)
    err = e.value
    assert (err.file, err.line, err.field) == (str(path), 15, "tiering.policies[1].damo"), str(err)
    assert says in err.message and "\n" not in str(err), (where, str(err))


def test_the_same_line_runs_when_it_can_match(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.format(options="--damos_age 1s max"))
    exp = load_experiment(path)
    policy = exp.to_dict()["tiering"]["policies"][1]
    assert policy["damo"].endswith("--damos_age 1s max")
