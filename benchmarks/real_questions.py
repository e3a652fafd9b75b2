"""Writes tests/fixtures/real_easy_mc.jsonl: 240 easy multiple-choice questions, 5 task types x 48.

    python benchmarks/real_questions.py            # (re)writes the file; deterministic (seeded)
    python benchmarks/real_questions.py --check    # exit 1 when the shipped file differs from what this writes

Task types: arithmetic (one-digit + and -), capitals (well-known countries),
opposites, plurals, units (whole-number conversions). Easy on purpose: the CI
model (SmolLM2-135M-Instruct) should be above chance (0.25) on some of them.
Facts are in the tables below, read by hand; arithmetic and unit answers are
computed here and recomputed from the question text by tests/real/test_questions_file.py.
Distractors are generated so that none is also a right answer (see each maker).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests/fixtures/real_easy_mc.jsonl"
SEED = 20261202
PER_TYPE = 48
LETTERS = "ABCD"

CAPITALS = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Egypt", "Cairo"), ("Italy", "Rome"), ("Spain", "Madrid"),
    ("Germany", "Berlin"), ("the United Kingdom", "London"), ("Russia", "Moscow"), ("China", "Beijing"),
    ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Ireland", "Dublin"), ("Norway", "Oslo"), ("Sweden", "Stockholm"),
    ("Finland", "Helsinki"), ("Denmark", "Copenhagen"), ("Austria", "Vienna"), ("Poland", "Warsaw"),
    ("Hungary", "Budapest"), ("the Czech Republic", "Prague"), ("Belgium", "Brussels"), ("Thailand", "Bangkok"),
    ("South Korea", "Seoul"), ("Kenya", "Nairobi"), ("Argentina", "Buenos Aires"), ("Peru", "Lima"),
    ("Chile", "Santiago"), ("Mexico", "Mexico City"), ("Cuba", "Havana"), ("Canada", "Ottawa"),
    ("Australia", "Canberra"), ("India", "New Delhi"), ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Turkey", "Ankara"),
    ("Indonesia", "Jakarta"), ("the Philippines", "Manila"), ("Vietnam", "Hanoi"), ("Saudi Arabia", "Riyadh"),
    ("Ukraine", "Kyiv"), ("Romania", "Bucharest"), ("Colombia", "Bogota"), ("Venezuela", "Caracas"),
    ("Ethiopia", "Addis Ababa"), ("Nigeria", "Abuja"), ("Morocco", "Rabat"), ("Cambodia", "Phnom Penh"),
    ("Nepal", "Kathmandu"),
]

# (word, its opposite); no opposite is also a question word, so a distractor (another question word) is never right
OPPOSITES = [
    ("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"), ("happy", "sad"), ("full", "empty"),
    ("early", "late"), ("wet", "dry"), ("hard", "soft"), ("win", "lose"), ("day", "night"), ("black", "white"),
    ("thick", "thin"), ("rich", "poor"), ("strong", "weak"), ("push", "pull"), ("inside", "outside"),
    ("above", "below"), ("buy", "sell"), ("true", "false"), ("loud", "quiet"), ("clean", "dirty"), ("alive", "dead"),
    ("first", "last"), ("on", "off"), ("north", "south"), ("east", "west"), ("sweet", "sour"), ("love", "hate"),
    ("always", "never"), ("yes", "no"), ("begin", "end"), ("give", "take"), ("good", "bad"), ("high", "low"),
    ("near", "far"), ("cheap", "expensive"), ("wide", "narrow"), ("friend", "enemy"), ("summer", "winter"),
    ("question", "answer"), ("boy", "girl"), ("king", "queen"), ("front", "back"), ("laugh", "cry"), ("come", "go"),
    ("safe", "dangerous"), ("entrance", "exit"),
]

# (singular, plural); words with two accepted plurals (fish, person, bus, hero, cactus) are left out
PLURALS = [
    ("cat", "cats"), ("dog", "dogs"), ("book", "books"), ("car", "cars"), ("tree", "trees"), ("apple", "apples"),
    ("house", "houses"), ("bird", "birds"), ("pen", "pens"), ("cup", "cups"), ("key", "keys"), ("boy", "boys"),
    ("day", "days"), ("toy", "toys"), ("box", "boxes"), ("fox", "foxes"), ("church", "churches"), ("dish", "dishes"),
    ("watch", "watches"), ("glass", "glasses"), ("class", "classes"), ("brush", "brushes"), ("baby", "babies"),
    ("city", "cities"), ("story", "stories"), ("lady", "ladies"), ("party", "parties"), ("country", "countries"),
    ("knife", "knives"), ("leaf", "leaves"), ("wolf", "wolves"), ("life", "lives"), ("wife", "wives"),
    ("half", "halves"), ("shelf", "shelves"), ("potato", "potatoes"), ("tomato", "tomatoes"), ("child", "children"),
    ("man", "men"), ("woman", "women"), ("foot", "feet"), ("tooth", "teeth"), ("goose", "geese"), ("mouse", "mice"),
    ("ox", "oxen"), ("sheep", "sheep"), ("deer", "deer"), ("bench", "benches"),
]

# (question template, factor); N takes 1..6
UNITS = [
    ("How many minutes are in {n} hour{s}?", 60), ("How many seconds are in {n} minute{s}?", 60),
    ("How many hours are in {n} day{s}?", 24), ("How many days are in {n} week{s}?", 7),
    ("How many months are in {n} year{s}?", 12), ("How many centimeters are in {n} meter{s}?", 100),
    ("How many grams are in {n} kilogram{s}?", 1000), ("How many eggs are in {n} dozen eggs?", 12),
]
UNIT_FACTORS = sorted({f for _, f in UNITS} | {10})


def _row(qid: str, task_type: str, question: str, right: str, wrong: list[str], rng: random.Random) -> dict:
    assert len(wrong) == 3 and right not in wrong and len(set(wrong)) == 3, (qid, right, wrong)
    choices = [right, *wrong]
    rng.shuffle(choices)
    return {"qid": qid, "task_type": task_type, "question": question, "choices": choices,
            "answer": LETTERS[choices.index(right)]}


def arithmetic(rng: random.Random) -> list[dict]:
    pairs = sorted({(a, b) for a in range(1, 10) for b in range(1, 10)})
    rng.shuffle(pairs)
    rows = []
    for i, (a, b) in enumerate(pairs[:PER_TYPE]):
        plus = i % 2 == 0
        if not plus and a < b:
            a, b = b, a
        value = a + b if plus else a - b
        near = [value + d for d in (-2, -1, 1, 2, 3) if value + d >= 0]
        wrong = [str(v) for v in rng.sample(near, 3)]
        rows.append(_row(f"arithmetic-{i + 1:02d}", "arithmetic", f"What is {a} {'+' if plus else '-'} {b}?", str(value), wrong, rng))
    return rows


def capitals(rng: random.Random) -> list[dict]:
    cities = [c for _, c in CAPITALS]
    rows = []
    for i, (country, city) in enumerate(CAPITALS):
        wrong = rng.sample([c for c in cities if c != city], 3)
        rows.append(_row(f"capitals-{i + 1:02d}", "capitals", f"What is the capital of {country}?", city, wrong, rng))
    return rows


def opposites(rng: random.Random) -> list[dict]:
    words = [w for w, _ in OPPOSITES]
    assert not {o for _, o in OPPOSITES} & set(words)
    rows = []
    for i, (word, opposite) in enumerate(OPPOSITES):
        wrong = rng.sample([w for w in words if w != word], 3)
        rows.append(_row(f"opposites-{i + 1:02d}", "opposites", f"What is the opposite of \"{word}\"?", opposite, wrong, rng))
    return rows


def _wrong_plurals(word: str, plural: str) -> list[str]:
    forms = [word + "s", word + "es", (word[:-1] + "ies") if len(word) > 2 else word + "ies", word + "en", word, word + "z"]
    out = []
    for form in forms:
        if form != plural and form not in out:
            out.append(form)
    return out


def plurals(rng: random.Random) -> list[dict]:
    rows = []
    for i, (word, plural) in enumerate(PLURALS):
        wrong = rng.sample(_wrong_plurals(word, plural)[:4], 3)
        rows.append(_row(f"plurals-{i + 1:02d}", "plurals", f"What is the plural of \"{word}\"?", plural, wrong, rng))
    return rows


def units(rng: random.Random) -> list[dict]:
    rows = []
    i = 0
    for template, factor in UNITS:
        for n in range(1, 7):
            i += 1
            value = n * factor
            others = sorted({n * f for f in UNIT_FACTORS if n * f != value} | {value + factor, max(1, value - factor)} - {value})
            wrong = [str(v) for v in rng.sample(others, 3)]
            question = template.format(n=n, s="" if n == 1 else "s")
            rows.append(_row(f"units-{i:02d}", "units", question, str(value), wrong, rng))
    return rows


def build() -> list[dict]:
    rng = random.Random(SEED)
    rows = arithmetic(rng) + capitals(rng) + opposites(rng) + plurals(rng) + units(rng)
    for kind in ("arithmetic", "capitals", "opposites", "plurals", "units"):
        assert sum(r["task_type"] == kind for r in rows) == PER_TYPE, kind
    return rows


def render(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    text = render(build())
    if args.check:
        same = Path(args.out).read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'differs from benchmarks/real_questions.py'}")
        return 0 if same else 1
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {text.count(chr(10))} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
