"""Every spec section the repository cites has a heading in docs/spec/, and the modules docs/spec points at exist.

Citations look like `seed 000 §11`, `seed 000 §15/§16`, `seed 000 §8–§12`, `seed §7` (seed 000 is meant),
`DESIGN §5`; a heading is `## §11 ...` (or `### §1.1 ...`) in docs/spec/seed-000.md, docs/spec/design.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "spec"
SCANNED = ("harness", "stages", "conf", "tests", "benchmarks", "docs", "dvc.yaml", "README.md")
SUFFIXES = {".py", ".yaml", ".md", ".toml"}
CITATION = re.compile(r"\b(?P<doc>seed(?:\s+(?P<num>\d{3}))?|DESIGN(?:\.md)?)\s+(?P<refs>§\s*\d+(?:\.\d+)?(?:\s*[-–/,]\s*§\s*\d+(?:\.\d+)?)*)",
                      re.IGNORECASE)
SECTION = re.compile(r"§\s*(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,3} §(\d+(?:\.\d+)?)\b", re.MULTILINE)
SEED_NAME = re.compile(r"\bseed\s+(\d{3})\b", re.IGNORECASE)
POINTER = re.compile(r"`((?:harness|stages|tests)/[\w/.]+)`")


def _page(doc: str, num: str | None) -> Path:
    return SPEC / ("design.md" if doc.upper().startswith("DESIGN") else f"seed-{num or '000'}.md")


def _sources() -> list[Path]:
    files = []
    for name in SCANNED:
        path = ROOT / name
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.suffix in SUFFIXES]
        files += [p for p in candidates if SPEC not in p.parents and p != Path(__file__) and "__pycache__" not in p.parts]
    return files


def _sections(refs: str) -> set[str]:
    numbers = SECTION.findall(refs)
    found = set(numbers)
    if re.search(r"§\s*\d+\s*[-–]\s*§", refs):  # a range: every section in between
        ends = [int(float(n)) for n in numbers]
        found.update(str(n) for n in range(min(ends), max(ends) + 1))
    return found


def _citations() -> dict[tuple[Path, str], set[str]]:
    """(page, section) -> the files citing it."""
    cited: dict[tuple[Path, str], set[str]] = {}
    for path in _sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in CITATION.finditer(text):
            for section in _sections(m["refs"]):
                cited.setdefault((_page(m["doc"], m["num"]), section), set()).add(path.relative_to(ROOT).as_posix())
    return cited


def test_the_scan_finds_the_citations_it_is_meant_to() -> None:
    assert _sections("§8–§12") == {"8", "9", "10", "11", "12"} and _sections("§15/§16") == {"15", "16"}
    cited = _citations()
    assert len(cited) >= 15, sorted(cited)  # the code cites seed 000 §3..§16 and DESIGN §5/§7
    assert (SPEC / "seed-000.md", "11") in cited and (SPEC / "design.md", "5") in cited


def test_every_cited_section_has_a_heading_in_docs_spec() -> None:
    missing = []
    for (page, section), where in sorted(_citations().items()):
        headings = set(HEADING.findall(page.read_text(encoding="utf-8"))) if page.is_file() else set()
        if section not in headings:
            missing.append(f"{page.relative_to(ROOT)} has no heading '§{section}' (cited in {', '.join(sorted(where))})")
    assert not missing, "\n".join(missing)


def test_every_cited_seed_has_a_page() -> None:
    seeds = {n for path in _sources() for n in SEED_NAME.findall(path.read_text(encoding="utf-8", errors="replace"))}
    assert {"000", "002"} <= seeds
    assert [n for n in sorted(seeds) if not (SPEC / f"seed-{n}.md").is_file()] == []


@pytest.mark.parametrize("page", sorted(p.name for p in SPEC.glob("*.md")))
def test_modules_docs_spec_points_at_exist(page: str) -> None:
    pointers = POINTER.findall((SPEC / page).read_text(encoding="utf-8"))
    assert [p for p in pointers if not (ROOT / p.rstrip("/")).exists()] == []
