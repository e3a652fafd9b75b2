"""holdout: deliver what the certify stage chose and evaluate base and delivered on the test pool -> HoldoutDoc (holdout.json)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Optional

from harness import workspace as wsp
from harness.bench.soft import mixed_score
from harness.contracts.certificate import Certificate, write_certificate
from harness.identity import HOLDOUT_INDEX, holdout_run_id
from harness.log import HarnessLog
from harness.loop import rollouts as ro
from harness.loop.context import StageContext
from harness.loop.documents import HOLDOUT, DeliveredDoc, HoldoutDoc, read_document, to_json, write_document
from harness.loop.observation import write_holdout_eval
from harness.loop.persistence import read_pools
from harness.loop.stages.certify import delivered_tree
from harness.loop.state import RUNLOG, WORKSPACE, StateError, fresh_output, mark_done, read_lineage, require_done
from harness.loop.validate import ScoredShareGuard

progress = logging.getLogger("harness.progress")


def stage_holdout(ctx: StageContext, final_state: Path, pools: Path, out: Path, certify: Path) -> None:
    """Deliver what `certify` chose (its tree under out/delivered, its certificate beside it) and evaluate base and
    delivered on the test pool."""
    prev = require_done(Path(final_state), "final state")
    ws = prev / WORKSPACE
    certificate, sv, pv, delivered = delivered_tree(Path(certify), ws)  # a per-type rollback is no workspace version
    types = rolled_back_types(certificate)  # said wherever (sv, pv) labels the delivery: it is not that version's tree
    out_dir = fresh_output(Path(out))
    best = wsp.read_best(ws)
    delivered.save(out_dir / "delivered")
    write_certificate(out_dir, certificate)
    p = read_pools(Path(pools))
    qs = ctx.questions()
    log = HarnessLog(out_dir / RUNLOG)
    rows: list[dict[str, Any]] = []  # holdout_eval rows (harness/loop/observation.py)
    try:
        guard = ScoredShareGuard(ctx.infra_limits, "holdout (test pool)")
        rollout, soft_of = guard.rollout(ro.rollout_fn(ctx, log)), ro.soft_score_fn(log)
        for which, (s, v) in (("base", ("v0", "v0")), ("delivered", (sv, pv))):
            run_id = holdout_run_id(ctx.run_name, which)
            log.record_run(run_id, "holdout", skills_version=s, prompts_version=v)
            tree = delivered if which == "delivered" else wsp.harness_view(ws, s, v)
            got = asyncio.run(rollout(tree, [(qs[q], HOLDOUT_INDEX) for q in p["test"]], run_id))
            seen = [x for x in got if x is not None]
            if not seen:  # never an accuracy from nothing (an empty test pool asks nothing)
                raise StateError(f"{pools}: the test pool is empty: the holdout has nothing to score; re-run the pools stage")
            acc = sum(bool(x) for x in seen) / len(seen)
            soft = soft_of(run_id)
            rows.append(dict(epoch=0, which=which, run_id=run_id, skills_version=s, prompts_version=v, n=len(p["test"]),
                             hard_acc=acc, soft_score=soft, mixed_score=mixed_score(acc, soft),
                             rolled_back=", ".join(types) if which == "delivered" and types else None))
    finally:
        log.close()
    write_holdout_eval(out_dir / RUNLOG, rows)
    lineage = read_lineage(prev)
    val_acc, best_epoch = delivered_figures(best, sv, pv, rolled_back(certificate))
    if best is not None and (best.skills, best.prompts) == (sv, pv) and rolled_back(certificate):
        progress.info("[holdout] delivered: a per-type rollback of skills %s prompts %s (that parent: val acc %.3f, epoch %d); "
                      "the rollback itself has no validation accuracy", sv, pv, best.val_acc, best.epoch)
    result = HoldoutDoc(
        delivered=DeliveredDoc(skills_version=sv, prompts_version=pv, fingerprint=delivered.fingerprint,
                               val_acc=val_acc, best_epoch=best_epoch),
        test={r["which"]: r["hard_acc"] for r in rows}, n_test=len(p["test"]),
        stopped_early=lineage.stopped, stop_reason=lineage.stop_reason)
    write_document(out_dir / HOLDOUT, result)
    mark_done(out_dir, {"stage": "holdout", **to_json(result.delivered)}, spend=ctx.take_spend())
    progress.info("[holdout] delivered skills %s prompts %s%s: test acc %.3f (base %.3f)", sv, pv,
                  f" with {', '.join(types)} rolled back" if types else "", result.test["delivered"], result.test["base"])


def delivered_figures(best: Optional[wsp.BestPointer], sv: str, pv: str, rolled_back: bool) -> tuple[Optional[float], Optional[int]]:
    """(val_acc, best_epoch) of what is delivered: the best pointer's when it is the (sv, pv) harness itself; None when
    the delivery is another harness, or a per-type rollback of (sv, pv) (never evaluated on the validation pool: the
    parent's figures would describe a different tree)."""
    if best is None or rolled_back or (best.skills, best.prompts) != (sv, pv):
        return None, None
    return best.val_acc, best.epoch


def rolled_back_types(certificate: Certificate) -> list[str]:
    """The task types a per-type rollback delivery put back to the start's files ([] for any other delivery)."""
    rollback = certificate.chosen.rollback if certificate.chosen is not None else None
    return [str(t) for t in rollback["task_types"]] if rollback else []


def rolled_back(certificate: Certificate) -> bool:
    """Whether what the certificate delivers is a per-type rollback of a workspace harness (no workspace version)."""
    return certificate.chosen is not None and bool(certificate.chosen.rollback)


def read_holdout(holdout: Path) -> HoldoutDoc:
    """The HoldoutDoc of a finished holdout stage."""
    return read_document(require_done(Path(holdout), "holdout") / HOLDOUT, HoldoutDoc)
