"""Simulated non-solver roles: they read the real prompts and reply in the real formats.

Every reply is a deterministic function of (world seed, format, full prompt
text, sample index). The editor policy (shared by the loop editor and the
Harness² editor):

  * with `editor_malformed_prob` the reply is malformed (prose, an unclosed
    block, or a replace without <old>);
  * otherwise 1–3 edits (capped by the budget). Each edit, with
    `editor_follow_evidence_prob`, adds the rule whose cue the evidence
    (failure traces, diagnoses) mentions, weighted by how often — right
    hints lead to insights, distractor hints to traps/neutrals; otherwise
    it draws from `editor_prior` (insight, neutral rewrite, trap, fix = delete
    a stated trap). Stated and blacklisted rules are never proposed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from harness.contracts.evolution import (
    FILE_CLOSE,
    FILE_OPEN,
    FORMAT_DIAGNOSIS,
    FORMAT_EDIT_OPS,
    FORMAT_MOMENTUM,
    H_COMPARISON,
    H_CURRENT_FILE,
    H_PREVIOUS_GUIDANCE,
    H_REJECTED,
)
from harness.contracts.harness2 import FORMAT_CHOICE, FORMAT_EDITOR, FORMAT_EXPERIENCE, FORMAT_GRADE
from harness.evolution.apply import apply_edits
from harness.kernel.types import Edit
from harness.llm.protocol import ChatMessage

from .composer import HFILE as _HFILE
from .composer import harness_blocks_span, reply_compose
from .matching import normalize
from .solver import uniforms
from .world import RULE_KINDS, Rule, World, display_name

_TASK_TYPE = re.compile(r"Task type:\s*([A-Za-z0-9_\-]+)")
_HEADER_TASK_TYPE = re.compile(r"^Task type:\s*([A-Za-z0-9_\-]+)\s*$", re.MULTILINE)
_BUDGET = re.compile(r"^Edit budget:\s*(\d+)\s*$", re.MULTILINE)
_ANSWER = re.compile(r"ANSWER\s*:\s*([A-J])\b")
_QUESTION = re.compile(r"Question:\s*(.+)")
_DELIVERABLE_LINE = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*:\s*\(?([A-J])\b", re.MULTILINE)
_CANDIDATE = re.compile(r"^## Candidate\s+(\S+)\s*$", re.MULTILINE)
_STAGE = re.compile(r"^STAGE:\s*(\w+)\s*$", re.MULTILINE)

TOOL_GUIDE_SENTENCES = (
    "Call the tool only when the answer depends on a moment you cannot recall.",
    "Pass a short focus phrase, for example the object the question names.",
    "Do not call the tool twice for the same question.",
)
GENERIC_NEUTRALS = (
    "Re-read the question before giving the final letter.",
    "Keep the reasoning to a few sentences.",
    "Check that the final letter matches the chosen option.",
)


class Stream:
    """Deterministic uniforms for one reply."""

    def __init__(self, key: str):
        self._key, self._i = key, 0
        self._buf: list[float] = []

    def next(self) -> float:
        if not self._buf:
            self._buf = uniforms(f"{self._key}|{self._i}", 8)
            self._i += 1
        return self._buf.pop()

    def choice(self, items: Sequence):
        return items[min(int(self.next() * len(items)), len(items) - 1)]

    def weighted(self, items: Sequence, weights: Sequence[float]):
        total = sum(weights)
        x = self.next() * total
        for item, w in zip(items, weights):
            x -= w
            if x < 0:
                return item
        return items[-1]


def stream_for(world: World, fmt: str, messages: Sequence[ChatMessage], sample_index: int) -> Stream:
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for m in messages:
        h.update(m.role.encode())
        h.update(b"\x00")
        h.update(m.content.encode("utf-8"))
        h.update(b"\x01")
    return Stream(f"{world.seed}|{fmt}|{h.hexdigest()}|{sample_index}")


def section(text: str, heading: str) -> str:
    """Text under the first line starting with `heading` up to the next `## ` heading."""
    start = text.find(heading)
    if start < 0:
        return ""
    body_start = text.find("\n", start)
    if body_start < 0:
        return ""
    nxt = re.search(r"^## ", text[body_start + 1 :], re.MULTILINE)
    return text[body_start + 1 : body_start + 1 + nxt.start()] if nxt else text[body_start + 1 :]


def _file_span(text: str) -> tuple[int, int] | None:
    """(start, end) of the <file>…</file> block under `## Current file` (tags included)."""
    head = text.find(H_CURRENT_FILE)
    if head < 0:
        return None
    start = text.find(FILE_OPEN, head)
    end = text.find(FILE_CLOSE, start + len(FILE_OPEN)) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return start, end + len(FILE_CLOSE)


def fenced_file(text: str) -> str:
    span = _file_span(text)
    return text[span[0] + len(FILE_OPEN) : span[1] - len(FILE_CLOSE)].strip("\n") if span else ""


def without_file(text: str) -> str:
    span = _file_span(text)
    return text[: span[0]] + text[span[1] :] if span else text


def stated_rules(world: World, text: str, task_types: Sequence[str]) -> list[Rule]:
    norm = normalize(text)
    return [r for t in task_types if t in world.spec_by_name for r in world.spec_by_name[t].rules if r.norm in norm]


def cue_counts(world: World, evidence: str, task_types: Sequence[str]) -> dict[str, int]:
    norm = normalize(evidence)
    counts: dict[str, int] = {}
    for t in task_types:
        for rule in world.spec_by_name[t].rules if t in world.spec_by_name else ():
            n = norm.count(normalize(rule.cue))
            if n:
                counts[rule.rule_id] = n
    return counts


def propose_edits(world: World, *, task_types: Sequence[str], current: str, evidence: str, rejected: str, budget: int, stream: Stream) -> list[Edit]:
    """The editor policy (module docstring); [] means no change."""
    p = world.params
    # ordered (world order), not a set: iterating a set of str follows PYTHONHASHSEED, and `stated_traps` below is
    # drawn from by index, so a set made the editor's choice, and a whole run, differ from one process to the next
    stated = dict.fromkeys(r.rule_id for r in stated_rules(world, current, task_types))
    rejected_norm = normalize(rejected)
    usable = lambda r: r.rule_id not in stated and r.norm not in rejected_norm  # noqa: E731
    pool = {k: [r for t in task_types if t in world.spec_by_name for r in world.spec_by_name[t].of_kind(k) if usable(r)] for k in RULE_KINDS}
    hinted = {rid: n for rid, n in cue_counts(world, evidence, task_types).items() if usable(world.rules[rid])}
    n_edits = min(max(budget, 1), 1 + int(stream.weighted([0, 1, 2], list(p.editor_n_edits))))
    edits: list[Edit] = []
    used: set[str] = set()

    def add(rule: Rule, why: str) -> None:
        used.add(rule.rule_id)
        edits.append(Edit(op="add", text=rule.text, rationale=why))

    for _ in range(n_edits):
        fresh_hints = {rid: n for rid, n in hinted.items() if rid not in used}
        if fresh_hints and stream.next() < p.editor_follow_evidence_prob:
            rid = stream.weighted(list(fresh_hints), list(fresh_hints.values()))
            add(world.rules[rid], f"several failures point at the {world.rules[rid].cue}")
            continue
        kind = stream.weighted(["insight", "neutral", "trap", "fix"], list(p.editor_prior))
        stated_traps = [world.rules[rid] for rid in stated if world.rules[rid].kind == "trap" and rid not in used]
        if kind == "fix" and stated_traps:
            trap = stream.choice(stated_traps)
            used.add(trap.rule_id)
            edits.append(Edit(op="delete", text="", old=trap.text, rationale="this rule misleads on several failures"))
            continue
        if kind == "fix":
            kind = "neutral"
        candidates = [r for r in pool[kind] if r.rule_id not in used]
        if not candidates:
            continue
        rule = stream.choice(candidates)
        if kind == "neutral" and stream.next() < 0.4:
            old_line = _plain_bullet(world, current, stream)
            if old_line:
                used.add(rule.rule_id)
                edits.append(Edit(op="replace", text=rule.text, old=old_line, rationale="clearer wording"))
                continue
        add(rule, "a general rule for this task type")
    return edits


def _plain_bullet(world: World, text: str, stream: Stream) -> str:
    """A bullet line that states no world insight/trap (a neutral rewrite target)."""
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("- ") and not any(r.norm in normalize(s) for r in world.rules.values() if r.kind != "neutral"):
            lines.append(s[2:])
    return stream.choice(lines) if lines else ""


def render_edit_ops(edits: Sequence[Edit]) -> str:
    blocks = []
    for e in edits:
        why = f"<why>{e.rationale}</why>" if e.rationale else ""
        if e.op == "add":
            blocks.append(f'<edit op="add"><new>{e.text}</new>{why}</edit>')
        elif e.op == "delete":
            blocks.append(f'<edit op="delete"><old>{e.old}</old>{why}</edit>')
        else:
            blocks.append(f'<edit op="replace"><old>{e.old}</old><new>{e.text}</new>{why}</edit>')
    return "\n".join(blocks)


def malformed_edit_reply(stream: Stream, world: World, task_types: Sequence[str]) -> str:
    style = int(stream.next() * 3)
    rule = stream.choice([r for t in task_types if t in world.spec_by_name for r in world.spec_by_name[t].rules] or [None])
    text = rule.text if rule else GENERIC_NEUTRALS[0]
    if style == 0:
        return f"I think the skill should say something like: {text}"
    if style == 1:
        return f'<edit op="add"><new>{text}</new>'
    return f'<edit op="replace"><new>{text}</new></edit>'


def _all_text(messages: Sequence[ChatMessage]) -> str:
    return "\n\n".join(m.content for m in messages)


def _user_text(messages: Sequence[ChatMessage]) -> str:
    return "\n\n".join(m.content for m in messages if m.role != "system")


# ---------------------------------------------------------------- edit-ops (loop editor)
def reply_edit_ops(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    user = _user_text(messages[:2])  # the original request; a retry appends feedback only
    header = _HEADER_TASK_TYPE.search(user)
    budget_match = _BUDGET.search(user)
    budget = int(budget_match.group(1)) if budget_match else 1
    current = fenced_file(user)
    if "\nTool:" in user or user.startswith("Tool:"):
        return _reply_tool_guide(current, stream)
    # a shared file (default-strategy) serves every task type whose failures are shown
    case_types = sorted({m.group(1) for m in _TASK_TYPE.finditer(user)} - ({header.group(1)} if header else set()))
    task_types = ([header.group(1)] if header else []) + case_types
    if stream.next() < world.params.editor_malformed_prob:
        return malformed_edit_reply(stream, world, task_types)
    rejected = section(user, H_REJECTED)
    evidence = without_file(user).replace(rejected, "")
    edits = propose_edits(world, task_types=task_types, current=current, evidence=evidence, rejected=rejected, budget=budget, stream=stream)
    if not edits:
        return "<no-change>No rule I can add is supported by these failures.</no-change>"
    return render_edit_ops(edits)


def _reply_tool_guide(current: str, stream: Stream) -> str:
    norm = normalize(current)
    fresh = [s for s in TOOL_GUIDE_SENTENCES if normalize(s) not in norm]
    if not fresh or stream.next() < 0.4:
        return "<no-change>The guide already covers how the tool was used.</no-change>"
    return f'<edit op="add"><new>{stream.choice(fresh)}</new><why>clarifies when to call the tool</why></edit>'


# ---------------------------------------------------------------- diagnosis
def reply_diagnosis(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    user = _user_text(messages[:2])
    m = _HEADER_TASK_TYPE.search(user)
    task_type = m.group(1) if m else ""
    spec = world.spec_by_name.get(task_type)
    if spec is None:
        return "<diagnosis>The agent chose a wrong option; the trace does not show which detail it missed, so a rule to re-read every choice before answering is the safest fix.</diagnosis>"
    counts = cue_counts(world, section(user, "Trace:") or user.split("Trace:", 1)[-1], [task_type])
    if counts and stream.next() < world.params.diagnosis_keep_cue_prob:
        rule = world.rules[stream.weighted(list(counts), list(counts.values()))]
    else:
        rule = stream.choice(spec.rules)
    return (
        f"<diagnosis>The agent picked a wrong option for this {display_name(task_type)} question. "
        f"Its reasoning did not account for the {rule.cue}; a rule telling it how to use the {rule.cue} "
        f"would likely have prevented the mistake.</diagnosis>"
    )


# ---------------------------------------------------------------- momentum
def reply_momentum(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    user = _user_text(messages[:2])
    if stream.next() < world.params.editor_malformed_prob:
        return "Guidance: keep doing what worked and avoid what regressed."
    m = _HEADER_TASK_TYPE.search(user)
    task_types = [m.group(1)] if m else []
    current = fenced_file(user)
    # ordered (world order), not a set: iterating a set of str follows PYTHONHASHSEED, and `stated_traps` below is
    # drawn from by index, so a set made the editor's choice, and a whole run, differ from one process to the next
    stated = dict.fromkeys(r.rule_id for r in stated_rules(world, current, task_types))
    previous = [line.strip()[2:] for line in section(user, H_PREVIOUS_GUIDANCE).splitlines() if line.strip().startswith("- ")]
    bullets = previous[:2]
    counts = {rid: n for rid, n in cue_counts(world, without_file(user).split(H_COMPARISON, 1)[-1], task_types).items() if rid not in stated}
    if counts and stream.next() < 0.5:
        bullets.append(world.rules[stream.weighted(list(counts), list(counts.values()))].text)
    bullets.append(stream.choice(GENERIC_NEUTRALS))
    unique = list(dict.fromkeys(bullets))
    return "<guidance>\n" + "\n".join(f"- {b}" for b in unique) + "\n</guidance>"


# ---------------------------------------------------------------- Harness² formats
def reply_file_blocks(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    """INV/DOM: the editor policy on the task type's skill; COMPOSE: harness/sim/composer.py (prompt text only)."""
    text = _all_text(messages)
    stage = _STAGE.search(messages[0].content) if messages else None
    if stage and stage.group(1) == "compose":
        p = world.params
        return reply_compose(text, stream, min_gain=p.composer_min_gain, gain_jitter=p.composer_gain_jitter, malformed_prob=p.editor_malformed_prob)
    span = harness_blocks_span(text)
    harness_part = text[span[0] : span[1]] if span else ""
    files = {m.group(1).strip(): m.group(2) + "\n" for m in _HFILE.finditer(harness_part)}
    tt_match = _TASK_TYPE.search(text)
    task_types = [tt_match.group(1)] if tt_match and tt_match.group(1) in world.spec_by_name else []
    target = _h2_target(files, task_types[0] if task_types else "")
    if target is None:
        return "<no-change>The harness has no file this task's rules belong in.</no-change>"
    if stream.next() < world.params.editor_malformed_prob:
        return f"=== HARNESS FILE: {target} ===\n{files[target]}\n<notes>unfinished</notes>"
    evidence = text[: span[0]] + text[span[1] :] if span else text
    edits = propose_edits(world, task_types=task_types, current=files[target], evidence=evidence, rejected="", budget=3, stream=stream)
    new_text, report = apply_edits(files[target], edits, budget=3)
    if new_text == files[target]:
        return "<no-change>No supported change for this task.</no-change>"
    notes = "; ".join(f"{a.edit.op} {a.edit.text or a.edit.old}" for a in report if a.status == "applied")
    return f"=== HARNESS FILE: {target} ===\n{new_text.rstrip()}\n=== END HARNESS FILE ===\n<notes>{notes}</notes>"


def _h2_target(files: dict[str, str], task_type: str) -> str | None:
    for suffix in (f"{task_type}/SKILL.md" if task_type else None, "default-strategy/SKILL.md"):
        if suffix:
            for path in sorted(files):
                if path == suffix or path.endswith("/" + suffix):
                    return path
    for name in ("system_prompt.md", "AGENTS.md"):
        for path in sorted(files):
            if path == name or path.endswith("/" + name):
                return path
    return sorted(files)[0] if files else None


def _rule_score(world: World, text: str) -> float:
    norm = normalize(text)
    return sum(r.weight for r in world.rules.values() if r.kind != "neutral" and r.norm in norm)


def _deliverable_accuracy(world: World, text: str) -> float | None:
    """Share of `<qid>: <letter>` lines that are right, None when no line names a world question."""
    answers = {qid: letter for qid, letter in _DELIVERABLE_LINE.findall(text) if qid in world.truth}
    if not answers:
        return None
    return sum(world.truth[q].answer == a for q, a in answers.items()) / len(answers)


def reply_choice(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    text = _all_text(messages)
    heads = list(_CANDIDATE.finditer(text))
    if not heads:
        return "```choice\nnone\n```\n<why>No candidate sections were given.</why>"
    bodies = {h.group(1): text[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(text)] for i, h in enumerate(heads)}
    ids = list(bodies)
    best = max(ids, key=lambda cid: (_deliverable_accuracy(world, bodies[cid]) or 0.0, _rule_score(world, bodies[cid]), -ids.index(cid)))
    pick = best if stream.next() < world.params.selector_best_prob else stream.choice(ids)
    return f"```choice\n{pick}\n```\n<why>Candidate {pick} states the most useful rules for the failures shown.</why>"


def reply_experience(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    text = _all_text(messages)
    norm = normalize(text)
    stated = [r for r in world.rules.values() if r.norm in norm]
    insights = [r for r in stated if r.kind == "insight"]
    rule = stream.choice(insights) if insights else (stream.choice(stated) if stated else None)
    if rule is None:
        payload = {"cue": "any question", "lesson": GENERIC_NEUTRALS[0], "evidence": "no specific rule was visible", "confidence": 0.3}
    else:
        payload = {
            "cue": f"{display_name(rule.task_type)} questions involving the {rule.cue}",
            "lesson": rule.text,
            "evidence": "the adopted harness states this rule and the probe improved",
            "confidence": round(0.4 + 0.5 * stream.next(), 2),
        }
    return f"<experience>{json.dumps(payload)}</experience>"


def reply_grade(world: World, messages: Sequence[ChatMessage], stream: Stream) -> str:
    text = _all_text(messages)
    grade = None
    deliverable = text.split("## Deliverable", 1)[-1]
    accuracy = _deliverable_accuracy(world, deliverable)
    if accuracy is not None:
        grade = max(0.0, min(1.0, accuracy + 0.2 * (stream.next() - 0.5)))
        why = "most listed answers look consistent with the questions" if accuracy >= 0.5 else "several listed answers look wrong"
    for qm in _QUESTION.finditer(text if grade is None else ""):
        qid = world.qid_by_text.get(qm.group(1).strip())
        answers = _ANSWER.findall(text)
        if qid and answers:
            grade = 1.0 if answers[-1] == world.truth[qid].answer else 0.0
            why = "the final answer matches the reference" if grade else "the final answer does not match the reference"
            break
    if grade is None:
        score = _rule_score(world, text)
        grade = max(0.0, min(1.0, 0.5 + 0.15 * score + 0.1 * (stream.next() - 0.5)))
        why = "judged from the rules the harness states"
    return f"<grade>{grade:.2f}</grade>\n<why>{why}</why>"


HANDLERS = {  # FORMAT name (harness/contracts) -> the simulated reply in that format
    FORMAT_EDIT_OPS: reply_edit_ops,
    FORMAT_DIAGNOSIS: reply_diagnosis,
    FORMAT_MOMENTUM: reply_momentum,
    FORMAT_EDITOR: reply_file_blocks,
    FORMAT_CHOICE: reply_choice,
    FORMAT_EXPERIENCE: reply_experience,
    FORMAT_GRADE: reply_grade,
}
