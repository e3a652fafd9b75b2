"""Certify harnesses against a baseline on a population: the one writer of the certificate file.

Training's `certify` stage and `stages.compare` both call `run_certificate`: candidates are tried in order, each
at its own share of alpha (the shares sum to the certificate's alpha: Bonferroni over the attempts, fixed before
any certification sample is drawn), on the kernel's one gate loop (`harness.kernel.engine.run_gate`) with the
uniform plan of `harness.kernel.certificate`. The first certified candidate is delivered; when none is, the
baseline is. Every attempt draws the same slots (questions and fresh sample indices), so the baseline's outcomes
are run once and shared; each attempt's pairs are still i.i.d. draws, which is all its test needs.

An outage is a fault, never a result: when more than INFRA_MAX_SHARE of the pairs (after INFRA_MIN_PAIRS) had an
infrastructure failure the certification raises `CertifyInfraError` and writes no certificate.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

from harness.contracts.certificate import Attempt, Certificate, TypeRow
from harness.contracts.solver import render_system_message, resolve_skill_file
from harness.kernel.certificate import EXACT_ZERO, CertifyDecision, CertifyParams, UniformDraws, certify_decision, per_type_estimates
from harness.kernel.engine import run_gate
from harness.kernel.gate import pair_block
from harness.kernel.types import BlockItem, PairResult
from harness.loop.validate import InfraFailureError, RolloutFn
from harness.questions import Question
from harness.tree import HarnessTree

progress = logging.getLogger("harness.progress")

INFRA_MAX_SHARE = 0.2  # more failed pairs than this share: the server, not the harness, is being measured
INFRA_MIN_PAIRS = 20
PER_TYPE = ("flag", "rollback", "rollback_shared")  # certify.per_type
SKILLS_PREFIX = "skills/"
RECERTIFY_OFFSET = 500_000  # a rollback re-certification's sample indices: first_index + this + pair number (fresh)
TOPUP_OFFSET = 250_000  # an attempt's per-type top-up sample indices: its first index + this + pair number (fresh)


IDENTICAL_INPUT = "the candidate's input is identical to the baseline's on every question"


class CertifyInfraError(InfraFailureError):
    """Too many infrastructure failures for the certificate to be evidence about the harnesses."""


@dataclass(frozen=True)
class Contender:
    """A harness put through the certificate (or the baseline it is compared with)."""

    label: str
    tree: HarnessTree
    skills_version: Optional[str] = None
    prompts_version: Optional[str] = None
    path: Optional[str] = None  # the directory it was read from, when named by the user


def attempt_levels(alpha: float, n_candidates: int, fallback_share: float) -> list[float]:
    """alpha for one candidate; else (1 - fallback_share) alpha for the first and fallback_share alpha split evenly
    over the others. The levels sum to alpha."""
    if n_candidates < 1:
        raise ValueError("certificate: no candidate to certify")
    if n_candidates == 1:
        return [alpha]
    rest = alpha * fallback_share / (n_candidates - 1)
    return [alpha * (1.0 - fallback_share)] + [rest] * (n_candidates - 1)


def population_of(pool: str, qids: Sequence[str]) -> dict[str, Any]:
    unique = sorted(set(qids))
    return {"pool": pool, "n_questions": len(unique),
            "qids_sha1": hashlib.sha1("\n".join(unique).encode("utf-8")).hexdigest(),
            "sampling": "uniform with replacement over these questions, a fresh sample index per pair, both arms"}


def arm_slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-") or "candidate"


def _look_line(what: str, decision: CertifyDecision, rollouts: int, params: CertifyParams, alpha: float) -> str:
    look = decision.look
    return (f"[{what}] pairs {look.pairs}/{params.max_pairs} · wins {look.wins} losses {look.losses} ties {look.ties}"
            f"{f' infra {look.infra}' if look.infra else ''} · log E {look.log_e_max:.2f}/{look.threshold:.2f} (alpha {alpha:.4g})"
            f" · gain {100 * look.estimate:+.1f} pts, anytime bounds [{100 * look.lower_bound:+.1f}, {100 * look.upper_bound:+.1f}]"
            f" · rollouts {rollouts}")


def rollback_tree(parent: HarnessTree, baseline: HarnessTree, task_types: Sequence[str], *,
                  shared: bool = False) -> tuple[HarnessTree, dict[str, str], dict[str, str]]:
    """`parent` with the skill file each of `task_types` reads put back to the baseline's version (removed when the
    baseline has none, unless the shared default changed: then it holds the default text the type read at the
    baseline): (tree, {path: "restored" | "removed"}, {task type: why it kept its file}). `shared`: the
    files every type reads (everything outside skills/: system prompt, tool guides) go back to the baseline's too,
    so a rolled-back type with a skill file of its own reads exactly the baseline's harness. Without it, a type whose
    file is the baseline's keeps it: what changed for it are shared files."""
    changes: dict[str, str | None] = {}
    kept: dict[str, str] = {}
    if shared:
        changes.update({p: baseline.get(p) for p in set(parent) | set(baseline)
                        if not p.startswith(SKILLS_PREFIX) and parent.get(p) != baseline.get(p)})
    for task_type in sorted(set(task_types)):
        path = resolve_skill_file(parent, task_type)
        if parent.get(path) == baseline.get(path):
            if not shared or not changes:
                kept[task_type] = f"{path} is the baseline's: the change comes from shared files (system prompt, tool guides)"
            continue
        base_path = resolve_skill_file(baseline, task_type)
        # a file the baseline lacks: removing it would make the type read the parent's shared default, which may have
        # changed (the type check splits a type off an edited default); it gets the text it read at the baseline
        changed_default = path not in baseline and parent.get(base_path) != baseline.get(base_path)
        changes[path] = baseline.get(base_path) if changed_default else baseline.get(path)
    files = {p: "restored" if p in baseline or changes[p] is not None else "removed" for p in sorted(changes)}
    return parent.with_files(changes), files, kept


def input_keys(tree: HarnessTree, task_types: Sequence[str]) -> dict[str, str]:
    """task type -> a fingerprint of everything in `tree` its solver input may depend on: two trees give a type the
    same key only when its input is byte-identical under both (`changed_types`' rule). Conservative: the key covers
    (1) every file outside skills/ (the system prompt, the tool guides, and any other file, read or not), (2) the
    skill file the type resolves to (`resolve_skill_file`), path and text, and (3) `render_system_message` for the
    type. The rendered system message is the native solver's whole harness-dependent input (harness/agent/loop.py
    reads the tree only through it; the user message is the question's, tools and scorer the benchmark's), so (3)
    follows from (1) and (2) today and guards the rule against a reader of the tree it does not cover."""
    shared = hashlib.sha256()
    for path in sorted(p for p in tree if not p.startswith(SKILLS_PREFIX)):
        shared.update(f"{len(path)}:{path}{len(tree[path])}:".encode() + tree[path].encode())
    keys: dict[str, str] = {}
    for task_type in sorted(set(task_types)):
        path = resolve_skill_file(tree, task_type)
        h = shared.copy()
        for part in (path, tree.get(path), render_system_message(tree, task_type)):
            text = "\x00<absent>" if part is None else part
            h.update(f"{len(text)}:".encode() + text.encode())
        keys[task_type] = h.hexdigest()[:32]
    return keys


def changed_types(tree: HarnessTree, baseline: HarnessTree, task_types: Sequence[str]) -> list[str]:
    """The task types whose solver input may differ between `tree` and `baseline` (their `input_keys` differ); every
    other type reads byte-identical input under both, so its paired difference is exactly 0 in distribution
    (certify.skip_identical). The certificate's trees are native (the certify stage's workspace views;
    stages.compare converts other surfaces); an agent that reads the harness some other way sets
    certify.skip_identical false (every type counts as changed)."""
    mine, theirs = input_keys(tree, task_types), input_keys(baseline, task_types)
    return [t for t in sorted(mine) if mine[t] != theirs[t]]


def asked_qids(qids: Sequence[str], task_type_of: Mapping[str, str], changed: Sequence[str]) -> list[str]:
    """The questions of `qids` whose task type is in `changed`: the ones a certificate asks (the others read
    identical input under both harnesses)."""
    keep = set(changed)
    return sorted(q for q in set(qids) if task_type_of[q] in keep)


def topup_items(pairs: Sequence[PairResult], qids_of_type: Mapping[str, Sequence[str]], want: int, *, seed: int,
                start: int) -> list[BlockItem]:
    """Slots that bring each type of `qids_of_type` to `want` pairs: its questions drawn uniformly with replacement
    (seeded), sample indices start + TOPUP_OFFSET + k (fresh: never an attempt's or a re-certification's)."""
    have: dict[str, int] = {}
    type_of = {q: t for t, qs in qids_of_type.items() for q in qs}
    for p in pairs:
        if p.qid in type_of:
            have[type_of[p.qid]] = have.get(type_of[p.qid], 0) + 1
    rng = random.Random(f"certify-topup|{seed}|{start}")
    items: list[BlockItem] = []
    for task_type in sorted(qids_of_type):
        pool = sorted(qids_of_type[task_type])
        for _ in range(max(0, want - have.get(task_type, 0))):
            items.append(BlockItem(rng.choice(pool), start + TOPUP_OFFSET + len(items)))
    return items


def type_rows(pairs: Sequence[PairResult], task_type_of: Mapping[str, str], params: CertifyParams,
              identical: Sequence[str]) -> list[TypeRow]:
    """The per-type rows: the kernel's estimate for each type with pairs, and for each type in `identical` (byte-identical
    input under both harnesses) estimate 0, no pairs, never flagged, `identical_input` — exact, not estimated. A type
    of `identical` that got pairs (the first attempts share the union of their changed types) is shown as identical."""
    rows = {t.task_type: TypeRow(t.task_type, t.pairs, t.estimate, t.ci_low, t.ci_high, t.flagged)
            for t in per_type_estimates(pairs, task_type_of, params)}
    rows.update({t: TypeRow(t, 0, 0.0, 0.0, 0.0, False, identical_input=True) for t in identical})
    return [rows[t] for t in sorted(rows)]


def _skipped(contender: Contender, alpha: float, reason: str, rollback: Optional[dict[str, Any]] = None) -> Attempt:
    return Attempt(contender.label, contender.tree.fingerprint, contender.skills_version, contender.prompts_version, alpha,
                   "skipped", reason, 0, 0, 0, 0, 0, 0, None, None, None, None, None, None, rollback=rollback)


async def run_certificate(
    candidates: Sequence[Contender],
    baseline: Contender,
    *,
    qids: Sequence[str],
    questions: Mapping[str, Question],
    rollout: RolloutFn,
    params: CertifyParams,
    fallback_share: float,
    run_id: Callable[[str], str],
    seed: int,
    first_index: int,
    pool: str,
    what: str = "certify",
    otherwise: Optional[Contender] = None,
    per_type: str = "flag",
    identical_why: Optional[str] = None,
) -> Certificate:
    """Try `candidates` in order against `baseline` (see the module doc); returns the certificate (not written).
    When none is certified, `otherwise` (default: the baseline) is what the certificate says is delivered.
    `identical_why`: why, in the caller's words, no candidate may differ from the baseline; the summary says it when
    none does ("nothing to certify: <identical_why> (no candidate differs from base)").

    per_type="rollback": when the certified attempt flags task types, their skill files are put back to the
    baseline's (`rollback_tree`) and that harness is certified once more, on fresh sample indices (first_index +
    RECERTIFY_OFFSET), at the certified attempt's own level (fixed-sequence testing: it is only tested after its parent
    was certified, so the chain's false-certification probability stays at the parent's level; docs/certificate.md
    "Levels"). Certified -> it is delivered; else the parent is, with its flags.

    params.type_pairs > 0: a certified attempt's per-type rows get top-up pairs (`topup_items`) for each task type it
    changed (`changed_types`) that has fewer; they are rolled out after the decision and never enter the e-process.

    params.skip_identical: each attempt asks only the questions whose input changed (S: the types `changed_types`
    returns; the first attempts share one S, the union of their changed types, so their slots stay shared; a rollback
    re-certification has its own) and tests Delta_S > -margin / pi, pi = |S| / |population| (harness/kernel/
    certificate.py, "Only the questions whose input changed"); estimate and bounds are in population units, the pair
    budget is sized on |S|, an unchanged type's row reads estimate 0 with `identical_input`. A question of the union
    that is unchanged for one attempt has mean-0 differences under it, so its test stays valid with the same pi.
    S empty (nothing the questions read changed): no pairs; Delta = 0 exactly, so with a margin the attempt is
    certified (estimate 0, bounds [0, 0]), without one it is skipped, not certified. A candidate identical to the
    baseline is the same case: with a margin certified exactly, without one "nothing to certify"."""
    if not qids:
        raise ValueError(f"{what}: the population to certify on is empty")
    if per_type not in PER_TYPE:
        raise ValueError(f"{what}: per_type {per_type!r}, expected one of {list(PER_TYPE)}")
    if per_type != "flag" and params.max_pairs > RECERTIFY_OFFSET:
        raise ValueError(f"{what}: certify.max_pairs {params.max_pairs} > {RECERTIFY_OFFSET}: the re-certification's "
                         "fresh sample indices would overlap the first attempts'")
    if params.type_pairs > 0 and params.max_pairs > TOPUP_OFFSET:
        raise ValueError(f"{what}: certify.max_pairs {params.max_pairs} > {TOPUP_OFFSET}: the per-type top-up's fresh "
                         "sample indices would overlap the attempt's")
    unknown = sorted(set(qids) - set(questions))
    if unknown:
        raise KeyError(f"{what}: population names unknown qids {unknown[:5]}")
    levels = attempt_levels(params.alpha, len(candidates), fallback_share)
    task_type_of = {q: questions[q].task_type for q in set(qids)}
    every_type = sorted(set(task_type_of.values()))
    n_population = len(task_type_of)
    attempts: list[Attempt] = []
    asked_by_label: dict[str, Sequence[str]] = {}  # the S each tested (or exactly certified) attempt drew from
    total = 0

    def asked_of(changed: Sequence[str]) -> list[str]:
        """The questions an attempt draws from: those whose input changed (every one with skip_identical off)."""
        return asked_qids(qids, task_type_of, changed if params.skip_identical else every_type)

    def asked_block(asked: Sequence[str]) -> dict[str, Any]:
        """The population block's description of one S: its size, its share, the task types with no question in it."""
        return {"asked_questions": len(asked), "asked_share": len(asked) / n_population,
                "identical_task_types": sorted(set(every_type) - {task_type_of[q] for q in asked})}

    async def attempt(contender: Contender, alpha: float, base_outcomes: dict[tuple[str, int], Optional[bool]],
                      start: int, asked: Sequence[str], own: Sequence[str], sized: CertifyParams,
                      rollback: Optional[dict[str, Any]] = None) -> Attempt:
        """One sequential test of `contender` against the baseline at `alpha` on the questions `asked`, slots from
        `start`; `own`: the task types it changed (`changed_types`); `sized`: `params` with the pair budget of
        `asked` (`for_population`, fixed before any pair is drawn)."""
        nonlocal total
        asked_by_label[contender.label] = asked
        share = len(asked) / n_population
        level = replace(sized, alpha=alpha)
        spent = 0

        async def sample_block(block: list[BlockItem], b: int) -> list[PairResult]:
            nonlocal spent
            todo = [it for it in block if (it.qid, it.sample_index) not in base_outcomes]
            if todo:
                got = await rollout(baseline.tree, [(questions[it.qid], it.sample_index) for it in todo], run_id("base"))
                base_outcomes.update({(it.qid, it.sample_index): v for it, v in zip(todo, got)})
                spent += len(todo)
            cand = await rollout(contender.tree, [(questions[it.qid], it.sample_index) for it in block], run_id(arm_slug(contender.label)))
            spent += len(block)
            base = [base_outcomes[(it.qid, it.sample_index)] for it in block]
            return pair_block(block, base, list(cand))

        def decide(pairs: Sequence[PairResult], final: bool) -> CertifyDecision:
            n_infra = sum(p.infra for p in pairs)
            if len(pairs) >= INFRA_MIN_PAIRS and n_infra / len(pairs) > INFRA_MAX_SHARE:
                raise CertifyInfraError(f"{what}: {n_infra} of {len(pairs)} pairs had an infrastructure failure "
                                        f"(> {INFRA_MAX_SHARE:.0%}); no certificate is written — fix the model server and re-run")
            return certify_decision(pairs, level, final=final, share=share)

        def on_block(b: int, block_pairs: Sequence[PairResult], decision: CertifyDecision) -> None:
            progress.info("%s", _look_line(f"{what} {contender.label}", decision, spent, sized, alpha))

        plan = UniformDraws(asked, max_pairs=sized.max_pairs, block_size=sized.block_size, seed=seed, first_index=start)
        run = await run_gate(plan, sample_block, decide, on_block=on_block, label=f"{what} {contender.label}")
        look = run.decision.look
        reason = run.decision.reason
        typed = list(run.pairs)
        if run.decision.action == "certified" and params.type_pairs > 0:
            # the flags need pairs on every type the harness changed; drawn within a type, these pairs are i.i.d. for
            # that type's gain only, so they feed its row and never the e-process (the certificate is already decided)
            of_type = {t: [q for q, tt in task_type_of.items() if tt == t] for t in own}
            items = topup_items(run.pairs, of_type, params.type_pairs, seed=seed, start=start)
            if items:
                typed += await sample_block(items, -1)
                reason += f"; per-type rows include {len(items)} top-up pairs (changed types to {params.type_pairs} pairs each)"
                progress.info("[%s %s] per-type top-up: %d pairs", what, contender.label, len(items))
        identical = sorted(set(every_type) - set(own)) if params.skip_identical else []
        types = type_rows(typed, task_type_of, level, identical)
        total += spent
        return Attempt(contender.label, contender.tree.fingerprint, contender.skills_version, contender.prompts_version,
                       alpha, run.decision.action, reason, look.pairs, look.wins, look.losses, look.ties,
                       look.infra, spent, look.estimate, look.lower_bound, look.upper_bound, look.log_e_max,
                       look.threshold, look.crossed_at, types, rollback=rollback, asked_questions=len(asked),
                       share=share, identical_task_types=identical)

    def identical_input(contender: Contender, alpha: float, rollback: Optional[dict[str, Any]] = None) -> Attempt:
        """An attempt with nothing to ask: no question's input changed (S empty), Delta = 0 exactly: certified without
        pairs with a margin (`certify_decision` at share 0), else skipped, not certified."""
        asked_by_label[contender.label] = []
        rows = type_rows([], task_type_of, params, every_type)
        decision = certify_decision([], params, final=True, share=0.0)
        if decision.action != "certified":
            return replace(_skipped(contender, alpha, f"not certified: {IDENTICAL_INPUT}", rollback=rollback),
                           asked_questions=0, share=0.0, identical_task_types=every_type, per_task_type=rows)
        look = decision.look
        return Attempt(contender.label, contender.tree.fingerprint, contender.skills_version, contender.prompts_version,
                       alpha, "certified", f"{decision.reason}; {IDENTICAL_INPUT}", 0, 0, 0, 0, 0, 0, look.estimate,
                       look.lower_bound, look.upper_bound, None, None, None, rows, rollback=rollback, asked_questions=0,
                       share=0.0, identical_task_types=every_type)

    shared: dict[tuple[str, int], Optional[bool]] = {}  # the first attempts draw the same slots: baseline run once
    tried: dict[str, Contender] = {}
    differ = [c for c in candidates if c.tree.fingerprint != baseline.tree.fingerprint]
    changed_of = {c.tree.fingerprint: changed_types(c.tree, baseline.tree, every_type) for c in differ}
    # one S for the first attempts (the union of their changed types), fixed before any pair: their slots stay shared
    union = sorted({t for own in changed_of.values() for t in own})
    first_asked = asked_of(union)
    first_sized = params.for_population(len(first_asked) or n_population)  # the certificate's pair_budget
    for contender, alpha in zip(candidates, levels):
        same_tree = contender.tree.fingerprint == baseline.tree.fingerprint
        if same_tree and params.margin <= 0:
            attempts.append(_skipped(contender, alpha, "identical to the baseline: nothing to certify"))
            continue
        if same_tree or not first_asked:  # Delta = 0 exactly: with a margin certified without pairs
            attempts.append(identical_input(contender, alpha))
        else:
            tried[contender.label] = contender
            attempts.append(await attempt(contender, alpha, shared, first_index, first_asked,
                                          changed_of[contender.tree.fingerprint], first_sized))
        if attempts[-1].decision == "certified":
            break
    chosen = next((a for a in attempts if a.decision == "certified"), None)
    rolled_back: Optional[Attempt] = None
    flags = sorted({t.task_type for t in chosen.per_task_type if t.flagged}) if chosen else []
    if per_type != "flag" and chosen is not None and flags:
        parent = tried[chosen.label]
        tree, files, kept = rollback_tree(parent.tree, baseline.tree, flags, shared=per_type == "rollback_shared")
        start = first_index + RECERTIFY_OFFSET
        info = {"of": chosen.label, "task_types": sorted(set(flags) - set(kept)), "files": files, "kept": kept,
                "first_index": start, "shared": per_type == "rollback_shared",
                "level": f"alpha {chosen.alpha:g} of {chosen.label!r}: tested only after it was certified, on fresh samples "
                         "(fixed sequence), so the two together are falsely certified with probability <= that level",
                "why": "flagged: " + ", ".join(f"{t.task_type} {100 * t.estimate:+.1f} pts on {t.pairs} pairs"
                                               for t in chosen.per_task_type if t.flagged)}
        child = Contender(f"{chosen.label} rolled back", tree, parent.skills_version, parent.prompts_version)
        child_changed = changed_types(tree, baseline.tree, every_type)
        child_asked = asked_of(child_changed)
        if not files:
            rolled_back = _skipped(child, chosen.alpha, "no file the flagged task types read differs from the baseline's "
                                                        "and may be rolled back: nothing to roll back", rollback=info)
        elif not child_asked:
            rolled_back = identical_input(child, chosen.alpha, rollback=info)
        else:
            rolled_back = await attempt(child, chosen.alpha, {}, start, child_asked, child_changed,
                                        params.for_population(len(child_asked)), rollback=info)
        attempts.append(rolled_back)
        if rolled_back.decision == "certified":
            chosen = rolled_back
    fallback = (otherwise or baseline).label
    kind = "non_inferiority" if params.margin > 0 else "superiority"
    if chosen is not None:
        claim = "better" if params.margin == 0 else f"not worse by more than {100 * params.margin:.1f} pts"
        if chosen.asked_questions == 0:  # S empty: exact, no test and no level spent
            summary = f"certified {claim} than {baseline.label}: {chosen.label} ({EXACT_ZERO}; exact, no pairs)"
        else:
            summary = (f"certified {claim} than {baseline.label} at alpha {params.alpha:g}: {chosen.label} "
                       f"(gain {100 * (chosen.estimate or 0):+.1f} pts, lower bound {100 * (chosen.lower_bound or 0):+.1f} "
                       f"pts, {chosen.pairs} pairs)")
        if chosen.rollback:
            summary += f"; rolled back {', '.join(chosen.rollback['task_types'])} ({', '.join(chosen.rollback['files'])})"
        elif rolled_back is not None and rolled_back.rollback and rolled_back.rollback["files"]:
            summary += (f"; the rollback of {', '.join(rolled_back.rollback['task_types'])} was not certified "
                        f"({rolled_back.decision}): delivered with its flags")
    elif all(a.decision == "skipped" for a in attempts) and any(a.asked_questions == 0 for a in attempts):
        summary = (f"not certified: {IDENTICAL_INPUT} ({len(task_type_of)} questions of the {pool} pool; no pairs); "
                   f"delivering {fallback}")
    elif all(a.decision == "skipped" for a in attempts):
        why = f": {identical_why}" if identical_why else ""
        summary = f"not certified: nothing to certify{why} (no candidate differs from {baseline.label}); delivering {fallback}"
    else:
        tested = [a for a in attempts if a.decision != "skipped"]
        why = tested[0].reason.removeprefix("not certified: ")
        more = f" ({len(tested) - 1} earlier checkpoint(s) not certified either)" if len(tested) > 1 else ""
        summary = f"not certified at alpha {params.alpha:g}: {why}{more}; delivering {fallback}"
    flagged = sorted({t.task_type for t in (chosen.per_task_type if chosen else []) if t.flagged})
    split = {a.label: a.alpha for a in attempts if not a.rollback}
    level_doc: dict[str, Any] = {
        "attempts": split,
        "rule": "Bonferroni over the attempts (levels fixed before any certification sample, summing to alpha)"
                + ("; a rollback re-certification inherits its parent's level (fixed sequence)" if per_type != "flag" else ""),
        "total": params.alpha}
    population = {**population_of(pool, qids), "pair_budget": first_sized.max_pairs,
                  "skip_identical": params.skip_identical}
    if len(first_asked) < n_population:
        population["sampling"] = ("uniform with replacement over the questions whose input changed (asked_questions; the "
                                  "others read identical input under both harnesses: difference exactly 0), a fresh sample "
                                  "index per pair, both arms")
    certificate = Certificate(certified=chosen is not None, delivered=chosen.label if chosen else fallback, summary=summary,
                              kind=kind, margin=float(params.margin), alpha=float(params.alpha), population=population,
                              baseline={"label": baseline.label, "fingerprint": baseline.tree.fingerprint, "path": baseline.path},
                              attempts=attempts, rollouts=total, flagged_task_types=flagged, per_type=per_type, levels=level_doc)
    # asked_*: the S of the attempt the summary and the metrics describe (a delivered rollback asks its own S);
    # first_attempts: the S the first attempts shared (a skipped attempt asked nothing of its own: theirs is shown)
    shown = certificate.described
    shown_asked = asked_by_label.get(shown.label, first_asked) if shown else first_asked
    certificate = replace(certificate, population={**population, **asked_block(shown_asked),
                                                   "first_attempts": asked_block(first_asked)})
    asked = certificate.asked_line() if first_asked else None  # S empty: the summary says so already
    return replace(certificate, summary=f"{summary}; {asked}") if asked else certificate


def certificate_metrics(certificate: Certificate) -> dict[str, float | None]:
    """The certificate as MLflow metrics (`certify_*`, `certify/<task type>` estimates); None where unknown. The
    per-attempt ones describe `certificate.described`, the attempt the summary describes (a rollback when delivered)."""
    shown = certificate.described
    out: dict[str, float | None] = {
        "certify_certified": float(certificate.certified), "certify_alpha": certificate.alpha,
        "certify_rollouts": float(certificate.rollouts), "certify_attempts": float(len(certificate.attempts)),
        "certify_flagged_task_types": float(len(certificate.flagged_task_types)),
    }
    if shown is not None:
        out.update({"certify_pairs": float(shown.pairs), "certify_estimate": shown.estimate,
                    "certify_lower_bound": shown.lower_bound, "certify_upper_bound": shown.upper_bound,
                    "certify_width": shown.width, "certify_log_e": shown.log_e, "certify_asked_share": shown.share})
        out.update({f"certify_type/{row.task_type}": row.estimate for row in shown.per_task_type})
    return out


def certificate_tags(certificate: Certificate) -> dict[str, str]:
    return {"harness.certified": str(certificate.certified).lower(), "harness.delivered": certificate.delivered,
            "harness.certificate": certificate.summary[:4000]}
