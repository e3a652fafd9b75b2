"""The simulated Harness² composer: keeps the pool edits whose probe behaved better than the base.

It reads ONLY the compose prompt (harness/h2/prompts.py): the current harness
(file blocks), the base rollout(s) and, per pool entry, its diff and its probe
rollout. Its evidence is what the solver *said* in those rollouts — the share
of answers stated with ``Confidence: high`` (a noisy behavioural signal, see
harness/sim/solver.py) — never the world's rules, their kinds, the answer key
or the oracle: this module imports nothing that holds them
(tests/h2/test_compose_evidence.py checks it).

Policy: gain(candidate) = confident share of its probe − confident share of the
base rollouts on the same task. A candidate is kept when gain > min_gain + a
per-composition jitter (different compositions of one pool can differ, as
different samples of an LLM would); the kept candidates' diffs are merged into
the current files. Nothing kept → ``<no-change>`` (keep the base); no base
rollout → ``<no-change>`` (nothing to compare with). With `malformed_prob` the
reply is an unclosed block (the contract's retry path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from harness.contracts.harness2 import BASE, PROBE, ROLLOUT_BEGIN, ROLLOUT_END

HFILE = re.compile(r"=== HARNESS FILE: (.+?) ===\n(.*?)\n?=== END HARNESS FILE ===[ \t]*", re.DOTALL)
_CONFIDENCE = re.compile(r"^Confidence:\s*(high|low)\s*$", re.MULTILINE | re.IGNORECASE)
_ENTRY = re.compile(r"^### Pool entry (\S+) \(([A-Za-z]+), ([^)\n]*)\)\s*$", re.MULTILINE)
_DIFF = re.compile(r"```diff\n(.*?)\n```", re.DOTALL)


class Uniforms(Protocol):
    def next(self) -> float: ...


def _rollout_re(marker: str) -> re.Pattern[str]:
    begin = re.escape(ROLLOUT_BEGIN.format(kind=marker, label="\x00")).replace("\x00", "(?P<label>.+?)")
    return re.compile(begin + r"\n(?P<body>.*?)\n" + re.escape(ROLLOUT_END.format(kind=marker)), re.DOTALL)


_BASE_ROLLOUT = _rollout_re(BASE)
_PROBE_ROLLOUT = _rollout_re(PROBE)


@dataclass(frozen=True)
class Stated:
    """How many answers of some rollouts were stated with high / low confidence."""

    high: int = 0
    low: int = 0

    @property
    def n(self) -> int:
        return self.high + self.low

    @property
    def share(self) -> float | None:
        return self.high / self.n if self.n else None

    def __add__(self, other: "Stated") -> "Stated":
        return Stated(self.high + other.high, self.low + other.low)


def stated_confidence(rollout_text: str) -> Stated:
    said = [m.group(1).lower() for m in _CONFIDENCE.finditer(rollout_text)]
    return Stated(said.count("high"), said.count("low"))


@dataclass(frozen=True)
class Candidate:
    label: str
    stage: str
    status: str
    diff: str
    probe: str | None  # the probe rollout text, None when not probed

    @property
    def live(self) -> bool:
        return self.probe is not None and "dead" not in self.status and bool(self.diff.strip()) and not self.diff.startswith("(no change")


@dataclass
class FileChanges:
    removed: list[str] = field(default_factory=list)
    added: list[tuple[str | None, str]] = field(default_factory=list)  # (anchor line before it, new line)
    created: bool = False
    deleted: bool = False


def harness_blocks_span(text: str, heading: str = "## Current harness") -> tuple[int, int] | None:
    """(start, end) of the consecutive file blocks right under `heading` (skill files contain `## ` lines)."""
    head = text.find(heading)
    if head < 0:
        return None
    pos = text.find("\n", head)
    pos = len(text) if pos < 0 else pos + 1
    start = pos
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        m = HFILE.match(text, pos)
        if not m:
            return start, pos
        pos = m.end()


def current_files(text: str) -> dict[str, str]:
    span = harness_blocks_span(text)
    part = text[span[0] : span[1]] if span else ""
    return {m.group(1).strip(): m.group(2) + "\n" for m in HFILE.finditer(part)}


def base_rollouts(text: str) -> list[str]:
    return [m.group("body") for m in _BASE_ROLLOUT.finditer(text)]


def pool_candidates(text: str) -> list[Candidate]:
    pool_at = text.find("\n## Pool\n")
    if pool_at < 0:
        return []
    pool = text[pool_at:]
    heads = list(_ENTRY.finditer(pool))
    out = []
    for i, h in enumerate(heads):
        body = pool[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(pool)]
        d = _DIFF.search(body)
        probe = _PROBE_ROLLOUT.search(body)
        out.append(Candidate(h.group(1), h.group(2).lower(), h.group(3), d.group(1) if d else "", probe.group("body") if probe else None))
    return out


def parse_diff(diff: str) -> dict[str, FileChanges]:
    """Per file of a unified diff: removed lines, added lines with their anchor, created / deleted."""
    files: dict[str, FileChanges] = {}
    cur: FileChanges | None = None
    old_path = ""
    anchor: str | None = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            old_path = line[4:].strip()
            continue
        if line.startswith("+++ "):
            new_path = line[4:].strip()
            deleted = new_path == "/dev/null"
            path = (old_path if deleted else new_path).removeprefix("a/").removeprefix("b/")
            cur = files.setdefault(path, FileChanges(created=old_path == "/dev/null", deleted=deleted))
            anchor = None
            continue
        if cur is None or line.startswith("@@"):
            anchor = None if line.startswith("@@") else anchor
            continue
        if line.startswith("-"):
            cur.removed.append(line[1:])  # the anchor stays the kept line before it (a replacement lands in place)
        elif line.startswith("+"):
            cur.added.append((anchor, line[1:]))
            anchor = line[1:]
        elif line.startswith(" "):
            anchor = line[1:]
    return files


def merge_changes(current: dict[str, str], changes: Sequence[dict[str, FileChanges]]) -> dict[str, str | None]:
    """New text per changed path (None = delete) after applying every candidate's line changes to `current`."""
    out: dict[str, str | None] = {}
    paths = sorted({p for c in changes for p in c})
    for path in paths:
        per = [c[path] for c in changes if path in c]
        if any(fc.deleted for fc in per):
            if path in current:
                out[path] = None
            continue
        lines = current.get(path, "").splitlines()
        for fc in per:
            for old in fc.removed:
                if old in lines:
                    lines.remove(old)
        for fc in per:
            for anchor, new in fc.added:
                if new in lines and new.strip():
                    continue
                at = len(lines)
                if anchor is not None and anchor in lines:
                    at = lines.index(anchor) + 1
                    while at < len(lines) and lines[at] in {n for _, n in fc.added}:
                        at += 1
                lines.insert(at, new)
        text = "\n".join(lines).rstrip("\n") + "\n"
        if text != current.get(path):
            out[path] = text
    return out


@dataclass(frozen=True)
class Judgement:
    label: str
    probe: Stated
    gain: float | None
    kept: bool


def judge_pool(base: Stated, candidates: Sequence[Candidate], threshold: float) -> list[Judgement]:
    out = []
    for c in candidates:
        if not c.live:
            continue
        probe = stated_confidence(c.probe or "")
        gain = None if probe.share is None or base.share is None else probe.share - base.share
        out.append(Judgement(c.label, probe, gain, gain is not None and gain > threshold))
    return out


def reply_compose(text: str, stream: Uniforms, *, min_gain: float, gain_jitter: float, malformed_prob: float) -> str:
    """The composer's reply to one compose prompt (module docstring)."""
    files = current_files(text)
    if stream.next() < malformed_prob and files:
        path = sorted(files)[0]
        return f"=== HARNESS FILE: {path} ===\n{files[path]}\n<notes>unfinished</notes>"
    base = Stated()
    for body in base_rollouts(text):
        base = base + stated_confidence(body)
    if base.n == 0:
        return "<no-change>There is no rollout of the current harness to compare the probes with, so I keep it.</no-change>"
    threshold = min_gain + gain_jitter * (stream.next() - 0.5)
    cands = {c.label: c for c in pool_candidates(text)}
    judged = judge_pool(base, list(cands.values()), threshold)
    summary = "; ".join(
        f"{j.label}: {j.probe.high} of {j.probe.n} answers stated with high confidence" for j in judged
    ) or "no live probed candidate"
    base_note = f"base: {base.high} of {base.n}"
    kept = [j for j in judged if j.kept]
    if not kept:
        return f"<no-change>No candidate's probe behaved better than the base ({base_note}; {summary}).</no-change>"
    new = merge_changes(files, [parse_diff(cands[j.label].diff) for j in kept])
    if not new:
        return f"<no-change>The supported candidates change nothing against the current harness ({base_note}; {summary}).</no-change>"
    blocks = []
    for path, content in new.items():
        if content is None:
            blocks.append(f"=== DELETE HARNESS FILE: {path} ===")
        else:
            blocks.append(f"=== HARNESS FILE: {path} ===\n{content.rstrip()}\n=== END HARNESS FILE ===")
    notes = f"kept {', '.join(j.label for j in kept)}: their probes stated high confidence more often than the base ({base_note}; {summary})"
    return "\n".join(blocks) + f"\n<notes>{notes}</notes>"
