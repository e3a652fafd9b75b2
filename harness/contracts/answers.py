"""The solver's answer extractor: which answer a reply gives, and by which rule it was read.

One extractor serves the agent loop (when does a reply end the rollout, with
which answer), the scoring (which choice a predicted text designates) and the
simulated world (harness/sim reads its own replies with it).

Rules, tried in order (`benchmark.answer_parsing`):

  strict          an `ANSWER: <value>` line (the contract of harness/contracts/solver.py).
                  Several ANSWER lines naming different choices designate nothing.
  lenient adds, when the reply has no ANSWER line (multiple choice):
    leading_letter  the reply starts with a choice letter: `B`, `(B)`, `B.`, `B)`, `B:`,
                    `**B**`, `Option B`, `B. <text>`
    answer_phrase   "the answer is B" / "answer: (B)" / "the correct answer is <choice text>"
    choice_text     the reply names exactly one choice's text (whole words, normalised)
    final_letter    the reply's last line ends with a standalone choice letter
  and (free form) `answer_phrase` only: "the answer is <text>".

A reply whose rules designate two different choices (the leading letter says
A and "the answer is C", or two lines start with different choice letters) is
no answer: mode `ambiguous`. A reply no rule reads is mode `none`.

`ANSWER_MODES` lists every mode the run log and the metrics name.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from harness.questions import LETTERS

AnswerParsing = Literal["strict", "lenient"]
ANSWER_PARSING_MODES: tuple[str, ...] = ("strict", "lenient")

STRICT = "strict"
LEADING_LETTER = "leading_letter"
ANSWER_PHRASE = "answer_phrase"
CHOICE_TEXT = "choice_text"
FINAL_LETTER = "final_letter"
AMBIGUOUS = "ambiguous"
NONE = "none"
FALLBACK_MODES: tuple[str, ...] = (LEADING_LETTER, ANSWER_PHRASE, CHOICE_TEXT, FINAL_LETTER)
ANSWER_MODES: tuple[str, ...] = (STRICT, *FALLBACK_MODES, AMBIGUOUS, NONE)
UNPARSED_MODES: tuple[str, ...] = (AMBIGUOUS, NONE)  # a reply that designates no single choice: a parse failure

_ANSWER_LINE = re.compile(r"^\s*ANSWER\s*:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
# a value that is a choice letter: "B", "(B)", "B.", "B)", "B:", "B) text", "B. text"
_LETTER_VALUE = re.compile(r"^\(?\s*([A-Za-z])\s*(?:[).:]|$)(.*)$", re.DOTALL)
_MARKUP = re.compile(r"[*_`#>]+")
# a line that starts with a choice letter (upper case: "A man ..." is not a letter)
_LEADING = re.compile(r"^\s*(?:(?:option|choice)\s+)?\(?([A-J])\s*(?:[).:]|\s*$)", re.IGNORECASE)
_LEADING_CASE = re.compile(r"^\s*(?:(?i:option|choice)\s+)?\(?[A-J]\s*(?:[).:]|\s*$)")  # same, letter in upper case
_PHRASE = re.compile(
    r"\b(?:the\s+)?(?:correct\s+|right\s+|final\s+|best\s+)?(?:answer|option|choice)\s*(?:is|would\s+be|will\s+be|=)\s*:?\s*(.+)",
    re.IGNORECASE,
)
_PHRASE_LETTER = re.compile(r"^\(?\s*(?:option\s+|choice\s+)?([A-J])\s*(?:[).:,;!?]|\s|$)")
_FINAL_LETTER = re.compile(r"(?:^|[\s:(\[])\(?([A-J])\)?[.!]?\s*$")


@dataclass(frozen=True)
class Extraction:
    """What a reply answers: `answer` (None = no answer) and the rule that read it (one of ANSWER_MODES)."""

    answer: str | None
    mode: str

    @property
    def answered(self) -> bool:
        return self.answer is not None


def normalize_text(text: str) -> str:
    """Lower case, punctuation removed, articles removed, whitespace collapsed."""
    lowered = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def answer_lines(text: str) -> list[str]:
    """The values of every `ANSWER:` line, in order."""
    return [m.strip() for m in _ANSWER_LINE.findall(text or "")]


def parse_answer(text: str) -> str | None:
    """The last `ANSWER:` line's value, or None when there is none."""
    values = answer_lines(text)
    return values[-1] if values else None


def designated_letter(value: str | None, choices: tuple[str, ...] | list[str]) -> str | None:
    """The choice letter an answer value designates ("B", "(B)", "B.", "B) text", or a choice's exact text), else None."""
    if value is None:
        return None
    text = value.strip()
    valid = LETTERS[: len(choices)]
    match = _LETTER_VALUE.match(text)
    if match and match.group(1).upper() in valid:
        return match.group(1).upper()
    wanted = normalize_text(text)
    hits = [LETTERS[i] for i, choice in enumerate(choices) if normalize_text(choice) == wanted]
    return hits[0] if len(hits) == 1 else None


def extract_answer(text: str | None, choices: tuple[str, ...] | list[str] = (), parsing: str = "lenient") -> Extraction:
    """The answer of one solver reply under `parsing` ("strict" | "lenient"); see the module docstring."""
    if parsing not in ANSWER_PARSING_MODES:
        raise ValueError(f"benchmark.answer_parsing must be one of {list(ANSWER_PARSING_MODES)}, got {parsing!r}")
    text = text or ""
    choices = tuple(choices)
    values = answer_lines(text)
    if values:
        if choices:
            letters = {designated_letter(v, choices) for v in values} - {None}
            if len(letters) > 1:
                return Extraction(None, AMBIGUOUS)
        return Extraction(values[-1], STRICT)
    if parsing == STRICT:
        return Extraction(None, NONE)
    if not choices:
        phrase = _phrase_values(text)
        return Extraction(phrase[-1], ANSWER_PHRASE) if phrase else Extraction(None, NONE)
    found = _fallback_letters(text, choices)
    designated = set().union(*found.values()) if found else set()
    if len(designated) > 1:
        return Extraction(None, AMBIGUOUS)
    for mode in FALLBACK_MODES:
        if found.get(mode):
            return Extraction(next(iter(found[mode])), mode)
    return Extraction(None, NONE)


def _lines(text: str) -> list[str]:
    return [line for line in (_MARKUP.sub("", raw).strip() for raw in text.splitlines()) if line]


def _fallback_letters(text: str, choices: tuple[str, ...]) -> dict[str, set[str]]:
    """mode -> the letters that rule designates in `text` (rules that designate nothing are left out)."""
    valid = LETTERS[: len(choices)]
    lines = _lines(text)
    found: dict[str, set[str]] = {}
    leading = set()
    for i, line in enumerate(lines):
        match = _LEADING.match(line)
        if match and _LEADING_CASE.match(line) and match.group(1).upper() in valid:
            leading.add(match.group(1).upper())
        elif i == 0:
            break  # only a reply that starts with a letter is read this way (a later list line alone is not)
    if leading:
        found[LEADING_LETTER] = leading
    phrase = {letter for v in _phrase_values(text) if (letter := _phrase_letter(v, choices)) is not None}
    if phrase:
        found[ANSWER_PHRASE] = phrase
    named = _named_choices(text, choices)
    if len(named) == 1:
        found[CHOICE_TEXT] = named
    if lines:
        final = _FINAL_LETTER.search(lines[-1])
        if final and final.group(1) in valid:
            found[FINAL_LETTER] = {final.group(1)}
    return found


def _phrase_values(text: str) -> list[str]:
    """What follows each "the answer is" in `text`, up to the end of its sentence."""
    out = []
    for match in _PHRASE.finditer(text):
        value = re.split(r"(?<=[^A-Z])[.!?](?:\s|$)|\n", match.group(1).strip(), maxsplit=1)[0]
        value = _MARKUP.sub("", value).strip().strip('"“”\'').strip()
        if value:
            out.append(value)
    return out


def _phrase_letter(value: str, choices: tuple[str, ...]) -> str | None:
    match = _PHRASE_LETTER.match(value)
    if match and match.group(1) in LETTERS[: len(choices)]:
        return match.group(1)
    return designated_letter(value, choices)


def _named_choices(text: str, choices: tuple[str, ...]) -> set[str]:
    """Letters of the choices whose whole normalised text occurs in `text` (a choice inside another's text counts once)."""
    haystack = f" {normalize_text(text)} "
    norms = [normalize_text(c) for c in choices]
    hits = {i for i, n in enumerate(norms) if n and f" {n} " in haystack}
    # "12" inside "12 apples" when both are choices: keep the longer one only
    hits = {i for i in hits if not any(j != i and norms[i] != norms[j] and f" {norms[i]} " in f" {norms[j]} " for j in hits)}
    return {LETTERS[i] for i in hits}


def parse_shares(counts: Mapping[str, int]) -> dict[str, float | None]:
    """`parse_share_<mode>` for every mode of ANSWER_MODES plus `parse_failure_rate` (ambiguous + none),
    over judged rollouts (`counts`: mode -> rollouts). All None when nothing was judged (never 0)."""
    unknown = sorted(set(counts) - set(ANSWER_MODES))
    if unknown:
        raise ValueError(f"unknown answer parse mode(s) {unknown}; expected one of {', '.join(ANSWER_MODES)}")
    total = sum(int(k) for k in counts.values())
    shares: dict[str, float | None] = {
        f"parse_share_{mode}": (round(int(counts.get(mode, 0)) / total, 6) if total else None) for mode in ANSWER_MODES}
    failed = sum(int(counts.get(mode, 0)) for mode in UNPARSED_MODES)
    shares["parse_failure_rate"] = round(failed / total, 6) if total else None
    return shares


class AnswerFormatError(RuntimeError):
    """The solver model's replies mostly designate no answer (`benchmark.max_unparsed_share`): training on them
    would measure the reply format, not the harness."""


def check_answer_format(replies: list[tuple[str, str | None]], max_share: float, *, model: str, where: str) -> None:
    """Raise AnswerFormatError when the share of unparsed replies (mode in UNPARSED_MODES) among the judged
    `replies` ((parse_mode, reply text) pairs) exceeds `max_share`; the one-line message names the model,
    the share and an example reply."""
    if not replies:
        return
    failed = [text for mode, text in replies if mode in UNPARSED_MODES]
    share = len(failed) / len(replies)
    if share <= max_share:
        return
    example = " ".join(str(failed[0] or "").split())
    example = example if len(example) <= 160 else example[:157] + "..."
    raise AnswerFormatError(
        f"{where}: model {model!r} gave no readable answer in {len(failed)} of {len(replies)} replies ({share:.0%} > "
        f"benchmark.max_unparsed_share={max_share:g}), e.g. {example!r}; make the model follow the 'ANSWER: <letter>' "
        f"line, use benchmark.answer_parsing=lenient, or raise benchmark.max_unparsed_share")
