"""`tierscope compare DIR`: the monitors of one run side by side, in the shape of the
Telescope paper's Table 2 (kernel-thread cycles) and Figure 10 (ACCESSED bits flipped),
with precision, recall, flushes, PMU samples, the missed hot memory and the modelled
application slowdown. When the experiment has `[tiering]`, a second table has one row per
policy run: speed-up over all-slow, gap to the oracle, fast-tier hit ratio, bytes
migrated and the migrations' CPU time.

It reads DIR/metrics.json only (written by `tierscope run`), prints the table(s) and writes
DIR/compare.md (the tables as Markdown), DIR/compare.json (the monitor rows) and, with
policy runs, DIR/compare-policies.json (the policy rows). It imports nothing from the
extension, so it also runs as `python3 python/tierscope/cli/compare.py DIR`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
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
#: docs/KVM.md): "yes", or "NO" with the reason printed below the table.
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
(docs/BASELINES.md); valid (only when some run is not) = NO where the kvm engine fell
short of what was asked, or the monitor cannot see this host's ACCESSED bits set again
(docs/KVM.md): its scores are kept, the reason follows the table.

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
        help="compare the monitors of a run (cycles, bits flipped, precision/recall)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _arguments(p)
    p.set_defaults(func=run)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="output directory of `tierscope run`")
    p.add_argument(
        "--format",
        choices=("table", "markdown", "json"),
        default="table",
        help="what to print (default: an aligned table); the files are written regardless. "
        "json prints the monitor rows, or with policy runs {monitors: [...], policies: [...]}",
    )
    p.add_argument("--no-write", action="store_true", help="print only; write no files")


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


def format_table(table: list[dict[str, Any]], columns: Columns = COLUMNS) -> str:
    """An aligned table: the first two columns (names) left-aligned, the rest right."""
    headers, body = _cells(table, columns)
    widths = [max(len(x) for x in col) for col in zip(headers, *body, strict=True)]
    lines = []
    for i, row in enumerate([headers, *body]):
        lines.append(
            "  ".join(
                c.ljust(w) if j < 2 else c.rjust(w)
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


def run(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    try:
        metrics = load(directory)
    except CompareError as e:
        print(f"tierscope: error: {e}", file=sys.stderr)
        return 2
    table, policies = rows(metrics), policy_rows(metrics)
    columns, notes = monitor_columns(table)
    markdown = format_markdown(table, columns) + "".join(f"\n\n{n}" for n in notes)
    if policies:
        markdown += "\n\n" + format_markdown(policies, POLICY_COLUMNS)
    if args.format == "json":
        # Without policy runs, the monitor rows as before; with them, both lists.
        doc: Any = {"monitors": table, "policies": policies} if policies else table
        print(json.dumps(doc, indent=2))
    elif args.format == "markdown":
        print(markdown)
    else:
        print(format_table(table, columns))
        for note in notes:
            print(note)
        if policies:
            print()
            print(format_table(policies, POLICY_COLUMNS))
    if not args.no_write:
        (directory / "compare.md").write_text(markdown + "\n")
        (directory / "compare.json").write_text(json.dumps(table, indent=2) + "\n")
        if policies:
            text = json.dumps(policies, indent=2) + "\n"
            (directory / "compare-policies.json").write_text(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (`python3 compare.py DIR`)."""
    p = argparse.ArgumentParser(prog="tierscope compare", epilog=EPILOG)
    _arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
