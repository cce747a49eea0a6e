"""`tierscope compare RUN [RUN...]`: the monitors and tiering policy runs of runs side
by side. A RUN is the output directory of `tierscope run` (its metrics.json), or a sweep
store (`tierscope sweep --out`: every stored run, from runs/<id>/metrics.json when the
sweep wrote full outputs, else from its rows). One run: the monitors in the shape of the
Telescope paper's Table 2 (kernel-thread cycles) and Figure 10 (ACCESSED bits flipped),
with precision, recall, flushes, PMU samples, the missed hot memory and the modelled
application slowdown, and with `[tiering]` a second table, one row per policy run:
speed-up over all-slow, gap to the oracle, fast-tier hit ratio, bytes migrated and the
migrations' CPU time. Several runs: the same tables with a `run` column, then what
differs: the settings whose values differ between the runs, and each monitor's and
policy run's scores against the first run that has it.

It reads the inputs only and never writes into them: the tables go to stdout, and with
--out DIR also to DIR/compare.md (Markdown) and DIR/compare.json (rows and differences),
with DIR's tierscope-manifest.json. It imports nothing from the extension, so it also
runs as `python3 python/tierscope/cli/compare.py RUN...`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: (key in a row, header, format) of each column, in order.
COLUMNS: list[tuple[str, str, str]] = [
    ("monitor", "monitor", "{}"),
    ("kind", "kind", "{}"),
    ("precision", "precision", "{:.3f}"),
    ("recall", "recall", "{:.3f}"),
    ("f1", "f1", "{:.3f}"),
    ("gcycles", "Gcycles", "{:.3f}"),
    ("cpu_percent", "cpu %", "{:.3f}"),
    ("bits_flipped", "bits flipped", "{:,}"),
    ("flushes", "flushes", "{:,}"),
    ("pmu_samples", "PMU samples", "{:,}"),
    ("window_s", "window s", "{:.3f}"),
    ("missed_hot_mib", "missed hot MiB/window", "{:.1f}"),
    ("app_slowdown_percent", "app slowdown %", "{:.4f}"),
]

#: The column added when some monitor's run is invalid (the kvm engine's guards,
#: docs/models/KVM.md): "yes", or "NO" with the reason printed below the table.
VALID_COLUMN: tuple[str, str, str] = ("valid", "valid", "yes/no")

#: The columns of the policy table (runs of `[tiering]` policies), like `COLUMNS`.
POLICY_COLUMNS: list[tuple[str, str, str]] = [
    ("run", "policy run", "{}"),
    ("kind", "kind", "{}"),
    ("speedup_over_slow", "speed-up over slow", "{:.3f}"),
    ("gap_to_oracle", "gap to oracle", "{:.3f}"),
    ("fast_hit_ratio", "fast-hit ratio", "{:.3f}"),
    ("promoted_gb", "GB promoted", "{:.3f}"),
    ("demoted_gb", "GB demoted", "{:.3f}"),
    ("migration_cpu_ms", "migration CPU ms", "{:.1f}"),
]

EPILOG = """\
columns: Gcycles = the monitor's cycles in billions (Table 2); bits flipped = ACCESSED
bits cleared from 1 to 0 (Figure 10); window s = mean window length after warm-up (for a
linear scan, one full pass); missed hot MiB/window = truly hot memory reported cold, the
mean over windows after warm-up; app slowdown % = the modelled application slowdown
(docs/results/BASELINES.md); valid (only when some run is not) = NO where the kvm engine fell
short of what was asked, or the monitor cannot see this host's ACCESSED bits set again
(docs/models/KVM.md): its scores are kept, the reason follows the table.

policy table (runs with [tiering]): one row per policy run (`policy@monitor` for a policy
fed by a monitor); speed-up over slow = the application time with everything on the
slowest tier / this run's; gap to oracle = this run's time / the oracle's (1 = as good;
- without an oracle); fast-hit ratio = share of accesses the fastest tier served;
GB promoted/demoted = bytes migrated (10^9); migration CPU ms = CPU time of the
migrations.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="compare the monitors and policies of runs and sweeps side by side",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _arguments(p)
    p.set_defaults(func=run)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="output directory of `tierscope run`, or a sweep store of `tierscope sweep`",
    )
    p.add_argument(
        "--format",
        choices=("table", "markdown", "json"),
        default="table",
        help="what to print (default: aligned tables). json, of one run: its monitor rows, "
        "or with policy runs {monitors: [...], policies: [...]}; of several: {runs, "
        "monitors, policies, settings, changes}",
    )
    p.add_argument(
        "-o",
        "--out",
        metavar="DIR",
        help="also write DIR/compare.md and DIR/compare.json (never into a RUN)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier compare output in DIR (only the files tierscope wrote)",
    )
    # Kept for scripts written when compare wrote into the run directory: it never does now.
    p.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)


class CompareError(Exception):
    """DIR has no usable metrics.json."""


def _warm(m: dict[str, Any], warmup_ns: int) -> list[dict[str, Any]]:
    windows: list[dict[str, Any]] = m.get("windows") or []
    after = [w for w in windows if w.get("start_ns", 0) >= warmup_ns]
    return after or windows


def rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per monitor of a metrics.json document."""
    warmup = int((metrics.get("experiment") or {}).get("warmup_ns", 0))
    out = []
    for name, m in (metrics.get("monitors") or {}).items():
        cost = m.get("cost") or {}
        used = _warm(m, warmup)
        lengths = [w["end_ns"] - w["start_ns"] for w in used]
        missed = [
            w["true_hot_bytes"] * (1.0 - (w["recall"] if w["recall"] is not None else 0.0))
            for w in used
        ]
        slowdown = m.get("app_slowdown")
        out.append(
            {
                "monitor": name,
                "kind": m.get("kind", ""),
                "precision": m.get("precision"),
                "recall": m.get("recall"),
                "f1": m.get("f1"),
                "gcycles": (m.get("cycles") or 0.0) / 1e9,
                "cpu_percent": m.get("cpu_percent"),
                "bits_flipped": m.get("bits_cleared", cost.get("bits_cleared", 0)),
                "flushes": m.get("flushes", 0),
                "pmu_samples": cost.get("pmu_samples", 0),
                "window_s": sum(lengths) / len(lengths) / 1e9 if lengths else None,
                "missed_hot_mib": sum(missed) / len(missed) / 2**20 if missed else None,
                "app_slowdown_percent": None if slowdown is None else 100.0 * slowdown,
                "valid": bool(m.get("valid", True)),
                "invalid_reason": m.get("invalid_reason"),
            }
        )
    return out


def policy_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per tiering policy run of a metrics.json document (none without
    `[tiering]`)."""
    out = []
    for name, p in (metrics.get("policies") or {}).items():
        s = p.get("summary") or {}
        m = p.get("migration") or {}
        cpu = s.get("migration_cpu_ns", m.get("cpu_ns"))
        out.append(
            {
                "run": name,
                "kind": p.get("kind", ""),
                "monitor": p.get("monitor"),
                "speedup_over_slow": s.get("speedup_over_slow"),
                "gap_to_oracle": s.get("gap_to_oracle"),
                "fast_hit_ratio": s.get("fast_hit_ratio"),
                "promoted_gb": m.get("promoted_bytes", 0) / 1e9,
                "demoted_gb": m.get("demoted_bytes", 0) / 1e9,
                "migration_cpu_ms": None if cpu is None else cpu / 1e6,
            }
        )
    return out


def format_cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "yes/no":
        return "yes" if value else "NO"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


Columns = list[tuple[str, str, str]]


def _cells(table: list[dict[str, Any]], columns: Columns) -> tuple[list[str], list[list[str]]]:
    headers = [h for _, h, _ in columns]
    body = [[format_cell(r.get(k), f) for k, _, f in columns] for r in table]
    return headers, body


def format_table(table: list[dict[str, Any]], columns: Columns = COLUMNS, names: int = 2) -> str:
    """An aligned table: the first `names` columns left-aligned, the rest right."""
    headers, body = _cells(table, columns)
    widths = [max(len(x) for x in col) for col in zip(headers, *body, strict=True)]
    lines = []
    for i, row in enumerate([headers, *body]):
        lines.append(
            "  ".join(
                c.ljust(w) if j < names else c.rjust(w)
                for j, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_markdown(table: list[dict[str, Any]], columns: Columns = COLUMNS) -> str:
    headers, body = _cells(table, columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def monitor_columns(table: list[dict[str, Any]]) -> tuple[Columns, list[str]]:
    """The monitor table's columns (with `valid` when some run is invalid) and one line
    per invalid run giving its reason."""
    invalid = [r for r in table if not r.get("valid", True)]
    if not invalid:
        return COLUMNS, []
    notes = [f"{r['monitor']}: invalid: {r.get('invalid_reason') or '?'}" for r in invalid]
    return [*COLUMNS, VALID_COLUMN], notes


def load(directory: Path) -> dict[str, Any]:
    path = directory / "metrics.json"
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise CompareError(
            f"{path}: no such file (is {directory} a `tierscope run` output?)"
        ) from None
    except json.JSONDecodeError as e:
        raise CompareError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    if not isinstance(doc.get("monitors"), dict) or not doc["monitors"]:
        raise CompareError(f"{path}: no monitors")
    return doc


@dataclass
class Run:
    """One compared run: its label, its metrics document (or one made from a sweep's
    rows) and its settings (the experiment's fields, flattened to paths)."""

    label: str
    metrics: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": [1, {"c": 2}]}}` -> `{"a.b[0]": 1, "a.b[1].c": 2}` (the sweep path
    syntax)."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def _sweep_row_metrics(
    monitors: list[dict[str, Any]], policies: list[dict[str, Any]]
) -> dict[str, Any]:
    """A metrics document from a sweep run's stored rows (no windows: the columns
    computed from windows are left empty)."""
    return {
        "monitors": {
            r["monitor"]: {**r, "cost": {"bits_cleared": r.get("bits_cleared")}, "windows": []}
            for r in monitors
        },
        "policies": {
            r["policy_run"]: {
                "kind": r.get("policy_kind", ""),
                "monitor": r.get("monitor"),
                "summary": r,
                "migration": {
                    "promoted_bytes": r.get("promoted_bytes") or 0,
                    "demoted_bytes": r.get("demoted_bytes") or 0,
                },
            }
            for r in policies
        },
    }


def _stored_rows(directory: Path, run_id: str) -> tuple[list, list] | None:
    """A sweep run's monitor and policy rows from its Parquet files: monitors/ and
    policies/, or rows/ (one table, `row` telling them apart) in a store written before
    the tables were separate; None when the run is not stored."""
    import polars as pl

    def read(table: str) -> list[dict[str, Any]]:
        f = directory / table / f"{run_id}.parquet"
        return pl.read_parquet(f).to_dicts() if f.is_file() else []

    if (directory / "monitors" / f"{run_id}.parquet").is_file():
        return read("monitors"), read("policies")
    if (directory / "rows" / f"{run_id}.parquet").is_file():
        rows = read("rows")
        monitors = [r for r in rows if (r.get("row") or "monitor") == "monitor"]
        return monitors, [r for r in rows if r.get("row") == "policy"]
    return None


def load_sweep_runs(directory: Path) -> list[Run]:
    """The stored runs of a sweep store: from runs/<id>/metrics.json when the sweep wrote
    full outputs, else from its Parquet rows (runs not stored yet are left out)."""
    try:
        doc = json.loads((directory / "sweep.json").read_text())
        listed = [(str(r["id"]), r.get("params") or {}) for r in doc["runs"]]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        where = directory / "sweep.json"
        raise CompareError(f"{where}: not a sweep's list of runs ({e})") from None
    out: list[Run] = []
    missing = [i for i, _ in listed if not (directory / "runs" / i / "metrics.json").is_file()]
    by_run = {i: rows for i in missing if (rows := _stored_rows(directory, i)) is not None}
    for i, params in listed:
        label = f"{directory.name}/{i}"
        if i not in missing:
            m = load(directory / "runs" / i)
            out.append(Run(label, m, flatten(m.get("experiment") or {})))
        elif i in by_run:
            out.append(Run(label, _sweep_row_metrics(*by_run[i]), flatten(params)))
    if not out:
        raise CompareError(f"{directory}: the sweep has no stored run yet")
    return out


def load_runs(paths: Sequence[str]) -> list[Run]:
    """Every run of the inputs, labelled by directory name (by the path as given when
    two names clash)."""
    runs: list[Run] = []
    for p in paths:
        d = Path(p)
        if (d / "sweep.json").is_file() and not (d / "metrics.json").is_file():
            runs += load_sweep_runs(d)
        else:
            m = load(d)
            runs.append(Run(d.name or str(d), m, flatten(m.get("experiment") or {})))
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):
        for r, p in zip(runs, _given_labels(paths, runs), strict=True):
            r.label = p
    return runs


def _given_labels(paths: Sequence[str], runs: list[Run]) -> list[str]:
    """Labels made from the paths as given (for clashing directory names)."""
    out: list[str] = []
    k = 0
    for p in paths:
        d = Path(p)
        if (d / "sweep.json").is_file() and not (d / "metrics.json").is_file():
            n = sum(1 for r in runs[k:] if r.label.startswith(f"{d.name}/"))
            out += [f"{p.rstrip('/')}/{r.label.split('/', 1)[1]}" for r in runs[k : k + n]]
            k += n
        else:
            out.append(p.rstrip("/") or p)
            k += 1
    return out


#: The scores compared between runs: (row key, header).
MONITOR_CHANGES = [
    ("precision", "precision"),
    ("recall", "recall"),
    ("f1", "f1"),
    ("cpu_percent", "cpu %"),
    ("app_slowdown_percent", "app slowdown %"),
]
POLICY_CHANGES = [
    ("speedup_over_slow", "speed-up over slow"),
    ("gap_to_oracle", "gap to oracle"),
    ("fast_hit_ratio", "fast-hit ratio"),
    ("promoted_gb", "GB promoted"),
]


def setting_differences(runs: list[Run]) -> list[dict[str, Any]]:
    """The settings whose values differ between the runs: `{"setting", <label>: value}`
    each (absent where a run does not have it), in path order."""
    keys = sorted({k for r in runs for k in r.settings})
    out = []
    for k in keys:
        values = {json.dumps(r.settings.get(k, "-"), sort_keys=True) for r in runs}
        if len(values) > 1:
            out.append({"setting": k, **{r.label: r.settings.get(k) for r in runs}})
    return out


def changes(
    table: list[dict[str, Any]], key: str, scores: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Each row's scores minus those of the first run with the same `key` (monitor name
    or policy run): one row per later run, `{key, "run", "against", <score>: difference}`."""
    first: dict[str, dict[str, Any]] = {}
    out = []
    for r in table:
        base = first.setdefault(r[key], r)
        if base is r:
            continue
        row: dict[str, Any] = {key: r[key], "run": r["run"], "against": base["run"]}
        for k, _ in scores:
            a, b = base.get(k), r.get(k)
            row[k] = None if a is None or b is None else b - a
        out.append(row)
    return out


def _change_columns(key: str, header: str, scores: list[tuple[str, str]]) -> Columns:
    return [
        (key, header, "{}"),
        ("run", "run", "{}"),
        ("against", "against", "{}"),
        *[(k, f"Δ {h}", "{:+.3f}") for k, h in scores],
    ]


def _setting_columns(runs: list[Run]) -> Columns:
    return [("setting", "setting", "{}"), *[(r.label, r.label, "{}") for r in runs]]


def _fmt_value(v: Any) -> Any:
    return v if not isinstance(v, (dict, list)) else json.dumps(v)


def _out_inside_input(out: Path, inputs: Sequence[str]) -> str | None:
    o = out.resolve()
    for p in inputs:
        d = Path(p).resolve()
        if o == d or d in o.parents:
            return p
    return None


def run(args: argparse.Namespace) -> int:
    try:
        runs = load_runs(args.runs)
    except CompareError as e:
        print(f"tierscope: error: {e}", file=sys.stderr)
        return 2
    if args.out:
        inside = _out_inside_input(Path(args.out), args.runs)
        if inside is not None:
            print(
                f"tierscope: error: command line: --out: {args.out} is inside the input "
                f"{inside}: compare never writes into what it reads",
                file=sys.stderr,
            )
            return 2
    if len(runs) == 1:
        text, markdown, doc = _one(runs[0].metrics)
    else:
        text, markdown, doc = _several(runs)
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    elif args.format == "markdown":
        print(markdown)
    else:
        print(text)
    if args.out:
        from tierscope import outdir

        with outdir.claim(args.out, "compare", force=args.force) as claim:
            with claim.stage() as staging:
                (staging / "compare.md").write_text(markdown + "\n")
                (staging / "compare.json").write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.out}/compare.md, compare.json", file=sys.stderr)
    return 0


def _one(metrics: dict[str, Any]) -> tuple[str, str, Any]:
    """One run: its tables (text, Markdown) and its JSON document."""
    table, policies = rows(metrics), policy_rows(metrics)
    columns, notes = monitor_columns(table)
    markdown = format_markdown(table, columns) + "".join(f"\n\n{n}" for n in notes)
    if policies:
        markdown += "\n\n" + format_markdown(policies, POLICY_COLUMNS)
    text = "\n".join([format_table(table, columns), *notes])
    if policies:
        text += "\n\n" + format_table(policies, POLICY_COLUMNS)
    # Without policy runs, the monitor rows as before; with them, both lists.
    doc: Any = {"monitors": table, "policies": policies} if policies else table
    return text, markdown, doc


def _several(runs: list[Run]) -> tuple[str, str, Any]:
    """Several runs: the tables with a run column, then the differences."""
    run_col: Columns = [("run", "run", "{}")]
    table = [{"run": r.label, **row} for r in runs for row in rows(r.metrics)]
    policies = [{"run_label": r.label, **row} for r in runs for row in policy_rows(r.metrics)]
    columns, notes = monitor_columns(table)
    # Names first (left-aligned): run, monitor, kind.
    mcols = run_col + columns
    pcols: Columns = [("run_label", "run", "{}"), *POLICY_COLUMNS]
    settings = setting_differences(runs)
    scols = _setting_columns(runs)
    shown = [{k: _fmt_value(v) for k, v in s.items()} for s in settings]
    mchanges = changes(table, "monitor", MONITOR_CHANGES)
    pchanges = changes(
        [{**p, "run": p["run_label"], "policy_run": p["run"]} for p in policies],
        "policy_run",
        POLICY_CHANGES,
    )
    sections: list[tuple[str, list[dict[str, Any]], Columns, int]] = [
        ("monitors", table, mcols, 3),
        ("policy runs", policies, pcols, 3),
        ("settings that differ", shown, scols, 1),
        (
            "monitors against the first run that has them",
            mchanges,
            _change_columns("monitor", "monitor", MONITOR_CHANGES),
            3,
        ),
        (
            "policy runs against the first run that has them",
            pchanges,
            _change_columns("policy_run", "policy run", POLICY_CHANGES),
            3,
        ),
    ]
    text_parts, md_parts = [], []
    for title, body, cols, names in sections:
        if not body and title != "monitors":
            continue
        text_parts.append(f"{title}:\n{format_table(body, cols, names)}")
        md_parts.append(f"### {title}\n\n{format_markdown(body, cols)}")
        if title == "monitors" and notes:
            text_parts[-1] += "".join(f"\n{n}" for n in notes)
    if not settings:
        text_parts.append("settings that differ: none")
    doc = {
        "runs": [r.label for r in runs],
        "monitors": table,
        "policies": policies,
        "settings": settings,
        "changes": {"monitors": mchanges, "policies": pchanges},
    }
    return "\n\n".join(text_parts), "\n\n".join(md_parts), doc


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (`python3 compare.py RUN...`)."""
    p = argparse.ArgumentParser(prog="tierscope compare", epilog=EPILOG)
    _arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
