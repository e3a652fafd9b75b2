"""Write questions.jsonl: 100 multiple-choice arithmetic questions, 4 task types x 25, answers computed.

    python examples/own-run/make_questions.py examples/own-run/questions.jsonl

The example data of docs/own-run.md (one JSON object per line, the questions schema of docs/data.md).
"""

from __future__ import annotations

import json
import random
import sys

LETTERS = "ABCD"


def _choices(rng: random.Random, right: int) -> tuple[list[str], str]:
    wrong: set[int] = set()
    while len(wrong) < 3:
        candidate = right + rng.choice([-10, -2, -1, 1, 2, 10, 11])
        if candidate != right and candidate >= 0:
            wrong.add(candidate)
    options = [right, *sorted(wrong)]
    rng.shuffle(options)
    return [str(o) for o in options], LETTERS[options.index(right)]


def questions(seed: int = 14) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(25):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        kinds = {
            "addition": (f"What is {a} + {b}?", a + b),
            "subtraction": (f"What is {max(a, b)} - {min(a, b)}?", max(a, b) - min(a, b)),
            "multiplication": (f"What is {a % 12 + 2} x {b % 12 + 2}?", (a % 12 + 2) * (b % 12 + 2)),
            "word_problems": (f"A shelf holds {a} books. {b % 20 + 1} are taken away and {b % 7 + 3} are added. "
                              "How many books are on the shelf now?", a - (b % 20 + 1) + (b % 7 + 3)),
        }
        for task_type, (text, right) in kinds.items():
            choices, answer = _choices(rng, right)
            rows.append({"qid": f"{task_type}-{i + 1:02d}", "task_type": task_type, "question": text,
                         "choices": choices, "answer": answer})
    return rows


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "questions.jsonl"
    with open(target, "w", encoding="utf-8") as handle:
        for row in questions():
            handle.write(json.dumps(row) + "\n")
    print(f"wrote {target}")
