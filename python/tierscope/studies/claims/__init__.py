"""The claims ledger (docs/results/CLAIMS.md): the papers' quantitative claims as data beside this
file, and `ledger`, which measures ours and gives each claim its status."""

from tierscope.studies.claims.ledger import (
    MEASURES,
    PAPERS,
    STATUSES,
    Claim,
    LedgerError,
    build,
    load_claims,
    render,
    resolve,
    rows_for,
    status,
)

__all__ = [
    "MEASURES",
    "PAPERS",
    "STATUSES",
    "Claim",
    "LedgerError",
    "build",
    "load_claims",
    "render",
    "resolve",
    "rows_for",
    "status",
]
