"""The simulated solver: reads the real solver prompt, answers in the real format.

The system message (harness/contracts/solver.py) is parsed once per distinct
text and cached: its content hash, the world rules it states, and the length
of its always-on part (system prompt + tool guides). A sample is a pure
function of (world seed, qid, content hash, sample index), so re-asking the
same harness with the same index gives the same answer, and a new index is a
fresh Bernoulli draw with the same P(correct).

What the reply *says* is a noisy behavioural signal, drawn from the sampled
outcome (never from P or the rules): the solver states ``Confidence: high``
with `confidence_when_right` when its sampled answer is right and with
`confidence_when_wrong` when it is wrong (AUROC 0.5 + (right − wrong) / 2 as
a correctness detector), and its reasoning names one cue of the task type
whether it is right or wrong, so no wording gives the answer away. The
say-draws use their own hash key, so correctness, letters and tool calls are
the same draws as without them.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from harness.contracts.solver import LETTERS, SECTION_SKILL, SECTION_TOOLS
from harness.contracts.tool_calls import render_tool_call

from .matching import normalize
from .world import World

_MAX_CACHE = 4096


@dataclass(frozen=True)
class ReadHarness:
    """What the solver takes from one system message."""

    content_hash: str
    stated: frozenset[str]  # ids of world rules stated anywhere in the message
    always_on_chars: int
    length_cost: float  # logit penalty for always-on text beyond the budget
    tools: tuple[str, ...]


@dataclass(frozen=True)
class SolverDraw:
    correct: bool
    letter: str
    p_correct: float
    hint_rule: str | None  # rule id whose cue the wrong answer's reasoning names
    call_tool: bool
    hint_cue: str = ""
    confident: bool = False  # what the reply states; noisy in correctness (module docstring)
    said_cue: str = ""  # the cue the reasoning names (the hint cue when wrong)


def uniforms(key: str, n: int) -> list[float]:
    """n deterministic uniforms in [0, 1) from a string key (blake2b, 8 bytes each)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8 * n).digest()
    return [int.from_bytes(digest[8 * i : 8 * i + 8], "big") / 2.0**64 for i in range(n)]


def logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class SolverModel:
    """P(correct) and deterministic samples for a world; caches per system message."""

    def __init__(self, world: World):
        self.world = world
        self._reads: dict[str, ReadHarness] = {}
        self._rule_norms = [(rid, r.norm) for rid, r in world.rules.items()]

    def read(self, system_message: str) -> ReadHarness:
        cached = self._reads.get(system_message)
        if cached is not None:
            return cached
        marker = f"\n\n{SECTION_SKILL}"
        cut = system_message.find(marker)
        always_on = system_message if cut < 0 else system_message[:cut]
        if system_message.startswith(SECTION_SKILL):
            always_on = ""
        norm = normalize(system_message)
        stated = frozenset(rid for rid, rn in self._rule_norms if rn in norm)
        p = self.world.params
        over = max(0, len(always_on) - p.length_budget_chars)
        tools = _tool_names(always_on)
        read = ReadHarness(
            content_hash=hashlib.blake2b(system_message.encode("utf-8"), digest_size=8).hexdigest(),
            stated=stated,
            always_on_chars=len(always_on),
            length_cost=p.length_cost_per_kchar * over / 1000.0,
            tools=tools,
        )
        if len(self._reads) >= _MAX_CACHE:
            self._reads.clear()
        self._reads[system_message] = read
        return read

    def logit(self, read: ReadHarness, qid: str) -> float:
        truth = self.world.truth[qid]
        spec = self.world.spec_by_name[truth.task_type]
        x = spec.base_ability - truth.difficulty - read.length_cost
        for rid, weight in truth.applies:
            if rid in read.stated:
                x += weight
        return x

    def p_correct(self, read: ReadHarness, qid: str) -> float:
        return logistic(self.logit(read, qid))

    def draw(self, read: ReadHarness, qid: str, sample_index: int) -> SolverDraw:
        truth = self.world.truth[qid]
        p = self.p_correct(read, qid)
        u_correct, u_letter, u_hint, u_pick, u_tool = uniforms(f"{self.world.seed}|{qid}|{read.content_hash}|{sample_index}", 5)
        n = len(self.world.question(qid).choices) or 4
        correct = u_correct < p
        if correct:
            letter = truth.answer
        else:
            wrong = [L for L in LETTERS[:n] if L != truth.answer]
            letter = wrong[int(u_letter * len(wrong))]
        hint = None if correct else self._hint(truth.task_type, truth.applies, read.stated, u_hint, u_pick)
        call_tool = bool(read.tools) and u_tool < self.world.params.tool_call_prob
        cue = self.world.rules[hint].cue if hint else ""
        u_conf, u_say_hint, u_say_pick = uniforms(f"{self.world.seed}|{qid}|{read.content_hash}|{sample_index}|say", 3)
        pc = self.world.params.confidence_when_right if correct else self.world.params.confidence_when_wrong
        said = cue
        if correct:
            said_rule = self._hint(truth.task_type, truth.applies, read.stated, u_say_hint, u_say_pick)
            said = self.world.rules[said_rule].cue if said_rule else ""
        return SolverDraw(correct, letter, p, hint, call_tool, cue, confident=u_conf < pc, said_cue=said)

    def letter_distribution(self, read: ReadHarness, qid: str, sample_index: int, draw: SolverDraw) -> dict[str, float]:
        """The solver's probability of each choice letter at its answer position in this sample (what a server
        returns as token log-probabilities).

        P(right letter) = q of the sample, q ~ Beta(k p, k (1 - p)) (k = `soft_concentration`, p = P(correct))
        drawn given the sampled outcome: Beta(k p + 1, k (1 - p)) when the draw was right, Beta(k p, k (1 - p) + 1)
        when wrong. Marginally q ~ Beta(k p, k (1 - p)), so E[q] = p (the soft score is an unbiased, less noisy
        estimate of the same accuracy: variance p (1 - p) / (k + 1)) and P(right | q) = q. The other letters share
        1 - q equally. Its own hash key: correctness, letters and every other draw are unchanged."""
        truth = self.world.truth[qid]
        n = len(self.world.question(qid).choices) or 4
        k = self.world.params.soft_concentration
        a, b = max(k * draw.p_correct, 1e-9), max(k * (1.0 - draw.p_correct), 1e-9)
        a, b = (a + 1.0, b) if draw.correct else (a, b + 1.0)
        (u,) = uniforms(f"{self.world.seed}|{qid}|{read.content_hash}|{sample_index}|soft", 1)
        q = random.Random(u).betavariate(a, b)
        rest = (1.0 - q) / (n - 1) if n > 1 else 0.0
        return {letter: (q if letter == truth.answer else rest) for letter in LETTERS[:n]}

    def _hint(self, task_type: str, applies, stated: frozenset[str], u_hint: float, u_pick: float) -> str | None:
        """A missing applicable insight (right hint) or a trap/neutral cue (distractor)."""
        missing = [rid for rid, w in applies if w > 0 and rid not in stated]
        if missing and u_hint < self.world.params.hint_right_prob:
            return missing[int(u_pick * len(missing))]
        spec = self.world.spec_by_name[task_type]
        distractors = [r.rule_id for r in spec.rules if r.kind != "insight"]
        return distractors[int(u_pick * len(distractors))] if distractors else None


def _tool_names(always_on: str) -> tuple[str, ...]:
    start = always_on.find(SECTION_TOOLS)
    if start < 0:
        return ()
    names = [line[3:].strip() for line in always_on[start:].splitlines() if line.startswith("## ")]
    return tuple(n for n in names if n)


def render_solver_reply(draw: SolverDraw, first_turn: bool, tool: str | None, qid: str) -> str:
    """Reasoning + `Confidence: high|low` + `ANSWER: X`, or a tool call on the first turn when the draw says so.

    The wording depends only on the stated confidence and the named cue, never
    directly on correctness (a right and a wrong answer read alike).
    """
    if first_turn and draw.call_tool and tool:
        return "I need to check the frames before answering.\n" + render_tool_call(tool, {"focus": draw.hint_cue or "the key moment"})
    about = f"the {draw.said_cue}" if draw.said_cue else "the details"
    if draw.confident:
        return f"Reasoning: I checked {about}: choice {draw.letter} fits and the other choices do not.\nConfidence: high\nANSWER: {draw.letter}"
    return f"Reasoning: I was unsure about {about}, so I went with my first reading.\nConfidence: low\nANSWER: {draw.letter}"
