"""Scoring a predicted answer against a question's answer.

Multiple choice: the predicted text is reduced to a choice letter ("B",
"(B)", "B.", "B) text", or the exact text of a choice) and compared with the
answer letter. Free form: "exact" (surrounding whitespace ignored) or
"normalized" (SQuAD-style: case, punctuation, articles, whitespace). A
custom scorer is named by import path "package.module:function" and called
as `function(question, predicted) -> bool`.
"""

from __future__ import annotations

import importlib
import re
import string
from collections.abc import Callable

from harness.bench.protocol import Scorer
from harness.contracts.solver import LETTERS
from harness.questions import Question

BUILTIN_SCORERS = ("exact", "normalized")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_LETTER_FORMS = re.compile(r"^\(?\s*([A-Za-z])\s*(?:[).:]|$)(.*)$", re.DOTALL)


def normalize_text(text: str) -> str:
    """Lower case, punctuation removed, articles removed, whitespace collapsed."""
    lowered = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def exact_match(predicted: str | None, answer: str) -> bool:
    return predicted is not None and predicted.strip() == answer.strip()


def normalized_match(predicted: str | None, answer: str) -> bool:
    return predicted is not None and normalize_text(predicted) == normalize_text(answer)


def predicted_letter(predicted: str | None, choices: tuple[str, ...]) -> str | None:
    """The choice letter `predicted` designates, or None when it designates none."""
    if predicted is None:
        return None
    text = predicted.strip()
    valid = LETTERS[: len(choices)]
    match = _LETTER_FORMS.match(text)
    if match and match.group(1).upper() in valid:
        return match.group(1).upper()
    wanted = normalize_text(text)
    hits = [LETTERS[i] for i, choice in enumerate(choices) if normalize_text(choice) == wanted]
    return hits[0] if len(hits) == 1 else None


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
    def scorer(question: Question, predicted: str | None) -> bool:
        result = function(question, predicted)
        if not isinstance(result, bool):
            raise TypeError(f"custom scorer {spec} must return a bool, returned {type(result).__name__} for qid {question.qid!r}")
        return result

    scorer.__name__ = f"custom[{spec}]"
    return scorer
