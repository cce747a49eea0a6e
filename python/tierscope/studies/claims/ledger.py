"""The claims ledger: every quantitative claim of the papers tierscope implements, with the
paper's value, ours, the command that produces ours, and one status.

The claims are data (`tierscope/studies/claims/PAPER.toml`, one `[[claim]]` each, numbered
per paper). A modelled claim names where ours comes from, and how it is judged, before
anything runs:

    [claim.ours]
    measure = "telescope"                  # a measurement of MEASURES: a tierscope command
    key = "quality[experiment=multiphase-5t,monitor=telescope-bnd].precision"
    note = "..."            # optional: what the reader must know (a calibrated input, a
                            # setting that differs from the paper's)

    [claim.check]
    paper = 0.92            # the paper's number (or [low, high] for a range; a one-sided
                            # claim is [low, inf] or [-inf, high], its tolerance absolute)
    tolerance = 0.05        # absolute, or "10%" of the paper's number: reproduced within it
    than = 0.5              # optional: the reference the claim's direction is about; ours
                            # is in the same direction when it lies on the paper's side

    [claim.sensitivity]     # for a claim ours disagrees with (or matches in direction
    assumption = "..."      # only): the one named assumption that, changed in a run,
                            # moves ours to the paper's
    command = "..."
    finding = "..."
    pinned = "yes"          # or "in part", "no": whether the run moved ours to the
                            # paper's (PINNED)

Statuses: `reproduced` (within the tolerance), `same direction` (on the paper's side of
`than`, another size), `disagrees` (neither; its row names the sensitivity run when there
is one), `not modelled` (`modelled = false` with `why_not`). Nothing here changes a status
but the measurement: the tolerance and the reference are stated in the data before running.

A measurement is a tierscope command run into its own directory of the ledger's output,
read back from the JSON it writes; a finished one is reused (a ledger resumes). `main` is
`tierscope repro claims`: it runs the measurements, writes DIR/CLAIMS.md and
DIR/claims.json, prints the counts per paper and status and exits 1 naming every problem
(a modelled claim without a command, a key or a check, a key its measurement lacks, a
measurement that failed).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

PAPERS = ("telescope", "cori", "nemo", "vmmload")

STATUSES = ("reproduced", "same direction", "disagrees", "not modelled")
#: What a sensitivity run shows (`pinned` in [claim.sensitivity]): the named assumption,
#: changed in the run, moves ours to the paper's ("yes"), toward it or over part of the gap
#: ("in part"), or does not ("no": the cause is named, not pinned). As the ledger says it.
PINNED = {"yes": "pinned", "in part": "pinned in part", "no": "not pinned"}


class LedgerError(Exception):
    """The claims data is malformed (one line naming the claim and the field)."""


@dataclass(frozen=True)
class Measure:
    """A tierscope command producing a JSON document of results."""

    #: The command as a user types it from the source tree; `DIR` stands for the output
    #: directory, `experiments/...` for a shipped experiment file (`tierscope.data`).
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
        return [sys.executable, "-m", "tierscope"] + [_word(w, directory) for w in words[1:]]


def _word(word: str, directory: Path) -> str:
    if word == "DIR":
        return str(directory)
    if word.startswith("experiments/"):
        from tierscope.data import experiments_dir

        return str(experiments_dir() / word.removeprefix("experiments/"))
    return word


def _run_measure(experiment: str, quick: str | None = None) -> Measure:
    """One experiment file's run; its metrics.json is the document."""
    command = f"tierscope run experiments/{experiment}.toml --out DIR --quiet"
    quick_command = (
        None if quick is None else f"tierscope run experiments/{quick}.toml --out DIR --quiet"
    )
    return Measure(command, output="metrics.json", quick=quick_command)


#: Every measurement a claim may name.
MEASURES: dict[str, Measure] = {
    "telescope": Measure(
        "tierscope repro telescope --out DIR --quiet",
        quick="tierscope repro telescope --quick --needle-seeds 2 --layouts 1 --layout-seeds 1 "
        "--out DIR --quiet",
    ),
    # Section 6.3 at the paper's length (40 minutes per run, telemetry from 150 s): its
    # rows are all 40-minute quantities. Quick: every run 6 s (the pipeline, not numbers).
    "telescope-tiering-paper": Measure(
        "tierscope repro telescope-tiering --paper-length --out DIR --quiet",
        quick="tierscope repro telescope-tiering --quick --out DIR --quiet",
    ),
    # The same with the application model measured on real memcached and Redis
    # (experiments/tiering/apps/, docs/models/TIERING.md section 4.1).
    "telescope-tiering-paper-measured": Measure(
        "tierscope repro telescope-tiering --app measured --paper-length --out DIR --quiet",
        quick="tierscope repro telescope-tiering --app measured --quick --out DIR --quiet",
    ),
    "nemo": Measure(
        "tierscope repro nemo --out DIR", quick="tierscope repro nemo --quick --out DIR"
    ),
    "cori": Measure("tierscope repro cori --out DIR"),
    # Figures 1 and 5 on traces of real programs (C kernels under valgrind lackey).
    "cori-programs": Measure(
        "tierscope repro cori-programs --out DIR",
        quick="tierscope repro cori-programs --quick --out DIR",
    ),
    "vmmload": Measure(
        "tierscope repro vmmload --out DIR", quick="tierscope repro vmmload --quick --out DIR"
    ),
    # The 1 PiB run of docs/models/FIDELITY.md (abstract: "petabyte-scale").
    "run-petabyte-1p": _run_measure("paper/petabyte-1p"),
    # Linear scanning's cost at 64 GiB (docs/results/BASELINES.md section 1); quick: at 1 GiB.
    "run-scan-cost-64g": _run_measure("baselines/scan-cost-64g", quick="baselines/scan-cost-1g"),
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
    note: str | None = None
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
            note=ours.get("note"),
            check=t.get("check") or {},
            sensitivity=t.get("sensitivity") or {},
        )

    def problems(self) -> list[str]:
        """What keeps this claim's row from being complete (empty: nothing)."""
        at = f"{self.paper}: claim {self.id}"
        if not self.modelled:
            return [] if self.why_not else [f"{at}: not modelled, but no `why_not`"]
        out = []
        if self.sensitivity and self.sensitivity.get("pinned") not in PINNED:
            out.append(
                f"{at}: its sensitivity run needs `pinned` = "
                + " / ".join(f'"{k}"' for k in PINNED)
            )
        if "by construction" in (self.note or "").lower():
            # Agreement an input guarantees is no evidence: such a claim names the input
            # instead (issue 25: nothing fitted to a claim's output counts as reproduced).
            out.append(
                f"{at}: its note says it agrees by construction: an input, so"
                " `modelled = false` with `why_not` naming the input"
            )
        if self.measure is None or self.key is None:
            out.append(f"{at}: modelled, but no `ours.measure` and `ours.key` (no command)")
        elif self.measure not in MEASURES:
            out.append(f"{at}: unknown measurement {self.measure!r}")
        if "paper" not in self.check:
            out.append(f"{at}: no `check.paper` (the paper's number, stated before running)")
        elif "tolerance" not in self.check:
            out.append(f"{at}: no `check.tolerance` (stated before running)")
        else:
            paper = self.check["paper"]
            bounds = paper if isinstance(paper, list) else [paper]
            if any(math.isinf(float(b)) for b in bounds) and isinstance(
                self.check["tolerance"], str
            ):
                out.append(f"{at}: a one-sided `check.paper` needs an absolute tolerance")
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


def _arguments(text: str) -> list[str]:
    """`a, b[x=1,y=2], c` -> its three keys (commas inside brackets are selectors')."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


_FIELD = re.compile(r'\s*([^=,\s]+)=(?:"([^"]*)"|([^,]*))\s*(?:,|$)')


def _selector(sel: str) -> dict[str, str]:
    """`a=x,b="y, z"` -> {"a": "x", "b": "y, z"} (a quoted value may hold commas)."""
    out, pos = {}, 0
    while pos < len(sel):
        m = _FIELD.match(sel, pos)
        if m is None or m.end() == pos:
            raise KeyError(f"bad selector [{sel}]")
        out[m[1]] = m[2] if m[2] is not None else m[3].strip()
        pos = m.end()
    return out


def resolve(doc: Any, key: str) -> Any:
    """The value at `key` in a JSON document: dot-separated names; `name[i]` indexes a
    list, `name[a=x,b=y]` picks its one element whose fields match (`b="y, z"`: a value
    with commas). `min(K1, K2, ...)`,
    `max(...)` and `mean(...)` are the least, greatest and mean of several keys' values
    (a claim about two variants or workloads, of a measurement that gives them apart;
    null values left out)."""
    for name, f in (("min(", min), ("max(", max), ("mean(", statistics.fmean)):
        if key.startswith(name) and key.endswith(")"):
            values = [resolve(doc, k) for k in _arguments(key[len(name) : -1])]
            present = [v for v in values if v is not None]
            return f(present) if present else None
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
        want = _selector(sel)
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


def _check_text(check: dict[str, Any]) -> str:
    """The check as the table shows it: the paper's number in ours' unit, the tolerance
    and the reference."""
    if "paper" not in check:
        return "-"
    p = check["paper"]
    text = f"[{_fmt(p[0])}, {_fmt(p[1])}]" if isinstance(p, list) else _fmt(p)
    tol = check.get("tolerance", 0)
    if tol not in (0, "0%"):
        text += f" ± {tol}" if isinstance(tol, str) else f" ± {_fmt(tol)}"
    if "than" in check:
        text += f"; than {_fmt(check['than'])}"
    return text


def rows_for(
    claims: Sequence[Claim],
    measured: dict[str, Any],
    quick: bool = False,
    out: str = "runs/claims",
    failed: dict[str, str] | None = None,
) -> tuple[list[Row], list[str]]:
    """The ledger's rows from the measurements' documents, and the problems found (a
    claim without a command, a key its measurement does not have). `out` is the ledger's
    directory as the rows' commands name it; `failed` the measurements that failed, with
    why."""
    rows, problems = [], []
    failed = failed or {}
    for c in claims:
        problems += c.problems()
        ours: float | None = None
        command = ""
        notes = [c.why_not or ""]
        if c.modelled and c.measure in MEASURES and c.key:
            m = MEASURES[c.measure]
            command = (m.quick if quick and m.quick else m.command).replace(
                "DIR", f"{out}/{c.measure}"
            )
            doc = measured.get(c.measure)
            if doc is not None:
                try:
                    v = resolve(doc, c.key)
                    ours = None if v is None else float(v)
                except (KeyError, IndexError, TypeError, ValueError) as e:
                    problems.append(f"{c.paper}: claim {c.id}: key {c.key!r}: {e}")
            elif c.measure in failed:
                notes.append(f"not measured: {failed[c.measure]}")
        notes.append(c.note or "")
        complete = "paper" in c.check and "tolerance" in c.check
        st = status(c, ours) if complete or not c.modelled else "disagrees"
        if st in ("disagrees", "same direction") and c.sensitivity:
            s = c.sensitivity
            pinned = PINNED.get(s.get("pinned", ""), "?")
            notes.append(
                f"cause ({pinned}): {s.get('assumption', '?')}; run `{s.get('command', '?')}`: "
                f"{s.get('finding', '')}"
            )
        note = " ".join(n for n in notes if n)
        rows.append(Row(c, ours, st, command, note))
    return rows, problems


def counts(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    """Per paper (and "all"), the number of claims per status."""
    out: dict[str, dict[str, int]] = {}
    for paper in (*PAPERS, "all"):
        mine = [r for r in rows if paper in ("all", r.claim.paper)]
        if mine:
            out[paper] = {s: sum(r.status == s for r in mine) for s in STATUSES}
    return out


#: A disagreement whose claim has no sensitivity run (CAUSES' last column).
NO_RUN = "no sensitivity run"
CAUSES = (*PINNED.values(), NO_RUN)


def causes(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    """Per paper (and "all"), the disagreements by what their sensitivity run shows
    (PINNED's labels, or NO_RUN)."""
    out: dict[str, dict[str, int]] = {}
    for paper in (*PAPERS, "all"):
        mine = [r for r in rows if r.status == "disagrees" and paper in ("all", r.claim.paper)]
        if mine:
            labels = [PINNED.get(r.claim.sensitivity.get("pinned", ""), NO_RUN) for r in mine]
            out[paper] = {label: labels.count(label) for label in CAUSES}
    return out


def counts_line(rows: Sequence[Row]) -> str:
    """One line: claims and statuses per paper, then all of them."""
    parts = []
    for paper, by in counts(rows).items():
        n = sum(by.values())
        parts.append(f"{paper} {n}: " + ", ".join(f"{v} {k}" for k, v in by.items()))
    return "claims: " + "; ".join(parts)


def render(rows: Sequence[Row], title: str = "Claims ledger", produced: str = "") -> str:
    """docs/results/CLAIMS.md: how it was produced, the counts and shares per paper and status,
    then one table per paper."""
    lines = [f"# {title}", ""]
    if produced:
        lines += [produced, ""]
    lines += [
        "Generated by `tierscope repro claims` from `python/tierscope/studies/claims/*.toml`"
        " (do not edit by hand). Statuses: reproduced within the tolerance stated in the data"
        " before running; same direction (ours on the paper's side of the stated reference,"
        " another size); disagrees (the note names the sensitivity run and whether it pins"
        " the cause: pinned when the named assumption, changed in the run, moves ours to the"
        " paper's; pinned in part when it moves ours toward it or explains part of the gap;"
        " not pinned when the cause is named but the run does not move ours there); not"
        " modelled (why). The check column gives the paper's number in the unit of ours, the"
        " tolerance and the reference (`than`).",
        "",
        "Conventions, stated in the data before running: precision and recall within 0.05;"
        " times, cycles, CPU and latencies within 10 % (20 % where the paper writes ~, ≈,"
        " about or around); the paper's words as numbers: 'high' or '90%+' is [0.9, 1], '~0'"
        " is 0 and 'low' is [0, 0.1], each with `than` 0.5; a trend without a number is its"
        " direction, counted when ours moves by more than the noise (0.05 for precision and"
        " recall, 10 % for a ratio). A claim about several variants or workloads is checked"
        " on the least favourable of ours (a minimum for 'high', a maximum for 'low'), a"
        " claim about two named ones on the first named. Settings, hardware, formulas and"
        " worked examples the paper states are inputs of tierscope's models, not results:"
        " those rows are `not modelled` and say which input they are.",
        "",
        "| paper | claims | " + " | ".join(STATUSES) + " |",
        "|---|---:|" + "---:|" * len(STATUSES),
    ]
    by_paper = counts(rows)
    for paper, by in by_paper.items():
        n = sum(by.values())
        cells = [f"{by[s]} ({100 * by[s] / n:.0f} %)" for s in STATUSES]
        name = "**all**" if paper == "all" else paper
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    by_cause = causes(rows)
    if by_cause:
        lines += [
            "",
            "The disagreements by what their sensitivity run shows:",
            "",
            "| paper | disagrees | " + " | ".join(CAUSES) + " |",
            "|---|---:|" + "---:|" * len(CAUSES),
        ]
        for paper, by in by_cause.items():
            name = "**all**" if paper == "all" else paper
            cells = [str(by[label]) for label in CAUSES]
            lines.append(f"| {name} | {sum(by.values())} | " + " | ".join(cells) + " |")
    for paper in PAPERS:
        mine = [r for r in rows if r.claim.paper == paper]
        if not mine:
            continue
        lines += [
            "",
            f"## {paper}",
            "",
            "| id | where | quantity (setting) | paper | check | ours | status | command / note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            c = r.claim
            what = c.quantity + (f" ({c.setting})" if c.setting else "")
            how = " ".join(x for x in [f"`{r.command}`" if r.command else "", r.note] if x)
            check = _check_text(c.check) if c.modelled else "-"
            cells = [c.id, c.where, what, c.value, check, _fmt(r.ours), r.status, how]
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
    out: Path,
    *,
    quick: bool = False,
    papers: Sequence[str] = PAPERS,
    runner: Runner = _run,
    produced: str = "",
    on_measured: Callable[[str, float | None], None] | None = None,
) -> tuple[str, list[Row], list[str]]:
    """Runs the measurements the claims of `papers` name and returns the ledger's text,
    its rows and its problems (a failed measurement is one; its claims stay unmeasured).
    `on_measured(name, wall_s)` is called after each (wall_s None: reused)."""
    claims = load_claims(papers)
    needed = sorted({c.measure for c in claims if c.modelled and c.measure in MEASURES})
    measured: dict[str, Any] = {}
    failed: dict[str, str] = {}

    def one(name: str) -> tuple[str, Any, str | None, float | None]:
        reused = (out / name / MEASURES[name].output).is_file()
        t0 = time.monotonic()
        try:
            doc = measure(name, out, quick, runner)
        except (LedgerError, json.JSONDecodeError) as e:
            return name, None, str(e), None
        return name, doc, None, None if reused else time.monotonic() - t0

    # The quick variants run two at a time (each is mostly one core); the full ones one
    # after another, so that each one's wall time is its own.
    workers = min(2, os.cpu_count() or 1) if quick else 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        for name, doc, error, wall_s in pool.map(one, needed):
            if error is not None:
                failed[name] = error
                continue
            measured[name] = doc
            if on_measured is not None:
                on_measured(name, wall_s)
    rows, problems = rows_for(claims, measured, quick, str(out), failed)
    problems = [f"{n}: {why}" for n, why in failed.items()] + problems
    return render(rows, produced=produced), rows, problems


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[4]
    if not (root / ".git").exists():
        return None
    r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    return r.stdout.strip() if r.returncode == 0 else None


def _adopt(directory: Path) -> list[str] | None:
    """An earlier ledger's directory from before its manifest: only measurements' outputs
    (directories of MEASURES, each tierscope's) and the ledger's own files."""
    ours = set(MEASURES) | {"CLAIMS.md", "claims.json", "timings.json"}
    entries = list(directory.iterdir())
    if all(e.name in ours for e in entries):
        return [e.name for e in entries if e.is_file()]
    return None


def main(out: str | None, *, quick: bool = False, papers: Sequence[str] | None = None) -> int:
    """`tierscope repro claims`: the ledger of `papers` (default all) into `out` (default
    runs/claims, runs/claims-quick with `quick`). Prints the counts per paper and status;
    returns 1 with one line per problem on stderr, else 0."""
    from tierscope import outdir

    target = Path(out if out is not None else ("runs/claims-quick" if quick else "runs/claims"))
    chosen = list(papers or PAPERS)
    try:
        load_claims(chosen)
    except (LedgerError, tomllib.TOMLDecodeError) as e:
        print(f"tierscope: claims: {e}", file=sys.stderr)
        return 2
    with outdir.claim(target, "claims", resume=True, adopt=_adopt) as claim:
        earlier = target / "claims.json"
        if earlier.is_file():
            was = json.loads(earlier.read_text(encoding="utf-8")).get("quick")
            if was is not None and bool(was) != quick:
                raise outdir.OutputError(
                    f"{target}: holds a {'quick' if was else 'full'} ledger's measurements; "
                    "choose another --out"
                )
        timings_path = target / "timings.json"
        timings: dict[str, Any] = (
            json.loads(timings_path.read_text(encoding="utf-8")) if timings_path.is_file() else {}
        )

        commit = _git("rev-parse", "--short", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))

        def on_measured(name: str, wall_s: float | None) -> None:
            # Each measurement keeps the commit it was taken at: a later ledger that
            # reuses it says so.
            if wall_s is not None:
                timings[name] = {"wall_s": round(wall_s, 1), "quick": quick}
                if commit:
                    timings[name]["commit"] = commit + ("+" if dirty else "")
                claim.put("timings.json", (json.dumps(timings, indent=1) + "\n").encode())

        words = ["tierscope", "repro", "claims"] + (["--quick"] if quick else [])
        words += [f"--paper {p}" for p in papers or []] + ["--out", str(target)]
        produced = (
            f"Produced by `{' '.join(words)}` on "
            f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC at commit "
            f"{commit or '(not a git tree)'}"
            + (" (the working tree had uncommitted changes)" if dirty else "")
            + f", on {os.cpu_count()} cores."
        )
        text, rows, problems = build(
            target, quick=quick, papers=chosen, produced=produced, on_measured=on_measured
        )
        if timings:
            walls = ", ".join(
                f"{n} {t['wall_s']:.0f} s" + (f" at {t['commit']}" if "commit" in t else "")
                for n, t in sorted(timings.items())
                if "wall_s" in t
            )
            text = text.replace(
                produced,
                produced + " Measurements' wall times and commits (a + marks uncommitted "
                f"changes): {walls}.",
                1,
            )
        doc = {
            "quick": quick,
            "papers": chosen,
            "produced": produced,
            "counts": counts(rows),
            "disagreements_by_cause": causes(rows),
            "problems": problems,
            "rows": [
                {
                    "paper": r.claim.paper,
                    "id": r.claim.id,
                    "where": r.claim.where,
                    "quantity": r.claim.quantity,
                    "setting": r.claim.setting,
                    "paper_value": r.claim.value,
                    "check": r.claim.check,
                    "measure": r.claim.measure,
                    "key": r.claim.key,
                    "ours": r.ours,
                    "status": r.status,
                    "command": r.command,
                    "note": r.note,
                }
                for r in rows
            ],
        }
        claim.put("CLAIMS.md", text.encode())
        claim.put("claims.json", (json.dumps(doc, indent=1) + "\n").encode())
    print(counts_line(rows))
    print(f"wrote {target}/CLAIMS.md and claims.json")
    for p in problems:
        print(f"tierscope: claims: {p}", file=sys.stderr)
    return 1 if problems else 0
