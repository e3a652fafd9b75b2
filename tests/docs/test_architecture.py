"""docs/ARCHITECTURE.md cannot go stale: its module map is the generated one, and every path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from harness.pipeline.code_fingerprint import MAP_BEGIN, MAP_END, module_files, module_map, replace_module_map

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PATH = re.compile(r"`((?:harness|stages|tests|conf|benchmarks|docs)/[\w./-]*)`")


def test_module_map_is_the_generated_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    generated = module_map(ROOT)
    assert replace_module_map(text, generated) == text, (
        "docs/ARCHITECTURE.md: the module map is stale; run "
        "`python -m harness.pipeline.code_fingerprint --module-map --write docs/ARCHITECTURE.md`")


def test_every_module_is_in_the_map_and_every_named_path_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    generated = text[text.index(MAP_BEGIN):text.index(MAP_END)]
    for path in module_files(ROOT):
        if path.name != "__init__.py":
            assert f"`{path.relative_to(ROOT).as_posix()}`" in generated, path
    missing = sorted({p for p in PATH.findall(text) if not (ROOT / p.rstrip("/")).exists()})
    assert missing == [], f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_sections_the_code_cites_exist() -> None:
    """`docs/ARCHITECTURE.md "Pipeline state"` in a comment names a section that exists."""
    headings = {h.strip().lower() for h in re.findall(r"^#+ (.+)$", DOC.read_text(encoding="utf-8"), re.MULTILINE)}
    cited = {}
    for top in ("harness", "stages", "tests", "benchmarks", "docs"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix not in (".py", ".md") or path == DOC or "__pycache__" in path.parts:
                continue
            for m in re.finditer(r'docs/ARCHITECTURE\.md,? "([^"]+)"', path.read_text(encoding="utf-8")):
                title = m.group(1).strip().lower()
                cited.setdefault(title, set()).add(path.relative_to(ROOT).as_posix())
    assert "pipeline state" in cited  # the scan finds what it is meant to
    missing = {t: sorted(w) for t, w in cited.items() if not any(h.startswith(t) for h in headings)}
    assert missing == {}, f"docs/ARCHITECTURE.md has no section for: {missing}"


def test_replace_module_map_needs_the_markers() -> None:
    import pytest

    with pytest.raises(ValueError, match="markers"):
        replace_module_map("# no map here\n", module_map(ROOT))
