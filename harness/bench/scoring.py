"""Scoring a predicted answer against a question's answer.

Multiple choice: the predicted text is reduced to a choice letter ("B",
"(B)", "B.", "B) text", or the exact text of a choice) by the answer
extractor's `designated_letter` and compared with the answer letter. Free
form: "exact" (surrounding whitespace ignored) or "normalized" (SQuAD-style:
case, punctuation, articles, whitespace). A custom scorer is named by import
path "package.module:function" and called as `function(question, predicted) -> bool | float`: a float
in [0, 1] is a soft score (harness/bench/soft.py: correct when >= 0.5).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from harness.bench.protocol import Scorer
from harness.contracts.answers import designated_letter, normalize_text
from harness.questions import Question

BUILTIN_SCORERS = ("exact", "normalized")

# which choice a predicted text designates is the answer extractor's rule (harness/contracts/answers.py)
predicted_letter = designated_letter


def exact_match(predicted: str | None, answer: str) -> bool:
    return predicted is not None and predicted.strip() == answer.strip()


def normalized_match(predicted: str | None, answer: str) -> bool:
    return predicted is not None and normalize_text(predicted) == normalize_text(answer)


def choice_match(question: Question, predicted: str | None) -> bool:
    return predicted_letter(predicted, question.choices) == question.answer.strip().upper()


def score_exact(question: Question, predicted: str | None) -> bool:
    if question.is_multiple_choice:
        return choice_match(question, predicted)
    return exact_match(predicted, question.answer)


def score_normalized(question: Question, predicted: str | None) -> bool:
    if question.is_multiple_choice:
        return choice_match(question, predicted)
    return normalized_match(predicted, question.answer)


def load_scorer(spec: str, *, key: str = "benchmark.scorer") -> Scorer:
    """"exact" | "normalized" | "module:function"; a bad spec raises ValueError naming `key`."""
    if spec == "exact":
        return score_exact
    if spec == "normalized":
        return score_normalized
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ValueError(f"{key}: expected 'exact', 'normalized' or an import path 'module:function', got {spec!r}")
    module_name, function_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{key}: cannot import module {module_name!r} of scorer {spec!r}: {exc}") from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{key}: module {module_name!r} has no callable {function_name!r}")
    return _checked(function, spec)


def _checked(function: Callable, spec: str) -> Scorer:
    def scorer(question: Question, predicted: str | None) -> bool | float:
        result = function(question, predicted)
        if isinstance(result, bool):
            return result
        if isinstance(result, float) and 0.0 <= result <= 1.0:  # a soft score (NaN fails both bounds)
            return result
        raise TypeError(f"custom scorer {spec} must return a bool or a float in [0, 1], returned {result!r} for qid {question.qid!r}")

    scorer.__name__ = f"custom[{spec}]"
    return scorer
