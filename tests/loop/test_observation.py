"""Observation tables: idempotent, NULL not 0, read-only readers; report field sets."""

from __future__ import annotations

import sqlite3

import pytest

from harness.kernel.types import PairResult
from harness.loop.observation import (
    EPOCH_REPORT_FIELDS,
    read_table,
    step_report_row,
    write_dual_metric,
    write_epoch_report,
    write_gate_evidence,
    write_holdout_eval,
    write_quadrant_pairs,
    write_shadow_gate,
)


def test_writes_are_idempotent_and_none_is_null(tmp_path):
    db = tmp_path / "runlog.sqlite"
    for _ in range(2):
        write_dual_metric(db, run_id="r", epoch=1, kind="R", skills_version="v1", prompts_version="v0", n=10, hard_acc=0.5,
                          soft_score=None, mixed_score=None)
        write_shadow_gate(db, epoch=1, run_id="r", hard_acc=0.5, mixed_score=None, shadow_best_mixed=None, shadow_skills_version=None,
                          shadow_prompts_version=None, hard_best_skills_version="v1", hard_best_prompts_version="v0")
        write_holdout_eval(db, [dict(epoch=1, which="best", run_id="h", skills_version="v1", prompts_version="v0", n=5, hard_acc=0.4,
                                     soft_score=None, mixed_score=None)])
        write_quadrant_pairs(db, gate_run_id="g_gate_t", epoch=1, step=1, task_type="t", action="accept",
                             pairs=[PairResult("a", False, True), PairResult("b", True, True), PairResult("a", True, False)])
        write_gate_evidence(db, [dict(gate_run_id="g_gate_t", seq=0, block=0, epoch=1, step=1, task_type="t", qid="a", baseline=False,
                                      candidate=True, sample_index=10, anchor=True, sign=1, log_e=0.1, log_lr_dir=0.2, action="continue")])
    dual = read_table(db, "dual_metric_eval")
    assert len(dual) == 1 and dual[0]["soft_score"] is None and dual[0]["mixed_score"] is None
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM dual_metric_eval WHERE soft_score IS NULL").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM dual_metric_eval WHERE soft_score = 0").fetchone()[0] == 0
    conn.close()
    quads = {r["qid"]: r["quadrant"] for r in read_table(db, "quadrant_pair")}
    assert quads == {"a": "REGRESSED", "b": "STABLE_SUCCESS"}  # the last pair of a re-asked question
    assert len(read_table(db, "gate_evidence")) == 1 and read_table(db, "gate_evidence")[0]["stop_reason"] is None
    assert len(read_table(db, "holdout_eval")) == 1 and len(read_table(db, "shadow_gate")) == 1


def test_nan_metric_refused(tmp_path):
    with pytest.raises(ValueError, match="soft_score"):
        write_dual_metric(tmp_path / "x.sqlite", run_id="r", epoch=1, kind="R", skills_version=None, prompts_version=None, n=1,
                          hard_acc=0.5, soft_score=float("nan"), mixed_score=None)


def test_readers_never_create(tmp_path):
    db = tmp_path / "absent.sqlite"
    assert read_table(db, "gate_evidence") == []
    assert not db.exists()
    conn = sqlite3.connect(tmp_path / "other.sqlite")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert read_table(tmp_path / "other.sqlite", "holdout_eval") == []
    names = sqlite3.connect(tmp_path / "other.sqlite").execute("SELECT name FROM sqlite_master").fetchall()
    assert names == [("t",)]
    with pytest.raises(KeyError):
        read_table(db, "predictions")


def test_report_fields(tmp_path):
    row = step_report_row(epoch=1, step=2, task_type="t", action="skipped_cooldown")
    assert row["log_e"] is None and row["n_pairs"] is None
    with pytest.raises(KeyError):
        step_report_row(bogus=1)
    with pytest.raises(KeyError, match="missing"):
        write_epoch_report(tmp_path / "r.json", {"epoch": 1})
    full = {k: None for k in EPOCH_REPORT_FIELDS}
    assert set(write_epoch_report(tmp_path / "r.json", full)) == set(EPOCH_REPORT_FIELDS)
