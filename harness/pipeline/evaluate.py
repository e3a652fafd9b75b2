"""`stages.eval` and `stages.diagnose`: one harness on one pool, on its own (no training run).

Evaluate: the harness answers every question of the pool `samples` times (sample indices EVAL_INDEX + k), and the
report gives accuracy overall and per task type with a 95 % interval (Wilson for one sample per question; with
several, a cluster-robust interval that treats each question as a cluster, so repeated samples of one question are
not counted as independent evidence), the mean soft score where every rollout has one, and the answer parse-mode
shares (harness/contracts/answers.py `parse_shares`). The run is recorded in `<out>/runlog.sqlite` with its
questions reference (the evaluated questions written to `<out>/questions.parquet`, `<path>@sha256:<digest>` as in a
workspace manifest), the harness fingerprint in its meta and, for a workspace, the skills/prompts versions: what
`harness.store.promote_to_seed` checks. The evaluated harness is copied to `<out>/harness/` (native layout).

Diagnose: the same evaluation, then the diagnoser role on every failure (harness/evolution/diagnose.py, as the evolve
stage calls it); the diagnoses per task type go to `<out>/diagnosis.json` and `.md`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.atomic import atomic_write_json, atomic_write_text
from harness.identity import EVAL_INDEX, eval_run_id
from harness.log import HarnessLog, RunLogReader
from harness.questions import Question, questions_digest, write_questions
from harness.tree import HarnessTree

progress = logging.getLogger("harness.progress")

POOLS = ("all", "test", "validation")
Z95 = 1.959963984540054  # two-sided 95 % normal quantile
EVAL_JSON = "eval.json"
EVAL_MD = "eval.md"
DIAGNOSIS_JSON = "diagnosis.json"
DIAGNOSIS_MD = "diagnosis.md"
EVAL_RUNLOG = "runlog.sqlite"
EVAL_QUESTIONS = "questions.parquet"
EVAL_HARNESS = "harness"
# every entry stages.eval / stages.diagnose writes into --out: what `check_out` refuses to find there and what an eval
# that stops without its result removes (one list, so a file the run writes cannot be missing from either)
EVAL_OUT_ENTRIES = (EVAL_RUNLOG, EVAL_QUESTIONS, EVAL_HARNESS, EVAL_MD, EVAL_JSON, DIAGNOSIS_MD, DIAGNOSIS_JSON)
SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")  # the files SQLite keeps beside a database (the run log's)
EVAL_FORMAT = "harness-eval/1"


class EvalInputError(ValueError):
    """An eval input (harness directory, pool, samples) that cannot be used; the message names it."""


# ---------------------------------------------------------------- intervals (pure)


@dataclass(frozen=True)
class Interval:
    """An accuracy estimate with its 95 % interval; `method` is "wilson" or "cluster" (questions as clusters)."""

    estimate: Optional[float]
    low: Optional[float]
    high: Optional[float]
    method: str
    questions: int
    rollouts: int
    correct: int


def wilson_interval(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion `correct / n` (n >= 1)."""
    if n < 1 or not 0 <= correct <= n:
        raise ValueError(f"wilson_interval: need 0 <= correct <= n and n >= 1, got correct={correct}, n={n}")
    p = correct / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def cluster_interval(per_question: Sequence[tuple[int, int]], z: float = Z95) -> tuple[float, float, float]:
    """(estimate, low, high) of the ratio estimator sum(correct) / sum(trials) over questions, with the
    cluster-robust (questions as clusters, small-sample factor n/(n-1)) normal interval, clipped to [0, 1].
    `per_question`: (correct, trials) with trials >= 1; at least two questions."""
    clusters = [(c, m) for c, m in per_question if m > 0]
    n = len(clusters)
    if n < 2:
        raise ValueError(f"cluster_interval: need at least 2 questions with a judged rollout, got {n}")
    total = sum(m for _, m in clusters)
    estimate = sum(c for c, _ in clusters) / total
    variance = n / (n - 1) * math.fsum((c - estimate * m) ** 2 for c, m in clusters) / (total * total)
    half = z * math.sqrt(variance)
    return estimate, max(0.0, estimate - half), min(1.0, estimate + half)


def accuracy_interval(outcomes: Mapping[str, Sequence[bool]]) -> Interval:
    """Accuracy over `outcomes` (qid -> judged outcomes of its samples): Wilson when every question has at most one
    judged sample (or fewer than two questions), else the cluster-robust interval. No judged rollout: all None."""
    judged = {q: list(v) for q, v in outcomes.items() if len(v) > 0}
    rollouts = sum(len(v) for v in judged.values())
    correct = sum(sum(bool(x) for x in v) for v in judged.values())
    if rollouts == 0:
        return Interval(None, None, None, "wilson", 0, 0, 0)
    if max(len(v) for v in judged.values()) == 1 or len(judged) < 2:
        low, high = wilson_interval(correct, rollouts)
        return Interval(correct / rollouts, low, high, "wilson", len(judged), rollouts, correct)
    estimate, low, high = cluster_interval([(sum(bool(x) for x in v), len(v)) for v in judged.values()])
    return Interval(estimate, low, high, "cluster", len(judged), rollouts, correct)


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class EvaluatedHarness:
    """The harness to evaluate in the native layout, where it came from and, for a workspace, its versions."""

    tree: HarnessTree
    source: Path
    kind: str  # "directory" | "workspace" | "seed"
    skills_version: Optional[str] = None
    prompts_version: Optional[str] = None


def load_harness(directory: Path, surface: str, what: str = "--harness") -> EvaluatedHarness:
    """A harness directory: a workspace (manifest.json: its current versions), a seed (seed.json) or a harness tree in
    the layout `surface` (benchmark.harness_surface, harness/compose.py `start_harness`)."""
    from harness.bench.layouts import load_in_layout
    from harness.store import SEED_META, StoreError, read_seed

    if not directory.is_dir():
        raise EvalInputError(f"{what} {directory}: not a directory")
    if (directory / "manifest.json").is_file() and (directory / "skills").is_dir() and (directory / "prompts").is_dir():
        from harness import workspace as wsp

        try:
            manifest = wsp.read_manifest(directory)
            tree = wsp.harness_view(directory, manifest.skills_version, manifest.prompts_version)
        except (wsp.WorkspaceError, StoreError, ValueError) as exc:
            raise EvalInputError(f"{what} {directory}: unreadable workspace: {exc}") from None
        return EvaluatedHarness(tree, directory, "workspace", manifest.skills_version, manifest.prompts_version)
    if (directory / SEED_META).is_file():
        try:
            seed = read_seed(directory)
        except StoreError as exc:
            raise EvalInputError(f"{what} {directory}: {exc}") from None
        return EvaluatedHarness(seed.prompts.with_files({f"skills/{p}": t for p, t in seed.skills.items()}), directory, "seed")
    try:
        tree = load_in_layout(directory, surface)
    except (ValueError, OSError) as exc:
        raise EvalInputError(f"{what} {directory}: {exc}") from None
    return EvaluatedHarness(tree, directory, "directory")


def pool_qids(cfg: Any, root: Path, pool: str, questions: Mapping[str, Question]) -> list[str]:
    """The qids of `pool`: every question for "all", else the pool of `pools.path` (an error names the file and the
    command that writes it when it is absent)."""
    if pool not in POOLS:
        raise EvalInputError(f"--pool {pool!r}: expected one of {', '.join(POOLS)}")
    if pool == "all":
        return sorted(questions)
    path = Path(str(cfg.pools.path))
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        raise EvalInputError(f"--pool {pool}: {path} (pools.path) does not exist; write it with `dvc repro pools` "
                             "(or run `python -m stages.train`), or evaluate every question with --pool all")
    try:
        pools = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalInputError(f"--pool {pool}: {path} is not a readable pools file: {exc}") from None
    listed = pools.get(pool) if isinstance(pools, dict) else None
    if not isinstance(listed, list):
        raise EvalInputError(f"--pool {pool}: {path} has no list {pool!r}")
    qids = [q for q in listed if q in questions]
    if not qids:
        raise EvalInputError(f"--pool {pool}: none of the {len(listed)} questions of {path} is in the configured "
                             "benchmark (were the pools made for other questions?)")
    return qids


# ---------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class EvalRequest:
    harness: Path
    pool: str
    samples: int
    out: Path
    tracking: bool = True


@dataclass
class EvalReport:
    """What `eval.json` holds (format EVAL_FORMAT)."""

    run_id: str
    harness: str
    harness_kind: str
    harness_surface: str
    harness_fingerprint: str
    skills_version: Optional[str]
    prompts_version: Optional[str]
    questions_ref: str
    pool: str
    samples: int
    sample_indices: list[int]
    interval_method: str
    overall: dict[str, Any]
    per_task_type: dict[str, dict[str, Any]]
    parse_shares: dict[str, Optional[float]]
    parse_counts: dict[str, int]
    infra_failures: int
    cost_usd: float
    seconds: float
    llm_model: str
    benchmark: str
    mlflow_run_id: Optional[str] = None
    format: str = EVAL_FORMAT

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _interval_row(interval: Interval, soft: Optional[float]) -> dict[str, Any]:
    return {"accuracy": interval.estimate, "ci_low": interval.low, "ci_high": interval.high, "method": interval.method,
            "questions": interval.questions, "rollouts": interval.rollouts, "correct": interval.correct, "soft_score": soft}


def summarize_predictions(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, int]]:
    """(overall row, per task type rows, parse-mode counts) of one eval run's judged prediction rows
    (`qid`, `task_type`, `correct`, `soft_score`, `parse_mode`); rows with `correct` NULL (infra) are left out."""
    from harness.bench.soft import mean_soft_score

    judged = [r for r in rows if r["correct"] is not None]

    def block(subset: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        outcomes: dict[str, list[bool]] = {}
        for r in subset:
            outcomes.setdefault(str(r["qid"]), []).append(bool(r["correct"]))
        return _interval_row(accuracy_interval(outcomes), mean_soft_score([r["soft_score"] for r in subset]))

    types = sorted({str(r["task_type"]) for r in judged})
    per_type = {t: block([r for r in judged if str(r["task_type"]) == t]) for t in types}
    counts: dict[str, int] = {}
    for r in judged:
        if r["parse_mode"] is not None:
            counts[str(r["parse_mode"])] = counts.get(str(r["parse_mode"]), 0) + 1
    return block(judged), per_type, counts


def _questions_ref(path: Path, root: Path) -> str:
    from harness.loop.state import rel_to

    return f"{rel_to(root, path)}@sha256:{questions_digest(path)}"


def _check_infra(n_infra: int, n_total: int, cfg: Any, where: str) -> None:
    from harness.loop.context import InfraLimits
    from harness.loop.validate import guard_infra_failures

    guard_infra_failures(n_infra, n_total, InfraLimits(float(cfg.gate.infra_max_ratio), int(cfg.gate.infra_min_denominator)), where)


def check_out(out: Path, entries: Sequence[str] = EVAL_OUT_ENTRIES, what: str = "an eval run's") -> Path:
    """Refuse an `out` holding any of `entries` (what the run writes there, with a run log's SQLite side files): an
    earlier run, finished or not, is never overwritten nor mixed with this one."""
    if out.exists() and not out.is_dir():
        raise EvalInputError(f"--out {out}: not a directory")
    found = [name for entry in entries for name in (entry, *(f"{entry}{side}" for side in SQLITE_SIDE_SUFFIXES))
             if (out / name).exists()]
    if found:
        raise EvalInputError(f"--out {out}: already holds {what} {', '.join(found)}; choose another directory")
    return out


@contextmanager
def removed_if_unfinished(out: Path, names: Sequence[str]) -> Iterator[None]:
    """Around an eval or compare that writes `names` into `out`: when it stops without its result (a server fault, an
    infra abort, Ctrl-C), what it wrote goes, so a failed run never looks like a result and a later run into the same
    directory starts clean. The directory goes when this run created it, else only the entries of `names` it created
    (a run log with its SQLite side files; an earlier run's files in a reused `--out` stay)."""
    created_out = not out.exists()
    new_names = [name for name in names if not (out / name).exists()]
    try:
        yield
    except BaseException:
        if created_out:
            shutil.rmtree(out, ignore_errors=True)
        for name in () if created_out else new_names:
            if (out / name).is_dir():
                shutil.rmtree(out / name, ignore_errors=True)
            else:
                (out / name).unlink(missing_ok=True)
            for side in SQLITE_SIDE_SUFFIXES:
                (out / f"{name}{side}").unlink(missing_ok=True)
        raise


def evaluate(cfg: Any, request: EvalRequest, root: Path, ctx: Any = None) -> EvalReport:
    """Run the evaluation of the module doc; writes runlog.sqlite, questions.parquet and harness/ into `request.out`
    (the caller writes the report files, and removes what was written when the run stops without its result:
    `run_eval` / `run_diagnose` around everything they write). `ctx`: a StageContext to reuse (diagnose reuses its
    provider)."""
    from harness.loop import rollouts as ro
    from harness.loop.context import make_context

    if request.samples < 1:
        raise EvalInputError(f"--samples {request.samples}: must be >= 1")
    surface = str(cfg.benchmark.harness_surface)
    harness = load_harness(request.harness, surface)
    own_ctx = ctx is None
    ctx = ctx or make_context(cfg, root)
    started = time.monotonic()
    out = check_out(request.out)
    try:
        questions = {q.qid: q for q in ctx.bench().questions()}
        qids = pool_qids(cfg, root, request.pool, questions)
        out.mkdir(parents=True, exist_ok=True)  # after the input checks: a refused eval leaves no directory
        qpath = write_questions(out / EVAL_QUESTIONS, [questions[q] for q in sorted(questions)])
        questions_ref = _questions_ref(qpath, root)
        harness.tree.save(out / EVAL_HARNESS)
        versions = (harness.skills_version, harness.prompts_version)
        run_id = eval_run_id(str(cfg.train.run_name), request.pool, *(
            (str(versions[0]), str(versions[1])) if None not in versions else ("tree", harness.tree.fingerprint[:12])))
        indices = [EVAL_INDEX + k for k in range(request.samples)]
        requests = [(questions[q], i) for q in qids for i in indices]
        progress.info("[eval] %s (%s) on %d questions of pool %s x %d sample(s) = %d rollouts", request.harness,
                      harness.kind, len(qids), request.pool, request.samples, len(requests))
        log = HarnessLog(out / EVAL_RUNLOG)
        try:
            log.record_run(run_id, "eval", skills_version=harness.skills_version, prompts_version=harness.prompts_version,
                           questions_ref=questions_ref,
                           meta={"harness_fingerprint": harness.tree.fingerprint, "harness": str(request.harness),
                                 "harness_kind": harness.kind, "pool": request.pool, "samples": request.samples,
                                 "n_questions": len(qids)})
            asyncio.run(ro.rollout_fn(ctx, log)(harness.tree, requests, run_id))
        finally:
            log.close()
    finally:
        if own_ctx:
            ctx.close()
    rows = RunLogReader(out / EVAL_RUNLOG).query(
        "SELECT qid, task_type, correct, soft_score, parse_mode, cost_usd FROM predictions WHERE run_id = ?", (run_id,))
    n_infra = sum(r["correct"] is None for r in rows)
    _check_infra(n_infra, len(rows), cfg, f"eval run {run_id}")
    overall, per_type, counts = summarize_predictions(rows)
    from harness.contracts.answers import parse_shares

    report = EvalReport(
        run_id=run_id, harness=str(request.harness), harness_kind=harness.kind, harness_surface=surface, harness_fingerprint=harness.tree.fingerprint,
        skills_version=harness.skills_version, prompts_version=harness.prompts_version, questions_ref=questions_ref,
        pool=request.pool, samples=request.samples, sample_indices=indices, interval_method=str(overall["method"]),
        overall=overall, per_task_type=per_type, parse_shares=parse_shares(counts), parse_counts=counts,
        infra_failures=n_infra, cost_usd=round(math.fsum(float(r["cost_usd"] or 0.0) for r in rows), 6),
        seconds=round(time.monotonic() - started, 3), llm_model=str(cfg.llm.model), benchmark=str(cfg.benchmark.name))
    return report


def _pct(value: Optional[float]) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _row_text(name: str, row: Mapping[str, Any]) -> str:
    soft = "" if row.get("soft_score") is None else f", soft {row['soft_score']:.3f}"
    if row["accuracy"] is None:
        return f"{name}: no judged rollout"
    return (f"{name}: {_pct(row['accuracy'])} [{_pct(row['ci_low'])}, {_pct(row['ci_high'])}] "
            f"({row['correct']}/{row['rollouts']} rollouts, {row['questions']} questions{soft})")


INTERVAL_NAMES = {"wilson": "Wilson score interval (one sample per question)",
                  "cluster": "cluster-robust normal interval, questions as clusters (several samples per question)"}


def report_lines(report: EvalReport) -> list[str]:
    """The printed summary: overall, per task type, parse shares (one line each)."""
    lines = [f"eval {report.run_id}: harness {report.harness} ({report.harness_kind}, fingerprint "
             f"{report.harness_fingerprint[:12]}), pool {report.pool}, {report.samples} sample(s) per question",
             f"95 % intervals: {INTERVAL_NAMES[report.interval_method]}",
             _row_text("accuracy", report.overall)]
    lines += [_row_text(f"  {t}", row) for t, row in report.per_task_type.items()]
    shares = ", ".join(f"{k.removeprefix('parse_share_')} {_pct(v)}" for k, v in report.parse_shares.items()
                       if k.startswith("parse_share_") and v)
    lines.append(f"answer parse modes: {shares or 'none judged'}; unparsed {_pct(report.parse_shares.get('parse_failure_rate'))}")
    if report.infra_failures:
        lines.append(f"infrastructure failures: {report.infra_failures} rollouts (left out of the accuracy)")
    lines.append(f"cost {report.cost_usd:.4f} USD, {report.seconds:.1f} s; questions {report.questions_ref}")
    return lines


def report_markdown(report: EvalReport) -> str:
    def cell(row: Mapping[str, Any]) -> str:
        soft = "—" if row.get("soft_score") is None else f"{row['soft_score']:.3f}"
        return (f"{_pct(row['accuracy'])} | [{_pct(row['ci_low'])}, {_pct(row['ci_high'])}] | {row['correct']}/{row['rollouts']} "
                f"| {row['questions']} | {soft}")

    out = [f"# Evaluation {report.run_id}", "",
           f"- harness: `{report.harness}` ({report.harness_kind}), fingerprint `{report.harness_fingerprint}`"
           + (f", skills {report.skills_version} prompts {report.prompts_version}" if report.skills_version else ""),
           f"- questions: `{report.questions_ref}`, pool `{report.pool}`, {report.samples} sample(s) per question "
           f"(sample indices {report.sample_indices[0]}..{report.sample_indices[-1]})",
           f"- model `{report.llm_model}`, benchmark `{report.benchmark}`, cost {report.cost_usd:.4f} USD, {report.seconds:.1f} s",
           f"- 95 % intervals: {INTERVAL_NAMES[report.interval_method]}", "",
           "| task type | accuracy | 95 % interval | correct/rollouts | questions | soft score |",
           "|---|---|---|---|---|---|", f"| **all** | {cell(report.overall)} |"]
    out += [f"| {t} | {cell(row)} |" for t, row in report.per_task_type.items()]
    out += ["", "| answer parse mode | share |", "|---|---|"]
    out += [f"| {k.removeprefix('parse_share_')} | {_pct(v)} |" for k, v in report.parse_shares.items()]
    if report.infra_failures:
        out += ["", f"{report.infra_failures} rollouts failed for infrastructure reasons and are left out."]
    return "\n".join(out) + "\n"


def write_markdown(report: EvalReport, out: Path) -> Path:
    return Path(atomic_write_text(out / EVAL_MD, report_markdown(report)))


def write_json(report: EvalReport, out: Path) -> Path:
    """eval.json, written last: its presence means a finished eval (what `stages.promote --eval` reads)."""
    return Path(atomic_write_json(out / EVAL_JSON, report.to_json()))


def read_eval(run_dir: Path) -> dict[str, Any]:
    """eval.json of a finished eval run directory; EvalInputError when there is none."""
    path = Path(run_dir) / EVAL_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalInputError(f"{run_dir}: no finished eval run ({EVAL_JSON} is missing)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalInputError(f"{path}: unreadable eval report: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != EVAL_FORMAT:
        raise EvalInputError(f"{path}: format {doc.get('format') if isinstance(doc, dict) else None!r}, expected {EVAL_FORMAT!r}")
    return doc


# ---------------------------------------------------------------- tracking


def eval_metrics(report: EvalReport) -> dict[str, Optional[float]]:
    metrics: dict[str, Optional[float]] = {
        "eval_acc": report.overall["accuracy"], "eval_acc_ci_low": report.overall["ci_low"],
        "eval_acc_ci_high": report.overall["ci_high"], "eval_soft_score": report.overall["soft_score"],
        "eval_rollouts": float(report.overall["rollouts"]), "eval_questions": float(report.overall["questions"]),
        "eval_infra_failures": float(report.infra_failures), "eval_cost_usd": report.cost_usd}
    metrics.update({k: v for k, v in report.parse_shares.items()})
    return metrics


def log_eval(cfg: Any, report: EvalReport, files: Sequence[Path], root: Path, what: str = "eval") -> str:
    """One MLflow run: overall metrics, the per-type table, the report files as artifacts."""
    from harness.tracking.mlflow_log import log_tracked_run
    from harness.tracking.provenance import git_commit
    from harness.tracking.record import TrackedRun
    from harness.tracking.store import resolve_tracking_uri

    params = {f"{what}.harness": report.harness, f"{what}.pool": report.pool, f"{what}.samples": str(report.samples),
              f"{what}.interval": report.interval_method, "harness.fingerprint": report.harness_fingerprint,
              "llm.model": report.llm_model, "benchmark.name": report.benchmark, "questions_ref": report.questions_ref}
    tags = {"harness.kind": what, "harness.eval_run_id": report.run_id}
    commit = git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    rows = [{"task_type": t, **row} for t, row in report.per_task_type.items()]
    run = TrackedRun(run_name=f"{what}-{Path(report.harness).name}-{report.pool}", params=params, tags=tags,
                     summary_metrics=eval_metrics(report), tables={f"{what}_per_task_type": rows} if rows else {},
                     artifacts=[(Path(f), what) for f in files])
    uri = resolve_tracking_uri(cfg.tracking.tracking_uri, root)
    return log_tracked_run(run, tracking_uri=uri, experiment=str(cfg.tracking.experiment), project_root=root)


def run_eval(cfg: Any, request: EvalRequest, root: Path) -> EvalReport:
    """Evaluate, write eval.md / eval.json, log the MLflow run (tracking.enabled and request.tracking). A run that stops
    without its result (a server fault, an infra abort, the tracking server, Ctrl-C) leaves nothing of itself in --out."""
    with removed_if_unfinished(request.out, EVAL_OUT_ENTRIES):
        report = evaluate(cfg, request, root)
        md = write_markdown(report, request.out)
        if request.tracking and bool(cfg.tracking.enabled):
            report.mlflow_run_id = log_eval(cfg, report, [md], root)
            progress.info("[eval] MLflow run %s (experiment %s)", report.mlflow_run_id, cfg.tracking.experiment)
        write_json(report, request.out)
    return report


# ---------------------------------------------------------------- diagnosis


@dataclass
class DiagnosisReport:
    """What `diagnosis.json` holds: the eval it diagnosed and the diagnoses per task type."""

    eval_run_id: str
    harness: str
    pool: str
    failures: int
    diagnosed: int
    unparseable: int
    reply_format: str
    usd: float
    accuracy: dict[str, Any]
    by_task_type: dict[str, dict[str, Any]] = field(default_factory=dict)
    format: str = "harness-diagnosis/1"


def failure_cases(db: Path, run_id: str, questions: Mapping[str, Question]) -> list[Any]:
    """One CaseSample per wrong judged rollout of `run_id` (its own sample's trace excerpt), in (qid, sample) order."""
    from harness.kernel.types import CaseSample
    from harness.loop.rollouts import trace_text

    rows = RunLogReader(db).query("SELECT qid, sample_index, predicted FROM predictions WHERE run_id = ? AND correct = 0 "
                                  "ORDER BY qid, sample_index", (run_id,))
    return [CaseSample.of(questions[r["qid"]], predicted=r["predicted"], correct=False,
                          trace_excerpt=trace_text(db, run_id, r["qid"], int(r["sample_index"])))
            for r in rows if r["qid"] in questions]


def diagnosis_markdown(doc: DiagnosisReport) -> str:
    out = [f"# Diagnosis of {doc.harness} (eval {doc.eval_run_id}, pool {doc.pool})", "",
           f"{doc.failures} failed rollouts, {doc.diagnosed} diagnosed, {doc.unparseable} unparseable diagnoser replies "
           f"(format {doc.reply_format or '—'}), diagnoser cost {doc.usd:.4f} USD; accuracy {_pct(doc.accuracy['accuracy'])} "
           f"[{_pct(doc.accuracy['ci_low'])}, {_pct(doc.accuracy['ci_high'])}].", ""]
    for task_type, block in doc.by_task_type.items():
        out += [f"## {task_type}", "", f"{block['failures']} failures, accuracy {_pct(block['accuracy'])}", ""]
        out += [f"- `{case}`: {' '.join(text.split())}" for case, text in block["diagnoses"]]
        out.append("")
    if not doc.by_task_type:
        out.append("No failure to diagnose.")
    return "\n".join(out) + "\n"


def run_diagnose(cfg: Any, request: EvalRequest, root: Path) -> DiagnosisReport:
    """Evaluate (eval files in `out` as `run_eval` writes them), then the diagnoser on each failure; writes
    diagnosis.json / diagnosis.md and, with tracking, one MLflow run holding both reports."""
    with removed_if_unfinished(request.out, EVAL_OUT_ENTRIES):  # a diagnoser fault after the eval leaves no half run
        return _diagnose(cfg, request, root)


def _diagnose(cfg: Any, request: EvalRequest, root: Path) -> DiagnosisReport:
    from harness.evolution.diagnose import run_diagnosis
    from harness.loop.context import make_context

    ctx = make_context(cfg, root)
    try:
        report = evaluate(cfg, request, root, ctx=ctx)
        questions = {q.qid: q for q in ctx.bench().questions()}
        cases = failure_cases(request.out / EVAL_RUNLOG, report.run_id, questions)
        progress.info("[diagnose] %d failures of %d rollouts to diagnose", len(cases), report.overall["rollouts"])
        result = asyncio.run(run_diagnosis(ctx.llm(), run_id=report.run_id, failures=cases,
                                           concurrency=int(cfg.llm.concurrency), sample_index=EVAL_INDEX,
                                           prompts=ctx.meta_prompts()))
    finally:
        ctx.close()
    doc = DiagnosisReport(eval_run_id=report.run_id, harness=report.harness, pool=report.pool, failures=len(cases),
                          diagnosed=sum(len(v) for v in result.by_task_type.values()), unparseable=result.n_unparseable,
                          reply_format=result.reply_format, usd=round(result.usd, 6), accuracy=report.overall)
    for task_type in sorted(result.failures):
        fails = result.failures[task_type]
        texts = result.by_task_type.get(task_type, [])
        # run_diagnosis keeps each type's parsed diagnoses in failure order, skipping the unparseable ones
        doc.by_task_type[task_type] = {"failures": len(fails), "accuracy": report.per_task_type.get(task_type, {}).get("accuracy"),
                                       "diagnoses": [[c.qid, t] for c, t in zip(fails, texts)] if len(texts) == len(fails)
                                       else [["", t] for t in texts]}
    eval_md = write_markdown(report, request.out)
    md = atomic_write_text(request.out / DIAGNOSIS_MD, diagnosis_markdown(doc))
    js = atomic_write_json(request.out / DIAGNOSIS_JSON, asdict(doc))
    if request.tracking and bool(cfg.tracking.enabled):
        report.mlflow_run_id = log_eval(cfg, report, [eval_md, Path(md), Path(js)], root, what="diagnose")
        progress.info("[diagnose] MLflow run %s (experiment %s)", report.mlflow_run_id, cfg.tracking.experiment)
    write_json(report, request.out)
    return doc


# ---------------------------------------------------------------- promote


def make_eval_hint(harness: Optional[Path]) -> str:
    """The command that makes the eval run a promotion needs."""
    return (f"make one with `python -m stages.eval --harness {harness or 'HARNESS_DIR'} --out RUN_DIR` (add the config "
            "overrides of your questions and model) and pass --eval RUN_DIR")


def promote_evaluated(seed: Path, eval_dir: Path, harness_dir: Optional[Path], root: Path) -> Any:
    """Promote to `seed` the harness the eval run in `eval_dir` evaluated (`harness_dir`, default the copy in
    `<eval_dir>/harness/`); refused (StoreError / EvalInputError, nothing written) unless the eval run records this
    harness (workspace versions, or its fingerprint) and its questions file still has the recorded content."""
    from harness.questions import QuestionsError, check_questions_ref
    from harness.store import StoreError, promote_to_seed

    doc = read_eval(eval_dir)
    run_log = Path(eval_dir) / EVAL_RUNLOG
    if not run_log.is_file():
        raise EvalInputError(f"{eval_dir}: {EVAL_RUNLOG} is missing, so the eval run {doc.get('run_id')!r} cannot be checked")
    surface = str(doc.get("harness_surface") or "native")
    source = harness_dir if harness_dir is not None else Path(eval_dir) / EVAL_HARNESS
    harness = load_harness(source, surface if harness_dir is not None else "native",
                           "--harness" if harness_dir is not None else "the evaluated harness copy")
    run_id = str(doc.get("run_id"))
    try:
        check_questions_ref(str(doc.get("questions_ref")), base=root)
    except QuestionsError as exc:
        raise StoreError(f"eval run {run_id!r}: {exc}; re-run the eval") from None
    meta = {"from_eval": str(eval_dir), "harness_source": str(source), "pool": doc.get("pool"),
            "eval_accuracy": (doc.get("overall") or {}).get("accuracy")}
    if harness.kind == "workspace":
        workspace = harness.source
        return promote_to_seed(seed, run_log=run_log, eval_run_id=run_id, skills_store=workspace / "skills",
                               prompts_store=workspace / "prompts", skills_version=harness.skills_version,
                               prompts_version=harness.prompts_version, meta=meta)
    return promote_to_seed(seed, run_log=run_log, eval_run_id=run_id, harness=harness.tree, meta=meta)


# ---------------------------------------------------------------- command lines (stages.eval, stages.diagnose)


def eval_command(prog: str, doc: str, argv: Optional[list[str]], run: Any) -> int:
    """The shared command line of stages.eval / stages.diagnose: parse, load the config, `run(cfg, request, root)`,
    print its lines; 0 done, 2 error (one line on stderr, no traceback)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc.split("\n\n", 1)[1])
    parser.add_argument("--harness", required=True, type=Path,
                        help="the harness: a directory in the layout benchmark.harness_surface, a seed or a workspace")
    parser.add_argument("--pool", choices=POOLS, default="all",
                        help="questions: all of the benchmark's (default), or the test or validation pool of pools.path")
    parser.add_argument("--samples", type=int, default=1, help="samples per question (default 1)")
    parser.add_argument("--out", type=Path, default=None, help=f"where the reports go (default runs/{prog.rsplit('.', 1)[-1]}/<time>)")
    parser.add_argument("--no-tracking", action="store_true", help="do not log an MLflow run")
    parser.add_argument("overrides", nargs="*", help="config overrides (Hydra syntax), as for python -m stages.train")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from harness.tracking.progress import quiet_third_party_loggers

    quiet_third_party_loggers()

    from harness.config.errors import ConfigError
    from harness.config.load import load_config
    from harness.config.secrets import install_redaction, print_error, refuse_secrets_on_command_line, secret_values
    from harness.pipeline.entry import command_exit, one_line_errors

    refuse_secrets_on_command_line(args.overrides, prog)
    if args.samples < 1:
        print_error(f"{prog}: --samples {args.samples}: must be >= 1")
        return 2
    out = args.out or Path("runs") / prog.rsplit(".", 1)[-1] / time.strftime("%Y-%m-%d_%H-%M-%S", time.gmtime())
    caught: tuple[type[BaseException], ...] = (ConfigError, EvalInputError, *one_line_errors())
    llm_cfg: Any = None  # until the config names llm.api_key_env, the environment's secret-looking variables are masked

    def body() -> int:
        nonlocal llm_cfg
        cfg = load_config(list(args.overrides))
        llm_cfg = cfg.llm
        install_redaction(secret_values(llm_cfg))  # the key's value never reaches a log line
        lines = run(cfg, EvalRequest(args.harness, args.pool, args.samples, out, not args.no_tracking), Path.cwd())
        print("\n".join(lines))
        return 0

    return command_exit(prog, body, caught, lambda: llm_cfg, prefix=f"{prog}:")
