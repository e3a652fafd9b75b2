"""The oracle: exact expected accuracy of any harness on any pool (no sampling).

For benchmarks and reports ONLY. The training loop never receives an oracle:
no module under harness/loop, harness/evolution or harness/kernel imports
this one (tests/sim/test_no_oracle_import.py enforces it).

It renders the exact system message the solver would read for each question
(harness/contracts/solver.render_system_message) and averages the solver's
P(correct), so it agrees with the mean of many sampled rollouts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from harness.contracts.solver import render_system_message, resolve_skill_file
from harness.evolution.apply import apply_edits
from harness.kernel.types import Edit
from harness.tree import HarnessTree

from .matching import normalize
from .solver import ReadHarness, SolverModel
from .world import World

# |Δ expected accuracy| at or below this is "neutral". A neutral rule changes
# nothing (Δ = 0 exactly); the smallest real insight/trap effect on its task
# type's questions is ~1 pp, so 0.1 pp only absorbs float noise and length cost.
CLASSIFY_THRESHOLD = 0.001

EditClass = Literal["helps", "neutral", "hurts"]


class Oracle:
    def __init__(self, world: World):
        self.world = world
        self._solver = SolverModel(world)

    def p_correct(self, tree: Mapping[str, str], qid: str) -> float:
        question = self.world.question(qid)
        read = self._solver.read(render_system_message(tree, question.task_type))
        return self._solver.p_correct(read, qid)

    def expected_accuracy(self, tree: Mapping[str, str], qids: Iterable[str] | None = None) -> float:
        """Mean P(correct) over `qids` (all questions when None)."""
        ids = [q.qid for q in self.world.questions] if qids is None else list(qids)
        if not ids:
            raise ValueError("expected_accuracy: empty question list")
        unknown = [q for q in ids if q not in self.world.truth]
        if unknown:
            raise KeyError(f"expected_accuracy: qids not in the world: {unknown[:5]}")
        return sum(self.p_correct_each(tree, ids)) / len(ids)

    def p_correct_each(self, tree: Mapping[str, str], qids: Iterable[str]) -> list[float]:
        """P(correct) of each of `qids` (world qids), rendering one system message per task type."""
        reads: dict[str, ReadHarness] = {}
        out = []
        for qid in qids:
            task_type = self.world.truth[qid].task_type
            read = reads.get(task_type)
            if read is None:
                read = reads[task_type] = self._solver.read(render_system_message(tree, task_type))
            out.append(self._solver.p_correct(read, qid))
        return out

    def edit_effect(self, old_tree: Mapping[str, str], new_tree: Mapping[str, str], qids: Iterable[str] | None = None) -> float:
        """expected_accuracy(new) − expected_accuracy(old) on the same questions."""
        ids = [q.qid for q in self.world.questions] if qids is None else list(qids)
        return self.expected_accuracy(new_tree, ids) - self.expected_accuracy(old_tree, ids)

    def classify_edit(self, old_tree: Mapping[str, str], new_tree: Mapping[str, str], qids: Iterable[str] | None = None, threshold: float = CLASSIFY_THRESHOLD) -> EditClass:
        effect = self.edit_effect(old_tree, new_tree, qids)
        if effect > threshold:
            return "helps"
        if effect < -threshold:
            return "hurts"
        return "neutral"

    def best_reachable_tree(self, tree: Mapping[str, str] | None = None) -> HarnessTree:
        """`tree` (default: the base harness) with every insight stated in its task type's
        skill file and every trap removed from every file."""
        base = HarnessTree(dict(tree)) if tree is not None else self.world.base_harness()
        files = dict(base)
        traps = [r for r in self.world.rules.values() if r.kind == "trap"]
        for path, text in list(files.items()):
            lines = [line for line in text.split("\n") if not any(t.norm in normalize(line) for t in traps)]
            files[path] = "\n".join(lines)
        for spec in self.world.task_types:
            path = resolve_skill_file(files, spec.name)
            text = files.get(path, "")
            edits = [Edit(op="add", text=r.text) for r in spec.of_kind("insight")]
            files[path], _ = apply_edits(text, edits, budget=len(edits))
        return HarnessTree(files)
