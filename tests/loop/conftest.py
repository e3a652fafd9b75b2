"""Fixtures of the loop tests: a tiny simulated training run (train=tiny) with a call-counting provider."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


class Interrupt(BaseException):
    """Simulated kill (not an Exception: nothing in the loop may swallow it)."""


class CountingProvider:
    """Wraps the real provider under the cache: counts the calls that reached it (and can die after N)."""

    def __init__(self, inner, die_after: int | None = None):
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.die_after = die_after

    def model_for(self, role):
        return self.inner.model_for(role)

    def request_identity(self, request):
        return self.inner.request_identity(request)

    async def complete(self, request):
        if self.die_after is not None and self.calls >= self.die_after:
            raise Interrupt(f"killed after {self.calls} provider calls")
        response = await self.inner.complete(request)
        self.calls += 1
        return response


def tiny_cfg(*overrides: str):
    from harness.config.load import load_config

    return load_config(["train=tiny", *overrides], env_file=None, environ={})


class FrozenEditor:
    """Editor that never changes anything (edit-ops: <no-change>; momentum: unparseable, so the guidance is kept)."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def model_for(self, role):
        return self.inner.model_for(role)

    def request_identity(self, request):
        return self.inner.request_identity(request)

    async def complete(self, request):
        from harness.llm.protocol import LLMResponse

        system = request.messages[0].content
        if "FORMAT: edit-ops" in system:
            return LLMResponse(text="<no-change>frozen for the test</no-change>", model="frozen", provider=self.name)
        if "FORMAT: momentum" in system:
            return LLMResponse(text="no guidance", model="frozen", provider=self.name)
        return await self.inner.complete(request)


def make_runner(root: Path, cfg, die_after: int | None = None, wrap=None):
    """A Runner whose provider is CachedProvider(CountingProvider(SimProvider)) over root/.cache/llm."""
    from harness.compose import build_benchmark, build_provider
    from harness.llm.cache import CachedProvider, ResponseCache
    from harness.loop.runner import Runner

    bench = build_benchmark(cfg.benchmark, root)
    inner = build_provider(cfg.llm, world=bench.world)
    counting = CountingProvider(wrap(inner) if wrap else inner, die_after=die_after)
    cache = ResponseCache(root / ".cache" / "llm")
    runner = Runner(cfg, root, llm=CachedProvider(counting, cache), bench=bench)
    return runner, counting, cache


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """One uninterrupted tiny training run, shared by the read-only tests."""
    root = tmp_path_factory.mktemp("tiny_run")
    cfg = tiny_cfg()
    runner, counting, cache = make_runner(root, cfg)
    result = runner.train()
    cache.close()
    return {"root": root, "cfg": cfg, "runner": runner, "result": result, "calls": counting.calls}
