"""The run log: one SQLite file per stage fragment (seed 000 §4).

`HarnessLog` is the writer: WAL mode, a busy timeout, one `threading.Lock`
around the shared connection for inserts *and* queries (a shared connection
with a concurrent SELECT and INSERT corrupts cursor state), idempotent
`INSERT OR IGNORE` (primary keys make a repeated insert a no-op).

`RunLogReader` is the read-only port the evolution kernel and reports use:
its own `mode=ro` connections, never creates tables or `_runs` rows, and
reads a chain of fragment files as one log.

Table definitions (`INFERENCE_TABLES_SQL`) are the contract of
docs/ARCHITECTURE.md "Run log contract".
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.inputs import is_file_failure, sqlite_failure

BUSY_TIMEOUT_MS = 30_000
_NOW = "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

INFERENCE_TABLES_SQL: dict[str, str] = {
    "_runs": f"""CREATE TABLE IF NOT EXISTS _runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    skills_version TEXT,
    prompts_version TEXT,
    questions_ref TEXT,
    created_at TEXT NOT NULL DEFAULT {_NOW},
    meta TEXT
)""",
    "predictions": f"""CREATE TABLE IF NOT EXISTS predictions (
    run_id TEXT NOT NULL,
    qid TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    task_type TEXT,
    predicted TEXT,
    answer TEXT,
    correct INTEGER NULL,
    stop_reason TEXT,
    n_steps INTEGER,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cost_usd REAL,
    latency_s REAL,
    error TEXT,
    evidence TEXT,
    reasoning TEXT,
    skill_hash TEXT,
    created_at TEXT NOT NULL DEFAULT {_NOW},
    parse_mode TEXT,
    soft_score REAL NULL,
    PRIMARY KEY (run_id, qid, sample_index)
)""",
    "traces": """CREATE TABLE IF NOT EXISTS traces (
    run_id TEXT NOT NULL,
    qid TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT,
    content TEXT,
    PRIMARY KEY (run_id, qid, sample_index, step)
)""",
    "validation_flags": """CREATE TABLE IF NOT EXISTS validation_flags (
    run_id TEXT NOT NULL,
    qid TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    flag TEXT NOT NULL,
    detail TEXT,
    PRIMARY KEY (run_id, qid, sample_index, flag)
)""",
    "anchor_check": """CREATE TABLE IF NOT EXISTS anchor_check (
    run_id TEXT NOT NULL,
    qid TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    anchor TEXT NOT NULL,
    status TEXT,
    detail TEXT,
    PRIMARY KEY (run_id, qid, sample_index, anchor)
)""",
    "observe_frame_health": """CREATE TABLE IF NOT EXISTS observe_frame_health (
    run_id TEXT NOT NULL,
    qid TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    frame TEXT NOT NULL,
    status TEXT,
    detail TEXT,
    PRIMARY KEY (run_id, qid, sample_index, frame)
)""",
}

PREDICTION_KEY = ("run_id", "qid", "sample_index")
# columns added after a table's first release: (table, column, type); a writer adds them to an older file,
# readers see them missing in older files (rows then lack the key)
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("predictions", "parse_mode", "TEXT"),  # the answer extractor's rule (harness/contracts/answers.py)
    ("predictions", "soft_score", "REAL"),  # in [0, 1]: a float scorer's value or P(right letter); NULL: none
)


class RunLogError(RuntimeError):
    """Misuse of the run log (unknown table/column, missing run, unreadable fragment)."""


def _check_identifier(kind: str, name: str, where: str) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise RunLogError(f"{where}: invalid {kind} name {name!r} (expected [A-Za-z_][A-Za-z0-9_]*)")
    return name


@contextmanager
def _named_failures(path: Path) -> Iterator[None]:
    """SQLite failures of the file itself (corrupt, read-only, disk full) as one error naming it; constraint
    errors pass through (the callers name the row)."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if not is_file_failure(exc):
            raise
        raise sqlite_failure(path, "run log", exc) from exc


def _rollback(conn: sqlite3.Connection) -> None:
    """ROLLBACK unless SQLite already rolled back (disk full does): the first error stays the one reported."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class HarnessLog:
    """Writer for one run-log SQLite file; safe to share between threads and asyncio tasks."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._columns: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per insert()
        with _named_failures(self.path):
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                         timeout=BUSY_TIMEOUT_MS / 1000)
        self._conn.row_factory = sqlite3.Row
        with self._lock, _named_failures(self.path):
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RunLogError(f"{self.path}: could not switch the run log to WAL mode (got {mode!r})")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            try:  # BEGIN inside: a signal raised just after it returns still rolls back
                self._conn.execute("BEGIN IMMEDIATE")
                for ddl in INFERENCE_TABLES_SQL.values():
                    self._conn.execute(ddl)
                for table, column, kind in ADDED_COLUMNS:  # a log written before the column existed
                    present = {r["name"] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                    if column not in present:
                        self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                self._conn.execute("COMMIT")
            except BaseException:
                _rollback(self._conn)
                raise

    # -- lifecycle
    def close(self) -> None:
        """Checkpoint the WAL into the main file (so the file alone is the artifact) and close."""
        with self._lock, _named_failures(self.path):
            if self._conn is None:
                return
            try:
                _rollback(self._conn)  # a transaction an interrupted caller left open would block the checkpoint
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.close()
                self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> HarnessLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RunLogError(f"{self.path}: run log is closed")
        return self._conn

    # -- runs
    def record_run(
        self,
        run_id: str,
        kind: str,
        skills_version: str | None = None,
        prompts_version: str | None = None,
        questions_ref: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        """INSERT OR IGNORE one `_runs` row; True when it was new. An existing row is never changed."""
        if not run_id:
            raise RunLogError(f"{self.path}: record_run needs a non-empty run_id")
        meta_json = None if meta is None else json.dumps(dict(meta), sort_keys=True, allow_nan=False)
        with self._lock, _named_failures(self.path):
            conn = self._connection()
            cur = conn.execute(
                "INSERT OR IGNORE INTO _runs (run_id, kind, skills_version, prompts_version, questions_ref, meta)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, kind, skills_version, prompts_version, questions_ref, meta_json),
            )
            return cur.rowcount == 1

    def update_run_versions(
        self, run_id: str, skills_version: str | None, prompts_version: str | None, questions_ref: str | None
    ) -> None:
        """Back-fill the version pair and questions reference of an existing run (eval runs)."""
        with self._lock, _named_failures(self.path):
            cur = self._connection().execute(
                "UPDATE _runs SET skills_version = ?, prompts_version = ?, questions_ref = ? WHERE run_id = ?",
                (skills_version, prompts_version, questions_ref, run_id),
            )
            if cur.rowcount != 1:
                raise RunLogError(f"{self.path}: update_run_versions: no run {run_id!r} in _runs (record_run first)")

    # -- generic rows
    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        """INSERT OR IGNORE `rows` into `table` in one transaction; returns how many were new.

        Column names come from the dicts' keys (rows may differ in keys); an
        unknown table or column, a row lacking a NOT NULL column or a NULL in
        one raises RunLogError and nothing is written.
        """
        where = f"{self.path}: insert into {table!r}"
        _check_identifier("table", table, where)
        if not isinstance(rows, (list, tuple)):
            rows = list(rows)
        if not rows:
            return 0
        grouped: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for i, row in enumerate(rows):
            if not (type(row) is dict or isinstance(row, Mapping)) or not row:
                raise RunLogError(f"{where}: row {i} must be a non-empty mapping, got {row!r}")
            cols = tuple(row)
            bucket = grouped.get(cols)
            if bucket is None:
                bucket = grouped[cols] = []
            bucket.append(tuple(row.values()) if type(row) is dict else tuple(row[c] for c in cols))
        with self._lock, _named_failures(self.path):
            conn = self._connection()
            known, required = self._table_columns(conn, table, where)
            for cols in grouped:  # once per column set, not per row
                for c in cols:
                    _check_identifier("column", c, where)
                    if c not in known:
                        raise RunLogError(f"{where}: unknown column {c!r}; table columns are {sorted(known)}")
                absent = sorted(required - set(cols))
                if absent:
                    raise RunLogError(f"{where}: rows lack required column(s) {absent}")
            before = conn.total_changes
            try:  # BEGIN inside: a signal raised just after it returns (SIGTERM's RunKilled) still rolls back
                conn.execute("BEGIN IMMEDIATE")
                for cols, values in grouped.items():
                    # DO NOTHING covers key conflicts only (the idempotent re-insert); unlike OR IGNORE it
                    # does not skip a NULL in a NOT NULL column, so SQLite checks those per row in C
                    sql = (
                        f"INSERT INTO {table} ({', '.join(cols)}) "
                        f"VALUES ({', '.join('?' for _ in cols)}) ON CONFLICT DO NOTHING"
                    )
                    conn.executemany(sql, values)
                conn.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                _rollback(conn)
                raise self._null_error(where, grouped, required, exc) from exc
            except BaseException:
                _rollback(conn)
                raise
            return conn.total_changes - before

    @staticmethod
    def _null_error(where: str, grouped: Mapping[tuple[str, ...], list[tuple[Any, ...]]], required: frozenset[str], exc: sqlite3.IntegrityError) -> RunLogError:
        """The named error for the first row with a NULL in a required column (slow path, failures only)."""
        for cols, values in grouped.items():
            for value_row in values:
                nulls = [c for c, v in zip(cols, value_row) if v is None and c in required]
                if nulls:
                    return RunLogError(f"{where}: NULL in required column(s) {nulls}: {dict(zip(cols, value_row))}")
        return RunLogError(f"{where}: {exc}")

    def _table_columns(self, conn: sqlite3.Connection, table: str, where: str) -> tuple[frozenset[str], frozenset[str]]:
        """(all columns, NOT NULL columns without a default) of `table`."""
        cached = self._columns.get(table)
        if cached is None:  # other modules (observation) may create tables in this file later: look up on miss
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            if not info:
                raise RunLogError(f"{where}: no such table in {self.path}")
            cached = (
                frozenset(r["name"] for r in info),
                frozenset(r["name"] for r in info if r["notnull"] and r["dflt_value"] is None),
            )
            self._columns[table] = cached
        return cached

    def execute_script(self, sql: str) -> None:
        """Run DDL (e.g. `CREATE TABLE IF NOT EXISTS ...` of the observation tables) under the lock."""
        with self._lock, _named_failures(self.path):
            self._connection().executescript(sql)
            self._columns.clear()

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict[str, Any]]:
        """Run one statement under the lock; rows as dicts."""
        with self._lock, _named_failures(self.path):
            cur = self._connection().execute(sql, params)
            return [dict(r) for r in cur.fetchall()]

    # -- asyncio variants (the lock makes them safe from any thread)
    async def arecord_run(self, run_id: str, kind: str, **kwargs: Any) -> bool:
        return await asyncio.to_thread(self.record_run, run_id, kind, **kwargs)

    async def ainsert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        return await asyncio.to_thread(self.insert, table, rows)

    async def aquery(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.query, sql, params)


def connect_readonly(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A `mode=ro` connection to an existing SQLite file; never creates the file."""
    p = Path(path)
    if not p.is_file():
        raise RunLogError(f"run log fragment {p} does not exist")
    uri = f"file:{quote(str(p.resolve()))}?mode=ro"
    with _named_failures(p):
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


class RunLogReader:
    """Read-only view over one or several run-log fragments (in chain order).

    Each call opens fresh `mode=ro` connections, so it sees the writers'
    latest commits and is safe from any thread. `query` runs on each
    fragment and concatenates; a fragment lacking the queried table counts
    as empty, unless every fragment lacks it (then the error is raised).
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.paths = [Path(p) for p in paths]
        if not self.paths:
            raise RunLogError("RunLogReader needs at least one fragment path")
        missing = [str(p) for p in self.paths if not p.is_file()]
        if missing:
            raise RunLogError(f"run log fragment(s) do not exist: {missing}")

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        missing_table: list[sqlite3.OperationalError] = []
        for path in self.paths:
            conn = connect_readonly(path)
            try:
                out.extend(dict(r) for r in conn.execute(sql, params).fetchall())
            except sqlite3.OperationalError as exc:
                if is_file_failure(exc) and "readonly" not in str(exc):  # readonly: a write through this reader
                    raise sqlite_failure(path, "run log fragment", exc) from exc
                if "no such table" not in str(exc):
                    raise RunLogError(f"{path}: {exc} (sql: {sql})") from exc
                missing_table.append(exc)
            except sqlite3.DatabaseError as exc:  # not a database, malformed
                raise sqlite_failure(path, "run log fragment", exc) from exc
            finally:
                conn.close()
        if len(missing_table) == len(self.paths):
            raise RunLogError(f"{[str(p) for p in self.paths]}: {missing_table[0]} (sql: {sql})")
        return out

    def runs(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """`_runs` rows (meta decoded), first fragment wins on a repeated run_id."""
        sql = "SELECT * FROM _runs"
        params: tuple[str, ...] = ()
        if run_id is not None:
            sql, params = sql + " WHERE run_id = ?", (run_id,)
        seen: dict[str, dict[str, Any]] = {}
        for row in self.query(sql + " ORDER BY run_id", params):
            row["meta"] = None if row["meta"] is None else json.loads(row["meta"])
            seen.setdefault(row["run_id"], row)
        return list(seen.values())

    def predictions(
        self,
        run_id: str | None = None,
        run_id_glob: str | None = None,
        exclude_glob: str | None = None,
    ) -> list[dict[str, Any]]:
        """Prediction rows filtered by exact run id and/or SQLite GLOB (and an excluding GLOB).

        Ordered by (run_id, qid, sample_index); a key present in several
        fragments is returned once (the first fragment in chain order wins).
        """
        clauses, params = [], []
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if run_id_glob is not None:
            clauses.append("run_id GLOB ?")
            params.append(run_id_glob)
        if exclude_glob is not None:
            clauses.append("run_id NOT GLOB ?")
            params.append(exclude_glob)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.query(f"SELECT * FROM predictions{where}", params)
        unique: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            unique.setdefault(tuple(row[k] for k in PREDICTION_KEY), row)
        return [unique[k] for k in sorted(unique)]

    def traces(self, run_id: str, qid: str | None = None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM traces WHERE run_id = ?", [run_id]
        if qid is not None:
            sql += " AND qid = ?"
            params.append(qid)
        rows = self.query(sql, params)
        return sorted(rows, key=lambda r: (r["qid"], r["sample_index"], r["step"]))

    # -- asyncio variants
    async def aquery(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.query, sql, params)

    async def apredictions(self, run_id: str | None = None, run_id_glob: str | None = None, exclude_glob: str | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.predictions, run_id, run_id_glob, exclude_glob)

    async def aruns(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.runs, run_id)
