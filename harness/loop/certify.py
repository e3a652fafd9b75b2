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
from harness.contracts.solver import resolve_skill_file
from harness.kernel.certificate import CertifyDecision, CertifyParams, UniformDraws, certify_decision, per_type_estimates
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


def changed_types(tree: HarnessTree, baseline: HarnessTree, task_types: Sequence[str]) -> list[str]:
    """The task types that read something `tree` changed: all when a shared file (outside skills/) differs, else
    those whose resolved skill file's text differs from the one they read in `baseline`."""
    if any(tree.get(p) != baseline.get(p) for p in set(tree) | set(baseline) if not p.startswith(SKILLS_PREFIX)):
        return sorted(set(task_types))
    return sorted(t for t in set(task_types)
                  if tree.get(resolve_skill_file(tree, t)) != baseline.get(resolve_skill_file(baseline, t)))


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
) -> Certificate:
    """Try `candidates` in order against `baseline` (see the module doc); returns the certificate (not written).
    When none is certified, `otherwise` (default: the baseline) is what the certificate says is delivered.

    per_type="rollback": when the certified attempt flags task types, their skill files are put back to the
    baseline's (`rollback_tree`) and that harness is certified once more, on fresh sample indices (first_index +
    RECERTIFY_OFFSET), at the certified attempt's own level (fixed-sequence testing: it is only tested after its parent
    was certified, so the chain's false-certification probability stays at the parent's level; docs/certificate.md
    "Levels"). Certified -> it is delivered; else the parent is, with its flags.

    params.type_pairs > 0: a certified attempt's per-type rows get top-up pairs (`topup_items`) for each task type it
    changed (`changed_types`) that has fewer; they are rolled out after the decision and never enter the e-process."""
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
    params = params.for_population(len(set(qids)))  # the pair budget, fixed before any pair is drawn
    levels = attempt_levels(params.alpha, len(candidates), fallback_share)
    task_type_of = {q: questions[q].task_type for q in set(qids)}
    attempts: list[Attempt] = []
    total = 0

    async def attempt(contender: Contender, alpha: float, base_outcomes: dict[tuple[str, int], Optional[bool]],
                      start: int, rollback: Optional[dict[str, Any]] = None) -> Attempt:
        """One sequential test of `contender` against the baseline at `alpha`, slots from `start`."""
        nonlocal total
        level = replace(params, alpha=alpha)
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
            return certify_decision(pairs, level, final=final)

        def on_block(b: int, block_pairs: Sequence[PairResult], decision: CertifyDecision) -> None:
            progress.info("%s", _look_line(f"{what} {contender.label}", decision, spent, params, alpha))

        plan = UniformDraws(qids, max_pairs=params.max_pairs, block_size=params.block_size, seed=seed, first_index=start)
        run = await run_gate(plan, sample_block, decide, on_block=on_block, label=f"{what} {contender.label}")
        look = run.decision.look
        reason = run.decision.reason
        typed = list(run.pairs)
        if run.decision.action == "certified" and params.type_pairs > 0:
            # the flags need pairs on every type the harness changed; drawn within a type, these pairs are i.i.d. for
            # that type's gain only, so they feed its row and never the e-process (the certificate is already decided)
            changed = set(changed_types(contender.tree, baseline.tree, sorted(set(task_type_of.values()))))
            of_type = {t: [q for q, tt in task_type_of.items() if tt == t] for t in changed}
            items = topup_items(run.pairs, of_type, params.type_pairs, seed=seed, start=start)
            if items:
                typed += await sample_block(items, -1)
                reason += f"; per-type rows include {len(items)} top-up pairs (changed types to {params.type_pairs} pairs each)"
                progress.info("[%s %s] per-type top-up: %d pairs", what, contender.label, len(items))
        types = [TypeRow(t.task_type, t.pairs, t.estimate, t.ci_low, t.ci_high, t.flagged)
                 for t in per_type_estimates(typed, task_type_of, level)]
        total += spent
        return Attempt(contender.label, contender.tree.fingerprint, contender.skills_version, contender.prompts_version,
                       alpha, run.decision.action, reason, look.pairs, look.wins, look.losses, look.ties,
                       look.infra, spent, look.estimate, look.lower_bound, look.upper_bound, look.log_e_max,
                       look.threshold, look.crossed_at, types, rollback=rollback)

    shared: dict[tuple[str, int], Optional[bool]] = {}  # the first attempts draw the same slots: baseline run once
    tried: dict[str, Contender] = {}
    for contender, alpha in zip(candidates, levels):
        if contender.tree.fingerprint == baseline.tree.fingerprint:
            attempts.append(_skipped(contender, alpha, "identical to the baseline: nothing to certify"))
            continue
        tried[contender.label] = contender
        attempts.append(await attempt(contender, alpha, shared, first_index))
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
        if not files:
            rolled_back = _skipped(child, chosen.alpha, "no file the flagged task types read differs from the baseline's "
                                                        "and may be rolled back: nothing to roll back", rollback=info)
        else:
            rolled_back = await attempt(child, chosen.alpha, {}, start, rollback=info)
        attempts.append(rolled_back)
        if rolled_back.decision == "certified":
            chosen = rolled_back
    fallback = (otherwise or baseline).label
    kind = "non_inferiority" if params.margin > 0 else "superiority"
    if chosen is not None:
        claim = "better" if params.margin == 0 else f"not worse by more than {100 * params.margin:.1f} pts"
        summary = (f"certified {claim} than {baseline.label} at alpha {params.alpha:g}: {chosen.label} "
                   f"(gain {100 * (chosen.estimate or 0):+.1f} pts, lower bound {100 * (chosen.lower_bound or 0):+.1f} pts, "
                   f"{chosen.pairs} pairs)")
        if chosen.rollback:
            summary += f"; rolled back {', '.join(chosen.rollback['task_types'])} ({', '.join(chosen.rollback['files'])})"
        elif rolled_back is not None and rolled_back.rollback and rolled_back.rollback["files"]:
            summary += (f"; the rollback of {', '.join(rolled_back.rollback['task_types'])} was not certified "
                        f"({rolled_back.decision}): delivered with its flags")
    elif all(a.decision == "skipped" for a in attempts):
        summary = f"not certified: nothing to certify (no candidate differs from {baseline.label}); delivering {fallback}"
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
    return Certificate(certified=chosen is not None, delivered=chosen.label if chosen else fallback, summary=summary,
                       kind=kind, margin=float(params.margin), alpha=float(params.alpha),
                       population={**population_of(pool, qids), "pair_budget": params.max_pairs},
                       baseline={"label": baseline.label, "fingerprint": baseline.tree.fingerprint, "path": baseline.path},
                       attempts=attempts, rollouts=total, flagged_task_types=flagged, per_type=per_type, levels=level_doc)


def certificate_metrics(certificate: Certificate) -> dict[str, float | None]:
    """The certificate as MLflow metrics (`certify_*`, `certify/<task type>` estimates); None where unknown."""
    chosen = certificate.chosen or (certificate.attempts[0] if certificate.attempts else None)
    out: dict[str, float | None] = {
        "certify_certified": float(certificate.certified), "certify_alpha": certificate.alpha,
        "certify_rollouts": float(certificate.rollouts), "certify_attempts": float(len(certificate.attempts)),
        "certify_flagged_task_types": float(len(certificate.flagged_task_types)),
    }
    if chosen is not None:
        out.update({"certify_pairs": float(chosen.pairs), "certify_estimate": chosen.estimate,
                    "certify_lower_bound": chosen.lower_bound, "certify_upper_bound": chosen.upper_bound,
                    "certify_width": chosen.width, "certify_log_e": chosen.log_e})
        out.update({f"certify_type/{row.task_type}": row.estimate for row in chosen.per_task_type})
    return out


def certificate_tags(certificate: Certificate) -> dict[str, str]:
    return {"harness.certified": str(certificate.certified).lower(), "harness.delivered": certificate.delivered,
            "harness.certificate": certificate.summary[:4000]}
