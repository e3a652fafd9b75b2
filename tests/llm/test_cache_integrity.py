"""Response-cache integrity (issue 31 item 2): every entry's checksum covers its content and its key; a mismatch is
named (file, key), the entry deleted and paid again, never replayed. Real SQLite files edited as a tester would."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path

import pytest

from harness.contracts.logprobs import TokenLogprob
from harness.llm.cache import CachedProvider, ResponseCache, encode_text
from harness.llm.protocol import ChatMessage, LLMRequest, LLMResponse, Role, Usage

pytestmark = pytest.mark.timeout(60)


class Numbered:
    """Answers `reply <n>` (n = calls so far), with one token log-probability, so a second payment is visible."""

    name = "numbered"

    def __init__(self) -> None:
        self.calls = 0

    def model_for(self, role: Role) -> str:
        return "m"

    def request_identity(self, request: LLMRequest) -> dict:
        return {"provider": self.name, "endpoint": "in-process", "model": "m", "params": request.params_dict}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        return LLMResponse(text=f"reply {self.calls}\nANSWER: B", model="m", provider=self.name, usage=Usage(4, 2), cost_usd=0.01,
                           logprobs=(TokenLogprob("B", -0.1, (("B", -0.1), ("A", -2.3))),))


def ask(provider: CachedProvider, *texts: str) -> list[LLMResponse]:
    async def go():
        return [await provider.complete(LLMRequest(Role.SOLVER, (ChatMessage("user", t),))) for t in texts]

    return asyncio.run(go())


def db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "responses.sqlite")


def fill(root: Path, *texts: str) -> Numbered:
    inner = Numbered()
    with ResponseCache(root) as cache:
        ask(CachedProvider(inner, cache), *texts)
    return inner


def test_a_flipped_letter_is_named_deleted_and_paid_again(tmp_path, caplog):
    inner = fill(tmp_path, "q1", "q2")
    with db(tmp_path) as conn:
        (key,) = conn.execute("SELECT key FROM responses WHERE text LIKE 'reply 1%'").fetchone()
        conn.execute("UPDATE responses SET text = replace(text, 'ANSWER: B', 'ANSWER: C') WHERE key = ?", (key,))
    with caplog.at_level(logging.WARNING, logger="harness.llm.cache"), ResponseCache(tmp_path) as cache:
        first, second = ask(CachedProvider(inner, cache), "q1", "q2")
        assert cache.corrupt_count() == 1
    assert inner.calls == 3  # the corrupt entry was paid again, the intact one replayed
    assert first.text == "reply 3\nANSWER: B" and not first.cached and second.cached
    assert f"{tmp_path / 'responses.sqlite'}: LLM response cache entry {key}: its content does not match its checksum" in caplog.text


def test_an_entry_copied_under_another_key_is_not_replayed(tmp_path):
    inner = fill(tmp_path, "q1", "q2")
    with db(tmp_path) as conn:  # both rows swap their replies (and checksums): each now sits under the wrong key
        rows = dict(conn.execute("SELECT key, text || char(1) || checksum FROM responses").fetchall())
        (k1, v1), (k2, v2) = rows.items()
        for key, value in ((k1, v2), (k2, v1)):
            text, checksum = value.split("\x01")
            conn.execute("UPDATE responses SET text = ?, checksum = ? WHERE key = ?", (text, checksum, key))
    with ResponseCache(tmp_path) as cache:
        replies = ask(CachedProvider(inner, cache), "q1", "q2")
        assert cache.corrupt_count() == 2
    assert inner.calls == 4 and not any(r.cached for r in replies)


def test_an_edited_logprobs_field_is_the_caches_fault_named_not_the_providers(tmp_path, caplog):
    inner = fill(tmp_path, "q1")
    with db(tmp_path) as conn:
        conn.execute("UPDATE responses SET logprobs = ?", (json.dumps([{"token": "B", "logprob": "not a number"}]),))
    with caplog.at_level(logging.WARNING, logger="harness.llm.cache"), ResponseCache(tmp_path) as cache:
        (reply,) = ask(CachedProvider(inner, cache), "q1")
    assert inner.calls == 2 and reply.logprobs is not None and reply.logprobs[0].logprob == -0.1
    assert "responses.sqlite: LLM response cache entry" in caplog.text and "does not match its checksum" in caplog.text


def test_a_cache_written_before_checksums_is_adopted_once_and_then_verified(tmp_path):
    inner = fill(tmp_path, "q1")
    with db(tmp_path) as conn:  # the schema of a cache file written before checksums
        conn.execute("ALTER TABLE responses DROP COLUMN checksum")
    with ResponseCache(tmp_path) as cache:
        (reply,) = ask(CachedProvider(inner, cache), "q1")
    assert reply.cached and inner.calls == 1  # adopted: replayed, not paid again
    with db(tmp_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM responses WHERE checksum IS NULL").fetchone()[0] == 0
        conn.execute("UPDATE responses SET text = 'tampered'")
    with ResponseCache(tmp_path) as cache:
        (reply,) = ask(CachedProvider(inner, cache), "q1")
    assert not reply.cached and inner.calls == 2  # from then on it is verified


def test_an_old_row_holding_a_lone_surrogate_replays_as_valid_unicode(tmp_path, caplog):
    inner = fill(tmp_path, "q1")
    with db(tmp_path) as conn:  # what an older version stored for an editor reply holding "\ud800"
        conn.execute("ALTER TABLE responses DROP COLUMN checksum")
        conn.execute("UPDATE responses SET text = ?", (encode_text("edits \ud800 here"),))
    with caplog.at_level(logging.WARNING, logger="harness.llm.cache"), ResponseCache(tmp_path) as cache:
        (reply,) = ask(CachedProvider(inner, cache), "q1")
    assert reply.cached and reply.text == "edits \ufffd here" and inner.calls == 1
    assert "holds 1 lone surrogate(s) (a malformed reply)" in caplog.text
