"""The questions schema and its Parquet IO (see docs/data.md).

Required: qid, task_type, question, answer. Optional: choices (list of
strings; multiple choice when non-empty, and then `answer` is the letter
"A".."J" of the correct choice), difficulty (finite float, IRT logit),
context (list of media/context references), metadata (free JSON object,
stored as a JSON string column).

`read_questions` validates everything and raises `QuestionsError` naming the
file, the row (0-based index and qid when known) and the field.
`write_questions` validates first and writes atomically, so bad input
writes nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LETTERS = "ABCDEFGHIJ"  # the choice letters of every prompt (harness/contracts/solver.py); at most 10 choices
REQUIRED_FIELDS = ("qid", "task_type", "question", "answer")
OPTIONAL_FIELDS = ("choices", "difficulty", "context", "metadata")
ALL_FIELDS = REQUIRED_FIELDS + OPTIONAL_FIELDS


@dataclass(frozen=True)
class Question:
    qid: str
    task_type: str
    question: str
    answer: str
    choices: tuple[str, ...] = ()
    difficulty: float | None = None
    context: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.choices)


class QuestionsError(ValueError):
    """Bad questions data; the message names the source, row, qid and field."""

    def __init__(self, source: str, message: str, *, row: int | None = None, qid: str | None = None, field: str | None = None):
        self.source = source
        self.row = row
        self.qid = qid
        self.field = field
        where = [str(source)]
        if row is not None:
            where.append(f"row {row}" + (f" (qid={qid!r})" if qid is not None else ""))
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(": ".join(where) + f": {message}")


# ---------------------------------------------------------------- validation


def question_from_record(
    record: Mapping[str, Any],
    *,
    source: str,
    row: int,
    known_task_types: Iterable[str] | None = None,
) -> Question:
    """Build one validated Question from a plain mapping (a Parquet row, a JSONL line).

    `metadata` may be a dict or a JSON string holding an object; missing
    optional fields take their empty value; unknown keys are refused.
    """
    if not isinstance(record, Mapping):
        raise QuestionsError(source, f"expected an object/mapping, got {type(record).__name__}", row=row)
    qid_value = record.get("qid")
    qid = qid_value if isinstance(qid_value, str) and qid_value else None

    def fail(field_name: str, message: str) -> QuestionsError:
        return QuestionsError(source, message, row=row, qid=qid, field=field_name)

    unknown = sorted(set(record) - set(ALL_FIELDS))
    if unknown:
        raise fail(unknown[0], f"unknown field(s) {unknown}; allowed fields are {list(ALL_FIELDS)}")

    values: dict[str, str] = {}
    for name in REQUIRED_FIELDS:
        if name not in record:
            raise fail(name, "required field is missing")
        if record[name] is None:  # JSON null (a Parquet null): present, but no value
            raise fail(name, "required field is null; expected a non-empty string")
        value = record[name]
        if not isinstance(value, str):
            raise fail(name, f"expected a string, got {type(value).__name__} {value!r}")
        if not value.strip():
            raise fail(name, "expected a non-empty string")
        _require_unicode(value, fail, name)
        values[name] = value

    choices = _string_list(record.get("choices"), fail, "choices")
    if len(choices) > len(LETTERS):
        raise fail("choices", f"at most {len(LETTERS)} choices are supported, got {len(choices)}")
    if choices:
        allowed = list(LETTERS[: len(choices)])
        if values["answer"] not in allowed:
            raise fail(
                "answer",
                f"multiple-choice answer must be one of the letters {allowed} "
                f"(one per choice), got {values['answer']!r}",
            )

    difficulty = record.get("difficulty")
    if difficulty is not None:
        if isinstance(difficulty, bool) or not isinstance(difficulty, (int, float)):
            raise fail("difficulty", f"expected a number or null, got {type(difficulty).__name__} {difficulty!r}")
        try:
            difficulty = float(difficulty)
        except OverflowError:
            raise fail("difficulty", f"expected a finite number, got an integer of {len(str(difficulty))} digits "
                       "(beyond float range)") from None
        if not math.isfinite(difficulty):
            raise fail("difficulty", f"expected a finite number, got {difficulty!r}")

    context = _string_list(record.get("context"), fail, "context")

    metadata = record.get("metadata")
    if metadata is None:
        metadata = {}
    elif isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata.strip() else {}
        except json.JSONDecodeError as exc:
            raise fail("metadata", f"not valid JSON: {exc}") from exc
    if not isinstance(metadata, dict):
        raise fail("metadata", f"expected a JSON object, got {type(metadata).__name__}")
    try:
        _require_unicode(json.dumps(metadata, allow_nan=False, ensure_ascii=False), fail, "metadata")
    except (TypeError, ValueError) as exc:
        if isinstance(exc, QuestionsError):
            raise
        raise fail("metadata", f"not JSON-serialisable: {exc}") from exc

    if known_task_types is not None:
        known = set(known_task_types)
        if values["task_type"] not in known:
            raise fail("task_type", f"unknown task type {values['task_type']!r}; known: {sorted(known)}")

    return Question(
        qid=values["qid"],
        task_type=values["task_type"],
        question=values["question"],
        answer=values["answer"],
        choices=tuple(choices),
        difficulty=difficulty,
        context=tuple(context),
        metadata=metadata,
    )


def _require_unicode(text: str, fail, name: str) -> None:
    """Refuse a lone surrogate (JSON `"\\ud800"` decodes to one): it is no Unicode text, and Parquet cannot store it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fail(name, f"holds a lone surrogate {text[exc.start]!r} at character {exc.start} (an unpaired \\uD800-"
                   "\\uDFFF escape): not valid Unicode text; fix or remove the escape") from None


def _string_list(value: Any, fail, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        # numpy arrays from pandas are not Sequence; accept anything list-like with tolist()
        if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
            value = value.tolist()
        else:
            raise fail(name, f"expected a list of strings, got {type(value).__name__} {value!r}")
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise fail(name, f"item {i} must be a non-empty string, got {item!r}")
        _require_unicode(item, fail, f"{name}[{i}]")
        out.append(item)
    return out


def validate_questions(
    questions: Sequence[Question],
    *,
    source: str,
    known_task_types: Iterable[str] | None = None,
) -> list[Question]:
    """Re-check a list of Questions (field rules, unique qids, known task types, non-empty)."""
    records = []
    for row, q in enumerate(questions):
        if not isinstance(q, Question):
            raise QuestionsError(source, f"expected a Question, got {type(q).__name__}", row=row)
        records.append(question_to_record(q, metadata_as_json=False))
    return validate_rows(records, source=source, known_task_types=known_task_types)


def question_to_record(q: Question, *, metadata_as_json: bool = True) -> dict[str, Any]:
    """Plain dict of a Question (the Parquet/JSONL row); metadata as a JSON string by default."""
    metadata: Any = q.metadata
    if metadata_as_json:
        metadata = json.dumps(q.metadata, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return {
        "qid": q.qid,
        "task_type": q.task_type,
        "question": q.question,
        "answer": q.answer,
        "choices": list(q.choices),
        "difficulty": q.difficulty,
        "context": list(q.context),
        "metadata": metadata,
    }


# ---------------------------------------------------------------- Parquet IO


def parquet_schema():
    """The explicit Arrow schema of questions.parquet."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("qid", pa.string(), nullable=False),
            pa.field("task_type", pa.string(), nullable=False),
            pa.field("question", pa.string(), nullable=False),
            pa.field("answer", pa.string(), nullable=False),
            pa.field("choices", pa.list_(pa.string()), nullable=True),
            pa.field("difficulty", pa.float64(), nullable=True),
            pa.field("context", pa.list_(pa.string()), nullable=True),
            pa.field("metadata", pa.string(), nullable=True),
        ]
    )


def write_questions(path: str | os.PathLike[str], questions: Sequence[Question]) -> Path:
    """Validate `questions` and write them as Parquet atomically. Bad input writes nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.atomic import atomic_write_bytes

    target = Path(path)
    checked = validate_questions(list(questions), source=str(target))
    records = [question_to_record(q) for q in checked]
    table = pa.Table.from_pylist(records, schema=parquet_schema())
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return atomic_write_bytes(target, buffer.getvalue())


def read_questions(path: str | os.PathLike[str], *, known_task_types: Iterable[str] | None = None) -> list[Question]:
    """Read and validate questions.parquet; raises QuestionsError on any problem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = str(path)
    file_path = Path(path)
    if not file_path.is_file():
        raise QuestionsError(source, "file does not exist or is not a regular file")
    try:
        # ParquetFile(...).read(), not read_table: the same table, without pyarrow.dataset (which imports pandas, ~0.5 s)
        table = pq.ParquetFile(file_path).read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise QuestionsError(source, f"not a readable Parquet file: {exc}") from exc

    names = table.schema.names
    for name in REQUIRED_FIELDS:
        if name not in names:
            raise QuestionsError(source, f"required column is missing (columns: {names})", field=name)
    unknown = [n for n in names if n not in ALL_FIELDS]
    if unknown:
        raise QuestionsError(source, f"unknown column(s) {unknown}; allowed columns are {list(ALL_FIELDS)}", field=unknown[0])
    for name in names:
        _check_column_type(source, name, table.schema.field(name).type)
    if table.num_rows == 0:
        raise QuestionsError(source, "no questions (the file has zero rows)")

    questions = validate_rows(table.to_pylist(), source=source, known_task_types=known_task_types)
    return questions


def validate_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str,
    known_task_types: Iterable[str] | None = None,
) -> list[Question]:
    """Rows (dicts) -> validated Questions: field rules, unique qids, known task types, non-empty."""
    known = None if known_task_types is None else set(known_task_types)
    out: list[Question] = []
    seen: dict[str, int] = {}
    for row, record in enumerate(rows):
        q = question_from_record(record, source=source, row=row, known_task_types=known)
        if q.qid in seen:
            raise QuestionsError(source, f"duplicate qid (first seen at row {seen[q.qid]})", row=row, qid=q.qid, field="qid")
        seen[q.qid] = row
        out.append(q)
    if not out:
        raise QuestionsError(source, "no questions (an empty question set is not allowed)")
    return out


def _check_column_type(source: str, name: str, arrow_type) -> None:
    import pyarrow.types as pat

    def is_string(t) -> bool:
        return pat.is_string(t) or pat.is_large_string(t)

    if name in REQUIRED_FIELDS or name == "metadata":
        ok, expected = is_string(arrow_type), "string"
    elif name in ("choices", "context"):
        ok = (pat.is_list(arrow_type) or pat.is_large_list(arrow_type)) and (
            is_string(arrow_type.value_type) or pat.is_null(arrow_type.value_type)
        )
        ok = ok or pat.is_null(arrow_type)
        expected = "list<string>"
    else:  # difficulty
        ok = pat.is_floating(arrow_type) or pat.is_integer(arrow_type) or pat.is_null(arrow_type)
        expected = "float64"
    if not ok:
        raise QuestionsError(source, f"column has type {arrow_type}, expected {expected}", field=name)


def questions_digest(path: str | os.PathLike[str]) -> str:
    """sha256 hex digest of the questions file's bytes (the questions reference for tracking)."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- questions reference

_REF_SEP = "@sha256:"


def make_questions_ref(path: str | os.PathLike[str]) -> str:
    """`<path>@sha256:<digest>`: where the questions are and which content they had."""
    return f"{Path(path).as_posix()}{_REF_SEP}{questions_digest(path)}"


def check_questions_ref(ref: str, *, base: str | os.PathLike[str] | None = None) -> Path:
    """Resolve a questions reference (relative paths against `base`, default cwd) and verify it.

    Accepts `<path>` or `<path>@sha256:<digest>`; raises QuestionsError when
    the file is missing or its content no longer matches the digest.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise QuestionsError(str(ref), "questions reference must be a non-empty string")
    path_text, sep, digest = ref.rpartition(_REF_SEP)
    if not sep:
        path_text, digest = ref, ""
    path = Path(path_text)
    if not path.is_absolute():
        path = Path(base if base is not None else os.getcwd()) / path
    if not path.is_file():
        raise QuestionsError(ref, f"questions file {path} does not exist")
    if digest and questions_digest(path) != digest:
        raise QuestionsError(ref, f"questions file {path} changed: its sha256 is {questions_digest(path)}, the reference expects {digest}")
    return path


def require_recorded_questions(ref: str, path: str | os.PathLike[str]) -> None:
    """Refuse to compute on `path` when its content is not the questions file `ref` recorded (a workspace's
    manifest): a stage run by hand, or after the file changed, would mix two question sets in one run."""
    _, sep, digest = str(ref).rpartition(_REF_SEP)
    if not sep or not Path(path).is_file():
        return  # no digest recorded / read_questions names the missing file
    actual = questions_digest(path)
    if actual != digest:
        raise QuestionsError(str(path), f"sha256 {actual[:16]}... is not the questions file this run's workspace "
                             f"recorded ({ref}); re-create it with `dvc repro` (prepare), or point "
                             "benchmark.questions_path at the recorded file")

