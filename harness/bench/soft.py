"""The soft score of a rollout: a value in [0, 1] next to its hard (right / wrong) outcome.

Where it comes from, first that applies:

1. a custom scorer (`benchmark.scorer = module:function`) that returns a float in [0, 1] instead of a bool:
   that number is the soft score, and the rollout is correct when it is >= PASS_THRESHOLD (0.5);
2. a multiple-choice question whose final reply carries token log-probabilities (`llm.top_logprobs` > 0,
   on a server that returns them; the simulated world always can): the probability the model gave the
   right letter at its answer position (harness/contracts/logprobs.answer_letter_probability);
3. otherwise none (None, stored as NULL: never 0).

`mean_soft_score` is a run's soft score: the mean over its judged rollouts, None unless every one has one
(a mean over a subset would not describe the same population as the hard accuracy).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from harness.contracts.answers import designated_letter
from harness.contracts.logprobs import TokenLogprob, answer_letter_probability
from harness.questions import LETTERS, Question

PASS_THRESHOLD = 0.5
GATE_METRICS = ("hard", "soft", "mixed")  # gate.metric: what a gate pair's outcome is


class MissingSoftScoreError(ValueError):
    """gate.metric needs a soft score that a judged rollout does not have."""


def scored(question: Question, predicted: str | None, value: object,
           logprobs: Sequence[TokenLogprob] | None) -> tuple[bool, float | None]:
    """(correct, soft score or None) of one rollout from the scorer's `value` (a bool, or a float in [0, 1]);
    ValueError naming the qid for any other value."""
    if isinstance(value, bool):
        if not question.is_multiple_choice:
            return value, None
        letters = LETTERS[:len(question.choices)]
        letter = designated_letter(predicted, question.choices)
        return value, answer_letter_probability(logprobs, letter, question.answer, letters)
    if isinstance(value, float) and math.isfinite(value) and 0.0 <= value <= 1.0:
        return value >= PASS_THRESHOLD, value
    raise ValueError(f"scorer returned {value!r} for qid {question.qid!r}: expected a bool or a float in [0, 1]")


def mixed_score(hard: float, soft: float | None) -> float | None:
    """The mixed metric: the mean of the hard accuracy and the soft score (None without a soft score)."""
    return None if soft is None else (hard + soft) / 2.0


def mean_soft_score(values: Sequence[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return math.fsum(v for v in values if v is not None) / len(values)


def metric_value(metric: str, correct: bool, soft: float | None, *, qid: str) -> float:
    """The rollout's value of `metric` (GATE_METRICS) in [0, 1]: hard = correct, soft, mixed = (hard + soft) / 2;
    MissingSoftScoreError naming the qid and the keys when soft/mixed has no soft score to use."""
    if metric == "hard":
        return float(correct)
    if metric not in GATE_METRICS:
        raise ValueError(f"gate.metric = {metric!r}: must be one of {', '.join(GATE_METRICS)}")
    if soft is None:
        raise MissingSoftScoreError(
            f"gate.metric = {metric} but the rollout of qid {qid!r} has no soft score (no token log-probabilities from the "
            "server, or a free-form question with a bool scorer): set llm.top_logprobs > 0 on a server that returns them, "
            "a scorer that returns floats, or gate.metric = hard")
    return soft if metric == "soft" else (float(correct) + soft) / 2.0


def gate_value(metric: str, correct: bool, soft: float | None, *, qid: str) -> bool | float:
    """What a gate rollout reports for `metric`: the hard outcome itself (a bool) for `hard`, the metric's value in
    [0, 1] (a float) for soft / mixed (`metric_value`)."""
    return bool(correct) if metric == "hard" else float(metric_value(metric, correct, soft, qid=qid))


def round_gate_value(value: bool | float, *, qid: str, sample_index: int) -> bool:
    """A gate value as an outcome in {0, 1}: a bool is itself; a float v is True with probability v, by a seeded
    uniform of (qid, sample index) only, so a replay gives the same outcome and the baseline and candidate samples
    of one pair (same qid, same sample index) are rounded with the SAME uniform. E[outcome] = E[v]."""
    if isinstance(value, bool):
        return value
    if not (isinstance(value, float) and 0.0 <= value <= 1.0):
        raise ValueError(f"gate value of qid {qid!r} must be a bool or a float in [0, 1], got {value!r}")
    digest = hashlib.blake2b(f"{qid}|{sample_index}|gate-metric".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64 < value


def metric_outcome(metric: str, correct: bool, soft: float | None, *, qid: str, sample_index: int) -> bool:
    """The gate pair outcome of one rollout: its hard outcome for `hard`; for soft / mixed a randomized rounding of
    the metric's value v (`round_gate_value`). E[outcome] = E[v]: every gate rule then tests the metric's population
    mean with its own guarantees, on outcomes in {0, 1} (pair differences in [-1, 1])."""
    return round_gate_value(gate_value(metric, correct, soft, qid=qid), qid=qid, sample_index=sample_index)
