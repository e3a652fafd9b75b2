"""A Harness² sweep over tasks: manifest, pre-check, plan, domain-parallel run, reports.

Manifest (YAML or JSON; relative paths are relative to the manifest file)::

    version: 1
    surface: codex                      # optional (default: improve.surface)
    tasks:                              # stream order within a domain = list order
      - id: ledger-1
        domain: accounting
        prompt_file: ledger-1/prompt.md # or `prompt: "..."`
        source_dir: ledger-1/source     # optional: copied under the harness
        base_harness_dir: base-harness  # the task's base harness tree
        leak_globs: ["*answer_key*"]    # optional

For the embedded sim no file is needed: `sim_manifest` makes one task per
`questions_per_task` consecutive questions of each task type (= domain).

`precheck` finds every problem before any task is created (empty list =
ready); `render_plan` is what `stages.improve` prints by default. `run_plan`
runs domains concurrently (at most `workers` at a time) and the tasks of a
domain in stream order through `harness.h2.run.run_sweep` (one run
directory, library and identity per domain, so a domain can also run as
its own process / DVC stage). A task whose adapter cannot be built, or
whose round crashes, is recorded as crashed and the rest goes on. Each
domain writes ``<out_dir>/<domain>/domain-report.json`` last; `aggregate`
combines them into ``sweep-report.json`` (+ ``sweep-report.md``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from harness.atomic import atomic_write_json, atomic_write_text
from harness.h2.adapters import TaskAdapter
from harness.h2.budget import check_k, executions_for
from harness.h2.recursion import MODES
from harness.h2.report import Score, judge_base, judge_delivered
from harness.h2.roles import Roles
from harness.h2.run import run_sweep
from harness.h2.surfaces import Surface
from harness.h2.sweep_report import build_report, crashed_row, render_markdown, task_row
from harness.h2.validator import validate_tree
from harness.identity import validate_run_tag
from harness.questions import Question
from harness.tree import HarnessTree

log = logging.getLogger("harness.progress")

EXECUTORS = ("sim", "command", "service")
BACKENDS = ("inprocess", "ray", "auto")
DOMAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DOMAIN_REPORT = "domain-report.json"
SWEEP_REPORT = "sweep-report.json"
SWEEP_REPORT_MD = "sweep-report.md"
_TASK_KEYS = {"id", "domain", "prompt", "prompt_file", "source_dir", "base_harness_dir", "leak_globs"}


class ManifestError(ValueError):
    """The manifest cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class TaskSpec:
    task_id: str
    domain: str
    prompt: str | None = None
    prompt_file: Path | None = None
    source_dir: Path | None = None
    base_harness_dir: Path | None = None
    leak_globs: tuple[str, ...] | None = None
    task_type: str | None = None  # sim tasks
    qids: tuple[str, ...] = ()  # sim tasks

    @property
    def is_sim(self) -> bool:
        return self.task_type is not None

    def prompt_text(self) -> str:
        if self.prompt is not None:
            return self.prompt
        if self.prompt_file is not None:
            return Path(self.prompt_file).read_text(encoding="utf-8")
        return ""


@dataclass(frozen=True)
class Manifest:
    tasks: tuple[TaskSpec, ...]
    source: str  # the file it came from, or how it was derived
    surface: str | None = None

    def domains(self) -> list[str]:
        """Domains in order of first appearance."""
        return list(dict.fromkeys(t.domain for t in self.tasks))

    def by_domain(self) -> dict[str, list[TaskSpec]]:
        out: dict[str, list[TaskSpec]] = {}
        for t in self.tasks:
            out.setdefault(t.domain, []).append(t)
        return out

    def select(self, domains: Sequence[str]) -> Manifest:
        """Only the tasks of `domains`; an unknown domain is a ManifestError."""
        unknown = [d for d in domains if d not in self.domains()]
        if unknown:
            raise ManifestError(f"{self.source}: no tasks for domain(s) {unknown}; known domains: {self.domains()}")
        return replace(self, tasks=tuple(t for t in self.tasks if t.domain in set(domains)))


def load_manifest(path: str | Path) -> Manifest:
    """Read and structurally check a manifest file (YAML or JSON)."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{path}: manifest not found") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or not data["tasks"]:
        raise ManifestError(f"{path}: expected a mapping with a non-empty list `tasks`")
    if data.get("version", 1) != 1:
        raise ManifestError(f"{path}: version: expected 1, got {data.get('version')!r}")
    base = path.parent
    problems: list[str] = []
    tasks: list[TaskSpec] = []

    def rel(value: Any, where: str) -> Path | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            problems.append(f"{where}: expected a path string, got {value!r}")
            return None
        p = Path(value)
        return p if p.is_absolute() else (base / p)

    for i, t in enumerate(data["tasks"]):
        where = f"{path}: tasks[{i}]"
        if not isinstance(t, dict):
            problems.append(f"{where}: expected a mapping, got {type(t).__name__}")
            continue
        extra = sorted(set(t) - _TASK_KEYS)
        if extra:
            problems.append(f"{where}: unknown keys {extra}; allowed: {sorted(_TASK_KEYS)}")
        for key in ("id", "domain"):
            if not isinstance(t.get(key), str) or not t.get(key):
                problems.append(f"{where}.{key}: expected a non-empty string, got {t.get(key)!r}")
        if ("prompt" in t) == ("prompt_file" in t):
            problems.append(f"{where}: give exactly one of `prompt` and `prompt_file`")
        if "prompt" in t and not isinstance(t["prompt"], str):
            problems.append(f"{where}.prompt: expected a string")
        globs = t.get("leak_globs")
        if globs is not None and (not isinstance(globs, list) or not all(isinstance(g, str) for g in globs)):
            problems.append(f"{where}.leak_globs: expected a list of glob strings")
            globs = None
        tasks.append(TaskSpec(
            task_id=str(t.get("id", "")), domain=str(t.get("domain", "")),
            prompt=t.get("prompt") if isinstance(t.get("prompt"), str) else None,
            prompt_file=rel(t.get("prompt_file"), f"{where}.prompt_file"),
            source_dir=rel(t.get("source_dir"), f"{where}.source_dir"),
            base_harness_dir=rel(t.get("base_harness_dir"), f"{where}.base_harness_dir"),
            leak_globs=tuple(globs) if globs is not None else None,
        ))
    surface = data.get("surface")
    if surface is not None and not isinstance(surface, str):
        problems.append(f"{path}: surface: expected a string")
    if problems:
        raise ManifestError("; ".join(problems))
    return Manifest(tuple(tasks), str(path), surface)


def paths_outside(manifest: Manifest, directory: Path, key: str = "improve.tasks_dir") -> list[str]:
    """One problem per file a task names (prompt_file, source_dir, base_harness_dir) outside `directory`: the improve
    stage's DVC dependency is that directory, so an edit to a file outside it would not re-run the stage."""
    root = Path(directory).resolve()
    problems: list[str] = []
    for t in manifest.tasks:
        for field_name in ("prompt_file", "source_dir", "base_harness_dir"):
            value = getattr(t, field_name)
            if value is not None and not Path(value).resolve().is_relative_to(root):
                problems.append(f"{manifest.source}: task {t.task_id!r} {field_name} {value} lies outside {key}: {directory}; "
                                "move it under that directory or set improve.tasks_dir to a directory holding every task file "
                                "(dvc.yaml's improve@<domain> depends on that directory, and on nothing else of the tasks)")
    return problems


def sim_manifest(questions: Sequence[Question], domains: Sequence[str], tasks_per_domain: int, questions_per_task: int) -> Manifest:
    """Sim tasks: domain = task type; task i = questions [i*n, (i+1)*n) of that type in file order."""
    if tasks_per_domain < 1 or questions_per_task < 1:
        raise ManifestError(f"improve.tasks_per_domain and improve.questions_per_task must be >= 1, got {tasks_per_domain}, {questions_per_task}")
    if not domains:
        raise ManifestError("improve.domains is empty: list the sim task types to improve on")
    by_type: dict[str, list[Question]] = {}
    for q in questions:
        by_type.setdefault(q.task_type, []).append(q)
    problems: list[str] = []
    tasks: list[TaskSpec] = []
    for d in domains:
        qs = by_type.get(d)
        if qs is None:
            problems.append(f"improve.domains: {d!r} is not a task type of the benchmark; known: {sorted(by_type)}")
            continue
        need = tasks_per_domain * questions_per_task
        if len(qs) < need:
            problems.append(f"improve.domains: task type {d!r} has {len(qs)} questions, {need} needed "
                            f"(tasks_per_domain {tasks_per_domain} x questions_per_task {questions_per_task})")
            continue
        for i in range(tasks_per_domain):
            chunk = qs[i * questions_per_task:(i + 1) * questions_per_task]
            tasks.append(TaskSpec(task_id=f"{d}-{i}", domain=d, task_type=d, qids=tuple(q.qid for q in chunk)))
    if problems:
        raise ManifestError("; ".join(problems))
    return Manifest(tuple(tasks), f"sim benchmark ({tasks_per_domain} tasks x {questions_per_task} questions per domain)", "native")


@dataclass(frozen=True)
class SweepSettings:
    executor: str = "sim"
    backend: str = "inprocess"
    k: int = 1
    modes: tuple[str, ...] = ("parallel",)
    run_tag: str = "improve"
    budget_usd: float | None = None
    max_sessions: int | None = None
    workers: int = 1
    auto_apply: bool = False
    judge: bool = True
    surface: str = "native"
    out_dir: Path = Path("state/improve")
    report_dir: Path = Path("reports/improve")
    models: Mapping[str, str] = field(default_factory=dict)  # recorded in the run identity
    seed: int = 0


def precheck(manifest: Manifest, settings: SweepSettings, surface: Surface | None = None) -> list[str]:
    """Every problem that would make the sweep fail, found without creating any task (empty = ready)."""
    problems: list[str] = []
    try:
        validate_run_tag(settings.run_tag)
    except ValueError as exc:
        problems.append(f"improve.run_tag: {exc}")
    try:
        check_k(settings.k)
    except ValueError as exc:
        problems.append(f"h2_round.k: {exc}")
    if not settings.modes:
        problems.append(f"improve.modes: empty; expected some of {list(MODES)}")
    for m in settings.modes:
        if m not in MODES:
            problems.append(f"improve.modes: {m!r} is not one of {list(MODES)}")
    if len(set(settings.modes)) != len(settings.modes):
        problems.append(f"improve.modes: duplicates in {list(settings.modes)}")
    if settings.executor not in EXECUTORS:
        problems.append(f"improve.executor: {settings.executor!r} is not one of {list(EXECUTORS)}")
    if settings.backend not in BACKENDS:
        problems.append(f"improve.backend: {settings.backend!r} is not one of {list(BACKENDS)}")
    if settings.workers < 1:
        problems.append(f"improve.workers: must be >= 1, got {settings.workers}")
    if settings.budget_usd is not None and settings.budget_usd <= 0:
        problems.append(f"h2_round.budget_usd: must be > 0 or null, got {settings.budget_usd}")
    if not manifest.tasks:
        problems.append(f"{manifest.source}: no tasks")
    ids = [t.task_id for t in manifest.tasks]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        problems.append(f"{manifest.source}: task ids must be unique, repeated: {dup}")
    for d in manifest.domains():
        if not DOMAIN_RE.match(d):
            problems.append(f"{manifest.source}: domain {d!r} must match {DOMAIN_RE.pattern} (it names a directory)")
    for t in manifest.tasks:
        where = f"{manifest.source}: task {t.task_id!r}"
        if not DOMAIN_RE.match(t.task_id):
            problems.append(f"{where}: id must match {DOMAIN_RE.pattern} (it names a directory)")
        if t.is_sim:
            if settings.executor != "sim":
                problems.append(f"{where}: a sim task needs improve.executor=sim, got {settings.executor!r}")
            if not t.qids:
                problems.append(f"{where}: no questions")
            continue
        if settings.executor == "sim":
            problems.append(f"{where}: a manifest task needs improve.executor=command or service (sim runs the sim benchmark's tasks)")
        if t.prompt_file is not None and not Path(t.prompt_file).is_file():
            problems.append(f"{where}: prompt_file {t.prompt_file} does not exist")
        elif not t.prompt_text().strip():
            problems.append(f"{where}: the prompt is empty")
        if t.source_dir is not None and not Path(t.source_dir).is_dir():
            problems.append(f"{where}: source_dir {t.source_dir} does not exist")
        if t.base_harness_dir is None:
            problems.append(f"{where}: base_harness_dir is required")
        elif not Path(t.base_harness_dir).is_dir():
            problems.append(f"{where}: base_harness_dir {t.base_harness_dir} does not exist")
        elif surface is not None:
            try:
                verdict = validate_tree(HarnessTree.load(Path(t.base_harness_dir)), surface)
            except ValueError as exc:
                problems.append(f"{where}: base harness {t.base_harness_dir}: {exc}")
            else:
                problems += [f"{where}: base harness {t.base_harness_dir}: {e}" for e in verdict.errors]
    return problems


def plan_dict(manifest: Manifest, settings: SweepSettings) -> dict[str, Any]:
    """What the sweep will do and cost at most (executions and editor sessions per task)."""
    n_modes = len(settings.modes)
    per_task_exec = executions_for(settings.k) + (n_modes - 1) * (executions_for(settings.k) - 1)  # base shared by modes
    domains = manifest.by_domain()
    return {
        "source": manifest.source,
        "executor": settings.executor,
        "backend": settings.backend if settings.executor == "command" else None,
        "run_tag": settings.run_tag,
        "k": settings.k,
        "modes": list(settings.modes),
        "workers": settings.workers,
        "budget_usd_per_task_and_mode": settings.budget_usd,
        "max_sessions": settings.max_sessions,
        "judge": settings.judge,
        "auto_apply": settings.auto_apply,
        "domains": {d: [t.task_id for t in ts] for d, ts in domains.items()},
        "tasks": len(manifest.tasks),
        "max_executions_per_task": per_task_exec,
        "editor_sessions_per_task": 3 * settings.k * n_modes,
        "max_executions": per_task_exec * len(manifest.tasks),
        "out_dir": str(settings.out_dir),
        "report": str(Path(settings.report_dir) / SWEEP_REPORT),
    }


def _usd(value: float | None) -> str:
    return "none" if value is None else f"{value:g} USD"


def render_plan(plan: Mapping[str, Any]) -> str:
    lines = [
        f"Harness² sweep plan — run tag {plan['run_tag']}, executor {plan['executor']}"
        + (f" (backend {plan['backend']})" if plan.get("backend") else ""),
        f"  tasks from: {plan['source']}",
        f"  k = {plan['k']}, modes {', '.join(plan['modes'])}, {plan['workers']} domain(s) at a time, judge {'on' if plan['judge'] else 'off'}, auto_apply {plan['auto_apply']}",
        f"  budget per task and mode: {_usd(plan['budget_usd_per_task_and_mode'])}"
        + (f", max {plan['max_sessions']} sessions" if plan["max_sessions"] else ""),
        f"  at most {plan['max_executions_per_task']} agent executions and {plan['editor_sessions_per_task']} editor sessions per task "
        f"(+ revisions/format retries); at most {plan['max_executions']} executions in all",
        f"  outputs: {plan['out_dir']}/<domain>/, {plan['report']}",
        f"  {len(plan['domains'])} domain(s), {plan['tasks']} task(s), in stream order:",
    ]
    for d, ids in plan["domains"].items():
        lines.append(f"    {d}: {', '.join(ids)}")
    return "\n".join(lines) + "\n"


AdapterFactory = Callable[[TaskSpec], TaskAdapter]


async def _judge(results, adapters: Mapping[str, TaskAdapter], roles: Roles, run_tag: str, grade=judge_delivered,
                 **kw: Any) -> dict[tuple[str, str, int], Score]:
    scores: dict[tuple[str, str, int], Score] = {}
    for r in results:
        try:
            scores.update(await grade([r], adapters, roles.judge, run_tag, **kw))
        except Exception as exc:  # a judge that breaks leaves the task ungraded, never zero
            scores[(r.task_id, r.mode, r.k)] = Score(None, "judge-grade", f"judge crashed: {type(exc).__name__}: {exc}")
    return scores


async def run_domain(domain: str, specs: Sequence[TaskSpec], settings: SweepSettings, make_adapter: AdapterFactory, roles: Roles) -> dict[str, Any]:
    """One domain's tasks in stream order; writes and returns its domain report (crashes recorded)."""
    started = time.monotonic()
    out = Path(settings.out_dir) / domain
    rows: list[dict[str, Any]] = []
    adapters: list[TaskAdapter] = []
    for spec in specs:
        try:
            adapters.append(make_adapter(spec))
        except Exception as exc:  # failure isolation: this task is recorded, the domain goes on
            rows += [crashed_row(spec.task_id, domain, m, settings.k, f"adapter: {type(exc).__name__}: {exc}") for m in settings.modes]
    judged = bool(settings.judge and roles.judge is not None)
    if adapters:
        try:
            res = await run_sweep(
                adapters, roles, run_dir=out / "runs", run_tag=settings.run_tag, k=settings.k, modes=tuple(settings.modes),
                library_root=out / "library", models=dict(settings.models), budget_usd=settings.budget_usd,
                max_sessions=settings.max_sessions, auto_apply=settings.auto_apply, seed=settings.seed, split=domain,
            )
        except Exception as exc:  # e.g. a run-identity mismatch: the whole domain is recorded as crashed
            err = f"domain: {type(exc).__name__}: {exc}"
            rows += [crashed_row(a.task_id, domain, m, settings.k, err) for a in adapters for m in settings.modes]
            log.warning("[improve] domain %s crashed: %s", domain, err)
        else:
            by_id = {a.task_id: a for a in adapters}
            scores = await _judge(res.results, by_id, roles, settings.run_tag) if judged else {}
            base_scores = await _judge(res.results, by_id, roles, settings.run_tag, grade=judge_base, delivered=scores,
                                       graded={}) if judged else {}
            rows += [task_row(r, scores.get((r.task_id, r.mode, r.k)), judged=judged, base_score=base_scores.get((r.task_id, r.mode, r.k)))
                     for r in res.results]
            rows += [crashed_row(c["task_id"], domain, c["mode"], settings.k, c["error"]) for c in res.crashed]
            for c in res.crashed:
                log.warning("[improve] task %s/%s crashed: %s", c["task_id"], c["mode"], c["error"])
    order = {s.task_id: i for i, s in enumerate(specs)}
    rows.sort(key=lambda r: (order.get(r["task_id"], 0), list(settings.modes).index(r["mode"]) if r["mode"] in settings.modes else 0))
    report = {
        "version": 1, "domain": domain, "run_tag": settings.run_tag, "k": settings.k, "modes": list(settings.modes),
        "executor": settings.executor, "seconds": round(time.monotonic() - started, 3), "rows": rows,
    }
    atomic_write_json(out / DOMAIN_REPORT, report)
    log.info("[improve] domain %s: %d task(s), %d crashed, %.1f s", domain, len(specs),
             sum(r["status"] == "crashed" for r in rows), report["seconds"])
    return report


async def run_plan(manifest: Manifest, settings: SweepSettings, make_adapter: AdapterFactory, roles: Roles) -> list[dict[str, Any]]:
    """Every domain (at most `settings.workers` at a time); returns the domain reports in domain order."""
    sem = asyncio.Semaphore(max(1, settings.workers))
    domains = manifest.by_domain()

    async def one(domain: str, specs: list[TaskSpec]) -> dict[str, Any]:
        async with sem:
            try:
                return await run_domain(domain, specs, settings, make_adapter, roles)
            except Exception as exc:  # never let one domain take the others down
                rows = [crashed_row(s.task_id, domain, m, settings.k, f"domain: {type(exc).__name__}: {exc}") for s in specs for m in settings.modes]
                report = {"version": 1, "domain": domain, "run_tag": settings.run_tag, "k": settings.k, "modes": list(settings.modes),
                          "executor": settings.executor, "seconds": None, "rows": rows, "traceback": traceback.format_exc(limit=5)}
                atomic_write_json(Path(settings.out_dir) / domain / DOMAIN_REPORT, report)
                return report

    return list(await asyncio.gather(*(one(d, s) for d, s in domains.items())))


def read_domain_report(out_dir: Path, domain: str) -> dict[str, Any]:
    path = Path(out_dir) / domain / DOMAIN_REPORT
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{path}: missing — run `python -m stages.improve --yes --domain {domain}` first") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None


def aggregate(domain_reports: Sequence[Mapping[str, Any]], report_dir: Path, *, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Combine domain reports into `<report_dir>/sweep-report.json` and `.md` (atomic); returns the report."""
    rows = [r for d in domain_reports for r in d["rows"]]
    report = build_report(rows, meta={**dict(meta or {}), "domains": [d["domain"] for d in domain_reports]})
    report_dir = Path(report_dir)
    atomic_write_text(report_dir / SWEEP_REPORT_MD, render_markdown(report))
    atomic_write_json(report_dir / SWEEP_REPORT, report)
    return report
