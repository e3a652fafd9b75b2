"""certify: the delivery certificate (DESIGN §5 "Two kinds of evidence") -> certificate.json + delivered/.

The training's best pointer ("final") is certified against the starting harness (or `certify.reference`) on the
test pool, with fresh sample indices: no selection ever looked at those questions. Not certified -> the best
pointers of earlier epochs are tried (up to `certify.fallbacks`, each at its share of alpha), else the starting
harness is delivered. With `certify.per_type=rollback`, a certified harness with flagged task types gets those types'
skill files put back to the baseline's and is certified once more on fresh samples (harness/loop/certify.py). The choice and its evidence are the certificate; holdout evaluates what is delivered.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, get_args, get_type_hints

from harness import workspace as wsp
from harness.contracts.certificate import Attempt, Certificate, write_certificate
from harness.identity import CERTIFY_INDEX, certify_run_id
from harness.kernel.certificate import CertifyParams
from harness.kernel.schedule import StateLayout
from harness.log import HarnessLog
from harness.loop import rollouts as ro
from harness.loop.certify import Contender, arm_slug, rollback_tree, run_certificate
from harness.loop.context import StageContext
from harness.loop.persistence import read_pools
from harness.loop.state import RUNLOG, WORKSPACE, StateError, fresh_output, is_done, mark_done, require_done
from harness.loop.validate import ScoredShareGuard
from harness.tree import HarnessTree

progress = logging.getLogger("harness.progress")
DELIVERED = "delivered"
BASE = "base"


def certify_params(cfg: Any) -> CertifyParams:
    """CertifyParams from the `certify` config group, each key cast to its field's type (float, int, str or bool; an
    Optional[X] field keeps null as None, `_cast`; checked at config load, harness/config/validate.py), so a new
    CertifyParams field needs no edit here."""
    c = cfg.certify
    cast = get_type_hints(CertifyParams)
    return CertifyParams(**{k: _cast(cast[k], getattr(c, k)) for k in CertifyParams.keys()})


def _cast(kind: Any, value: Any) -> Any:
    """`value` as the field type `kind`; an Optional[X] field keeps None (null in the config) and casts the rest to X."""
    optional = [a for a in get_args(kind) if a is not type(None)]
    if optional and len(optional) < len(get_args(kind)):
        return None if value is None else optional[0](value)
    return kind(value)


def training_candidates(ctx: StageContext, final_state: Path, n_fallbacks: int, first: str = "best") -> list[Contender]:
    """What the certificate tries, in order, each distinct from the ones before it and from the starting harness:
    `first` = "best": the last epoch's best pointer ("final"), then the best pointers of earlier epochs, newest first;
    "current": the harness training ended with ("current"), then those. The first one and up to `n_fallbacks` more."""
    ws = final_state / WORKSPACE
    seen = {("v0", "v0")}
    m = wsp.read_manifest(ws)
    best = wsp.read_best(ws)
    final = ("final", (best.skills, best.prompts) if best else (m.skills_version, m.prompts_version))
    current = ("current", (m.skills_version, m.prompts_version))
    versions = [final] if first == "best" else [current, final]
    epochs = int(ctx.cfg.train.epochs)
    layout = StateLayout(str(ctx.cfg.train.state_dir))  # not ctx.paths: a DVC stage declares no pools.* key
    for e in range(epochs - 1, 0, -1):
        earlier = ctx.root / layout.slow(e)
        if not is_done(earlier):
            continue
        b = wsp.read_best(earlier / WORKSPACE)
        if b is not None:
            versions.append((f"epoch {e}", (b.skills, b.prompts)))
    out: list[Contender] = []
    for i, (label, (sv, pv)) in enumerate(versions):
        if i > 0 and ((sv, pv) in seen or len(out) > n_fallbacks):
            continue
        seen.add((sv, pv))
        out.append(Contender(label, wsp.harness_view(ws, sv, pv), sv, pv))
    return out


def stage_certify(ctx: StageContext, final_state: Path, pools: Path, out: Path) -> Certificate:
    """Certify the training's delivery (see the module doc); writes out/certificate.json and out/delivered/."""
    prev = require_done(Path(final_state), "final state")
    out_dir = fresh_output(Path(out))
    ws = prev / WORKSPACE
    params = certify_params(ctx.cfg)
    start = Contender(BASE, wsp.harness_view(ws, "v0", "v0"), "v0", "v0")
    reference = ctx.cfg.certify.reference
    baseline = start
    if reference is not None:
        path = Path(str(reference))
        path = path if path.is_absolute() else ctx.root / path
        baseline = Contender("reference", HarnessTree.load(path), path=str(reference))
    candidates = training_candidates(ctx, prev, int(ctx.cfg.certify.fallbacks), str(ctx.cfg.certify.candidate))
    test = read_pools(Path(pools))["test"]
    log = HarnessLog(out_dir / RUNLOG)
    try:
        for arm in [BASE] + [c.label for c in candidates]:
            log.record_run(certify_run_id(ctx.run_name, arm_slug(arm)), "certify")
        certificate = asyncio.run(run_certificate(
            candidates, baseline, qids=test, questions=ctx.questions(),
            rollout=ScoredShareGuard(ctx.infra_limits, "certify").rollout(ro.rollout_fn(ctx, log)), params=params,
            fallback_share=float(ctx.cfg.certify.fallback_share), run_id=lambda arm: certify_run_id(ctx.run_name, arm),
            seed=int(ctx.cfg.train.seed), first_index=CERTIFY_INDEX, pool="test", otherwise=start,
            per_type=str(ctx.cfg.certify.per_type),
            identical_why=f"training's best checkpoint is the {'starting' if reference is None else 'reference'} harness"))
    finally:
        log.close()
    chosen = certificate.chosen
    delivered = _delivered(chosen, candidates, baseline) if chosen else start
    delivered.tree.save(out_dir / DELIVERED)
    write_certificate(out_dir, certificate)
    mark_done(out_dir, {"stage": "certify", "certified": certificate.certified, "delivered": certificate.delivered,
                        "skills_version": delivered.skills_version, "prompts_version": delivered.prompts_version,
                        "rolled_back": sorted(chosen.rollback["files"]) if chosen and chosen.rollback else []},
              spend=ctx.take_spend())
    (progress.info if certificate.certified else progress.warning)("[certify] %s", certificate.summary)
    for a in certificate.attempts:
        if a.rollback and a.rollback.get("kept"):
            for task_type, why in sorted(a.rollback["kept"].items()):
                progress.warning("[certify] task type %r flagged but not rolled back: %s", task_type, why)
    for row in (chosen.per_task_type if chosen else []):
        if row.flagged:
            progress.warning("[certify] task type %r: estimate %+.1f pts on %d pairs (below -%.1f): check its skill file",
                             row.task_type, 100 * row.estimate, row.pairs, 100 * params.flag_drop)
    return certificate


def _delivered(chosen: Attempt, candidates: list[Contender], baseline: Contender) -> Contender:
    """The Contender of the certified attempt: a training candidate, or one with a per-type rollback applied."""
    if not chosen.rollback:
        return next(c for c in candidates if c.label == chosen.label)
    parent = next(c for c in candidates if c.label == chosen.rollback["of"])
    tree, _, _ = rollback_tree(parent.tree, baseline.tree, list(chosen.rollback["task_types"]),
                               shared=bool(chosen.rollback.get("shared")))
    if tree.fingerprint != chosen.fingerprint:
        raise StateError(f"certify: the rollback of {parent.label!r} rebuilt as {tree.fingerprint}, certified as {chosen.fingerprint}")
    return Contender(chosen.label, tree, parent.skills_version, parent.prompts_version)


def delivered_tree(certify_dir: Path, workspace: Path) -> tuple[Certificate, str, str, HarnessTree]:
    """(certificate, skills version, prompts version, tree) of what a finished certify stage delivers. With a per-type
    rollback the versions are those of the harness it modifies and the tree is certify_dir/delivered, checked against
    the certified fingerprint; otherwise the tree is the workspace's view, checked against certify_dir/delivered."""
    certificate, sv, pv = read_delivery(certify_dir)
    saved = HarnessTree.load(Path(certify_dir) / DELIVERED)
    chosen = certificate.chosen
    if chosen is not None and chosen.rollback:
        if saved.fingerprint != chosen.fingerprint:
            raise StateError(f"{certify_dir}/{DELIVERED} is not the certified rollback {chosen.fingerprint}: re-run the certify stage")
        return certificate, sv, pv, saved
    tree = wsp.harness_view(workspace, sv, pv)
    if tree.fingerprint != saved.fingerprint:
        raise StateError(f"{certify_dir}/{DELIVERED} is not the workspace's {sv}/{pv}: re-run the certify stage")
    return certificate, sv, pv, tree


def read_delivery(certify_dir: Path) -> tuple[Certificate, str, str]:
    """(certificate, skills version, prompts version) of what a finished certify stage delivers."""
    from harness.contracts.certificate import read_certificate

    certificate = read_certificate(require_done(Path(certify_dir), "certify"))
    chosen = certificate.chosen
    if chosen is None:
        return certificate, "v0", "v0"
    if chosen.skills_version is None or chosen.prompts_version is None:
        raise ValueError(f"{certify_dir}: the delivered attempt {chosen.label!r} names no workspace versions")
    return certificate, chosen.skills_version, chosen.prompts_version
