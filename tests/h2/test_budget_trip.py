"""No paid call of any role after the budget gate trips (issue 28 item 6a).

Every call of a round is recorded in order by real classes: the toy task's executions and a `FunctionResponder`
per role (tests/h2/conftest.py), or a counting wrapper around the simulated provider. The invariant: a call is made
only while the spend booked before it is below `budget_usd` and, for the session cap, never after the first refused
call. The bug this guards: the spend reached the budget with the last final probe, and the selector (and then the
reflector) was still called.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.h2.adapters import QuestionTaskAdapter
from harness.h2.library import Library
from harness.h2.roles import FORMAT_RETRY_SUFFIX, Editor, FunctionResponder, Reflector, Roles, Selector
from harness.h2.run import improve_task
from harness.llm.protocol import LLMProvider, LLMRequest, LLMResponse
from harness.sim.provider import SimProvider
from harness.sim.world import World

from .conftest import ToyTask, good_reflection, leveller, pick_highest

USD = 0.25  # every call costs this: sums stay exact in binary floating point


def _timeline_roles(timeline: list[str], editor=leveller) -> Roles:
    def recorded(role_name, fn):
        def call(role, messages, key):
            timeline.append(f"{role_name} {key}")
            return fn(role, messages, key)
        return FunctionResponder(call, USD)

    return Roles(editor=Editor(recorded("editor", editor)), selector=Selector(recorded("selector", pick_highest)),
                 reflector=Reflector(recorded("reflector", good_reflection)))


@dataclass
class RecordingToy(ToyTask):
    timeline: list[str] = field(default_factory=list)

    async def execute(self, label, harness):
        self.timeline.append(f"probe {label}")
        return await super().execute(label, harness)


def _round(tmp_path: Path, name: str, **budget):
    timeline: list[str] = []
    task = RecordingToy(usd=USD, timeline=timeline)
    library = Library(tmp_path / name / "lib", "t1", "parallel", "toys")
    result = asyncio.run(improve_task(task, _timeline_roles(timeline), work_dir=tmp_path / name / "w", k=2, mode="parallel",
                                      run_tag="t1", library=library, **budget))
    return result, timeline, library


def test_unbudgeted_k2_round_calls_the_selector_and_the_reflector(tmp_path: Path) -> None:
    result, timeline, library = _round(tmp_path, "free")
    # base + 4 proposals + 4 probes + 2 compositions + 2 finals, then selection and reflection
    assert len(timeline) == 15 and timeline[-2].startswith("selector") and timeline[-1].startswith("reflector")
    assert result.summary["selection"]["method"] == "selector" and len(library.entries()) == 1


@pytest.mark.parametrize("calls_paid", [13, 12, 6, 1])
def test_a_usd_budget_reached_mid_round_stops_every_paid_call(tmp_path: Path, calls_paid: int) -> None:
    """budget = the cost of the first `calls_paid` calls: 13 = reached exactly by the last final probe (the selector
    bug), 12 = by the first final, 6 = mid-proposals, 1 = by the base rollout."""
    budget = USD * calls_paid
    result, timeline, library = _round(tmp_path, f"usd{calls_paid}", budget_usd=budget)
    assert len(timeline) == calls_paid, timeline  # each call was made with less than the budget spent before it
    assert not any(c.startswith(("selector", "reflector")) for c in timeline)
    summary = result.summary
    assert summary["budget"]["tripped"].startswith(f"budget_usd {budget:.4f}")
    assert summary["ledger"]["total_usd"] == budget
    assert "not written: budget gate tripped" in summary["library"] and library.entries() == []
    if calls_paid == 13:  # two live finals: the selection falls back instead of calling the selector
        assert summary["selection"]["method"] == "fallback" and "selector not called, budget gate closed" in summary["selection"]["error"]
        assert any(r.startswith("selector select: budget_usd") for r in summary["budget"]["refused"])


def test_a_session_cap_tripped_mid_round_stops_every_call(tmp_path: Path) -> None:
    """max_sessions 7 (k = 2 needs 12): the 8th counted call is refused; nothing of any role is called after it."""
    result, timeline, library = _round(tmp_path, "cap", max_sessions=7)
    counted = [c for c in timeline if not c.startswith(("selector", "reflector")) and "-base-" not in c]
    assert len(counted) == 7 and timeline[-1] == counted[-1]  # the last call made is the 7th counted one
    assert result.summary["budget"]["tripped"] == "max_sessions 7 reached"
    assert library.entries() == []


def test_no_format_retry_once_the_first_attempt_reached_the_budget(tmp_path: Path) -> None:
    """The format retry (`.fmt2`) is not counted against max_sessions but is paid: the gate is asked first."""
    timeline: list[str] = []
    task = RecordingToy(usd=USD, timeline=timeline)
    roles = _timeline_roles(timeline, editor=lambda role, messages, key: "<notes>I improved it</notes>")  # no blocks
    result = asyncio.run(improve_task(task, roles, work_dir=tmp_path / "w", k=1, run_tag="t1", budget_usd=2 * USD))
    assert len(timeline) == 2 and not any(c.endswith(FORMAT_RETRY_SUFFIX) for c in timeline), timeline
    inv = result.summary["stages"][0]
    assert inv["status"] == "fallback" and inv["detail"].startswith("budget gate closed before the format retry: budget_usd")


@dataclass
class CountingProvider:
    """A real provider around another: records (role, cost) of every completed call, in order."""

    inner: LLMProvider
    calls: list[tuple[str, float]] = field(default_factory=list)
    name: str = "counting"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.inner.complete(request)
        self.calls.append((request.role.value, response.cost_usd))
        return response


def _sim_round(tmp_path: Path, name: str, budget_usd: float | None):
    world = World.generate(seed=3, n_task_types=3, questions_per_type=12, n_choices=4)
    priced = SimProvider(world, type("LLM", (), {"prices": {"sim-solver-1": {"input": 1.0, "output": 2.0}}})())
    provider = CountingProvider(priced)
    task_type = world.questions[0].task_type
    questions = [q for q in world.questions if q.task_type == task_type][:6]
    task = QuestionTaskAdapter(f"{task_type}-0", task_type, questions, world.base_harness(), provider)
    library = Library(tmp_path / name / "lib", "simt", "parallel", task_type)
    result = asyncio.run(improve_task(task, Roles.from_provider(provider), work_dir=tmp_path / name / "w", k=2, mode="parallel",
                                      run_tag="simt", library=library, budget_usd=budget_usd))
    return result, provider, json.loads((tmp_path / name / "w" / "ledger.json").read_text())


def test_sim_provider_budget_reached_by_the_last_final_calls_no_selector_or_reflector(tmp_path: Path) -> None:
    free, free_provider, ledger = _sim_round(tmp_path, "free", None)
    roles = Counter(role for role, _ in free_provider.calls)
    assert roles["selector"] == 1 and roles["reflector"] == 1 and free.summary["selection"]["method"] == "selector"
    last_final = max(i for i, e in enumerate(ledger) if e["kind"] == "rollout")  # final2, the last probe
    budget = 0.0
    for entry in ledger[: last_final + 1]:  # the same order and sums as the gate's ledger
        budget += entry["usd"]
    assert budget > 0

    capped, provider, _ = _sim_round(tmp_path, "capped", budget)
    counted = Counter(role for role, _ in provider.calls)
    assert counted["selector"] == 0 and counted["reflector"] == 0
    assert counted["editor"] == roles["editor"] and counted["solver"] == roles["solver"]  # the round up to the trip is unchanged
    assert capped.summary["selection"]["method"] == "fallback" and capped.summary["ledger"]["total_usd"] == budget
    assert "not written: budget gate tripped" in capped.summary["library"]
