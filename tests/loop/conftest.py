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


def slow_setup(tmp_path: Path, types, per_type: int, **deps):
    """A workspace of one skill file per task type ("<t> v0") and a system prompt, `per_type` questions a type
    ("<t><i>", all validation), and the slow update's SlowDeps over them (`deps` fills or overrides its fields).
    Returns (workspace, deps, skills tree, prompts tree)."""
    from harness import workspace as wsp
    from harness.loop.slow_update import SlowDeps
    from harness.questions import Question
    from harness.tree import HarnessTree

    qfile = tmp_path / "questions.jsonl"
    qfile.write_text("{}\n")
    skills = HarnessTree({f"{t}/SKILL.md": f"{t} v0" for t in types})
    prompts = HarnessTree({"system_prompt.md": "solve"})
    ws = tmp_path / "ws"
    wsp.init_workspace(ws, skills, prompts, str(qfile))
    questions = {f"{t}{i}": Question(f"{t}{i}", t, f"q {t} {i}", "A", ("A", "B")) for t in types for i in range(per_type)}
    slow = SlowDeps(**{"run_name": "t", "epoch": 1, "workspace_dir": ws, "runlog_path": tmp_path / "runlog", "questions": questions,
                       "validation": sorted(questions), "test": [], "llm": None, **deps})
    return ws, slow, skills, prompts
