"""`python -m stages.improve` as one library call: Harness² over tasks, from the composed config to the reports.

`run_improve(cfg, options, root)` plans, pre-checks (`check`: + executor preflight), runs the sweep (`run`) or
aggregates the domain reports (`aggregate`), writes per-domain reports and sweep-report.json and logs the sweep to
MLflow; the entry point (stages/improve.py) only parses its command line and loads the config. Each round's
settings come from `h2_round` (the one Harness² round config, read by evolve=h2 too); the sweep's from `improve`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class ImproveOptions:
    """One invocation: what to do and the command line's overrides of `improve.*` / `h2_round.*` (None = config)."""

    action: Literal["plan", "check", "run", "aggregate"] = "plan"
    manifest: str | None = None
    domain: list[str] | None = None  # only these domains
    k: int | None = None  # h2_round.k
    mode: list[str] | None = None  # improve.modes
    executor: str | None = None
    backend: str | None = None
    run_tag: str | None = None
    budget: float | None = None  # h2_round.budget_usd
    workers: int | None = None
    out_dir: str | None = None
    report_dir: str | None = None
    no_tracking: bool = False


def settings_from(cfg: Any, opts: ImproveOptions, root: Path):
    from harness.h2.sweep import SweepSettings

    imp, rnd = cfg.improve, cfg.h2_round
    executor = opts.executor or str(imp.executor)

    def path(value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else root / p

    if executor == "service":
        models = {"model": str(imp.service.model or ""), **{str(k): str(v) for k, v in imp.service.role_models.items()}}
    else:
        models = {"llm": str(cfg.llm.model), **{str(k): str(v) for k, v in cfg.llm.models.items()}}
    return SweepSettings(
        executor=executor,
        backend=opts.backend or str(imp.backend),
        k=int(opts.k if opts.k is not None else rnd.k),
        modes=tuple(opts.mode or [str(m) for m in imp.modes]),
        run_tag=opts.run_tag or str(imp.run_tag),
        budget_usd=opts.budget if opts.budget is not None else (None if rnd.budget_usd is None else float(rnd.budget_usd)),
        max_sessions=None if rnd.max_sessions is None else int(rnd.max_sessions),
        workers=int(opts.workers if opts.workers is not None else imp.workers),
        auto_apply=bool(imp.auto_apply),
        judge=bool(imp.judge),
        surface=str(imp.surface),
        out_dir=path(opts.out_dir or str(imp.out_dir)),
        report_dir=path(opts.report_dir or str(imp.report_dir)),
        models=models,
        seed=int(cfg.train.seed),
    )


def build_manifest(cfg: Any, opts: ImproveOptions, settings, ctx, root: Path):
    from harness.h2.sweep import ManifestError, load_manifest, paths_outside, sim_manifest

    manifest_path = opts.manifest or cfg.improve.manifest
    if manifest_path:
        p = Path(str(manifest_path))
        p = p if p.is_absolute() else root / p
        manifest = load_manifest(p)
        # the files the tasks name must lie where dvc.yaml looks (improve.tasks_source: tasks_dir, else the manifest's dir)
        tasks_dir = Path(str(cfg.improve.tasks_dir)) if cfg.improve.tasks_dir else p.parent
        key = "improve.tasks_dir" if cfg.improve.tasks_dir else "the manifest's directory (improve.tasks_dir is null)"
        outside = paths_outside(manifest, tasks_dir if tasks_dir.is_absolute() else root / tasks_dir, key)
        if outside:
            raise ManifestError("; ".join(outside))
    else:
        domains = opts.domain or [str(d) for d in cfg.improve.domains]
        manifest = sim_manifest(ctx.bench().questions(), domains, int(cfg.improve.tasks_per_domain), int(cfg.improve.questions_per_task))
    return manifest.select(opts.domain) if opts.domain else manifest


def surface_of(manifest, settings):
    from harness.h2.surfaces import surface_for

    return surface_for(manifest.surface or settings.surface)


def build_components(cfg: Any, settings, manifest, ctx, llm: Any = None):
    """(make_adapter, roles) for the configured executor; `llm`: the provider our roles call (default `ctx.llm()`; the
    run's `BudgetedProvider` when a budget is stated)."""
    from harness.h2.executor_adapters import CommandTaskAdapter, ServiceTaskAdapter, executor_for_role, service_roles
    from harness.h2.roles import Roles
    from harness.tree import HarnessTree

    imp = cfg.improve
    llm = llm if llm is not None else ctx.llm()
    if settings.executor == "sim":
        from harness.h2.adapters import QuestionTaskAdapter

        bench = ctx.bench()
        provider = llm
        qmap = {q.qid: q for q in bench.questions()}
        base = bench.base_harness()
        roles = Roles.from_provider(provider)
        if not settings.judge:
            roles.judge = None

        def make_sim(spec):
            missing = [q for q in spec.qids if q not in qmap]
            if missing:
                raise KeyError(f"questions {missing} are not in the benchmark")
            return QuestionTaskAdapter(spec.task_id, spec.task_type, [qmap[q] for q in spec.qids], base, provider,
                                       domain=spec.domain, concurrency=int(cfg.llm.concurrency))

        return make_sim, roles
    surface = surface_of(manifest, settings)

    def common(spec) -> dict[str, Any]:
        kw: dict[str, Any] = dict(task_id=spec.task_id, domain=spec.domain, prompt=spec.prompt_text(),
                                  base=HarnessTree.load(spec.base_harness_dir), source_dir=spec.source_dir, surface=surface,
                                  run_tag=settings.run_tag)
        if spec.leak_globs is not None:
            kw["leak_globs"] = tuple(spec.leak_globs)
        return kw

    if settings.executor == "command":
        from harness.executors.backend import make_backend
        from harness.executors.command import CommandExecutor

        executor = CommandExecutor([str(a) for a in imp.command.command], timeout_s=float(imp.command.timeout_s),
                                   keep_worktrees=bool(imp.command.keep_worktrees))
        backend = make_backend(settings.backend)
        roles = Roles.from_provider(llm)
        if not settings.judge:
            roles.judge = None
        return (lambda spec: CommandTaskAdapter(**common(spec), executor=executor, backend=backend)), roles
    from harness.executors.remote import TaskServiceExecutor

    base_exec = service_executor(imp, settings.run_tag)
    role_models = {str(k): str(v) for k, v in imp.service.role_models.items()}
    model = None if imp.service.model is None else str(imp.service.model)
    probe_exec: TaskServiceExecutor = executor_for_role(base_exec, "probe", model, role_models)
    roles = service_roles(base_exec, model=model, role_models=role_models, judge=settings.judge)
    return (lambda spec: ServiceTaskAdapter(**common(spec), executor=probe_exec)), roles


def service_executor(imp: Any, run_tag: str):
    from harness.executors.remote import TaskServiceExecutor

    if not imp.service.base_url:
        raise ValueError("improve.service.base_url is not set (the task service's URL)")
    return TaskServiceExecutor(base_url=str(imp.service.base_url), run_tag=run_tag, api_key_env=str(imp.service.api_key_env),
                               timeout_s=float(imp.service.timeout_s), poll_interval_s=float(imp.service.poll_interval_s))


def executor_preflight(cfg: Any, settings, manifest) -> list[str]:
    """Checks of the executor itself, creating no task (seed 002 `--check`)."""
    imp = cfg.improve
    problems: list[str] = []
    if settings.executor == "command":
        from harness.executors.command import CommandTemplateError, check_command_template

        argv = [str(a) for a in imp.command.command]
        try:
            check_command_template(argv)
        except CommandTemplateError as exc:
            return [f"improve.command.command: {exc}"]
        if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
            problems.append(f"improve.command.command: the agent program {argv[0]!r} is not on PATH")
        if settings.backend == "ray":
            from harness.executors.backend import ray_available

            if not ray_available():
                problems.append("improve.backend=ray but Ray is not installed (pip install 'harness-trainer[ray]')")
    elif settings.executor == "service":
        from harness.executors.remote import preflight_checks

        try:
            executor = service_executor(imp, settings.run_tag)
        except ValueError as exc:
            return [str(exc)]
        if not os.environ.get(str(imp.service.api_key_env)):
            problems.append(f"environment variable {imp.service.api_key_env} (improve.service.api_key_env) is not set")
        for i, spec in enumerate(manifest.tasks):
            found = preflight_checks(run_tag=settings.run_tag, base_dir=spec.base_harness_dir, prompt=spec.prompt_text(),
                                     source_dir=spec.source_dir, executor=executor if i == 0 else None)
            problems += [f"task {spec.task_id!r}: {p}" for p in found]
        executor.close()
    return problems


def log_sweep_to_mlflow(cfg: Any, report: dict, report_dir: Path, root: Path) -> str:
    """One MLflow run for the sweep: per-(mode, k) metrics, the report tables, the report files."""
    from harness.h2.sweep import SWEEP_REPORT, SWEEP_REPORT_MD
    from harness.tracking.mlflow_log import log_tracked_run
    from harness.tracking.provenance import git_commit
    from harness.tracking.record import TrackedRun
    from harness.tracking.store import resolve_tracking_uri

    meta = report["meta"]
    metrics: dict[str, float | None] = {}
    for c in report["configs"]:
        prefix = f"{c['mode']}_k{c['k']}"
        for key in ("tasks", "crashed", "graded", "ungraded", "unscored", "score_mean", "base_share", "fallbacks", "dead_probes", "usd"):
            metrics[f"{prefix}/{key}"] = c[key]
        for pick, n in c["picks"].items():
            metrics[f"{prefix}/pick_{pick}"] = n
    for c in report["comparison"]:
        if c["domain"] == "all":
            prefix = f"{c['mode']}_k{c['k']}"
            for key in ("pairs", "base_mean", "improved_mean", "diff_mean", "ci_low", "ci_high"):
                metrics[f"{prefix}/gain_{key}"] = c[key]
    if report.get("noise_floor"):
        metrics["k1_noise_floor_gap"] = report["noise_floor"]["gap"]
    metrics["warnings"] = len(report["warnings"])
    from harness.config.key_view import resolved

    params = {f"improve.{k}": v for k, v in resolved(cfg.improve).items() if k not in ("service", "command")}
    params.update({"improve.executor": meta.get("executor"), "improve.run_tag": meta.get("run_tag"), "h2_round.k": meta.get("k"),
                   "improve.modes": meta.get("modes"), "llm.model": str(cfg.llm.model)})
    tags = {"harness.kind": "improve", "harness.run_tag": str(meta.get("run_tag"))}
    commit = git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    table_rows = [{**{k: v for k, v in c.items() if k != "picks"}, **{f"pick_{p}": n for p, n in c["picks"].items()}} for c in report["configs"]]
    task_rows = [{k: v for k, v in r.items()} for r in report["tasks"]]
    run = TrackedRun(
        run_name=f"improve-{meta.get('run_tag')}", params=params, tags=tags, summary_metrics=metrics,
        tables={"improve_report": table_rows, **({"improve_tasks": task_rows} if task_rows else {})},
        artifacts=[(report_dir / SWEEP_REPORT, "improve"), (report_dir / SWEEP_REPORT_MD, "improve")],
    )
    uri = resolve_tracking_uri(cfg.tracking.tracking_uri, root)
    return log_tracked_run(run, tracking_uri=uri, experiment=str(cfg.tracking.improve_experiment), project_root=root)


def _mean(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def finish_report(cfg: Any, opts: ImproveOptions, settings, domain_reports: list[dict], root: Path) -> dict:
    from harness.h2.sweep import SWEEP_REPORT, aggregate

    meta = {"run_tag": settings.run_tag, "executor": settings.executor, "k": settings.k, "modes": list(settings.modes)}
    report = aggregate(domain_reports, settings.report_dir, meta=meta)
    print(f"wrote {settings.report_dir / SWEEP_REPORT}")
    for c in report["configs"]:
        score = "–" if c["score_mean"] is None else f"{c['score_mean']:.3f}"
        print(f"  {c['mode']} k={c['k']}: {c['tasks']} tasks, {c['crashed']} crashed, graded {c['graded']}, ungraded {c['ungraded']}, "
              f"score {score}, picks {c['picks']}, fallbacks {c['fallbacks']}, USD {c['usd']:.4f}")
    for c in report["comparison"]:  # the only place the sweep calls anything a gain: base vs improved, same tasks
        print(f"  base vs improved, {c['mode']} k={c['k']} {c['domain']}: base {_mean(c['base_mean'])}, improved "
              f"{_mean(c['improved_mean'])}: {c['verdict']}")
    for w in report["warnings"][:20]:
        print(f"  warning: {w}")
    if bool(cfg.tracking.enabled) and not opts.no_tracking:
        run_id = log_sweep_to_mlflow(cfg, report, settings.report_dir, root)
        print(f"MLflow run {run_id} (experiment {cfg.tracking.improve_experiment})")
    return report


def real_model(cfg: Any, settings) -> bool:
    """The sim executor's probes answered by a real model (llm.provider != sim): the case that needs a stated budget."""
    return settings.executor == "sim" and str(cfg.llm.provider) != "sim"


async def measure_rate(cfg: Any, manifest, ctx) -> Any:
    """Seconds per call on the configured server, measured now with one solver-sized and one editor-sized request
    (no response cache: a replay would measure the disk)."""
    import time

    from harness.compose import build_provider
    from harness.h2.budget import CallRate
    from harness.llm.protocol import ChatMessage, LLMRequest, Role

    questions = {q.qid: q for q in ctx.bench().questions()}
    first = questions[manifest.tasks[0].qids[0]]
    choices = "".join(f"\n{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate((first.choices or ())[:10]))
    provider = build_provider(cfg.llm)
    seconds = []
    try:
        for role, text in ((Role.SOLVER, f"{first.question}{choices}\nAnswer with your reasoning, then ANSWER: <answer>."),
                           (Role.EDITOR, f"Write a detailed strategy guide, about 300 words, for answering {first.task_type} questions.")):
            started = time.perf_counter()
            await provider.complete(LLMRequest.make(role, [ChatMessage("user", text)], temperature=0.0))
            seconds.append(time.perf_counter() - started)
    finally:
        closer = getattr(provider, "aclose", None)
        if closer is not None:
            await closer()
    return CallRate(seconds[0], seconds[1])


def estimate_line(cfg: Any, settings, manifest, rate: Any) -> str:
    """The plan's LLM calls and the time they take at the measured `rate`, against the stated budget."""
    from harness.h2.budget import planned_llm_calls
    from harness.tracking.progress import format_seconds

    solver, editor = planned_llm_calls(len(manifest.tasks), settings.k, len(settings.modes), int(cfg.improve.questions_per_task),
                                       settings.judge)
    budget = [f"{cfg.improve.max_llm_calls} LLM calls" if cfg.improve.max_llm_calls is not None else None,
              f"{cfg.improve.max_minutes:g} min" if cfg.improve.max_minutes is not None else None]
    stated = " and ".join(b for b in budget if b) or "none stated"
    return (f"[improve] estimate: at most {solver} solver + {editor} editor-sized LLM calls for {len(manifest.tasks)} task(s); "
            f"measured now {rate.solver_s:.2f} s per solver call and {rate.editor_s:.2f} s per editor call on {cfg.llm.model} "
            f"-> about {format_seconds(rate.seconds(solver, editor))} if all are made (one after another; long prompts and "
            f"retries add to it); budget: {stated}")


OPT_IN = ("[improve] not run: on a real model Harness² runs only with a stated budget; opt in with improve.max_minutes "
          "and/or improve.max_llm_calls (e.g. `dvc exp run -S improve.max_minutes=10`, or `python -m harness.config.snapshot "
          "... improve.max_minutes=10`); docs/pipeline.md \"Harness² on a real model\"")


def write_skipped(settings, domains: list[str], reason: str) -> list[dict]:
    """An empty domain report per domain (improve_report and DVC find them), saying why nothing ran."""
    from harness.atomic import atomic_write_json
    from harness.h2.sweep import DOMAIN_REPORT

    reports = []
    for domain in domains:
        report = {"version": 1, "domain": domain, "run_tag": settings.run_tag, "k": settings.k, "modes": list(settings.modes),
                  "executor": settings.executor, "seconds": 0.0, "rows": [], "skipped": reason}
        atomic_write_json(Path(settings.out_dir) / domain / DOMAIN_REPORT, report)
        reports.append(report)
    return reports


def nothing_lines(rows: list[dict]) -> list[str]:
    """One line per round (task x mode) that produced nothing: crashed, or delivered its base harness."""
    out = []
    for r in rows:
        if r["status"] == "crashed":
            out.append(f"[improve] {r['task_id']}/{r['mode']}: produced nothing (crashed: {r['error']})")
        elif r["pick"] == "base":
            score = "ungraded" if r["score"] is None else f"score {r['score']}"
            out.append(f"[improve] {r['task_id']}/{r['mode']}: produced nothing (delivered its base harness): "
                       f"{len(r['fallbacks'])} editor fallback(s), {r['dead_probes']} dead probe(s), "
                       f"budget {r['budget_tripped'] or 'not reached'}, {score}")
    return out


def run_improve(cfg: Any, opts: ImproveOptions, root: Path) -> int:
    """The whole invocation (`opts.action`); returns the exit code (2: refused before anything ran, 1: every round
    crashed)."""
    from harness.config.secrets import print_error
    from harness.h2.sweep import ManifestError, plan_dict, precheck, read_domain_report, render_plan, run_plan

    settings = settings_from(cfg, opts, root)

    if opts.action == "aggregate":
        domains = opts.domain or [str(d) for d in cfg.improve.domains]
        try:
            reports = [read_domain_report(settings.out_dir, d) for d in domains]
        except ManifestError as exc:  # improve_report declares no llm.api_key_env: the environment's secret names mask
            print_error(f"stages.improve: {exc}")
            return 2
        finish_report(cfg, opts, settings, reports, root)
        return 0

    from harness.loop.context import make_context

    ctx = make_context(cfg, root)
    try:
        try:
            manifest = build_manifest(cfg, opts, settings, ctx, root)
            surface = surface_of(manifest, settings)
        except (ManifestError, ValueError) as exc:
            print_error(f"stages.improve: {exc}", cfg.llm)
            return 2
        print(render_plan(plan_dict(manifest, settings)), end="")
        problems = precheck(manifest, settings, surface)
        if opts.action == "check" and not problems:
            problems = executor_preflight(cfg, settings, manifest)
        if problems:
            print_error("\n".join([f"stages.improve: {len(problems)} problem(s); nothing was run:",
                                    *(f"  - {p}" for p in problems)]), cfg.llm)
            return 2
        if opts.action == "check":
            print("preflight passed; no task was created")
            return 0
        if opts.action != "run":
            print("plan only: add --yes to run it")
            return 0
        imp = cfg.improve
        max_calls = None if imp.max_llm_calls is None else int(imp.max_llm_calls)
        max_minutes = None if imp.max_minutes is None else float(imp.max_minutes)
        if real_model(cfg, settings):
            print(estimate_line(cfg, settings, manifest, asyncio.run(measure_rate(cfg, manifest, ctx))), flush=True)
            if max_calls is None and max_minutes is None:
                print(OPT_IN, flush=True)
                domain_reports = write_skipped(settings, manifest.domains(), "no budget stated on a real model (improve.max_minutes, "
                                                                              "improve.max_llm_calls)")
                if not opts.domain:
                    finish_report(cfg, opts, settings, domain_reports, root)
                return 0
        llm = None
        if max_calls is not None or max_minutes is not None:
            from harness.h2.budget import BudgetedProvider

            llm = BudgetedProvider(ctx.llm(), max_calls=max_calls, max_seconds=None if max_minutes is None else 60 * max_minutes)
        try:
            make_adapter, roles = build_components(cfg, settings, manifest, ctx, llm)
        except (ValueError, RuntimeError) as exc:
            print_error(f"stages.improve: {exc}", cfg.llm)
            return 2
        domain_reports = asyncio.run(run_plan(manifest, settings, make_adapter, roles))
        if llm is not None:
            from harness.tracking.progress import format_seconds

            print(f"[improve] budget: {llm.calls} LLM calls made in {format_seconds(llm.elapsed())}, {llm.refused} refused"
                  + (f" ({llm.tripped})" if llm.tripped else " (not reached)"), flush=True)
    finally:
        ctx.close()
    rows = [r for d in domain_reports for r in d["rows"]]
    crashed = sum(r["status"] == "crashed" for r in rows)
    for line in nothing_lines(rows):
        print(line)
    print(f"ran {len(rows)} task x mode round(s), {crashed} crashed; per-domain outputs in {settings.out_dir}")
    if not opts.domain:
        finish_report(cfg, opts, settings, domain_reports, root)
    return 1 if rows and crashed == len(rows) else 0


