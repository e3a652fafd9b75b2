"""`evolve=candidates`: edits written outside the loop go through the same per-skill gate as the loop's own.

`evolve.candidates_path` (formats: harness/contracts/candidates.py, docs/candidates.md) is read at every evolve
step and checked against the run's starting harness (the workspace's v0) before the stage writes anything: an
unknown skill file, an `old` text that does not occur, an op that changes nothing, a file grown past
`evolve.max_skill_chars`, a variant that is not a harness tree or changes anything but skill files, all raise
`CandidatesError` naming the file, the line (or variant) and the field.

Hand-out rule: candidates are proposed in file order (JSONL lines; variants by name, then skill file), each
once. At a step, every skill file of the step's batch that is not resting (cooldown) gets the next candidate
of that file not proposed at an earlier step; a candidate whose file no step of the batch reads waits for one
that does. At most one candidate per skill file and step (the gate runs one gate per skill file and step).
A JSONL candidate's ops are applied to the file's current text (they compose with edits accepted since);
when one does not apply any more the candidate is recorded `skipped_not_applicable` and the file's next
candidate is tried. A variant's file replaces the current text. When a skill file has no candidate left
the step records `skipped_no_candidates` (the step report shows it).

Which candidates earlier steps proposed is read from their evolve.json (upstream of this step in the
chain; the file's digest is recorded there, and a changed file refuses to continue the run).
Every candidate carries its `source` (who wrote it) into evolve.json and the gate's step report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from harness import workspace as wsp
from harness.bench.layouts import load_in_layout
from harness.contracts.candidates import (
    JSONL_SUFFIX,
    CandidatesError,
    check_format,
    digest,
    list_variants,
    read_jsonl,
)
from harness.contracts.solver import SKILLS_PREFIX
from harness.evolution.apply import apply_edits
from harness.kernel.schedule import StateLayout
from harness.kernel.types import Edit, EditApplication, EvolutionRecord
from harness.loop.context import StageContext
from harness.loop.documents import EVOLVE, CandidateDoc, EvolveDoc, SkippedDoc, read_document, write_document
from harness.loop.gating import skill_key
from harness.loop.state import WORKSPACE, mark_done, require_done
from harness.tree import HarnessTree

METHOD = "candidates"
NOT_APPLICABLE = "skipped_not_applicable"
NO_CANDIDATES = "skipped_no_candidates"
VARIANT_APPLIED = "applied"

progress = logging.getLogger("harness.progress")


@dataclass(frozen=True)
class External:
    """One candidate from outside the loop, checked against the starting harness."""

    cid: str  # unique in its file: "line 3" | "<variant>/skills/<t>/SKILL.md"
    where: str  # for messages: "<path>:3" | "<path>/<variant>"
    skill_file: str  # inside the skills tree: "<task_type>/SKILL.md"
    source: str
    why: str
    ops: tuple[Edit, ...] = ()  # a JSONL line
    new_text: Optional[str] = None  # a variant: the whole file

    @property
    def kind(self) -> str:
        return "variant" if self.new_text is not None else "ops"

    def info(self) -> dict[str, Any]:
        return {"id": self.cid, "where": self.where, "kind": self.kind, "source": self.source, "why": self.why}


@dataclass
class Handout:
    """One step's result: candidates for the gate, skipped skill files, and the ids proposed now."""

    candidates: list[CandidateDoc] = field(default_factory=list)
    skipped: list[SkippedDoc] = field(default_factory=list)
    proposed: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- reading and checking


def _skill_of(path: str) -> str:
    return path[len(SKILLS_PREFIX):]


def _check_ops(where: str, cand_ops: Sequence[Edit], text: str, max_chars: int) -> tuple[str, list[EditApplication]]:
    new_text, report = apply_edits(text, list(cand_ops), budget=len(cand_ops), max_chars=max_chars)
    for i, app in enumerate(report):
        if app.status != "applied":
            key = {"not_found": f"ops[{i}].old", "duplicate": f"ops[{i}].new", "over_budget": "ops"}.get(app.status, f"ops[{i}]")
            raise CandidatesError(f"{where}: field {key!r}: {app.detail} ({app.status})")
    return new_text, report


def _jsonl(path: Path, label: str, start: HarnessTree, max_chars: int) -> list[External]:
    out = []
    for line in read_jsonl(path, label):
        where = f"{label}:{line.line}"
        if line.skill_file not in start:
            known = sorted(p for p in start if p.startswith(SKILLS_PREFIX))
            raise CandidatesError(f"{where}: field 'skill_file': {line.skill_file} is not a skill file of the starting "
                                  f"harness (it has {', '.join(known)})")
        ops = tuple(Edit(e.op, e.text, e.old, e.rationale or line.why) for e in line.ops)
        new_text, _ = _check_ops(f"{where} ({line.skill_file} of the starting harness)", ops, start[line.skill_file], max_chars)
        if new_text == start[line.skill_file]:
            raise CandidatesError(f"{where}: field 'ops': the edit leaves {line.skill_file} unchanged")
        out.append(External(cid=f"line {line.line}", where=where, skill_file=_skill_of(line.skill_file), source=line.source,
                            why=line.why, ops=ops))
    return out


def load_variant(path: Path, where: str, surface: str) -> HarnessTree:
    """A variant directory as a native harness tree; CandidatesError (load_in_layout's reason, named by the variant and
    its layout) when it is not a harness in `surface`'s layout."""
    try:
        return load_in_layout(path, surface)
    except (OSError, ValueError) as exc:  # OSError: an unreadable file of the variant
        raise CandidatesError(f"{where} ({surface} layout): {exc}") from None


def _variants(path: Path, label: str, start: HarnessTree, surface: str, max_chars: int) -> list[External]:
    out = []
    for entry in list_variants(path, label):
        where = f"{label}/{entry.name}"
        tree = load_variant(entry.path, where, surface)
        changed = sorted(p for p in set(tree) | set(start) if tree.get(p) != start.get(p))
        others = [p for p in changed if not p.startswith(SKILLS_PREFIX)]
        if others:
            raise CandidatesError(f"{where}: changes {others}; only skill files (skills/<task_type>/SKILL.md) are candidates "
                                  "(keep the other files as in the starting harness)")
        unknown = [p for p in changed if p not in start]
        if unknown:
            raise CandidatesError(f"{where}: {unknown} are not skill files of the starting harness")
        removed = [p for p in changed if p not in tree]
        if removed:
            raise CandidatesError(f"{where}: removes {removed}; a variant is a whole harness tree")
        if not changed:
            raise CandidatesError(f"{where}: identical to the starting harness (no candidate)")
        for p in changed:
            if len(tree[p]) > max_chars:
                raise CandidatesError(f"{where}/{p}: {len(tree[p])} characters > evolve.max_skill_chars {max_chars}")
            out.append(External(cid=f"{entry.name}/{p}", where=f"{where}/{p}", skill_file=_skill_of(p),
                                source=entry.source, why=entry.why, new_text=tree[p]))
    return out


def load_candidates(path: Path, start: HarnessTree, *, surface: str, max_chars: int, label: Optional[str] = None) -> list[External]:
    """Every candidate of `path` in hand-out order, checked against the starting harness view `start`."""
    label = label or str(path)
    check_format(path, label)
    if path.is_file() and path.suffix == JSONL_SUFFIX:
        return _jsonl(path, label, start, max_chars)
    return _variants(path, label, start, surface, max_chars)


# ---------------------------------------------------------------- the hand-out


def _record(cand: External, task_type: str, text: str, max_chars: int) -> tuple[Optional[EvolutionRecord], str]:
    """The gate's record of `cand` on the file's current `text`, or (None, why it does not apply)."""
    if cand.new_text is not None:
        if cand.new_text == text:
            return None, "the variant's file is already the current text"
        from harness.loop.evolve_h2 import hunk_edits  # line hunks as edit ops (report, blacklist)

        edits = hunk_edits(text, cand.new_text, cand.why)
        report = [EditApplication(e, VARIANT_APPLIED, f"variant {cand.cid}") for e in edits]
        return EvolutionRecord(task_type=task_type, skill_file=cand.skill_file, old_text=text, new_text=cand.new_text,
                               edits=edits, apply_report=report), ""
    new_text, report = apply_edits(text, list(cand.ops), budget=len(cand.ops), max_chars=max_chars)
    failed = [f"ops[{i}] {a.status}: {a.detail}" for i, a in enumerate(report) if a.status != "applied"]
    if failed:
        return None, "on the current text " + "; ".join(failed)
    if new_text == text:
        return None, "the ops leave the current text unchanged"
    return EvolutionRecord(task_type=task_type, skill_file=cand.skill_file, old_text=text, new_text=new_text,
                           edits=list(cand.ops), apply_report=report), ""


def hand_out(pending: Sequence[External], groups: Sequence[tuple[str, list[str]]], skills: Mapping[str, str],
             cooldown: Mapping[str, int], max_chars: int) -> Handout:
    """Candidates of one step: per skill file of `groups` (file, task types) not resting, the first of `pending`
    (not yet proposed, file order) that applies to the current text `skills[file]`."""
    out = Handout()
    empty: list[tuple[str, list[str]]] = []
    for f, tts in groups:
        key = skill_key(f)
        mine = [c for c in pending if c.skill_file == f]
        if not mine:
            empty.append((f, tts))
        elif cooldown.get(key, 0) > 0:
            out.skipped.append(SkippedDoc(tts[0], tts, f, "skipped_cooldown",
                                          f"cooldown {cooldown[key]} step(s) left; {len(mine)} candidate(s) wait"))
        else:
            for cand in mine:
                out.proposed.append(cand.cid)
                rec, why = _record(cand, tts[0], skills[f], max_chars)
                if rec is not None:
                    out.candidates.append(CandidateDoc(tts[0], tts, f, case_qids=[], record=rec, source=cand.source,
                                                       external=cand.info()))
                    break
                out.skipped.append(SkippedDoc(tts[0], tts, f, NOT_APPLICABLE, f"{cand.where}: {why}",
                                              edits_proposed=len(cand.ops) or None, source=cand.source, external=cand.info()))
    left = len(pending) - len(out.proposed)
    for f, tts in empty:
        why = f"{left} left for other skill files" if left else "every candidate was proposed"
        out.skipped.append(SkippedDoc(tts[0], tts, f, NO_CANDIDATES, f"no candidate for skills/{f} ({why})"))
    return out


def proposed_before(root: Path, state_dir: str, epoch: int, step: int, steps_per_epoch: int, path_digest: str) -> set[str]:
    """Ids of the candidates the run's earlier steps proposed (their evolve.json, upstream of this step)."""
    layout = StateLayout(state_dir)
    seen: set[str] = set()
    for e in range(1, epoch + 1):
        for s in range(1, (step if e == epoch else steps_per_epoch + 1)):
            doc_path = root / layout.of_step("evolve", e, s) / EVOLVE
            doc = read_document(doc_path, EvolveDoc)
            if doc.method != METHOD or doc.external is None:
                continue
            if doc.external.get("digest") != path_digest:
                raise CandidatesError(f"evolve.candidates_path: {doc.external.get('path')} changed since step e{e}.s{s} "
                                      f"(digest {doc.external.get('digest')} then, {path_digest} now); the run's hand-out "
                                      "was made from the old file: start a fresh run (another train.state_dir)")
            seen.update(doc.external.get("proposed", []))
    return seen


# ---------------------------------------------------------------- the stage


def candidates_path(ctx: StageContext) -> tuple[Path, str]:
    """(absolute path, the path as configured) of `evolve.candidates_path`."""
    value = ctx.cfg.evolve.candidates_path
    if value is None:
        raise CandidatesError("evolve.candidates_path: evolve=candidates needs a JSONL file of edits or a directory of variants")
    path = Path(str(value))
    return (path if path.is_absolute() else ctx.root / path), str(value)


def stage_evolve_candidates(ctx: StageContext, epoch: int, step: int, prev_state: Path, rollout: Path, out: Path) -> None:
    """`stage_evolve` under `evolve.method=candidates` (module docstring): same inputs, same evolve.json contract."""
    from harness.loop.stages.evolve import begin_evolve, evolve_inputs

    prev = require_done(Path(prev_state), "previous step")
    path, label = candidates_path(ctx)
    start = wsp.harness_view(prev / WORKSPACE, "v0", "v0")
    max_chars = int(ctx.cfg.evolve.max_skill_chars)
    every = load_candidates(path, start, surface=str(ctx.cfg.benchmark.harness_surface), max_chars=max_chars, label=label)
    path_digest = digest(path)
    before = proposed_before(ctx.root, str(ctx.cfg.train.state_dir), epoch, step, int(ctx.cfg.train.steps_per_epoch), path_digest)
    begun = begin_evolve(prev_state, rollout, out, method=METHOD)  # checks done: from here on the stage writes
    if begun is None:
        return
    prev, out, ro_doc = begun
    inp = evolve_inputs(ctx, epoch, prev, rollout, ro_doc)
    pending = [c for c in every if c.cid not in before]
    result = hand_out(pending, inp.groups, inp.skills, inp.state.gate_cooldown, max_chars)
    left = len(pending) - len(result.proposed)
    info = {"path": label, "digest": path_digest, "total": len(every), "proposed_before": len(before),
            "proposed": result.proposed, "left": left}
    write_document(out / EVOLVE, EvolveDoc(
        run_id=inp.run_id, method=METHOD, edit_budget=None, candidates=result.candidates, skipped=result.skipped,
        system_cases=[c for c in inp.cases if not c.correct], tool_packs=dict(inp.tool_packs), diagnosis_usd=0.0, external=info))
    mark_done(out, {"candidates": len(result.candidates), "skipped": len(result.skipped), "method": METHOD, "left": left},
              spend=ctx.take_spend())
    progress.info("[evolve@e%d.s%d] candidates: %d proposed (%s), %d left of %d", epoch, step, len(result.candidates),
                  ", ".join(f"{c.skill_file}<-{c.source}" for c in result.candidates) or "none", left, len(every))
