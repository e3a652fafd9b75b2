"""Recorded real replies of SmolLM2-135M-Instruct (tests/fixtures/smollm2_replies.jsonl, captured from the
llama.cpp server with the default jsonl harness by `benchmarks/real.py --capture`) read by the answer extractor.

Each row's expected mode/letter was checked by hand. The model never wrote an ANSWER line, a "the answer is"
sentence alone or a final bare letter in these captures (it answers `B. London`); those modes are covered with
written replies in tests/contracts/test_answers.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness.contracts.answers import AMBIGUOUS, CHOICE_TEXT, LEADING_LETTER, NONE, extract_answer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_replies.jsonl"
ROWS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("row", ROWS, ids=[r["qid"] for r in ROWS])
def test_each_recorded_reply_reads_as_checked(row):
    got = extract_answer(row["reply"], row["choices"])
    assert (got.mode, got.answer) == (row["expected_mode"], row["expected_letter"])
    assert extract_answer(row["reply"], row["choices"], "strict").answer is None  # no ANSWER line in any of them


def test_the_recorded_replies_cover_the_modes_the_model_produces():
    modes = Counter(r["expected_mode"] for r in ROWS)
    assert {LEADING_LETTER, CHOICE_TEXT, AMBIGUOUS, NONE} <= set(modes)
    assert modes[LEADING_LETTER] > len(ROWS) / 3  # "B. London" is how this model answers


@pytest.mark.parametrize("reply, choices", [
    ("A. 4\nD.", ["4", "5", "6", "7"]),  # two lines, two letters
    ("A. London\nB. Dublin", ["London", "Dublin", "Edinburgh", "Brussels"]),  # the choice list echoed
    ("B. 16\n", ["15", "14", "16", "13"]),  # the letter names 14, the text names 16
    ("C. Cairo\n\nThe answer is D. Egypt", ["Nairobi", "Rome", "Cairo", "Athens"]),  # letter and phrase disagree
])
def test_recorded_two_choice_replies_are_no_answer(reply, choices):
    assert any(r["reply"] == reply for r in ROWS), "the case must be a recorded reply"
    assert extract_answer(reply, choices).mode == AMBIGUOUS


def test_lenient_reads_the_recorded_letter_answers_and_strict_reads_none():
    lenient = [extract_answer(r["reply"], r["choices"]) for r in ROWS]
    assert sum(e.answer is not None for e in lenient) >= 25
    right = sum(e.answer == r["answer"] for e, r in zip(lenient, ROWS))
    assert right == 5  # 5 of 40 right at this capture: a 135M model near chance, but no longer 0
