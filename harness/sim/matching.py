"""How the simulated solver recognises a rule in the text it reads.

A rule is *stated* when its canonical sentence, normalised, occurs in the
normalised text. Normalisation lower-cases, keeps only runs of ASCII letters
and digits, and joins them with single spaces (padded at both ends). So
bullet markers (`-`, `*`, `1.`), Markdown emphasis, line wrapping, extra
whitespace, case and punctuation never matter, while any change of a word
does: "For counting problem questions, locate the timestamps first ..." is
stated by `* for counting problem questions  locate the TIMESTAMPS first…`
but not by a paraphrase. Negation is not understood (the solver is literal):
a rule quoted anywhere in the read text counts as stated.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")


def normalize(text: str) -> str:
    """' w1 w2 … ' — lower-case alphanumeric words joined by single spaces, space-padded."""
    words = _WORD.findall(text.lower())
    return " " + " ".join(words) + " " if words else " "


def states(normalized_text: str, rule_norm: str) -> bool:
    """True when the (normalised) rule occurs in the (normalised) text."""
    return rule_norm in normalized_text


def mentions(normalized_text: str, cue: str) -> bool:
    """True when the cue phrase occurs (as whole words) in the normalised text."""
    return normalize(cue) in normalized_text
