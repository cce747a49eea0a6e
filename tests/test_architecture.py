"""docs/ARCHITECTURE.md stays true: it names every registered monitor type, policy,
engine and tier preset, every feed kind and policy input, every crate and every
technique's and policy's source file, every document under docs/, and every path it cites
exists; and every technique and policy has a page under docs/techniques/. A registry
entry, a source file or a document added without a word in it fails here."""

from __future__ import annotations

import re
from pathlib import Path

from tierscope import _core

ROOT = Path(__file__).resolve().parent.parent
ARCH = ROOT / "docs" / "ARCHITECTURE.md"


def text() -> str:
    return ARCH.read_text(encoding="utf-8")


def test_every_registered_component_is_named() -> None:
    t = text()
    kinds = {p["type"] for p in _core.monitor_presets()}
    policies = {p["name"] for p in _core.policies()}
    engines = {e["name"] for e in _core.engines()}
    tiers = {p["name"] for p in _core.tier_presets()}
    for what, names in [
        ("monitor type", kinds),
        ("policy", policies),
        ("engine", engines),
        ("tier preset", tiers),
    ]:
        missing = sorted(n for n in names if f"`{n}`" not in t)
        assert not missing, f"docs/ARCHITECTURE.md does not name the {what}s {missing}"


def test_every_monitor_preset_is_in_the_format_reference() -> None:
    """docs/reference/EXPERIMENTS.md's preset table has one row per registered preset,
    with the preset's type."""
    doc = (ROOT / "docs" / "reference" / "EXPERIMENTS.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| ([a-z_]+) \|", doc, flags=re.M))
    for p in _core.monitor_presets():
        assert rows.get(p["name"]) == p["type"], (
            f"docs/reference/EXPERIMENTS.md's preset table: no row `{p['name']}` | {p['type']}"
        )


def test_every_crate_and_technique_file_is_named() -> None:
    t = text()
    crates = sorted(p.name for p in (ROOT / "crates").iterdir() if (p / "Cargo.toml").exists())
    missing = [c for c in crates if f"`{c}`" not in t]
    assert not missing, f"crates missing from docs/ARCHITECTURE.md: {missing}"
    sources = [
        *(ROOT / "crates/tierscope-monitors/src").glob("*.rs"),
        *(ROOT / "crates/tierscope-tiering/src/policy").glob("*.rs"),
    ]
    missing = sorted(
        p.name for p in sources if p.name not in ("lib.rs", "mod.rs") and f"`{p.name}`" not in t
    )
    assert not missing, f"source files missing from docs/ARCHITECTURE.md: {missing}"


def test_every_document_is_named() -> None:
    t = text()
    docs = sorted(
        p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md") if p != ARCH
    )
    missing = [d for d in docs if d not in t]
    assert not missing, f"documents missing from docs/ARCHITECTURE.md: {missing}"


def test_every_cited_path_exists() -> None:
    # Backticked repository paths: `crates/...`, `python/...`, `docs/...`, `tests/...`,
    # `experiments/...`, `scripts/...` (a trailing `/` for a directory).
    cited = set(re.findall(r"`((?:crates|python|docs|tests|experiments|scripts)/[^`\s]+)`", text()))
    # The recipes' placeholder files (`policy/foo.rs`, `techniques/FOO.md`) are not paths.
    missing = sorted(
        c for c in cited if "/foo." not in c.lower() and not (ROOT / c.rstrip("/")).exists()
    )
    assert not missing, f"docs/ARCHITECTURE.md cites paths that do not exist: {missing}"
    # The map names documents relative to docs/ (`models/MACHINE.md`): each one exists.
    named = set(
        re.findall(r"\b((?:guide|reference|models|techniques|results)/[A-Z_]+\.md)", text())
    )
    missing = sorted(d for d in named if "FOO." not in d and not (ROOT / "docs" / d).exists())
    assert not missing, f"docs/ARCHITECTURE.md names documents that do not exist: {missing}"


def test_every_technique_and_policy_has_a_page() -> None:
    # One page per technique and policy under docs/techniques/: each source file that
    # implements a registered monitor (`impl Technique for`) or policy (`impl
    # PolicyTechnique for`) is named on at least one page.
    pages = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs/techniques").glob("*.md"))
    sources = [
        *(ROOT / "crates/tierscope-monitors/src").glob("*.rs"),
        *(ROOT / "crates/tierscope-tiering/src/policy").glob("*.rs"),
    ]
    implementing = [
        p.name
        for p in sources
        if re.search(r"\bimpl (Policy)?Technique for\b", p.read_text(encoding="utf-8"))
    ]
    # The check finds one file per registered monitor type and policy.
    registered = {p["type"] for p in _core.monitor_presets()} | {
        p["name"] for p in _core.policies()
    }
    assert len(implementing) == len(registered), (implementing, sorted(registered))
    missing = sorted(n for n in implementing if n not in pages)
    assert not missing, f"no page under docs/techniques/ names {missing}"


def enum_variants(source: str, name: str) -> list[str]:
    """The variants of `pub enum NAME { ... }` in a Rust source (doc comments skipped)."""
    body = source.split(f"pub enum {name} {{", 1)[1].split("\n}", 1)[0]
    return re.findall(r"^\s{4}([A-Z]\w*)\b", body, flags=re.M)


def test_every_feed_kind_and_policy_input_is_named() -> None:
    # Typed feeds: what a monitor emits (FeedKind) and what a policy accepts (PolicyInput).
    t = text()
    feed = (ROOT / "crates/tierscope-core/src/feed.rs").read_text(encoding="utf-8")
    for enum in ("FeedKind", "PolicyInput"):
        variants = enum_variants(feed, enum)
        assert len(variants) >= 4, (enum, variants)
        missing = [v for v in variants if f"`{v}`" not in t and f"`{v}(" not in t]
        assert not missing, f"docs/ARCHITECTURE.md does not name the {enum}s {missing}"
