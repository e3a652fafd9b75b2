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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

from harness.contracts.certificate import Attempt, Certificate, TypeRow
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
) -> Certificate:
    """Try `candidates` in order against `baseline` (see the module doc); returns the certificate (not written).
    When none is certified, `otherwise` (default: the baseline) is what the certificate says is delivered."""
    if not qids:
        raise ValueError(f"{what}: the population to certify on is empty")
    unknown = sorted(set(qids) - set(questions))
    if unknown:
        raise KeyError(f"{what}: population names unknown qids {unknown[:5]}")
    levels = attempt_levels(params.alpha, len(candidates), fallback_share)
    base_outcomes: dict[tuple[str, int], Optional[bool]] = {}
    task_type_of = {q: questions[q].task_type for q in set(qids)}
    attempts: list[Attempt] = []
    total = 0
    for contender, alpha in zip(candidates, levels):
        if contender.tree.fingerprint == baseline.tree.fingerprint:
            attempts.append(Attempt(contender.label, contender.tree.fingerprint, contender.skills_version, contender.prompts_version,
                                    alpha, "skipped", "identical to the baseline: nothing to certify", 0, 0, 0, 0, 0, 0,
                                    None, None, None, None, None, None))
            continue
        level = replace(params, alpha=alpha)
        spent = 0

        async def sample_block(block: list[BlockItem], b: int, contender: Contender = contender) -> list[PairResult]:
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

        def decide(pairs: Sequence[PairResult], final: bool, level: CertifyParams = level) -> CertifyDecision:
            n_infra = sum(p.infra for p in pairs)
            if len(pairs) >= INFRA_MIN_PAIRS and n_infra / len(pairs) > INFRA_MAX_SHARE:
                raise CertifyInfraError(f"{what}: {n_infra} of {len(pairs)} pairs had an infrastructure failure "
                                        f"(> {INFRA_MAX_SHARE:.0%}); no certificate is written — fix the model server and re-run")
            return certify_decision(pairs, level, final=final)

        def on_block(b: int, block_pairs: Sequence[PairResult], decision: CertifyDecision, label: str = contender.label,
                     alpha: float = alpha) -> None:
            progress.info("%s", _look_line(f"{what} {label}", decision, spent, params, alpha))

        plan = UniformDraws(qids, max_pairs=params.max_pairs, block_size=params.block_size, seed=seed, first_index=first_index)
        run = await run_gate(plan, sample_block, decide, on_block=on_block, label=f"{what} {contender.label}")
        look = run.decision.look
        types = [TypeRow(t.task_type, t.pairs, t.estimate, t.ci_low, t.ci_high, t.flagged)
                 for t in per_type_estimates(run.pairs, task_type_of, level)]
        total += spent
        attempts.append(Attempt(contender.label, contender.tree.fingerprint, contender.skills_version, contender.prompts_version,
                                alpha, run.decision.action, run.decision.reason, look.pairs, look.wins, look.losses, look.ties,
                                look.infra, spent, look.estimate, look.lower_bound, look.upper_bound, look.log_e_max,
                                look.threshold, look.crossed_at, types))
        if run.decision.action == "certified":
            break
    chosen = next((a for a in attempts if a.decision == "certified"), None)
    fallback = (otherwise or baseline).label
    kind = "non_inferiority" if params.margin > 0 else "superiority"
    if chosen is not None:
        claim = "better" if params.margin == 0 else f"not worse by more than {100 * params.margin:.1f} pts"
        summary = (f"certified {claim} than {baseline.label} at alpha {params.alpha:g}: {chosen.label} "
                   f"(gain {100 * (chosen.estimate or 0):+.1f} pts, lower bound {100 * (chosen.lower_bound or 0):+.1f} pts, "
                   f"{chosen.pairs} pairs)")
    elif all(a.decision == "skipped" for a in attempts):
        summary = f"not certified: nothing to certify (no candidate differs from {baseline.label}); delivering {fallback}"
    else:
        tried = [a for a in attempts if a.decision != "skipped"]
        why = tried[0].reason.removeprefix("not certified: ")
        more = f" ({len(tried) - 1} earlier checkpoint(s) not certified either)" if len(tried) > 1 else ""
        summary = f"not certified at alpha {params.alpha:g}: {why}{more}; delivering {fallback}"
    flagged = sorted({t.task_type for t in (chosen.per_task_type if chosen else []) if t.flagged})
    return Certificate(certified=chosen is not None, delivered=chosen.label if chosen else fallback, summary=summary,
                       kind=kind, margin=float(params.margin), alpha=float(params.alpha), population=population_of(pool, qids),
                       baseline={"label": baseline.label, "fingerprint": baseline.tree.fingerprint, "path": baseline.path},
                       attempts=attempts, rollouts=total, flagged_task_types=flagged)


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
