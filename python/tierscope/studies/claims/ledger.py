"""The claims ledger: every quantitative claim of the papers tierscope implements, with the
paper's value, ours, the command that produces ours, and one status.

The claims are data (`tierscope/studies/claims/PAPER.toml`, one `[[claim]]` each, numbered
per paper). A modelled claim names where ours comes from, and how it is judged, before
anything runs:

    [claim.ours]
    measure = "telescope"                  # a measurement of MEASURES: a tierscope command
    key = "quality[experiment=multiphase-5t,monitor=telescope-bnd].precision"

    [claim.check]
    paper = 0.92            # the paper's number (or [low, high] for a range)
    tolerance = 0.05        # absolute, or "10%" of the paper's number: reproduced within it
    than = 0.5              # optional: the reference the claim's direction is about; ours
                            # is in the same direction when it lies on the paper's side

    [claim.sensitivity]     # for a claim ours disagrees with: the one named assumption
    assumption = "..."      # that, changed in a run, moves ours to the paper's
    command = "..."
    finding = "..."

Statuses: `reproduced` (within the tolerance), `same direction` (on the paper's side of
`than`, another size), `disagrees` (neither; its row names the sensitivity run when there
is one), `not modelled` (`modelled = false` with `why_not`). Nothing here changes a status
but the measurement: the tolerance and the reference are stated in the data before running.

A measurement is a tierscope command run into its own directory of the ledger's output,
read back from the JSON it writes; a finished one is reused (a ledger resumes).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

PAPERS = ("telescope", "cori", "nemo", "vmmload")

STATUSES = ("reproduced", "same direction", "disagrees", "not modelled")


class LedgerError(Exception):
    """The claims data is malformed (one line naming the claim and the field)."""


@dataclass(frozen=True)
class Measure:
    """A tierscope command producing a JSON document of results."""

    #: The command as a user types it; `DIR` stands for the output directory.
    command: str
    #: The file (under DIR) holding the results.
    output: str = "repro.json"
    #: The shorter variant for the test suite (None: the same command).
    quick: str | None = None

    def argv(self, directory: Path, quick: bool) -> list[str]:
        text = self.quick if quick and self.quick is not None else self.command
        words = shlex.split(text)
        if words[0] != "tierscope":
            raise LedgerError(f"a measurement runs tierscope, not {words[0]!r}")
        return [sys.executable, "-m", "tierscope"] + [
            str(directory) if w == "DIR" else w for w in words[1:]
        ]


#: Every measurement a claim may name.
MEASURES: dict[str, Measure] = {
    "telescope": Measure(
        "tierscope repro telescope --out DIR",
        quick="tierscope repro telescope --only subtb-1g --needle-seeds 0 --layouts 0 --out DIR",
    ),
    "telescope-tiering": Measure(
        "tierscope repro telescope-tiering --out DIR",
    ),
    "nemo": Measure(
        "tierscope repro nemo --out DIR", quick="tierscope repro nemo --quick --out DIR"
    ),
    "cori": Measure("tierscope repro cori --out DIR"),
}


@dataclass
class Claim:
    paper: str
    id: str
    where: str
    quantity: str
    value: str
    setting: str
    modelled: bool
    why_not: str | None = None
    measure: str | None = None
    key: str | None = None
    check: dict[str, Any] = field(default_factory=dict)
    sensitivity: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_table(cls, paper: str, t: dict[str, Any]) -> Claim:
        cid = t.get("id", "?")

        def need(name: str) -> Any:
            if name not in t:
                raise LedgerError(f"{paper}.toml: claim {cid}: `{name}` is missing")
            return t[name]

        ours = t.get("ours") or {}
        if not isinstance(ours, dict):
            raise LedgerError(f"{paper}.toml: claim {cid}: `ours` must be a table")
        return cls(
            paper=paper,
            id=need("id"),
            where=need("where"),
            quantity=need("quantity"),
            value=str(need("value")),
            setting=t.get("setting", ""),
            modelled=bool(t.get("modelled", True)),
            why_not=t.get("why_not"),
            measure=ours.get("measure"),
            key=ours.get("key"),
            check=t.get("check") or {},
            sensitivity=t.get("sensitivity") or {},
        )

    def problems(self) -> list[str]:
        """What keeps this claim's row from being complete (empty: nothing)."""
        at = f"{self.paper}: claim {self.id}"
        if not self.modelled:
            return [] if self.why_not else [f"{at}: not modelled, but no `why_not`"]
        out = []
        if self.measure is None or self.key is None:
            out.append(f"{at}: modelled, but no `ours.measure` and `ours.key` (no command)")
        elif self.measure not in MEASURES:
            out.append(f"{at}: unknown measurement {self.measure!r}")
        if "paper" not in self.check:
            out.append(f"{at}: no `check.paper` (the paper's number, stated before running)")
        return out


def load_claims(papers: Iterable[str] = PAPERS) -> list[Claim]:
    """Every claim of `papers`, in paper then file order."""
    out = []
    base = resources.files("tierscope.studies.claims")
    for paper in papers:
        doc = tomllib.loads(base.joinpath(f"{paper}.toml").read_text(encoding="utf-8"))
        for t in doc.get("claim", []):
            out.append(Claim.from_table(paper, t))
    seen: set[str] = set()
    for c in out:
        if c.id in seen:
            raise LedgerError(f"{c.paper}: claim id {c.id} twice")
        seen.add(c.id)
    return out


_SELECT = re.compile(r"^(?P<name>[^\[\]]*)(\[(?P<sel>[^\]]*)\])?$")


def resolve(doc: Any, key: str) -> Any:
    """The value at `key` in a JSON document: dot-separated names; `name[i]` indexes a
    list, `name[a=x,b=y]` picks its one element whose fields match."""
    v = doc
    for part in key.split("."):
        m = _SELECT.match(part)
        if m is None:
            raise KeyError(f"bad key segment {part!r}")
        if m["name"]:
            if not isinstance(v, dict) or m["name"] not in v:
                raise KeyError(f"no {m['name']!r} at {part!r}")
            v = v[m["name"]]
        sel = m["sel"]
        if sel is None:
            continue
        if not isinstance(v, list):
            raise KeyError(f"{part!r}: not a list")
        if sel.isdigit():
            v = v[int(sel)]
            continue
        want = dict(kv.split("=", 1) for kv in sel.split(","))
        hits = [x for x in v if all(str(x.get(k)) == w for k, w in want.items())]
        if len(hits) != 1:
            raise KeyError(f"{part!r} matches {len(hits)} rows")
        v = hits[0]
    return v


def _tolerance(check: dict[str, Any], paper: float) -> float:
    t = check.get("tolerance", 0)
    if isinstance(t, str) and t.endswith("%"):
        return abs(paper) * float(t[:-1]) / 100
    return float(t)


def status(claim: Claim, ours: float | None) -> str:
    """The claim's status for `ours` (None: not measured)."""
    if not claim.modelled:
        return "not modelled"
    if ours is None:
        return "disagrees"
    paper = claim.check["paper"]
    lo, hi = (paper, paper) if not isinstance(paper, list) else (min(paper), max(paper))
    tol = _tolerance(claim.check, (lo + hi) / 2)
    if lo - tol <= ours <= hi + tol:
        return "reproduced"
    than = claim.check.get("than")
    if than is not None:
        side = (lo + hi) / 2 - float(than)
        if side != 0 and (ours - float(than)) * side > 0:
            return "same direction"
    return "disagrees"


@dataclass
class Row:
    claim: Claim
    ours: float | None
    status: str
    command: str
    note: str


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}"


def rows_for(
    claims: Sequence[Claim], measured: dict[str, Any], quick: bool = False
) -> tuple[list[Row], list[str]]:
    """The ledger's rows from the measurements' documents, and the problems found (a
    claim without a command, a key its measurement does not have)."""
    rows, problems = [], []
    for c in claims:
        problems += c.problems()
        ours: float | None = None
        command = ""
        note = c.why_not or ""
        if c.modelled and c.measure in MEASURES and c.key:
            m = MEASURES[c.measure]
            command = (m.quick if quick and m.quick else m.command).replace(
                "DIR", f"runs/claims/{c.measure}"
            )
            doc = measured.get(c.measure)
            if doc is not None:
                try:
                    v = resolve(doc, c.key)
                    ours = None if v is None else float(v)
                except (KeyError, IndexError, TypeError, ValueError) as e:
                    problems.append(f"{c.paper}: claim {c.id}: key {c.key!r}: {e}")
        st = status(c, ours) if "paper" in c.check or not c.modelled else "disagrees"
        if st == "disagrees" and c.sensitivity:
            s = c.sensitivity
            note = (
                f"cause: {s.get('assumption', '?')}; run `{s.get('command', '?')}`: "
                f"{s.get('finding', '')}"
            )
        rows.append(Row(c, ours, st, command, note))
    return rows, problems


def render(rows: Sequence[Row], title: str = "Claims ledger") -> str:
    """docs/CLAIMS.md: the counts per paper and status, then one table per paper."""
    lines = [f"# {title}", ""]
    lines += [
        "Generated by `tierscope repro claims` from `python/tierscope/studies/claims/*.toml`"
        " (do not edit by hand). Statuses: reproduced within the tolerance stated in the data"
        " before running; same direction (ours on the paper's side of the stated reference,"
        " another size); disagrees (the note names the sensitivity run where the cause is"
        " pinned); not modelled (why).",
        "",
        "| paper | claims | " + " | ".join(STATUSES) + " |",
        "|---|---:|" + "---:|" * len(STATUSES),
    ]
    for paper in PAPERS:
        mine = [r for r in rows if r.claim.paper == paper]
        if not mine:
            continue
        counts = [sum(r.status == s for r in mine) for s in STATUSES]
        lines.append(f"| {paper} | {len(mine)} | " + " | ".join(map(str, counts)) + " |")
    for paper in PAPERS:
        mine = [r for r in rows if r.claim.paper == paper]
        if not mine:
            continue
        lines += [
            "",
            f"## {paper}",
            "",
            "| id | where | quantity (setting) | paper | ours | status | command / note |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            c = r.claim
            what = c.quantity + (f" ({c.setting})" if c.setting else "")
            how = " ".join(x for x in [f"`{r.command}`" if r.command else "", r.note] if x)
            cells = [c.id, c.where, what, c.value, _fmt(r.ours), r.status, how]
            lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines) + "\n"


Runner = Callable[[list[str]], int]


def _run(argv: list[str]) -> int:
    return subprocess.run(argv, check=False).returncode


def measure(name: str, out: Path, quick: bool, runner: Runner = _run) -> Any:
    """Runs measurement `name` into out/NAME (reused when its output exists) and returns
    its document."""
    m = MEASURES[name]
    directory = out / name
    result = directory / m.output
    if not result.is_file():
        status = runner(m.argv(directory, quick))
        if status != 0 or not result.is_file():
            raise LedgerError(f"measurement {name!r} failed (`{m.command}`, status {status})")
    return json.loads(result.read_text(encoding="utf-8"))


def build(
    out: Path, *, quick: bool = False, papers: Sequence[str] = PAPERS, runner: Runner = _run
) -> tuple[str, list[Row], list[str]]:
    """Runs the measurements the claims of `papers` name and returns the ledger's text,
    its rows and its problems."""
    claims = load_claims(papers)
    needed = sorted({c.measure for c in claims if c.modelled and c.measure in MEASURES})
    measured = {name: measure(name, out, quick, runner) for name in needed}
    rows, problems = rows_for(claims, measured, quick)
    return render(rows), rows, problems
