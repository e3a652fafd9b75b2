"""Measure the sim world's calibration targets (issue 4 item 5). Benchmarks/tests only.

  * base harness accuracy on a validation-sized pool (oracle, and one sampled pass),
  * best reachable harness accuracy (all insights, no traps),
  * the mix of editor proposals by oracle class (helps / neutral / hurts /
    unchanged) from the REAL evolve_single_skill on REAL failure case packs:
    rollouts of the current harness on a diagnosis pool → run_diagnosis →
    per task type evolve_single_skill (edit budget 3→1 over the steps, the
    blacklist of rejected applied edits carried) → Oracle.classify_edit on the
    task type's questions. An oracle gate keeps helping edits (a perfect gate),
    so later steps see a harness that already has some insights,
  * per-question discordance between two samples of the same harness.

Rollouts use a minimal agent loop (one tool call served by SimBenchmark,
then the answer) so this module does not depend on harness/agent/loop.py.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field

from harness.agent.prompts import solver_messages
from harness.contracts.answers import extract_answer
from harness.contracts.solver import resolve_skill_file
from harness.contracts.tool_calls import parse_tool_call, render_tool_result
from harness.evolution.diagnose import run_diagnosis
from harness.evolution.evolve import evolve_single_skill, rejected_summary
from harness.identity import STEP_INDEX, step_run_id
from harness.kernel.types import CaseSample, RejectedEdit
from harness.llm.protocol import ChatMessage, LLMRequest, Role
from harness.sim.benchmark import SimBenchmark
from harness.tree import HarnessTree

from .oracle import Oracle
from .provider import SimProvider
from .world import World, WorldParams

CLASSES = ("helps", "neutral", "hurts", "unchanged")


@dataclass
class Rollout:
    qid: str
    predicted: str | None
    correct: bool
    reasoning: str


async def rollout(provider: SimProvider, bench: SimBenchmark, tree: HarnessTree, qid: str, sample_index: int, max_steps: int = 3) -> Rollout:
    question = bench.world.question(qid)
    messages = solver_messages(tree, question.task_type, question.question, question.choices)
    dispatch = bench.tool_dispatch(question)
    text = ""
    for _ in range(max_steps):
        text = (await provider.complete(LLMRequest.make(Role.SOLVER, messages, sample_index=sample_index))).text
        call = parse_tool_call(text)
        if call is None or dispatch is None:
            break
        result = dispatch(call.name, call.arguments)
        messages = [*messages, ChatMessage("assistant", text), ChatMessage("user", render_tool_result(call.name, str(result)))]
    predicted = extract_answer(text, question.choices).answer
    return Rollout(qid, predicted, bench.score(question, predicted), text)


async def rollouts(provider, bench, tree, qids, sample_index) -> list[Rollout]:
    return list(await asyncio.gather(*(rollout(provider, bench, tree, q, sample_index) for q in qids)))


@dataclass
class CalibrationResult:
    seeds: list[int]
    base_accuracy_oracle: list[float] = field(default_factory=list)
    base_accuracy_sampled: list[float] = field(default_factory=list)
    best_accuracy_oracle: list[float] = field(default_factory=list)
    discordance: list[float] = field(default_factory=list)
    discordance_expected: list[float] = field(default_factory=list)
    proposals: Counter = field(default_factory=Counter)  # class -> count over all evolve calls
    parse_errors: int = 0
    no_change: int = 0
    edit_ops: Counter = field(default_factory=Counter)  # (op, status) -> count
    accuracy_after: list[float] = field(default_factory=list)  # oracle val accuracy after the oracle-gated steps

    @property
    def n_proposals(self) -> int:
        return sum(self.proposals.values())

    @property
    def n_changed(self) -> int:
        return self.proposals["helps"] + self.proposals["neutral"] + self.proposals["hurts"]

    def share_of_changed(self, cls: str) -> float:
        return self.proposals[cls] / self.n_changed if self.n_changed else float("nan")

    def share_of_all(self, cls: str) -> float:
        return self.proposals[cls] / self.n_proposals if self.n_proposals else float("nan")


def split_pools(world: World, val_size: int, diag_size: int, seed: int = 11) -> tuple[list[str], list[str]]:
    qids = [q.qid for q in world.questions]
    random.Random(seed).shuffle(qids)
    return qids[:val_size], qids[val_size : val_size + diag_size]


async def calibrate_world(world: World, result: CalibrationResult, *, val_size: int, diag_size: int, steps: int, max_cases: int = 8) -> None:
    oracle = Oracle(world)
    provider = SimProvider(world)
    bench = SimBenchmark(world)
    tree = world.base_harness()
    val, diag = split_pools(world, val_size, diag_size)

    result.base_accuracy_oracle.append(oracle.expected_accuracy(tree, val))
    result.best_accuracy_oracle.append(oracle.expected_accuracy(oracle.best_reachable_tree(), val))
    first, second = await rollouts(provider, bench, tree, val, 0), await rollouts(provider, bench, tree, val, 1)
    result.base_accuracy_sampled.append(sum(r.correct for r in first) / len(first))
    result.discordance.append(sum(a.correct != b.correct for a, b in zip(first, second)) / len(val))
    ps = oracle.p_correct_each(tree, val)
    result.discordance_expected.append(sum(2 * p * (1 - p) for p in ps) / len(ps))

    blacklist: dict[str, list[RejectedEdit]] = {}
    by_type_qids = {t: world.qids_of(t) for t in world.task_type_names}
    for step in range(1, steps + 1):
        budget = round(3 - 2 * (step - 1) / max(steps - 1, 1))
        run_id = step_run_id("calib", 1, step)
        outcomes = await rollouts(provider, bench, tree, diag, STEP_INDEX * 1 + step)
        failures = [
            CaseSample.of(world.question(o.qid), predicted=o.predicted, correct=False, trace_excerpt=o.reasoning)
            for o in outcomes
            if not o.correct
        ]
        diagnosis = await run_diagnosis(provider, run_id=run_id, failures=failures, concurrency=8, sample_index=STEP_INDEX * 1 + step)
        for task_type in world.task_type_names:
            cases = diagnosis.failures.get(task_type, [])[:max_cases]
            if not cases:
                continue
            skill_file = resolve_skill_file(tree, task_type)
            record = await evolve_single_skill(
                provider,
                task_type=task_type,
                skill_file=skill_file,
                skill_text=tree.get(skill_file, ""),
                case_pack=cases,
                diagnoses=diagnosis.by_task_type.get(task_type, [])[:max_cases],
                rejected=blacklist.get(task_type, []),
                edit_budget=budget,
                sample_index=STEP_INDEX * 1 + step,
            )
            result.parse_errors += bool(record.parse_error)
            result.no_change += bool(record.no_change_reason) and not record.edits  # the editor declined (proposed nothing)
            for a in record.apply_report:
                result.edit_ops[(a.edit.op, a.status)] += 1
            if not record.changed:
                result.proposals["unchanged"] += 1
                continue
            candidate = tree.with_files({skill_file: record.new_text})
            cls = oracle.classify_edit(tree, candidate, by_type_qids[task_type])
            result.proposals[cls] += 1
            if cls == "helps":
                tree = candidate
            else:
                blacklist.setdefault(task_type, []).append(RejectedEdit(task_type, skill_file, rejected_summary(record), 1, step))
    result.accuracy_after.append(oracle.expected_accuracy(tree, val))


def run_calibration(seeds: list[int], *, val_size: int = 220, diag_size: int = 220, steps: int = 5, params: WorldParams | None = None) -> CalibrationResult:
    result = CalibrationResult(seeds=list(seeds))
    for seed in seeds:
        world = World.generate(seed, params=params)
        asyncio.run(calibrate_world(world, result, val_size=val_size, diag_size=diag_size, steps=steps))
    return result
