import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.questions import (
    Question,
    QuestionsError,
    parquet_schema,
    question_from_record,
    questions_digest,
    read_questions,
    validate_rows,
    write_questions,
)


def _qs():
    return [
        Question("q1", "count", "How many?", "B", choices=("1", "2", "3"), difficulty=0.5,
                 context=("video://a.mp4#t=3",), metadata={"src": "x", "n": [1, 2]}),
        Question("q2", "ocr", "What text?", "hello"),
        Question("q3", "count", "How many now?", "A", choices=("4", "5")),
    ]


def _row(**over):
    row = {"qid": "q1", "task_type": "count", "question": "How many?", "answer": "A",
           "choices": ["1", "2"], "difficulty": None, "context": [], "metadata": "{}"}
    row.update(over)
    return row


def _write_rows(path, rows, schema=None):
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def test_roundtrip(tmp_path):
    path = tmp_path / "q.parquet"
    write_questions(path, _qs())
    got = read_questions(path, known_task_types={"count", "ocr"})
    assert got == _qs()
    assert [q.metadata for q in got] == [q.metadata for q in _qs()]
    assert got[1].choices == () and got[1].difficulty is None and not got[1].is_multiple_choice
    assert pq.read_schema(path).field("metadata").type == pa.string()
    assert json.loads(pq.read_table(path).column("metadata")[0].as_py()) == {"n": [1, 2], "src": "x"}


def test_digest_tracks_content(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_questions(a, _qs())
    write_questions(b, _qs()[:2])
    assert len(questions_digest(a)) == 64
    assert questions_digest(a) != questions_digest(b)
    write_questions(b, _qs())
    assert questions_digest(a) == questions_digest(b)  # deterministic bytes for equal input


def test_missing_file(tmp_path):
    with pytest.raises(QuestionsError, match="does not exist"):
        read_questions(tmp_path / "nope.parquet")


def test_not_parquet(tmp_path):
    path = tmp_path / "q.parquet"
    path.write_text("qid,task_type\n1,a\n")
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    assert str(path) in str(err.value) and "Parquet" in str(err.value)


def test_zero_byte_file(tmp_path):
    path = tmp_path / "q.parquet"
    path.write_bytes(b"")
    with pytest.raises(QuestionsError, match="Parquet"):
        read_questions(path)


def test_empty_table(tmp_path):
    path = tmp_path / "q.parquet"
    pq.write_table(parquet_schema().empty_table(), path)
    with pytest.raises(QuestionsError, match="zero rows"):
        read_questions(path)


def test_missing_required_column(tmp_path):
    path = tmp_path / "q.parquet"
    rows = [_row()]
    del rows[0]["answer"]
    _write_rows(path, rows)
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    assert err.value.field == "answer" and "missing" in str(err.value)


def test_unknown_column_refused(tmp_path):
    path = tmp_path / "q.parquet"
    _write_rows(path, [_row(choice=["x"])])
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    assert err.value.field == "choice"


def test_wrong_column_type(tmp_path):
    path = tmp_path / "q.parquet"
    _write_rows(path, [_row(difficulty="hard")])
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    assert err.value.field == "difficulty" and "expected float64" in str(err.value)


def test_null_required_value_names_row_and_field(tmp_path):
    path = tmp_path / "q.parquet"
    _write_rows(path, [_row(), _row(qid="q2", question=None)])
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    e = err.value
    assert (e.row, e.qid, e.field) == (1, "q2", "question")
    assert str(path) in str(e) and "row 1" in str(e) and "'question'" in str(e)


def test_duplicate_qid(tmp_path):
    path = tmp_path / "q.parquet"
    _write_rows(path, [_row(), _row(), _row(qid="q9")])
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    assert (err.value.row, err.value.qid, err.value.field) == (1, "q1", "qid")
    assert "first seen at row 0" in str(err.value)


def test_unknown_task_type(tmp_path):
    path = tmp_path / "q.parquet"
    _write_rows(path, [_row(), _row(qid="q2", task_type="mystery")])
    assert len(read_questions(path)) == 2  # no known list: any task type
    with pytest.raises(QuestionsError) as err:
        read_questions(path, known_task_types=["count"])
    assert (err.value.row, err.value.field) == (1, "task_type") and "mystery" in str(err.value)


@pytest.mark.parametrize("answer", ["C", "a", "1", "AB"])
def test_multiple_choice_answer_must_be_a_choice_letter(answer):
    with pytest.raises(QuestionsError) as err:
        question_from_record(_row(answer=answer), source="s", row=4)
    assert err.value.field == "answer" and err.value.row == 4


def test_too_many_choices():
    with pytest.raises(QuestionsError, match="at most 10"):
        question_from_record(_row(choices=[str(i) for i in range(11)]), source="s", row=0)


@pytest.mark.parametrize(
    "over, field",
    [
        ({"qid": ""}, "qid"),
        ({"qid": 5}, "qid"),
        ({"choices": "A,B"}, "choices"),
        ({"choices": ["1", ""]}, "choices"),
        ({"context": [3]}, "context"),
        ({"difficulty": float("nan")}, "difficulty"),
        ({"difficulty": True}, "difficulty"),
        ({"metadata": "[1, 2]"}, "metadata"),
        ({"metadata": "{not json"}, "metadata"),
    ],
)
def test_field_rules(over, field):
    with pytest.raises(QuestionsError) as err:
        question_from_record(_row(**over), source="s", row=0)
    assert err.value.field == field


def test_metadata_bad_json_in_file(tmp_path):
    path = tmp_path / "q.parquet"
    _write_rows(path, [_row(), _row(qid="q2", metadata="{oops")])
    with pytest.raises(QuestionsError) as err:
        read_questions(path)
    assert (err.value.row, err.value.qid, err.value.field) == (1, "q2", "metadata")


def test_file_written_by_pandas_is_accepted(tmp_path):
    import pandas as pd

    path = tmp_path / "q.parquet"
    pd.DataFrame([_row(), _row(qid="q2", choices=None, answer="x", difficulty=1)]).to_parquet(path)
    got = read_questions(path)
    assert [q.qid for q in got] == ["q1", "q2"]
    assert got[1].choices == () and got[1].difficulty == 1.0


def test_bad_input_writes_nothing(tmp_path):
    path = tmp_path / "q.parquet"
    bad = _qs() + [Question("q1", "count", "dup", "x")]
    with pytest.raises(QuestionsError, match="duplicate"):
        write_questions(path, bad)
    assert not path.exists()
    write_questions(path, _qs())
    before = path.read_bytes()
    with pytest.raises(QuestionsError):
        write_questions(path, [Question("z", "t", "q", "Z", choices=("a", "b"))])
    with pytest.raises(QuestionsError, match="empty"):
        write_questions(path, [])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.parquet"]


def test_validate_rows_for_jsonl_style_input():
    rows = [{"qid": "a", "task_type": "t", "question": "?", "answer": "x", "metadata": {"k": 1}}]
    (q,) = validate_rows(rows, source="in.jsonl")
    assert q.metadata == {"k": 1}
    with pytest.raises(QuestionsError, match="in.jsonl: row 0"):
        validate_rows([{"qid": "a"}], source="in.jsonl")
    with pytest.raises(QuestionsError, match="empty"):
        validate_rows([], source="in.jsonl")


def test_questions_ref_roundtrip_and_checks(tmp_path):
    from harness.questions import check_questions_ref, make_questions_ref

    path = tmp_path / "data" / "q.parquet"
    write_questions(path, _qs())
    ref = make_questions_ref(path)
    assert ref.endswith(questions_digest(path)) and "@sha256:" in ref
    assert check_questions_ref(ref) == path
    assert check_questions_ref("data/q.parquet", base=tmp_path) == path  # relative, no digest
    rel_ref = "data/q.parquet@sha256:" + questions_digest(path)
    assert check_questions_ref(rel_ref, base=tmp_path) == path
    with pytest.raises(QuestionsError, match="does not exist"):
        check_questions_ref("data/other.parquet", base=tmp_path)
    with pytest.raises(QuestionsError, match="non-empty"):
        check_questions_ref("")
    write_questions(path, _qs()[:1])
    with pytest.raises(QuestionsError, match="changed"):
        check_questions_ref(ref)


# --- issue 15 item 6: the three cases that used to escape as raw errors ----------------------------------------

def test_non_utf8_jsonl_huge_difficulty_and_lone_surrogate_are_named_like_other_bad_rows(tmp_path) -> None:
    from harness.bench.jsonl import read_jsonl_questions

    good = '{"qid": "q1", "task_type": "t", "question": "2+2?", "answer": "4"}\n'
    cases = {
        "latin1.jsonl": (good.encode() + '{"qid": "q2", "task_type": "t", "question": "caf\xe9", "answer": "4"}\n'
                         .encode("latin-1"), "line 2: not UTF-8 text (byte 0xe9 at column 49)"),
        "huge.jsonl": (good.replace('"4"}', '"4", "difficulty": 1' + "0" * 400 + "}").encode(),
                       "line 1: field 'difficulty': expected a finite number, got an integer of 401 digits"),
        "surrogate.jsonl": (good.replace("2+2?", "\\ud800 2+2?").encode(),
                            "line 1: field 'question': holds a lone surrogate '\\ud800' at character 0"),
        "surrogate_choice.jsonl": (good.replace('"answer": "4"', '"answer": "A", "choices": ["x\\udfff", "y"]').encode(),
                                   "field 'choices[0]': holds a lone surrogate"),
    }
    for name, (data, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(QuestionsError) as info:
            read_jsonl_questions(path)
        assert str(info.value).startswith(str(path)) and words in str(info.value), (name, str(info.value))
