"""Grader-verdict and answer-key detection, and leak-glob matching.

Harness² never shows an editor a score, a rubric or an answer key, and never
stores a harness that carries one into the experience library. These are
program checks (the prompt's "there is no rubric" is a separate, weaker
defence). Patterns are deliberately specific (a verdict *value* next to a
verdict word, an answer *value* after an answer-key word) so that ordinary
prose such as "check your answer" passes.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

VERDICT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("grader verdict", re.compile(r"\b(?:grader|judge|oracle|evaluator)[ _-]?(?:verdict|result|score|grade|feedback)s?\b", re.I)),
    ("verdict value", re.compile(r"\bverdict\s*[:=]\s*[\"']?(?:pass(?:ed)?|fail(?:ed)?|correct|incorrect|right|wrong)\b", re.I)),
    ("rubric score", re.compile(r"\brubric[ _-]?(?:score|points|grade|item)s?\s*[:=]", re.I)),
    ("answer key", re.compile(r"\banswer[ _-]?key\s*[:=]", re.I)),
    ("expected answer", re.compile(r"\b(?:expected|correct|gold|reference|true)[ _-]?answer\s*[:=]", re.I)),
    ("correctness flag", re.compile(r"[\"'](?:is_)?correct[\"']\s*:\s*(?:true|false|1|0)\b", re.I)),
    ("grade block", re.compile(r"<grade>\s*[0-9.]+\s*</grade>", re.I)),
)

VERDICT_NAME_RE = re.compile(r"(?:^|[/_.-])(?:grades?|grader|verdicts?|rubrics?|answer[_-]?keys?|expected[_-]?outputs?|gold)(?:[/_.-]|$)", re.I)


@dataclass(frozen=True)
class VerdictHit:
    path: str
    kind: str
    excerpt: str

    def message(self) -> str:
        return f"{self.path}: contains a {self.kind} ({self.excerpt!r}); graders' verdicts, rubrics and answer keys must never reach the editor or a harness"


def scan_text(path: str, text: str) -> list[VerdictHit]:
    hits: list[VerdictHit] = []
    for kind, pattern in VERDICT_PATTERNS:
        m = pattern.search(text)
        if m:
            start = max(0, m.start() - 20)
            hits.append(VerdictHit(path, kind, text[start : m.end() + 20].replace("\n", " ")))
    return hits


def scan_name(path: str) -> VerdictHit | None:
    m = VERDICT_NAME_RE.search(path)
    if m:
        return VerdictHit(path, "grader-verdict file name", m.group(0))
    return None


def scan_files(files: Mapping[str, str]) -> list[VerdictHit]:
    """Every verdict found in names and contents of `files` (path -> text)."""
    hits: list[VerdictHit] = []
    for path, text in files.items():
        named = scan_name(path)
        if named:
            hits.append(named)
        hits.extend(scan_text(path, text))
    return hits


def matches_leak_glob(path: str, globs: Iterable[str]) -> str | None:
    """The first leak glob `path` matches (on the full path or its file name), else None."""
    name = path.rsplit("/", 1)[-1]
    for glob in globs:
        if fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(name, glob):
            return glob
    return None
