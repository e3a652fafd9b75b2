"""The shipped easy multiple-choice set (tests/fixtures/real_easy_mc.jsonl): valid, regenerable, answers re-checked."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

from harness.bench.jsonl import read_user_questions

FILE = "tests/fixtures/real_easy_mc.jsonl"
UNIT_FACTORS = {"minutes in hour": 60, "seconds in minute": 60, "hours in day": 24, "days in week": 7, "months in year": 12,
                "centimeters in meter": 100, "grams in kilogram": 1000, "eggs in dozen": 12}


def _right(q) -> str:
    return q.choices["ABCD".index(q.answer)]


def test_the_file_is_valid_and_large_enough(repo_root):
    questions = read_user_questions(repo_root / FILE)
    assert len(questions) >= 200
    per_type = Counter(q.task_type for q in questions)
    assert len(per_type) >= 4 and min(per_type.values()) >= 40, per_type
    assert all(len(q.choices) == 4 and len(set(q.choices)) == 4 for q in questions)
    letters = Counter(q.answer for q in questions)
    assert set(letters) == set("ABCD") and max(letters.values()) < 0.35 * len(questions)  # no position bias to learn


def test_the_file_is_what_the_generator_writes(repo_root):
    done = subprocess.run([sys.executable, "benchmarks/real_questions.py", "--check"], cwd=repo_root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_computed_answers_recomputed_from_the_question_text(repo_root):
    checked = Counter()
    for q in read_user_questions(repo_root / FILE):
        if q.task_type == "arithmetic":
            a, op, b = re.fullmatch(r"What is (\d) ([+-]) (\d)\?", q.question).groups()
            assert int(_right(q)) == (int(a) + int(b) if op == "+" else int(a) - int(b)), q
            assert all(int(c) != int(_right(q)) for c in q.choices if c != _right(q))
        elif q.task_type == "units":
            unit, n, per = re.fullmatch(r"How many (\w+) are in (\d) (\w+?)s?( eggs)?\?", q.question).groups()[:3]
            factor = UNIT_FACTORS[f"{unit} in {per}"]
            assert int(_right(q)) == int(n) * factor, q
        else:
            continue
        checked[q.task_type] += 1
    assert checked == {"arithmetic": 48, "units": 48}


def test_no_distractor_is_another_right_answer_of_its_type(repo_root):
    questions = read_user_questions(repo_root / FILE)
    for kind in ("opposites", "plurals"):
        rows = [q for q in questions if q.task_type == kind]
        word = {q.qid: re.search(r"\"(\w+)\"", q.question).group(1) for q in rows}
        right = {word[q.qid]: _right(q) for q in rows}
        for q in rows:
            for choice in q.choices:
                if choice != _right(q):
                    assert choice != right[word[q.qid]], q  # never the right answer twice
                    if kind == "opposites":
                        assert choice not in right.values(), q  # a distractor is never any word's opposite
