"""holdout: deliver what the certify stage chose and evaluate base and delivered on the test pool -> HoldoutDoc (holdout.json)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from harness import workspace as wsp
from harness.bench.soft import mixed_score
from harness.contracts.certificate import write_certificate
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
                             hard_acc=acc, soft_score=soft, mixed_score=mixed_score(acc, soft)))
    finally:
        log.close()
    write_holdout_eval(out_dir / RUNLOG, rows)
    lineage = read_lineage(prev)
    result = HoldoutDoc(
        delivered=DeliveredDoc(skills_version=sv, prompts_version=pv, fingerprint=delivered.fingerprint,
                               val_acc=best.val_acc if best and (best.skills, best.prompts) == (sv, pv) else None,
                               best_epoch=best.epoch if best and (best.skills, best.prompts) == (sv, pv) else None),
        test={r["which"]: r["hard_acc"] for r in rows}, n_test=len(p["test"]),
        stopped_early=lineage.stopped, stop_reason=lineage.stop_reason)
    write_document(out_dir / HOLDOUT, result)
    mark_done(out_dir, {"stage": "holdout", **to_json(result.delivered)}, spend=ctx.take_spend())
    progress.info("[holdout] delivered skills %s prompts %s: test acc %.3f (base %.3f)", sv, pv, result.test["delivered"],
                  result.test["base"])


def read_holdout(holdout: Path) -> HoldoutDoc:
    """The HoldoutDoc of a finished holdout stage."""
    return read_document(require_done(Path(holdout), "holdout") / HOLDOUT, HoldoutDoc)
