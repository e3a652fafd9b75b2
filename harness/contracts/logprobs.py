"""Token log-probabilities of a reply, and the soft score of a multiple-choice answer read from them.

Wire format (OpenAI chat completions, also llama.cpp's and vLLM's servers): with `logprobs: true` and
`top_logprobs: k`, `choices[0].logprobs.content` is one entry per generated token,
`{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}`. The simulated provider
(harness/sim/provider.py) writes the same structure, so this parser is exercised offline too.

Soft score of a multiple-choice reply (`answer_letter_probability`): at the token that states the
predicted letter (the last token of the reply that is a choice letter once spaces, brackets and `*`/`.`/`:`
are stripped, and that letter is the predicted one), the probability the model gave the right letter,
normalised over the choice letters it listed there (the sampled token's own log-probability included):
P(right) / sum over letters L of P(L). A right letter outside the listed top-k counts 0 (a lower bound).
A reply that names no letter scores 0.0 (it put no mass on the right answer); no log-probabilities: None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TokenLogprob", "answer_letter_probability", "parse_logprobs"]

_STRIP = " \t\n()[]*.:_`"


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()  # (token, logprob) alternatives at this position, most likely first

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "logprob": self.logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in self.top]}


def parse_logprobs(choice: Any) -> tuple[TokenLogprob, ...] | None:
    """The token log-probabilities of one chat-completion choice (`choices[0]`), None when it carries none.

    ValueError naming the field when the block is there but malformed (a server bug, not a missing feature)."""
    block = choice.get("logprobs") if isinstance(choice, dict) else None
    if block is None:
        return None
    content = block.get("content") if isinstance(block, dict) else None
    if content is None:
        return None
    if not isinstance(content, list):
        raise ValueError("choices[0].logprobs.content is not a list")
    out = []
    for i, entry in enumerate(content):
        try:
            top = tuple((str(t["token"]), float(t["logprob"])) for t in entry.get("top_logprobs") or ())
            out.append(TokenLogprob(str(entry["token"]), float(entry["logprob"]), top))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"choices[0].logprobs.content[{i}] is malformed ({type(exc).__name__}: {exc})") from None
    return tuple(out)


def logprobs_from_json(data: Any) -> tuple[TokenLogprob, ...] | None:
    """The inverse of `[t.to_json() for t in tokens]` (the response cache's stored form)."""
    if data is None:
        return None
    return parse_logprobs({"logprobs": {"content": data}})


def _letter(token: str, letters: Sequence[str]) -> str | None:
    text = token.strip(_STRIP).upper()
    return text if text in letters else None


def answer_letter_probability(tokens: Sequence[TokenLogprob] | None, predicted: str | None, right: str,
                              letters: Sequence[str]) -> float | None:
    """The soft score of a multiple-choice reply (module docstring); None without log-probabilities."""
    if tokens is None:
        return None
    right = right.strip().upper()
    if predicted is None:
        return 0.0
    predicted = predicted.strip().upper()
    for token in reversed(tokens):
        if _letter(token.token, letters) != predicted:
            continue
        seen: dict[str, float] = {}  # token text -> logprob: the sampled token usually appears in its top list too
        for text, logprob in ((token.token, token.logprob), *token.top):
            seen.setdefault(text, logprob)
        mass: dict[str, float] = {}
        for text, logprob in seen.items():
            letter = _letter(text, letters)
            if letter is not None and math.isfinite(logprob):
                mass[letter] = mass.get(letter, 0.0) + math.exp(logprob)  # " B" and "B" are one letter
        total = math.fsum(mass.values())
        return 0.0 if total <= 0 else min(1.0, mass.get(right, 0.0) / total)
    return 0.0  # the letter was read by a rule from text no single token states (e.g. the choice's words)
