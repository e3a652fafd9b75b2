"""`benchmark=jsonl`: the user's own questions from a JSONL or Parquet file.

Rows follow the questions schema (docs/data.md: qid, task_type, question,
answer, choices, difficulty, context, metadata). A bad row raises
QuestionsError naming the file, the line (JSONL, 1-based) or row (Parquet)
and the field. Scoring: `benchmark.scorer` ("exact" | "normalized" |
"module:function"); multiple-choice questions are scored by answer letter.

Tools: when any question carries `context` entries, the solver gets one
tool, `get_context` ({"index": i} -> the i-th context entry of the question).

Base harness: a native-layout tree (`benchmark.harness_dir`, read by
harness/compose.py, which also converts Codex / OpenCode trees) when given,
else a generic system prompt and the tool guide. Either way every task type of
the data gets its own `skills/<task_type>/SKILL.md` (seed 000 §15: fast
gates, probation, momentum and the slow update run per skill file): a file the
tree already has is kept, a missing one is seeded from the tree's
`skills/default-strategy/SKILL.md`, else from `DEFAULT_STRATEGY`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.bench.protocol import (
    Scorer,
    ToolArgumentError,
    ToolDispatch,
    ToolSpec,
    UnknownToolError,
    no_tools,
)
from harness.bench.scoring import load_scorer
from harness.contracts.solver import (
    DEFAULT_SKILL,
    SYSTEM_PROMPT_PATH,
    TOOLS_PREFIX,
    skill_path,
)
from harness.questions import (
    Question,
    QuestionsError,
    question_from_record,
    read_questions,
)
from harness.tree import HarnessTree

CONTEXT_TOOL = ToolSpec(
    "get_context",
    'Returns one context entry of the current question. Arguments: {"index": <0-based int>}.',
)

DEFAULT_SYSTEM_PROMPT = """You are a careful problem solver. Read the question, think step by step,
use the available tools when the question refers to material you have not seen,
and answer in the required format."""

DEFAULT_STRATEGY_RULES = (
    "Restate what the question asks before answering.",
    "For multiple choice, eliminate choices that contradict the question, then pick the best remaining one.",
    "For short answers, give only the answer itself, without extra words.",
)


def strategy_skill(name: str, description: str) -> str:
    """A native SKILL.md holding the default strategy: frontmatter, a title and a `## Rules` list (edits add bullets there)."""
    rules = "\n".join(f"- {rule}" for rule in DEFAULT_STRATEGY_RULES)
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n## Rules\n{rules}\n"


DEFAULT_STRATEGY = strategy_skill(DEFAULT_SKILL, "Use for questions of any task type.")
# a task type names a skill folder (skills/<task_type>/SKILL.md)
TASK_TYPE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_FRONTMATTER_NAME = re.compile(r"\A(---[ \t]*\n(?:(?!---).*\n)*?)name:[^\n]*\n")

CONTEXT_TOOL_GUIDE = """Call `get_context` with {"index": 0}, {"index": 1}, ... to read the material the question refers to.
An out-of-range index returns an error; stop when you have what you need."""


def read_jsonl_questions(path: str | Path, *, known_task_types: Iterable[str] | None = None) -> list[Question]:
    """Questions of a JSONL file; QuestionsError names the file, line and field of the first bad row."""
    source = str(path)
    file_path = Path(path)
    if not file_path.is_file():
        raise QuestionsError(source, "file does not exist or is not a regular file")
    known = None if known_task_types is None else set(known_task_types)
    questions: list[Question] = []
    first_line: dict[str, int] = {}
    with file_path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            where = f"{source}: line {line_no}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise QuestionsError(where, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                                            "save the file as UTF-8") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionsError(where, f"not valid JSON: {exc.msg} (column {exc.colno})") from exc
            # row=None: the line number is already in `where` (the data module counts rows from 0)
            question = question_from_record(record, source=where, row=None, known_task_types=known)  # type: ignore[arg-type]
            if question.qid in first_line:
                raise QuestionsError(where, f"duplicate qid {question.qid!r} (first on line {first_line[question.qid]})", field="qid")
            first_line[question.qid] = line_no
            questions.append(question)
    if not questions:
        raise QuestionsError(source, "no questions (the file has no non-empty lines)")
    return questions


def read_user_questions(path: str | Path, *, known_task_types: Iterable[str] | None = None) -> list[Question]:
    """JSONL (`.jsonl`, `.json`) or Parquet (`.parquet`, `.pq`), chosen by suffix."""
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return read_jsonl_questions(path, known_task_types=known_task_types)
    if suffix in (".parquet", ".pq"):
        return read_questions(path, known_task_types=known_task_types)
    raise QuestionsError(str(path), f"unsupported file type {suffix!r}; expected .jsonl or .parquet")


def default_base_harness(*, with_context_tool: bool) -> HarnessTree:
    """The generic starting harness before per-task-type skills: system prompt (+ the context tool's guide)."""
    files = {SYSTEM_PROMPT_PATH: DEFAULT_SYSTEM_PROMPT}
    if with_context_tool:
        files[f"{TOOLS_PREFIX}{CONTEXT_TOOL.name}.md"] = CONTEXT_TOOL_GUIDE
    return HarnessTree(files)


def seeded_skill(task_type: str, strategy: str) -> str:
    """`strategy` (a default-strategy SKILL.md) as the first version of `task_type`'s skill file."""
    text = strategy if strategy.endswith("\n") else strategy + "\n"
    named, count = _FRONTMATTER_NAME.subn(lambda m: f"{m.group(1)}name: {task_type}\n", text, count=1)
    return named if count else text


def with_task_type_skills(base: HarnessTree, task_types: Sequence[str], *, source: str = "the questions") -> HarnessTree:
    """`base` plus one skill file per task type it lacks, seeded from its default strategy (else DEFAULT_STRATEGY)."""
    bad = [t for t in task_types if not TASK_TYPE_NAME.match(t) or t == DEFAULT_SKILL]
    if bad:
        raise QuestionsError(source, f"task type {bad[0]!r} cannot name a skill folder (skills/<task_type>/SKILL.md): "
                                     f"use letters, digits, '_', '-', '.', and not {DEFAULT_SKILL!r}", field="task_type")
    strategy = base.get(skill_path(DEFAULT_SKILL))
    return base.with_files({skill_path(t): seeded_skill(t, strategy) if strategy else strategy_skill(t, f"questions of task type {t}")
                            for t in task_types if skill_path(t) not in base})


class HarnessDirError(ValueError):
    """`benchmark.harness_dir` is not a usable harness tree (`reason` says why; the message names the key and path)."""

    def __init__(self, directory: Path, reason: str):
        self.directory, self.reason = directory, reason
        super().__init__(f"benchmark.harness_dir: {directory}: {reason}")


def load_harness_dir(directory: str | Path, surface: str = "native") -> HarnessTree:
    """`benchmark.harness_dir`: the harness at `directory` in the layout `surface`, in the native layout."""
    from harness.bench.layouts import load_in_layout

    try:
        return load_in_layout(Path(directory), surface)
    except ValueError as exc:
        raise HarnessDirError(Path(directory), str(exc)) from None


def context_dispatch(question: Question) -> ToolDispatch:
    def dispatch(name: str, arguments: Mapping[str, Any]) -> str:
        if name != CONTEXT_TOOL.name:
            raise UnknownToolError(f"unknown tool {name!r}; available: [{CONTEXT_TOOL.name!r}]")
        index = arguments.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise ToolArgumentError(f"{CONTEXT_TOOL.name}: 'index' must be an integer, got {index!r}")
        if not 0 <= index < len(question.context):
            raise ToolArgumentError(f"{CONTEXT_TOOL.name}: index {index} out of range; this question has {len(question.context)} context entries")
        return question.context[index]

    return dispatch


class JsonlBenchmark:
    """BenchmarkAdapter over a user's question file."""

    name = "jsonl"

    def __init__(self, questions: Sequence[Question], *, scorer: Scorer, base: HarnessTree | None = None, task_types: Sequence[str] = ()):
        self._questions = list(questions)
        found = sorted({q.task_type for q in self._questions})
        if task_types:
            missing = sorted(set(task_types) - set(found))
            if missing:
                raise ValueError(f"benchmark.task_types: {missing} have no questions in the file (found {found})")
            self._questions = [q for q in self._questions if q.task_type in set(task_types)]
        self.task_types = tuple(task_types) if task_types else tuple(found)
        self._scorer = scorer
        self._has_context = any(q.context for q in self._questions)
        start = base if base is not None else default_base_harness(with_context_tool=self._has_context)
        self._base = with_task_type_skills(start, self.task_types)

    @classmethod
    def from_config(cls, bench_cfg: Any, root: str | Path, *, base: HarnessTree | None = None) -> JsonlBenchmark:
        """From the `benchmark` config; `base` (already in the native layout) wins over `benchmark.harness_dir`."""
        if not getattr(bench_cfg, "path", None):
            raise ValueError("benchmark.path: benchmark=jsonl needs the path of a .jsonl or .parquet question file")
        path = Path(bench_cfg.path)
        if not path.is_absolute():
            path = Path(root) / path
        harness_dir = getattr(bench_cfg, "harness_dir", None)
        if base is None and harness_dir:
            base_path = Path(harness_dir)
            base = load_harness_dir(base_path if base_path.is_absolute() else Path(root) / base_path)
        return cls(
            read_user_questions(path),
            scorer=load_scorer(bench_cfg.scorer),
            base=base,
            task_types=list(getattr(bench_cfg, "task_types", None) or ()),
        )

    def questions(self) -> list[Question]:
        return list(self._questions)

    def base_harness(self) -> HarnessTree:
        return self._base

    def tools(self) -> list[ToolSpec]:
        return [CONTEXT_TOOL] if self._has_context else []

    def tool_dispatch(self, question: Question) -> ToolDispatch | None:
        if question.context:
            return context_dispatch(question)
        return no_tools if self._has_context else None

    def score(self, question: Question, predicted: str | None) -> bool | float:
        return self._scorer(question, predicted)

