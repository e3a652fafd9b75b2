"""benchmark=jsonl: reading the user's questions, scoring, tools, base harness, factory."""

from __future__ import annotations

import json
import sys

import pytest

from harness.bench.jsonl import JsonlBenchmark, read_user_questions
from harness.bench.protocol import BenchmarkAdapter, ToolArgumentError, UnknownToolError
from harness.bench.scoring import (
    load_scorer,
    normalize_text,
    predicted_letter,
    score_exact,
    score_normalized,
)
from harness.compose import build_benchmark
from harness.config.schema import BenchmarkConfig
from harness.questions import Question, QuestionsError, write_questions

ROWS = [
    {"qid": "q1", "task_type": "math", "question": "2+2?", "choices": ["3", "4", "5"], "answer": "B"},
    {"qid": "q2", "task_type": "capitals", "question": "Capital of France?", "answer": "Paris"},
    {"qid": "q3", "task_type": "capitals", "question": "Largest US state?", "answer": "The State of Alaska",
     "context": ["Alaska is the largest US state by area.", "Texas is second."], "difficulty": 0.5, "metadata": {"src": "t"}},
]


def write_jsonl(path, rows, *, raw_lines=()):
    lines = [json.dumps(r) for r in rows] + list(raw_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def mc(answer="B"):
    return Question(qid="x", task_type="t", question="?", answer=answer, choices=("red", "green", "blue"))


def free(answer):
    return Question(qid="y", task_type="t", question="?", answer=answer)


def test_reads_jsonl_and_parquet_identically(tmp_path):
    from_jsonl = read_user_questions(write_jsonl(tmp_path / "q.jsonl", ROWS))
    assert [q.qid for q in from_jsonl] == ["q1", "q2", "q3"]
    assert from_jsonl[0].choices == ("3", "4", "5") and from_jsonl[2].context[0].startswith("Alaska")
    write_questions(tmp_path / "q.parquet", from_jsonl)
    assert read_user_questions(tmp_path / "q.parquet") == from_jsonl


@pytest.mark.parametrize(
    "bad_line, field, fragment",
    [
        ({"qid": "q9", "task_type": "math", "question": "?"}, "answer", "required field is missing"),
        ({"qid": "q9", "task_type": "math", "question": "?", "answer": None}, "answer", "required field is null"),
        ({"qid": "q9", "task_type": "math", "question": "?", "answer": "Z", "choices": ["a", "b"]}, "answer", "one of the letters"),
        ({"qid": "q9", "task_type": "math", "question": "?", "answer": "x", "difficulty": "hard"}, "difficulty", "expected a number"),
        ({"qid": "q9", "task_type": "math", "question": "?", "answer": "x", "colour": 1}, "colour", "unknown field"),
        ({"qid": "q1", "task_type": "math", "question": "?", "answer": "x"}, "qid", "duplicate qid 'q1' (first on line 1)"),
    ],
)
def test_bad_row_names_file_line_and_field(tmp_path, bad_line, field, fragment):
    path = write_jsonl(tmp_path / "bad.jsonl", ROWS + [bad_line])
    with pytest.raises(QuestionsError) as info:
        read_user_questions(path)
    message = str(info.value)
    assert str(path) in message and "line 4" in message and f"field {field!r}" in message and fragment in message


def test_invalid_json_line_and_empty_file_and_unknown_suffix(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", ROWS[:1], raw_lines=["", "{not json"])
    with pytest.raises(QuestionsError, match=r"bad.jsonl: line 3: not valid JSON"):
        read_user_questions(path)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(QuestionsError, match="no questions"):
        read_user_questions(tmp_path / "empty.jsonl")
    with pytest.raises(QuestionsError, match="unsupported file type '.csv'"):
        read_user_questions(tmp_path / "q.csv")


def test_multiple_choice_scoring_accepts_letter_forms_and_choice_text():
    for predicted in ["B", "b", "(B)", "B.", "B) green", " Green ", "green."]:
        assert score_exact(mc(), predicted), predicted
    for predicted in [None, "", "A", "D", "red or green", "purple"]:
        assert not score_exact(mc(), predicted), predicted
    assert predicted_letter("C", ("x", "y")) is None  # out of range


def test_free_form_exact_vs_normalized():
    answer = "The State of Alaska"
    assert score_exact(free(answer), "  The State of Alaska ")
    assert not score_exact(free(answer), "state of alaska")
    assert score_normalized(free(answer), "state of Alaska!")
    assert not score_normalized(free(answer), "Alaska")
    assert not score_normalized(free(answer), None)
    assert normalize_text("  An  Apple, the pie. ") == "apple pie"


def test_custom_scorer_by_import_path(tmp_path, monkeypatch):
    (tmp_path / "my_scorers.py").write_text(
        "def contains(question, predicted):\n    return predicted is not None and question.answer.lower() in predicted.lower()\n"
        "def not_bool(question, predicted):\n    return 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_scorers", None)
    scorer = load_scorer("my_scorers:contains")
    assert scorer(free("Paris"), "It is paris.") and not scorer(free("Paris"), "Lyon")
    with pytest.raises(TypeError, match="must return a bool"):
        load_scorer("my_scorers:not_bool")(free("x"), "x")
    with pytest.raises(ValueError, match="benchmark.scorer: cannot import module 'no_such_mod'"):
        load_scorer("no_such_mod:f")
    with pytest.raises(ValueError, match="has no callable 'missing'"):
        load_scorer("my_scorers:missing")
    with pytest.raises(ValueError, match="expected 'exact', 'normalized'"):
        load_scorer("fuzzy")


def test_adapter_from_config_tools_harness_and_scoring(tmp_path):
    write_jsonl(tmp_path / "q.jsonl", ROWS)
    cfg = BenchmarkConfig(name="jsonl", path="q.jsonl", scorer="normalized")
    bench = build_benchmark(cfg, tmp_path)
    assert isinstance(bench, BenchmarkAdapter) and isinstance(bench, JsonlBenchmark)
    assert bench.task_types == ("capitals", "math")
    assert [t.name for t in bench.tools()] == ["get_context"]
    harness = bench.base_harness()
    assert set(harness) == {"system_prompt.md", "skills/capitals/SKILL.md", "skills/math/SKILL.md", "tools/get_context.md"}
    q1, q2, q3 = bench.questions()
    assert bench.score(q1, "B") and bench.score(q2, "paris") and bench.score(q3, "state of alaska")
    dispatch = bench.tool_dispatch(q3)
    assert dispatch("get_context", {"index": 1}) == "Texas is second."
    with pytest.raises(ToolArgumentError, match="out of range"):
        dispatch("get_context", {"index": 5})
    with pytest.raises(ToolArgumentError, match="must be an integer"):
        dispatch("get_context", {"index": "0"})
    with pytest.raises(UnknownToolError):
        dispatch("search", {})
    with pytest.raises(UnknownToolError):
        bench.tool_dispatch(q1)("get_context", {"index": 0})


def test_task_type_filter_and_harness_dir(tmp_path):
    write_jsonl(tmp_path / "q.jsonl", ROWS)
    hdir = tmp_path / "h"
    (hdir / "skills" / "math").mkdir(parents=True)
    (hdir / "system_prompt.md").write_text("Custom prompt")
    (hdir / "skills" / "math" / "SKILL.md").write_text("Add carefully.")
    bench = JsonlBenchmark.from_config(BenchmarkConfig(name="jsonl", path=str(tmp_path / "q.jsonl"), task_types=["math"]), "/nonexistent")
    assert [q.qid for q in bench.questions()] == ["q1"] and bench.tools() == []
    assert bench.tool_dispatch(bench.questions()[0]) is None

    with_dir = build_benchmark(BenchmarkConfig(name="jsonl", path="q.jsonl", harness_dir=str(hdir)), tmp_path)
    assert with_dir.base_harness()["system_prompt.md"] == "Custom prompt"
    assert with_dir.base_harness()["skills/math/SKILL.md"] == "Add carefully."  # the user's skill kept, the other seeded
    assert "name: capitals" in with_dir.base_harness()["skills/capitals/SKILL.md"]
    (tmp_path / "codex" / ".agents" / "skills" / "math").mkdir(parents=True)
    (tmp_path / "codex" / "AGENTS.md").write_text("Codex prompt\n")
    (tmp_path / "codex" / ".agents" / "skills" / "math" / "SKILL.md").write_text("---\nname: math\ndescription: d\n---\nAdd.\n")
    codex = build_benchmark(BenchmarkConfig(name="jsonl", path="q.jsonl", harness_dir="codex", harness_surface="codex"), tmp_path)
    assert codex.base_harness()["system_prompt.md"] == "Codex prompt\n" and "Add." in codex.base_harness()["skills/math/SKILL.md"]
    with pytest.raises(ValueError, match="benchmark.harness_dir: .*a opencode harness needs systemprompt.md"):
        build_benchmark(BenchmarkConfig(name="jsonl", path="q.jsonl", harness_dir="codex", harness_surface="opencode"), tmp_path)
    with pytest.raises(ValueError, match="benchmark.task_types"):
        JsonlBenchmark.from_config(BenchmarkConfig(name="jsonl", path="q.jsonl", task_types=["art"]), tmp_path)
    with pytest.raises(ValueError, match="benchmark.path"):
        build_benchmark(BenchmarkConfig(name="jsonl"), tmp_path)
    with pytest.raises(ValueError, match="benchmark.name: unknown benchmark 'mmlu'"):
        build_benchmark(BenchmarkConfig(name="mmlu"), tmp_path)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_normalization_is_idempotent_and_reflexive(text):
    assert normalize_text(normalize_text(text)) == normalize_text(text)
    assert score_normalized(free(text if text.strip() else "x"), text if text.strip() else "x")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(str.strip), min_size=2, max_size=6, unique_by=normalize_text))
def test_every_letter_and_distinct_choice_text_designates_its_choice(choices):
    letters = "ABCDEFGHIJ"[: len(choices)]
    for i, letter in enumerate(letters):
        assert predicted_letter(letter, tuple(choices)) == letter
        if normalize_text(choices[i]) and len(normalize_text(choices[i])) > 1:
            assert predicted_letter(choices[i], tuple(choices)) == letter
