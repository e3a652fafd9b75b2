"""Observation (seed 000 §14): the five observation tables and the step/epoch reports.

Tables live in a stage's run-log SQLite file, next to the five inference
tables of `harness/log.py`:

- `dual_metric_eval`  end-of-epoch hard + soft + mixed metrics of a validation run
- `shadow_gate`       the mixed-metric shadow best candidate (observed, never acted on)
- `holdout_eval`      four-way held-out metrics on the test pool
- `quadrant_pair`     per-question four quadrants after a fast gate
- `gate_evidence`     CE-gate rows, replayable question by question

Contracts:
- every write function creates its table if needed (idempotent DDL) and
  inserts with INSERT OR IGNORE on the table's primary key, so re-running a
  stage never duplicates rows;
- a soft/mixed metric that does not exist is stored as NULL, never 0;
- every read function opens its own read-only connection (`mode=ro`), never
  through a HarnessLog, and never creates a row or a table.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json

TABLES: dict[str, str] = {
    "dual_metric_eval": """CREATE TABLE IF NOT EXISTS dual_metric_eval (
        run_id TEXT NOT NULL, epoch INTEGER NOT NULL, kind TEXT NOT NULL,
        skills_version TEXT, prompts_version TEXT, n INTEGER NOT NULL,
        hard_acc REAL NOT NULL, soft_score REAL, mixed_score REAL,
        created_at REAL NOT NULL, PRIMARY KEY (run_id))""",
    "shadow_gate": """CREATE TABLE IF NOT EXISTS shadow_gate (
        epoch INTEGER NOT NULL, run_id TEXT NOT NULL, hard_acc REAL NOT NULL, mixed_score REAL,
        shadow_best_mixed REAL, shadow_skills_version TEXT, shadow_prompts_version TEXT,
        hard_best_skills_version TEXT, hard_best_prompts_version TEXT, disagrees INTEGER,
        created_at REAL NOT NULL, PRIMARY KEY (epoch))""",
    "holdout_eval": """CREATE TABLE IF NOT EXISTS holdout_eval (
        epoch INTEGER NOT NULL, which TEXT NOT NULL, run_id TEXT NOT NULL,
        skills_version TEXT, prompts_version TEXT, n INTEGER NOT NULL,
        hard_acc REAL NOT NULL, soft_score REAL, mixed_score REAL, rolled_back TEXT,
        created_at REAL NOT NULL, PRIMARY KEY (epoch, which))""",
    "quadrant_pair": """CREATE TABLE IF NOT EXISTS quadrant_pair (
        gate_run_id TEXT NOT NULL, qid TEXT NOT NULL, epoch INTEGER NOT NULL, step INTEGER NOT NULL,
        task_type TEXT NOT NULL, baseline INTEGER, candidate INTEGER, quadrant TEXT NOT NULL,
        action TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (gate_run_id, qid))""",
    "gate_evidence": """CREATE TABLE IF NOT EXISTS gate_evidence (
        gate_run_id TEXT NOT NULL, seq INTEGER NOT NULL, block INTEGER NOT NULL,
        epoch INTEGER NOT NULL, step INTEGER NOT NULL, task_type TEXT NOT NULL, qid TEXT NOT NULL,
        baseline INTEGER, candidate INTEGER, sample_index INTEGER NOT NULL, anchor INTEGER NOT NULL,
        sign INTEGER NOT NULL, log_e REAL NOT NULL, log_lr_dir REAL NOT NULL, action TEXT NOT NULL,
        stop_reason TEXT, created_at REAL NOT NULL, PRIMARY KEY (gate_run_id, seq))""",
}


def _nullable(value: float | None, name: str) -> float | None:
    """None stays None (NULL); a number must be finite."""
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"observation metric {name!r} must be finite or None, got {value!r}")
    return value


def _bool_int(value: bool | None) -> int | None:
    return None if value is None else int(bool(value))


def _write(db_path: str | Path, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """Create `table` if needed and INSERT OR IGNORE `rows`; returns rows actually inserted."""
    if table not in TABLES:
        raise KeyError(f"unknown observation table {table!r}; known: {sorted(TABLES)}")
    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(db_path), timeout=30.0)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(TABLES[table])
        inserted = 0
        with conn:
            for row in rows:
                cols = list(row)
                sql = f"INSERT OR IGNORE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
                inserted += conn.execute(sql, [row[c] for c in cols]).rowcount
        return inserted
    finally:
        conn.close()


# --- writers ---------------------------------------------------------------


def write_dual_metric(db_path: str | Path, *, run_id: str, epoch: int, kind: str, skills_version: str | None,
                      prompts_version: str | None, n: int, hard_acc: float, soft_score: float | None,
                      mixed_score: float | None) -> int:
    row = dict(run_id=run_id, epoch=int(epoch), kind=kind, skills_version=skills_version,
               prompts_version=prompts_version, n=int(n), hard_acc=float(hard_acc),
               soft_score=_nullable(soft_score, "soft_score"), mixed_score=_nullable(mixed_score, "mixed_score"),
               created_at=time.time())
    return _write(db_path, "dual_metric_eval", [row])


def write_shadow_gate(db_path: str | Path, *, epoch: int, run_id: str, hard_acc: float, mixed_score: float | None,
                      shadow_best_mixed: float | None, shadow_skills_version: str | None,
                      shadow_prompts_version: str | None, hard_best_skills_version: str | None,
                      hard_best_prompts_version: str | None) -> int:
    disagrees = None
    if shadow_skills_version is not None:
        disagrees = int((shadow_skills_version, shadow_prompts_version) != (hard_best_skills_version, hard_best_prompts_version))
    row = dict(epoch=int(epoch), run_id=run_id, hard_acc=float(hard_acc), mixed_score=_nullable(mixed_score, "mixed_score"),
               shadow_best_mixed=_nullable(shadow_best_mixed, "shadow_best_mixed"),
               shadow_skills_version=shadow_skills_version, shadow_prompts_version=shadow_prompts_version,
               hard_best_skills_version=hard_best_skills_version, hard_best_prompts_version=hard_best_prompts_version,
               disagrees=disagrees, created_at=time.time())
    return _write(db_path, "shadow_gate", [row])


def write_holdout_eval(db_path: str | Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """rows: epoch, which, run_id, skills_version, prompts_version, n, hard_acc, soft_score, mixed_score, and optional
    rolled_back (the task types a per-type rollback put back to the start's files: the row's harness is then not the
    workspace version its labels name; NULL otherwise)."""
    clean = []
    for r in rows:
        clean.append(dict(epoch=int(r["epoch"]), which=str(r["which"]), run_id=str(r["run_id"]),
                          skills_version=r["skills_version"], prompts_version=r["prompts_version"], n=int(r["n"]),
                          hard_acc=float(r["hard_acc"]), soft_score=_nullable(r["soft_score"], "soft_score"),
                          mixed_score=_nullable(r["mixed_score"], "mixed_score"), rolled_back=r.get("rolled_back"),
                          created_at=time.time()))
    return _write(db_path, "holdout_eval", clean)


def quadrant_of(baseline: bool | None, candidate: bool | None) -> str:
    """IMPROVED / REGRESSED / PERSISTENT_FAIL / STABLE_SUCCESS, or INFRA when an outcome is missing."""
    from harness.kernel.pair_classes import categorize_pair

    if baseline is None or candidate is None:
        return "INFRA"
    return categorize_pair(bool(baseline), bool(candidate))


def write_quadrant_pairs(db_path: str | Path, *, gate_run_id: str, epoch: int, step: int, task_type: str,
                         action: str, pairs: Iterable[Any]) -> int:
    """One row per question: the last pair observed for it in the gate (pairs are PairResult-like)."""
    last: dict[str, Any] = {}
    for p in pairs:
        last[p.qid] = p
    rows = [dict(gate_run_id=gate_run_id, qid=q, epoch=int(epoch), step=int(step), task_type=task_type,
                 baseline=_bool_int(p.baseline), candidate=_bool_int(p.candidate),
                 quadrant=quadrant_of(p.baseline, p.candidate), action=action, created_at=time.time())
            for q, p in sorted(last.items())]
    return _write(db_path, "quadrant_pair", rows)


def write_gate_evidence(db_path: str | Path, rows: Sequence[Mapping[str, Any]]) -> int:
    """rows as built by harness.loop.validate (seq, block, qid, baseline, candidate, ..., stop_reason)."""
    clean = []
    for r in rows:
        clean.append(dict(gate_run_id=r["gate_run_id"], seq=int(r["seq"]), block=int(r["block"]), epoch=int(r["epoch"]),
                          step=int(r["step"]), task_type=r["task_type"], qid=r["qid"],
                          baseline=_bool_int(r["baseline"]), candidate=_bool_int(r["candidate"]),
                          sample_index=int(r["sample_index"]), anchor=int(bool(r["anchor"])), sign=int(r["sign"]),
                          log_e=float(r["log_e"]), log_lr_dir=float(r["log_lr_dir"]), action=str(r["action"]),
                          stop_reason=r.get("stop_reason"), created_at=time.time()))
    return _write(db_path, "gate_evidence", clean)


# --- readers (own read-only connection) -------------------------------------


def read_table(db_paths: str | Path | Sequence[str | Path], table: str, where: str = "", params: Sequence[Any] = ()) -> list[dict]:
    """Rows of `table` over one or several run-log fragments (missing tables/files contribute nothing)."""
    if table not in TABLES:
        raise KeyError(f"unknown observation table {table!r}; known: {sorted(TABLES)}")
    paths = [db_paths] if isinstance(db_paths, (str, Path)) else list(db_paths)
    out: list[dict] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            continue
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, timeout=30.0)
        conn.row_factory = sqlite3.Row
        try:
            exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
            if not exists:
                continue
            sql = f"SELECT * FROM {table}" + (f" WHERE {where}" if where else "")
            out.extend(dict(r) for r in conn.execute(sql, tuple(params)))
        finally:
            conn.close()
    return out


# --- reports ----------------------------------------------------------------

STEP_REPORT_FIELDS = (
    "epoch", "step", "task_type", "skill_file", "action", "reason", "edits_proposed", "edits_applied",
    "gate_run_id", "log_e", "log_lr_dir", "wins", "losses", "ties", "n_pairs", "rollouts",
    "skills_version_before", "skills_version_after", "probation_opened",
    "fdr_level", "fdr_test", "fdr_spent", "screen",  # issue 13: the level the gate was given, its e-LOND index, run spent so far
    "source",  # who wrote the candidate: the evolve method, or the candidates file's `source` (evolve=candidates)
)


def step_report_row(**fields: Any) -> dict[str, Any]:
    """A step-report row with every field present; gate fields None on skipped/cooldown paths."""
    unknown = set(fields) - set(STEP_REPORT_FIELDS)
    if unknown:
        raise KeyError(f"unknown step report fields {sorted(unknown)}")
    return {k: fields.get(k) for k in STEP_REPORT_FIELDS}


def write_step_report(path: str | Path, *, epoch: int, step: int, run_id: str, batch_acc: float | None,
                      rows: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> dict:
    report = {"epoch": int(epoch), "step": int(step), "run_id": run_id, "batch_acc": batch_acc,
              "skills": [dict(r) for r in rows], **(dict(extra) if extra else {})}
    atomic_write_json(path, report)
    return report


EPOCH_REPORT_FIELDS = (
    "epoch", "eval_run_id", "eval_acc", "soft_score", "mixed_score", "eval_prev_acc", "label",
    "best_val_acc", "best_skills_version", "best_prompts_version", "probations_settled", "rollbacks",
    "momentum_updated_task_types", "system_tool_action", "r2_run_id", "r2_acc", "r2_kept",
    "changed_task_types", "ladder_sources", "holdout", "early_stop", "steps_since_best_improved", "r_acc", "rollouts",
    "momentum_check", "momentum_reverted", "type_check_drop", "type_check_reverted",
    "reuse_identical", "r_asked", "r2_asked",  # train.reuse_identical: the questions R and R2 asked (the others copied)
)


def write_epoch_report(path: str | Path, report: Mapping[str, Any]) -> dict:
    missing = [k for k in EPOCH_REPORT_FIELDS if k not in report]
    if missing:
        raise KeyError(f"epoch report is missing fields {missing}")
    data = {k: report[k] for k in EPOCH_REPORT_FIELDS}
    atomic_write_json(path, data)
    return data
