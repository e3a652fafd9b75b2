"""Content-addressed LLM response cache shared by every stage (`llm.cache_dir`).

Key: sha256 of the canonical JSON of (the provider's `request_identity`:
provider, endpoint, model and every sampling parameter as sent, defaults and
seed included; messages; sample_index). A re-run of the same work is served
from the cache (zero provider calls); a new sample index is a new key, hence
a fresh sample; another server (another base URL) or another temperature or
max_tokens of any role is another key, so it is never answered from this
one's replies.

Storage: one SQLite file in WAL mode with a busy timeout, so several
processes (DVC stages, sweep jobs) and threads can read and write at once.
`INSERT OR IGNORE` then read back: when two writers race on one key, every
caller returns the row that won, so all stages agree on the sample.
Failed calls (LLMError) are never stored. A reply that UTF-8 cannot hold
(lone surrogates such as "\\ud800", valid in JSON) is stored escaped and
replayed exactly (`encode_text` / `decode_text`), so it is paid once.

A failure of the cache file itself (full disk, read-only file, corrupt
database) raises `LocalStoreError` naming the file and the cause: it is
ours, never recorded as the provider's infra failure.

Integrity: every row carries `checksum`, the sha256 of its key (the request
identity) and its stored content (provider, model, text, tokens, cost,
log-probabilities). `get` recomputes it: a row that does not match (a flipped
letter, a row copied under another key, an edited logprobs field) is named
with the cache file and key in a warning, deleted and counted
(`cache_stats.corrupt`), and the request is paid again, never replayed.
Rows of a cache file written before checksums existed are adopted when the
file is opened: their checksum is computed from what they hold (they were
written by this code; nothing older can be verified, and re-paying every
cached call would change every resumed run's samples).
A reply holding lone surrogates (valid JSON escapes such as "\\ud800", not
valid Unicode) is a malformed reply: `CachedProvider` replaces each with
U+FFFD and logs it before storing, so the stage and every replay see the same
writable text; an older cache row holding one is replayed with the same
replacement. No later run meets text that cannot be written as UTF-8 (an
editor reply holding "\\ud800" once crashed the write of evolve.json).

Statistics: each `ResponseCache` counts its own hits, misses and USD saved
(`stats`); `flush_stats()` adds them to persisted totals (`persisted_stats()`)
that survive the process, so a pipeline stage can report them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contracts.logprobs import TokenLogprob, logprobs_from_json
from harness.llm.protocol import CacheableProvider, LLMRequest, LLMResponse, LocalStoreError, Role, Usage

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
DB_FILENAME = "responses.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    created_at REAL NOT NULL,
    logprobs TEXT,
    checksum TEXT
);
CREATE TABLE IF NOT EXISTS cache_stats (
    name TEXT PRIMARY KEY,
    value REAL NOT NULL
);
INSERT OR IGNORE INTO cache_stats (name, value) VALUES ('hits', 0), ('misses', 0), ('usd_saved', 0), ('corrupt', 0);
"""


IDENTITY_FIELDS = ("provider", "endpoint", "model", "params")


def cache_key(identity: Mapping[str, Any], request: LLMRequest) -> str:
    """sha256 hex of the canonical JSON of what determines a response: the provider's `request_identity(request)`
    (IDENTITY_FIELDS, ValueError naming a missing one), the messages and the sample index."""
    missing = [name for name in IDENTITY_FIELDS if name not in identity]
    if missing:
        raise ValueError(f"request identity lacks {missing} (has {sorted(identity)}); a cache key needs {list(IDENTITY_FIELDS)}")
    payload = {
        "identity": dict(identity),
        "messages": [m.to_dict() for m in request.messages],
        "sample_index": int(request.sample_index),
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # surrogatepass: a conversation holding a lone surrogate still has a key (valid text hashes as plain UTF-8)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


_ROW_COLUMNS = "provider, model, text, prompt_tokens, completion_tokens, cost_usd, logprobs"


def row_checksum(key: str, row: tuple[Any, ...]) -> str:
    """sha256 hex of a cache row's key and its stored content (`_ROW_COLUMNS`, as stored)."""
    provider, model, text, prompt_tokens, completion_tokens, cost, logprobs = row
    canonical = json.dumps([key, provider, model, text, int(prompt_tokens), int(completion_tokens), repr(float(cost)), logprobs],
                           ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def replace_lone_surrogates(text: str) -> tuple[str, int]:
    """(`text` with each lone surrogate replaced by U+FFFD, how many there were): valid Unicode, writable as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
        return fixed, sum(1 for ch in text if "\ud800" <= ch <= "\udfff")
    return text, 0


_ESCAPED = "\ufffejson:"  # a noncharacter: no model writes it; marks a text stored as ASCII JSON


def encode_text(text: str) -> str:
    """`text` as SQLite can store it: itself, or (lone surrogates, or the marker itself) escaped JSON."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ESCAPED + json.dumps(text, ensure_ascii=True)
    return _ESCAPED + json.dumps(text, ensure_ascii=True) if text.startswith(_ESCAPED) else text


def decode_text(stored: str) -> str:
    """The exact text `encode_text` was given."""
    return json.loads(stored[len(_ESCAPED):]) if stored.startswith(_ESCAPED) else stored


_ADVICE = (
    ("full", "free disk space"),
    ("readonly", "make the file and its directory writable"),
    ("read-only", "make the file and its directory writable"),
    ("not a database", "move the file aside (a new cache is started; its calls are paid again)"),
    ("malformed", "move the file aside (a new cache is started; its calls are paid again)"),
)


def _local_failure(path: Path, action: str, error: BaseException) -> LocalStoreError:
    cause = str(error) or type(error).__name__
    if isinstance(error, OSError) and error.strerror:
        cause = error.strerror
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        cause += ": read-only file or directory"  # SQLite says only "unable to open database file"
    advice = next((hint for word, hint in _ADVICE if word in cause.lower()), "fix the file or set llm.cache_dir")
    return LocalStoreError(f"{path}: LLM response cache: {action} failed ({cause}); {advice}, then re-run the stage")


@dataclass(frozen=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    usd_saved: float = 0.0

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats(self.hits + other.hits, self.misses + other.misses, self.usd_saved + other.usd_saved)


@dataclass(frozen=True)
class CachedEntry:
    provider: str
    model: str
    text: str
    usage: Usage
    cost_usd: float
    latency_s: float
    logprobs: tuple[TokenLogprob, ...] | None = None


def _retry_busy(step: Any, deadline: float) -> Any:
    """Run `step()` again, after a short randomized back-off, while SQLite says the database is locked or busy and
    `deadline` (time.monotonic) is not past. Processes opening one fresh cache file at once race for the lock that
    switches it to WAL (or creates its schema); SQLite answers the loser of that lock upgrade "database is locked" at
    once, without its busy handler (deadlock avoidance), so busy_timeout alone does not cover the open."""
    delay = 0.005
    while True:
        try:
            return step()
        except sqlite3.OperationalError as error:
            text = str(error).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(2 * delay, 0.25)


class ResponseCache:
    """SQLite response store; one connection per instance, guarded by a lock (thread-safe).

    `path` is a directory (the file `responses.sqlite` inside it is used) or a
    `.sqlite`/`.db` file. Open one instance per process (never share across fork).
    """

    def __init__(self, path: str | Path):
        target = Path(path)
        if target.suffix not in (".sqlite", ".db"):
            target = target / DB_FILENAME
        self.path = target
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        with self._local("opening"):
            target.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn = self._conn
            deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
            mode = _retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0], deadline)
            if str(mode).lower() != "wal":
                raise LocalStoreError(f"{target}: could not switch the response cache to WAL mode (got {mode!r})")
            conn.execute("PRAGMA synchronous=NORMAL")

            def schema() -> list:
                with self._transaction(conn):
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        conn.execute(statement)
                    columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
                    if "logprobs" not in columns:  # a cache file written before token log-probabilities were stored
                        conn.execute("ALTER TABLE responses ADD COLUMN logprobs TEXT")
                    adopted = []
                    if "checksum" not in columns:  # written before checksums: its rows are adopted, once
                        conn.execute("ALTER TABLE responses ADD COLUMN checksum TEXT")
                        adopted = conn.execute(f"SELECT key, {_ROW_COLUMNS} FROM responses").fetchall()
                        conn.executemany("UPDATE responses SET checksum = ? WHERE key = ?",
                                         [(row_checksum(r[0], tuple(r[1:])), r[0]) for r in adopted])
                return adopted

            adopted = _retry_busy(schema, deadline)
            if adopted:
                logger.info("%s: %d response-cache entries written before checksums were adopted (checksums computed "
                            "from their content)", target, len(adopted))
        self._stats = CacheStats()
        self._unflushed = CacheStats()

    @contextlib.contextmanager
    def _local(self, action: str) -> Iterator[None]:
        """Turn a failure of the cache file into a one-line `LocalStoreError` naming it."""
        try:
            yield
        except (sqlite3.Error, OSError) as error:
            raise _local_failure(self.path, action, error) from None

    @staticmethod
    @contextlib.contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
        try:  # BEGIN inside: a signal raised just after it returns still rolls back
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have ended the transaction already
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            raise

    # -- lifecycle
    def close(self) -> None:
        """Persist the counters (a failure is a warning: they are statistics) and close the file."""
        try:
            self.flush_stats()
        except LocalStoreError as error:
            logger.warning("%s (cache statistics of this process not saved)", error)
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"{self.path}: response cache is closed")
        return self._conn

    # -- entries
    def get(self, key: str) -> CachedEntry | None:
        """The entry of `key`, verified against its checksum; None when absent, or when it did not match (the row
        is then deleted, counted in `cache_stats.corrupt` and named in a warning: the caller pays for it again)."""
        with self._lock, self._local("reading"):
            row = self._connection().execute(
                f"SELECT {_ROW_COLUMNS}, latency_s, checksum FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        content, latency, checksum = tuple(row[:7]), row[7], row[8]
        if checksum != row_checksum(key, content):
            self._drop_corrupt(key, "its content does not match its checksum")
            return None
        provider, model, stored_text, prompt_tokens, completion_tokens, cost, stored_logprobs = content
        try:
            logprobs = None if stored_logprobs is None else logprobs_from_json(json.loads(stored_logprobs))
            text = decode_text(stored_text)
        except ValueError as exc:  # checksum right, content unreadable: written so by a bug, not the provider's fault
            raise LocalStoreError(f"{self.path}: LLM response cache entry {key}: unreadable ({exc}); move the file aside "
                                  "(a new cache is started; its calls are paid again), then re-run the stage") from None
        text, surrogates = replace_lone_surrogates(text)
        if surrogates:
            logger.warning("%s: cached reply %s holds %d lone surrogate(s) (a malformed reply): replayed with U+FFFD",
                           self.path, key, surrogates)
        return CachedEntry(provider, model, text, Usage(int(prompt_tokens), int(completion_tokens)), float(cost), float(latency), logprobs)

    def _drop_corrupt(self, key: str, why: str) -> None:
        logger.warning("%s: LLM response cache entry %s: %s; it is deleted and the request is sent again", self.path, key, why)
        with self._lock, self._local("deleting a corrupt entry"):
            conn = self._connection()
            with self._transaction(conn):
                conn.execute("DELETE FROM responses WHERE key = ?", (key,))
                conn.execute("UPDATE cache_stats SET value = value + 1 WHERE name = 'corrupt'")

    def corrupt_count(self) -> int:
        """Entries found corrupt (and deleted) over every process that used this cache file."""
        with self._lock, self._local("reading statistics"):
            row = self._connection().execute("SELECT value FROM cache_stats WHERE name = 'corrupt'").fetchone()
        return int(row[0]) if row else 0

    def put(self, key: str, response: LLMResponse) -> CachedEntry:
        """Store `response` unless the key exists; return the stored entry (the race winner's)."""
        logprobs = None if response.logprobs is None else json.dumps([t.to_json() for t in response.logprobs], ensure_ascii=True)
        content = (response.provider, response.model, encode_text(response.text), int(response.usage.prompt_tokens),
                   int(response.usage.completion_tokens), float(response.cost_usd), logprobs)
        row = (key, *content, float(response.latency_s), time.time(), row_checksum(key, content))
        with self._lock, self._local("writing a reply"):
            conn = self._connection()
            with self._transaction(conn):
                inserted = conn.execute(
                    f"INSERT OR IGNORE INTO responses (key, {_ROW_COLUMNS}, latency_s, created_at, checksum) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row).rowcount == 1
        if inserted:
            return CachedEntry(response.provider, response.model, response.text, response.usage, float(response.cost_usd),
                               float(response.latency_s), response.logprobs)
        stored = self.get(key)  # another writer won the race: everyone uses its sample
        if stored is None:
            raise RuntimeError(f"{self.path}: cache row {key} vanished right after INSERT OR IGNORE")
        return stored

    def __len__(self) -> int:
        with self._lock, self._local("counting"):
            return int(self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    # -- statistics
    def record_hit(self, usd_saved: float) -> None:
        delta = CacheStats(hits=1, usd_saved=usd_saved)
        with self._lock:
            self._stats += delta
            self._unflushed += delta

    def record_miss(self) -> None:
        delta = CacheStats(misses=1)
        with self._lock:
            self._stats += delta
            self._unflushed += delta

    @property
    def stats(self) -> CacheStats:
        """This instance's hits, misses and USD saved since it was opened."""
        return self._stats

    def flush_stats(self) -> None:
        """Add this instance's not-yet-persisted counts to the totals in the database."""
        with self._lock:
            if self._conn is None:
                return
            pending = self._unflushed
            if pending == CacheStats():
                return
            conn = self._conn
            with self._local("saving statistics"), self._transaction(conn):
                for name, value in (("hits", pending.hits), ("misses", pending.misses), ("usd_saved", pending.usd_saved)):
                    conn.execute("UPDATE cache_stats SET value = value + ? WHERE name = ?", (value, name))
            self._unflushed = CacheStats()

    def persisted_stats(self) -> CacheStats:
        """Totals over every process that flushed into this cache file."""
        with self._lock, self._local("reading statistics"):
            values = dict(self._connection().execute("SELECT name, value FROM cache_stats").fetchall())
        return CacheStats(int(values.get("hits", 0)), int(values.get("misses", 0)), float(values.get("usd_saved", 0.0)))


class CachedProvider:
    """An LLMProvider that answers from `cache` and calls `inner` only on a miss.

    A hit costs nothing (`cost_usd=0`, `cached=True`; the original cost is
    counted as saved). Concurrent identical requests in this process share
    one inner call. LLMError from `inner` propagates and is not stored.
    """

    def __init__(self, inner: CacheableProvider, cache: ResponseCache):
        if not callable(getattr(inner, "request_identity", None)):
            raise TypeError(f"{type(inner).__name__} cannot be cached: it has no request_identity(request) saying which "
                            "endpoint, model and sampling parameters answer a request (harness/llm/protocol.CacheableProvider)")
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.structured_output = getattr(inner, "structured_output", None)  # a declared capability passes through
        self._in_flight: dict[str, asyncio.Future[LLMResponse]] = {}

    def model_for(self, role: Role) -> str:
        return self.inner.model_for(role)

    def request_identity(self, request: LLMRequest) -> dict[str, Any]:
        return self.inner.request_identity(request)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        key = cache_key(self.inner.request_identity(request), request)
        entry = self.cache.get(key)
        if entry is not None:
            self.cache.record_hit(entry.cost_usd)
            return _from_entry(entry, latency_s=time.perf_counter() - started, cost_usd=0.0, cached=True, replayed_usd=entry.cost_usd)
        pending = self._in_flight.get(key)
        if pending is not None:  # same request already on its way: wait for it instead of paying twice
            response = await asyncio.shield(pending)
            self.cache.record_hit(response.cost_usd)
            return _replace_cost(response, latency_s=time.perf_counter() - started)
        future: asyncio.Future[LLMResponse] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            self.cache.record_miss()
            response = await self.inner.complete(request)
            text, surrogates = replace_lone_surrogates(response.text)
            if surrogates:  # a malformed reply: kept (the parser may still read it), but as valid Unicode
                logger.warning("malformed reply of model %s (%s): %d lone surrogate(s) replaced with U+FFFD",
                               response.model, request.role.value, surrogates)
                response = dataclasses.replace(response, text=text)
            stored = self.cache.put(key, response)
            if stored.text != response.text:  # another process stored this key first: use its sample
                response = _from_entry(stored, latency_s=response.latency_s, cost_usd=response.cost_usd, cached=False)
            future.set_result(response)
            return response
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: nobody may be waiting
            raise
        finally:
            del self._in_flight[key]

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()


def _from_entry(entry: CachedEntry, *, latency_s: float, cost_usd: float, cached: bool, replayed_usd: float = 0.0) -> LLMResponse:
    return LLMResponse(
        text=entry.text,
        model=entry.model,
        provider=entry.provider,
        usage=entry.usage,
        cost_usd=cost_usd,
        latency_s=latency_s,
        cached=cached,
        replayed_usd=replayed_usd,
        logprobs=entry.logprobs,
    )


def _replace_cost(response: LLMResponse, *, latency_s: float) -> LLMResponse:
    return LLMResponse(
        text=response.text, model=response.model, provider=response.provider, usage=response.usage, cost_usd=0.0, latency_s=latency_s, cached=True,
        replayed_usd=response.cost_usd, logprobs=response.logprobs,
    )
