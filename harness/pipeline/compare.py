"""`stages.compare`: is a harness change better than the current harness on my questions, with what confidence?

One command, the product's anytime-valid paired test (the delivery certificate's engine and file format,
harness/loop/certify.py): both harnesses answer the same uniformly drawn questions with the same fresh sample
index, the betting e-process decides at `certify.alpha`, a confidence sequence bounds the gain, and a budget
(`certify.max_pairs`) ends it. Exit status: 0 certified, 1 not certified, 2 error (bad input, outage) — a CI check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.contracts.certificate import CERTIFICATE_FILE, Certificate, write_certificate
from harness.identity import COMPARE_INDEX
from harness.log import HarnessLog
from harness.loop import rollouts as ro
from harness.loop.certify import Contender, arm_slug, certificate_metrics, certificate_tags, run_certificate
from harness.loop.context import make_context
from harness.loop.stages.certify import certify_params
from harness.loop.state import RUNLOG
from harness.pipeline.evaluate import EvalInputError, check_out, load_harness, pool_qids, removed_if_unfinished

progress = logging.getLogger("harness.progress")
CompareInputError = EvalInputError  # a harness directory or pool that cannot be used (the message names it)
COMPARE_OUT_ENTRIES = (RUNLOG, CERTIFICATE_FILE)  # what a compare writes into --out (refused there if present)


@dataclass(frozen=True)
class CompareRequest:
    candidate: Path
    baseline: Optional[Path]  # None: the configured starting harness
    pool: str
    seed: int
    out: Path
    tracking: bool


def run_compare(cfg: Any, request: CompareRequest, root: Path) -> Certificate:
    """Compare the two harnesses (see the module doc); writes <out>/certificate.json and the run log."""
    from harness.loop.validate import ScoredShareGuard

    ctx = make_context(cfg, root)
    surface = str(cfg.benchmark.harness_surface)
    candidate = Contender("candidate", load_harness(request.candidate, surface, "--candidate").tree, path=str(request.candidate))
    if request.baseline is not None:
        baseline = Contender("baseline", load_harness(request.baseline, surface, "--baseline").tree, path=str(request.baseline))
    else:
        from harness.loop.stages.pools import start_tree

        baseline = Contender("baseline", start_tree(ctx), path=None)
    questions = {q.qid: q for q in ctx.bench().questions()}
    qids = pool_qids(cfg, root, request.pool, questions)
    params = certify_params(cfg)
    tag = f"s{request.seed}"
    started = time.monotonic()
    check_out(request.out, COMPARE_OUT_ENTRIES, "a compare's")
    with removed_if_unfinished(request.out, COMPARE_OUT_ENTRIES):  # a fault up to the MLflow run leaves no result
        request.out.mkdir(parents=True, exist_ok=True)
        log = HarnessLog(request.out / RUNLOG)
        try:
            for arm in ("baseline", "candidate"):
                log.record_run(f"compare_{tag}_{arm_slug(arm)}", "compare")
            progress.info("[compare] %s vs %s on %d questions (pool %s), alpha %g, at most %d pairs",
                          request.candidate, request.baseline or "the starting harness", len(qids), request.pool,
                          params.alpha, params.max_pairs)
            certificate = asyncio.run(run_certificate(
                [candidate], baseline, qids=qids, questions=questions,
                rollout=ScoredShareGuard(ctx.infra_limits, "compare").rollout(ro.rollout_fn(ctx, log)), params=params,
                fallback_share=float(cfg.certify.fallback_share), run_id=lambda arm: f"compare_{tag}_{arm}",
                seed=request.seed, first_index=COMPARE_INDEX + 10**6 * request.seed, pool=request.pool, what="compare"))
        finally:
            log.close()
            ctx.close()
        path = write_certificate(request.out, certificate)
        run_id = log_compare(cfg, certificate, path, root, request) if request.tracking and bool(cfg.tracking.enabled) else None
    progress.info("[compare] %s (%.0f s); certificate: %s", certificate.summary, time.monotonic() - started, path)
    if run_id:
        progress.info("[compare] MLflow run %s (experiment %s)", run_id, cfg.tracking.experiment)
    return certificate


def log_compare(cfg: Any, certificate: Certificate, path: Path, root: Path, request: CompareRequest) -> str:
    """One MLflow run: the certificate's metrics and tags, the certificate file, per-type table."""
    from harness.tracking.mlflow_log import log_tracked_run
    from harness.tracking.provenance import git_commit
    from harness.tracking.record import TrackedRun
    from harness.tracking.store import resolve_tracking_uri

    attempt = certificate.attempts[0]
    params = {"compare.candidate": str(request.candidate), "compare.baseline": str(request.baseline or "start"),
              "compare.pool": request.pool, "compare.seed": str(request.seed), "certify.alpha": str(certificate.alpha),
              "certify.margin": str(certificate.margin), "certify.max_pairs": str(cfg.certify.max_pairs),
              "llm.model": str(cfg.llm.model), "benchmark.name": str(cfg.benchmark.name)}
    tags = {"harness.kind": "compare", **certificate_tags(certificate)}
    commit = git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    rows = [{"task_type": r.task_type, "pairs": r.pairs, "estimate": r.estimate, "ci_low": r.ci_low, "ci_high": r.ci_high,
             "flagged": r.flagged, "identical_input": r.identical_input} for r in attempt.per_task_type]
    run = TrackedRun(run_name=f"compare-{Path(request.candidate).name}", params=params, tags=tags,
                     summary_metrics=certificate_metrics(certificate), tables={"certificate_types": rows} if rows else {},
                     artifacts=[(path, "certificate")])
    uri = resolve_tracking_uri(cfg.tracking.tracking_uri, root)
    return log_tracked_run(run, tracking_uri=uri, experiment=str(cfg.tracking.experiment), project_root=root)
