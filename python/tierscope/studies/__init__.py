"""The paper studies: reproductions built only from the library's public pieces (run,
load, sweeps, the tuner, the binding's NEMO use cases) and the shipped experiment files
(`tierscope.data`). `tierscope repro PAPER` runs them.

- `telescope`: the Telescope paper's section 6.2 (`repro telescope`), with its numbers in
  `telescope_paper` and the random layouts of `robustness`;
- `telescope_tiering`: its section 6.3, tiering driven by each monitor (`repro
  telescope-tiering`);
- `cori`: the Cori paper's Figures 1, 3 and 5 on generated traces (`repro cori`);
- `nemo`: the NEMO paper's three use cases and the SRAM a terabyte sweep needs (`repro
  nemo`);
- `claims`: the claims ledger, each paper's quantitative claims as data and the rules
  that give each its status beside ours (docs/results/CLAIMS.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_tables(staging: Path, text: str, doc: Any, *, indent: int = 1) -> None:
    """A study's two tables, into its output's staging directory: DIR/repro.md (`text`, as
    printed) and DIR/repro.json (`doc`; values JSON cannot hold are written as strings)."""
    (staging / "repro.md").write_text(text, encoding="utf-8")
    (staging / "repro.json").write_text(
        json.dumps(doc, indent=indent, default=str) + "\n", encoding="utf-8"
    )
