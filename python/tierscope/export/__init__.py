"""Writers of run results in other tools' formats."""
