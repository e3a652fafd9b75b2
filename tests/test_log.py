import asyncio
import sqlite3
import threading

import pytest

from harness.log import INFERENCE_TABLES_SQL, HarnessLog, RunLogError, RunLogReader


def _pred(run_id, qid, idx, correct=True, **extra):
    return {"run_id": run_id, "qid": qid, "sample_index": idx, "task_type": "t", "predicted": "A",
            "answer": "A", "correct": correct, "stop_reason": "answer", **extra}


@pytest.fixture
def log(tmp_path):
    with HarnessLog(tmp_path / "runlog.sqlite") as lg:
        yield lg


def test_tables_wal_and_primary_keys(log):
    assert log.query("PRAGMA journal_mode")[0]["journal_mode"] == "wal"
    names = {r["name"] for r in log.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert set(INFERENCE_TABLES_SQL) <= names
    pk = [r["name"] for r in sorted(log.query("PRAGMA table_info(predictions)"), key=lambda r: r["pk"]) if r["pk"]]
    assert pk == ["run_id", "qid", "sample_index"]
    pk = [r["name"] for r in sorted(log.query("PRAGMA table_info(traces)"), key=lambda r: r["pk"]) if r["pk"]]
    assert pk == ["run_id", "qid", "sample_index", "step"]


def test_record_run_is_insert_or_ignore(log):
    assert log.record_run("r1", "step", skills_version="v1", meta={"epoch": 1}) is True
    assert log.record_run("r1", "eval", skills_version="v9") is False
    (row,) = log.query("SELECT * FROM _runs")
    assert (row["kind"], row["skills_version"]) == ("step", "v1")
    log.update_run_versions("r1", "v2", "v3", "sha:abc")
    (row,) = log.query("SELECT * FROM _runs")
    assert (row["skills_version"], row["prompts_version"], row["questions_ref"]) == ("v2", "v3", "sha:abc")
    with pytest.raises(RunLogError, match="no run 'missing'"):
        log.update_run_versions("missing", "v1", "v1", None)


def test_insert_idempotent_and_first_write_wins(log):
    rows = [_pred("r", f"q{i}", 0) for i in range(10)]
    assert log.insert("predictions", rows) == 10
    assert log.insert("predictions", rows) == 0
    assert log.insert("predictions", [_pred("r", "q0", 0, correct=False)]) == 0
    assert log.query("SELECT correct FROM predictions WHERE qid='q0'") == [{"correct": 1}]
    assert log.query("SELECT COUNT(*) AS n FROM predictions") == [{"n": 10}]


def test_insert_rejects_unknown_table_or_column_and_writes_nothing(log):
    with pytest.raises(RunLogError, match="no such table"):
        log.insert("nope", [{"a": 1}])
    with pytest.raises(RunLogError, match="unknown column 'bogus'"):
        log.insert("predictions", [_pred("r", "q1", 0), _pred("r", "q2", 0, bogus=1)])
    with pytest.raises(RunLogError, match="invalid table"):
        log.insert("predictions; DROP TABLE _runs", [{"a": 1}])
    assert log.query("SELECT COUNT(*) AS n FROM predictions") == [{"n": 0}]


def test_insert_is_one_transaction(log):
    # the second group fails while binding -> the first group is rolled back too
    with pytest.raises(sqlite3.ProgrammingError):
        log.insert("predictions", [_pred("r", "q1", 0), {"run_id": "r", "qid": "q2", "sample_index": 1, "error": object()}])
    assert log.query("SELECT COUNT(*) AS n FROM predictions") == [{"n": 0}]


def test_null_key_is_refused_not_silently_ignored(log):
    with pytest.raises(RunLogError, match=r"NULL in required column\(s\) \['qid'\]"):
        log.insert("predictions", [_pred("r", "q1", 0), {"run_id": "r", "qid": None, "sample_index": 1}])
    with pytest.raises(RunLogError, match=r"lack required column\(s\) \['sample_index'\]"):
        log.insert("predictions", [{"run_id": "r", "qid": "q"}])
    assert log.query("SELECT COUNT(*) AS n FROM predictions") == [{"n": 0}]


def test_tables_created_later_by_other_modules_are_usable(log):
    log.execute_script("CREATE TABLE IF NOT EXISTS quadrant_pair (run_id TEXT, qid TEXT, cat TEXT, PRIMARY KEY(run_id, qid))")
    assert log.insert("quadrant_pair", [{"run_id": "r", "qid": "q", "cat": "IMPROVED"}] * 2) == 1


def test_concurrent_threads_and_async_tasks_lose_and_duplicate_nothing(tmp_path):
    path = tmp_path / "runlog.sqlite"
    log = HarnessLog(path)
    other = HarnessLog(path)  # a second connection to the same file contends through WAL/busy_timeout
    n_threads, n_tasks, per_writer, batch = 8, 40, 10, 5
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads + 1)
    expected: set[tuple[str, str, int]] = set()

    def rows_for(writer: str, i: int):
        return [_pred(writer, f"q{i}_{j}", i * batch + j) for j in range(batch)]

    for w in range(n_threads):
        for i in range(per_writer):
            expected.update((r["run_id"], r["qid"], r["sample_index"]) for r in rows_for(f"thread{w}", i))
    for t in range(n_tasks):
        for i in range(per_writer):
            expected.update((r["run_id"], r["qid"], r["sample_index"]) for r in rows_for(f"task{t}", i))

    def thread_writer(w: int):
        try:
            start.wait()
            target = other if w % 2 else log
            for i in range(per_writer):
                target.insert("predictions", rows_for(f"thread{w}", i))
                target.insert("predictions", rows_for(f"thread{w}", i))  # repeated: adds nothing
                target.query("SELECT COUNT(*) FROM predictions")  # queries interleave with inserts
                target.insert("traces", [{"run_id": f"thread{w}", "qid": f"q{i}", "sample_index": 0, "step": 0, "kind": "x"}])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    async def task_writer(t: int):
        await log.arecord_run(f"task{t}", "step")
        for i in range(per_writer):
            await log.ainsert("predictions", rows_for(f"task{t}", i))
            await log.aquery("SELECT COUNT(*) FROM predictions")
        await log.ainsert("predictions", rows_for(f"task{t}", 0))

    async def all_tasks():
        start.wait()
        await asyncio.gather(*(task_writer(t) for t in range(n_tasks)))

    threads = [threading.Thread(target=thread_writer, args=(w,)) for w in range(n_threads)]
    for th in threads:
        th.start()
    asyncio.run(all_tasks())
    for th in threads:
        th.join()
    assert not errors
    other.close()
    log.close()

    reader = RunLogReader([path])
    rows = reader.query("SELECT run_id, qid, sample_index FROM predictions")
    got = [(r["run_id"], r["qid"], r["sample_index"]) for r in rows]
    assert len(got) == len(set(got)) == len(expected)
    assert set(got) == expected
    assert reader.query("SELECT COUNT(*) AS n FROM traces") == [{"n": n_threads * per_writer}]
    assert len(reader.runs()) == n_tasks


def test_reader_is_read_only_and_never_creates(tmp_path):
    with pytest.raises(RunLogError, match="do not exist"):
        RunLogReader([tmp_path / "missing.sqlite"])
    assert not (tmp_path / "missing.sqlite").exists()
    path = tmp_path / "r.sqlite"
    with HarnessLog(path) as lg:
        lg.insert("predictions", [_pred("r", "q", 0)])
    reader = RunLogReader(path)
    assert reader.runs() == []  # reading never records a run
    with pytest.raises(RunLogError, match="readonly"):
        reader.query("INSERT INTO _runs (run_id, kind) VALUES ('x', 'y')")
    assert reader.runs() == []


def test_reader_sees_live_writer_commits(tmp_path):
    path = tmp_path / "r.sqlite"
    with HarnessLog(path) as lg:
        reader = RunLogReader(path)
        assert reader.predictions() == []
        lg.insert("predictions", [_pred("r", "q", 0)])
        assert len(reader.predictions()) == 1


def test_reader_over_fragments(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with HarnessLog(a) as la, HarnessLog(b) as lb:
        la.record_run("x_e1_s1", "step", meta={"k": 1})
        la.insert("predictions", [_pred("x_e1_s1", "q1", 1001), _pred("x_e1_s1", "q2", 1001)])
        lb.record_run("x_e1_s1_gate_count", "gate")
        lb.insert("predictions", [_pred("x_e1_s1_gate_count", "q1", 7), _pred("x_e1_s2", "q1", 1002)])
        lb.insert("predictions", [_pred("x_e1_s1", "q1", 1001, correct=False)])  # same key, later fragment
        lb.execute_script("CREATE TABLE only_b (v INTEGER); INSERT INTO only_b VALUES (5);")
    reader = RunLogReader([a, b])
    assert len(reader.predictions()) == 4
    steps = reader.predictions(run_id_glob="x_e1_s*", exclude_glob="*_gate_*")
    assert [(r["run_id"], r["qid"]) for r in steps] == [("x_e1_s1", "q1"), ("x_e1_s1", "q2"), ("x_e1_s2", "q1")]
    assert steps[0]["correct"] == 1  # first fragment in chain order wins
    assert [r["run_id"] for r in reader.predictions(run_id="x_e1_s1_gate_count")] == ["x_e1_s1_gate_count"]
    assert {r["run_id"]: r["meta"] for r in reader.runs()} == {"x_e1_s1": {"k": 1}, "x_e1_s1_gate_count": None}
    assert reader.query("SELECT v FROM only_b") == [{"v": 5}]  # missing in a: counted as empty
    with pytest.raises(RunLogError, match="no such table"):
        reader.query("SELECT * FROM nowhere")
    assert asyncio.run(reader.apredictions(run_id="x_e1_s2"))[0]["qid"] == "q1"


def test_closed_log_refuses(tmp_path):
    lg = HarnessLog(tmp_path / "r.sqlite")
    lg.close()
    lg.close()  # idempotent
    with pytest.raises(RunLogError, match="closed"):
        lg.query("SELECT 1")


def test_a_log_written_before_parse_mode_stays_readable_and_gets_the_column(tmp_path):
    old = tmp_path / "old.sqlite"
    conn = sqlite3.connect(old)
    old_ddl = INFERENCE_TABLES_SQL["predictions"].replace("    parse_mode TEXT,\n", "")
    assert "parse_mode" not in old_ddl
    conn.execute(old_ddl)
    conn.execute("INSERT INTO predictions (run_id, qid, sample_index, predicted) VALUES ('r', 'q1', 0, 'B')")
    conn.commit()
    conn.close()
    [row] = RunLogReader(old).predictions()
    assert row["predicted"] == "B" and "parse_mode" not in row  # the reader never changes an old file
    with HarnessLog(old) as log:  # a resumed writer adds the column
        log.insert("predictions", [{"run_id": "r", "qid": "q2", "sample_index": 0, "predicted": "C", "parse_mode": "leading_letter"}])
    rows = RunLogReader(old).predictions()
    assert [(r["qid"], r["parse_mode"]) for r in rows] == [("q1", None), ("q2", "leading_letter")]


class _Killed(BaseException):
    """What the live-run SIGTERM handler raises (tracking.live.RunKilled) between two bytecodes."""


class _SignalAfterBegin:
    """A connection whose `BEGIN IMMEDIATE` returns and then a signal handler raises, as a SIGTERM can."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args):
        cursor = self._conn.execute(sql, *args)
        if sql == "BEGIN IMMEDIATE":
            raise _Killed("signal 15")
        return cursor

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


def test_a_signal_right_after_begin_leaves_no_open_transaction_and_close_keeps_the_signal(tmp_path):
    # a SIGTERM landing just after BEGIN used to leave the transaction open; close()'s WAL checkpoint then failed
    # with "database table is locked", which replaced the signal: the MLflow run ended FAILED instead of KILLED
    log = HarnessLog(tmp_path / "runlog.sqlite")
    log.record_run("r1", "train")
    real = log._conn
    log._conn = _SignalAfterBegin(real)  # type: ignore[assignment]
    with pytest.raises(_Killed):
        log.insert("predictions", [_pred("r1", "q1", 0)])
    assert not real.in_transaction
    log._conn = real
    real.execute("BEGIN IMMEDIATE")  # and were one left open elsewhere, close() still checkpoints
    log.close()  # no error of its own
    with HarnessLog(tmp_path / "runlog.sqlite") as again:
        assert again.query("SELECT COUNT(*) AS n FROM predictions")[0]["n"] == 0
        assert again.insert("predictions", [_pred("r1", "q1", 0)]) == 1
