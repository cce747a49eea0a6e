"""The claims ledger (tierscope/studies/claims): the shipped claims load and are complete,
the status rules and the key language by hand, the table's counts, a measurement reused
once done, and `tierscope repro claims --quick` through the CLI (every row with a command
or a reason; skipped where KVM or musl-gcc is missing, which repro vmmload needs, or
valgrind, which repro cori-programs needs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import QuickLedger
from test_repro_nemo import check_quick_repro
from test_repro_seeds import check_needle_seed_means
from tierscope.studies.claims import (
    MEASURES,
    PAPERS,
    Claim,
    LedgerError,
    ledger,
    load_claims,
    render,
    resolve,
    rows_for,
    status,
)


def claim(**kw: object) -> Claim:
    base: dict[str, object] = {
        "paper": "telescope",
        "id": "T0",
        "where": "Table 3",
        "quantity": "precision",
        "value": "0.92",
        "setting": "5 TB",
        "modelled": True,
    }
    base.update(kw)
    return Claim(**base)  # type: ignore[arg-type]


def test_the_shipped_claims_load_with_unique_ids_per_paper() -> None:
    claims = load_claims()
    assert {c.paper for c in claims} == set(PAPERS)
    for paper in PAPERS:
        ids = [c.id for c in claims if c.paper == paper]
        prefix = ids[0][0]
        assert all(i[0] == prefix for i in ids), paper
        numbers = [int(i[1:]) for i in ids]
        assert numbers == sorted(numbers), f"{paper}: ids out of paper order"
    for c in claims:
        assert c.modelled or c.why_not, f"{c.id}: not modelled without a reason"


def test_statuses_by_hand() -> None:
    c = claim(check={"paper": 0.92, "tolerance": 0.05, "than": 0.5})
    assert status(c, 0.90) == "reproduced"
    assert status(c, 0.97) == "reproduced"
    assert status(c, 0.70) == "same direction"
    assert status(c, 0.30) == "disagrees"
    assert status(c, None) == "disagrees"
    # A relative tolerance, a range, and no reference: outside is a disagreement.
    c = claim(check={"paper": 200, "tolerance": "10%"})
    assert status(c, 215) == "reproduced" and status(c, 225) == "disagrees"
    c = claim(check={"paper": [5.6, 34.0], "tolerance": 0})
    assert status(c, 20) == "reproduced" and status(c, 40) == "disagrees"
    assert status(claim(modelled=False, why_not="no FPGA"), None) == "not modelled"


def test_every_modelled_shipped_claim_names_a_command_a_key_and_a_check() -> None:
    problems = [p for c in load_claims() for p in c.problems()]
    assert problems == []


def test_every_disagreement_in_the_shipped_ledger_names_its_sensitivity_run() -> None:
    # Issue 25: a `disagrees` row of docs/results/CLAIMS.md links the run that pins (or
    # tries to pin) its cause: its claim carries an assumption, a command and a finding.
    ledger_md = Path(__file__).resolve().parent.parent / "docs/results/CLAIMS.md"
    disagreeing = set(re.findall(r"(?m)^\| ([A-Z]\d+) \|.*\| disagrees \|", ledger_md.read_text()))
    assert len(disagreeing) > 10
    claims = {c.id: c for c in load_claims()}
    for cid in sorted(disagreeing):
        s = claims[cid].sensitivity
        assert all(s.get(k) for k in ("assumption", "command", "finding", "pinned")), cid


def test_a_disagreement_says_whether_its_run_pins_the_cause() -> None:
    check = {"paper": 0.92, "tolerance": 0.05}
    base = {"assumption": "a", "command": "tierscope run x.toml", "finding": "f"}
    for pinned, fine in (("yes", True), ("in part", True), ("no", True), ("maybe", False)):
        c = claim(measure="telescope", key="k", check=check, sensitivity={**base, "pinned": pinned})
        assert (c.problems() == []) == fine, pinned
    c = claim(measure="telescope", key="k", check=check, sensitivity=base)
    assert any("pinned" in p for p in c.problems())
    # The note says it, and the ledger counts the disagreements by it.
    claims = [
        claim(
            id=f"T{i}", measure="telescope", key="v", check=check, sensitivity={**base, "pinned": p}
        )
        for i, p in enumerate(("yes", "no", "no"), start=1)
    ]
    rows, _ = rows_for(claims, {"telescope": {"v": 0.3}})
    assert [r.status for r in rows] == ["disagrees"] * 3
    assert "cause (pinned): a" in rows[0].note and "cause (not pinned): a" in rows[1].note
    text = render(rows)
    assert "| **all** | 3 | 1 | 0 | 2 | 0 |" in text
    # A disagreement without a run is counted as such, not dropped.
    rows, _ = rows_for(
        [*claims, claim(id="T9", measure="telescope", key="v", check=check)],
        {"telescope": {"v": 0.3}},
    )
    assert "| **all** | 4 | 1 | 0 | 2 | 1 |" in render(rows)


def test_a_claim_that_agrees_by_construction_is_an_input() -> None:
    check = {"paper": 49.2, "tolerance": "10%"}
    c = claim(measure="telescope", key="k", check=check, note="Fitted here: by construction.")
    assert any("by construction" in p for p in c.problems())
    c = claim(measure="telescope", key="k", check=check, note="A prediction of the fit.")
    assert c.problems() == []


def test_keys_take_quoted_values_and_the_least_greatest_or_mean_of_keys() -> None:
    doc = {"rows": [{"t": "NEMO (a, b)", "v": 1.0}, {"t": "MBM 1 ms", "v": 3.0}], "n": None}
    assert resolve(doc, 'rows[t="NEMO (a, b)"].v') == 1.0
    assert resolve(doc, "rows[t=MBM 1 ms].v") == 3.0
    both = 'rows[t="NEMO (a, b)"].v, rows[t=MBM 1 ms].v'
    assert resolve(doc, f"min({both})") == 1.0
    assert resolve(doc, f"max({both}, n)") == 3.0
    assert resolve(doc, f"mean({both})") == 2.0
    assert resolve(doc, "min(n, n)") is None


def test_one_sided_claims_need_an_absolute_tolerance() -> None:
    c = claim(measure="telescope", key="k", check={"paper": [1.1, float("inf")], "tolerance": 0})
    assert c.problems() == []
    assert status(c, 2.0) == "reproduced" and status(c, 1.05) == "disagrees"
    c.check["than"] = 1.0
    assert status(c, 1.05) == "same direction"
    c.check["tolerance"] = "10%"
    assert any("absolute tolerance" in p for p in c.problems())


def test_keys_select_rows_by_their_fields() -> None:
    doc = {
        "quality": [
            {"experiment": "a", "monitor": "m1", "precision": 0.5},
            {"experiment": "a", "monitor": "m2", "precision": 0.7},
            {"experiment": "b", "monitor": "m1", "precision": 0.9},
        ],
        "wall_s": 12,
    }
    assert resolve(doc, "quality[experiment=a,monitor=m2].precision") == 0.7
    assert resolve(doc, "quality[2].monitor") == "m1"
    assert resolve(doc, "wall_s") == 12
    with pytest.raises(KeyError, match="matches 2 rows"):
        resolve(doc, "quality[experiment=a].precision")
    with pytest.raises(KeyError):
        resolve(doc, "missing")


def test_rows_name_the_command_and_what_is_missing() -> None:
    ok = claim(
        id="T1",
        measure="telescope",
        key="quality[monitor=m].precision",
        check={"paper": 0.9, "tolerance": 0.05},
    )
    no_command = claim(id="T2", check={"paper": 1.0})
    bad_key = claim(id="T3", measure="telescope", key="nope", check={"paper": 1.0})
    skipped = claim(id="T4", modelled=False, why_not="hardware")
    doc = {"quality": [{"monitor": "m", "precision": 0.88}]}
    rows, problems = rows_for([ok, no_command, bad_key, skipped], {"telescope": doc})
    assert [r.status for r in rows] == ["reproduced", "disagrees", "disagrees", "not modelled"]
    assert rows[0].ours == 0.88 and "tierscope repro telescope" in rows[0].command
    assert any("T2" in p and "no command" in p for p in problems)
    assert any("T3" in p and "nope" in p for p in problems)
    text = render(rows)
    assert "| telescope | 4 | 1 (25 %) | 0 (0 %) | 2 (50 %) | 1 (25 %) |" in text
    assert "`tierscope repro telescope --out runs/claims/telescope --quiet`" in text


def test_a_finished_measurement_is_reused(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def runner(argv: list[str]) -> int:
        calls.append(argv)
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "repro.json").write_text(json.dumps({"rows": [1]}))
        return 0

    assert ledger.measure("cori", tmp_path, False, runner) == {"rows": [1]}
    assert ledger.measure("cori", tmp_path, False, runner) == {"rows": [1]}
    assert len(calls) == 1
    assert calls[0][1:4] == ["-m", "tierscope", "repro"]

    def failing(argv: list[str]) -> int:
        return 3

    with pytest.raises(LedgerError, match="failed"):
        ledger.measure("telescope", tmp_path, False, failing)


def test_every_measurement_is_a_tierscope_command() -> None:
    for name, m in MEASURES.items():
        assert m.command.startswith("tierscope ") and "DIR" in m.command, name


def test_repro_claims_quick_through_the_cli(quick_ledger: QuickLedger) -> None:
    r = quick_ledger.proc
    assert r.returncode == 0, r.stderr[-2000:]
    counts = [line for line in r.stdout.splitlines() if line.startswith("claims: ")]
    assert len(counts) == 1, r.stdout[-2000:]
    for paper in PAPERS:
        assert re.search(rf"\b{paper} \d+: \d+ reproduced, \d+ same direction, ", counts[0])
    text = (quick_ledger.out / "CLAIMS.md").read_text()
    rows = [line for line in text.splitlines() if re.match(r"^\| [TCNV]\d+ \|", line)]
    assert len(rows) == len(load_claims())
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        status_cell, how = cells[6], cells[7]
        if status_cell == "not modelled":
            assert how, row
        else:
            assert "`tierscope " in how, row
    doc = json.loads((quick_ledger.out / "claims.json").read_text())
    assert doc["quick"] is True and doc["problems"] == []
    # Every measurement was taken by this ledger: its wall time, and its commit in a git tree.
    walls = re.search(r"Measurements' wall times and commits \(.*?\): (.*?)\.\n", text)
    assert walls is not None, text[:2000]
    in_git = "at commit (not a git tree)" not in doc["produced"]
    for name in ("telescope", "nemo", "cori"):
        pattern = rf"\b{name} \d+ s" + (r" at [0-9a-f]{7,}\+?" if in_git else "")
        assert re.search(pattern, walls.group(1)), walls.group(1)
    # Nothing outside --out: the quick ledger never writes docs/.
    assert sorted(p.name for p in quick_ledger.base.iterdir()) == ["claims"]
    # Its measurements are the quick repros' own outputs: checked here as their tests
    # check them (those tests run their own only where the ledger cannot run).
    check_quick_repro(quick_ledger.measurement("nemo"))
    telescope = quick_ledger.measurement("telescope")
    check_needle_seed_means(telescope, (telescope / "repro.md").read_text())
    print(f"repro claims --quick: {quick_ledger.wall_s:.0f} s wall")
