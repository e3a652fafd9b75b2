"""Prompts of the loop's "gradient step": diagnoser, editor, momentum, slow updates.

The system messages are templates, files of `templates/` shipped with the package
(`diagnoser.md`, `skill_editor.md`, `system_prompt_editor.md`, `tool_editor.md`,
`momentum.md`); `evolve.prompts_dir` overrides any of them, and `$domain` is the
benchmark's domain words (`benchmark.domain`). Each rendered template is followed by
its reply contract, which stays product code.

The reply formats, `FORMAT:` names and the headings these messages are built
from are harness/contracts/evolution.py (the simulated world reads the same
headings). Evidence is quoted as data: the prompts say so, and traces are fenced.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

from harness.contracts.evolution import (
    DIAGNOSIS_CONTRACT,
    EDIT_OPS_CONTRACT,
    FILE_CLOSE,
    FILE_OPEN,
    H_COMPARISON,
    H_CURRENT_FILE,
    H_DIAGNOSES,
    H_FAILURES,
    H_PREVIOUS_GUIDANCE,
    H_REJECTED,
    H_TOOL_USAGE,
    MOMENTUM_CONTRACT,
    TRACE_CLOSE,
    TRACE_OPEN,
)
from harness.contracts.solver import CHOICES_HEADING
from harness.kernel.types import CaseSample, RejectedEdit, ToolCasePack
from harness.llm.protocol import ChatMessage
from harness.questions import LETTERS

MAX_TRACE_CHARS = 800
MAX_CHOICE_CHARS = 200  # a choice is shown whole up to this; the solver saw it whole
MAX_CONTEXT_CHARS = 300  # per context entry: enough to see what the material says, bounded for long documents
MAX_CONTEXT_ENTRIES = 4

TEMPLATES_DIR = Path(__file__).with_name("templates")  # package data (pyproject.toml)
DATA_FILES = ("templates/*.md",)  # part of every stage fingerprint whose code imports this module (code_fingerprint.py)
# template name -> the reply contract appended after it (product code: an edited template cannot break a parser)
TEMPLATE_CONTRACTS = {
    "diagnoser": DIAGNOSIS_CONTRACT,
    "skill_editor": EDIT_OPS_CONTRACT,
    "system_prompt_editor": EDIT_OPS_CONTRACT,
    "tool_editor": EDIT_OPS_CONTRACT,
    "momentum": MOMENTUM_CONTRACT,
}
DEFAULT_DOMAIN = "questions"  # the loop passes `benchmark.domain` (conf/benchmark/*.yaml)


class PromptTemplateError(ValueError):
    """A prompts directory or template that cannot be used; the message names the file."""


@dataclass(frozen=True)
class MetaPrompts:
    """The system messages of the meta roles, rendered from `<name>.md` templates ($domain substituted).

    `sources` maps each template name to the file it was read from (the package's templates, or
    `evolve.prompts_dir`, which may override any subset of them)."""

    systems: Mapping[str, str]
    sources: Mapping[str, str]

    @classmethod
    def load(cls, domain: str = DEFAULT_DOMAIN, prompts_dir: str | Path | None = None) -> MetaPrompts:
        if not str(domain).strip():
            raise PromptTemplateError("benchmark.domain: the domain words must not be empty (e.g. 'questions about tax law')")
        files = template_files(prompts_dir)
        systems = {}
        for name, path in files.items():
            try:
                text = Template(path.read_text(encoding="utf-8")).substitute(domain=" ".join(str(domain).split()))
            except (KeyError, ValueError) as exc:
                raise PromptTemplateError(f"{path}: bad placeholder ({exc}); the only placeholder is $domain "
                                          "(write $$ for a literal $)") from None
            systems[name] = f"{text.rstrip()}\n{TEMPLATE_CONTRACTS[name]}"
        return cls(systems, {name: str(path) for name, path in files.items()})

    def system(self, name: str) -> str:
        return self.systems[name]


def template_files(prompts_dir: str | Path | None = None) -> dict[str, Path]:
    """name -> template file: the package's, each replaced by `prompts_dir/<name>.md` when that file exists.

    A file in `prompts_dir` that is not a template name is an error (a misspelt name would otherwise be ignored)."""
    files = {name: TEMPLATES_DIR / f"{name}.md" for name in TEMPLATE_CONTRACTS}
    if prompts_dir is None:
        return files
    directory = Path(prompts_dir)
    if not directory.is_dir():
        raise PromptTemplateError(f"evolve.prompts_dir: {directory} is not a directory")
    for path in sorted(directory.iterdir()):
        if path.suffix != ".md" or path.stem not in files:
            raise PromptTemplateError(f"evolve.prompts_dir: {path} is not a template; expected files named "
                                      f"{', '.join(f'{n}.md' for n in TEMPLATE_CONTRACTS)}")
        files[path.stem] = path
    return files


@functools.lru_cache(maxsize=1)
def default_prompts() -> MetaPrompts:
    return MetaPrompts.load()


def _fence_file(text: str) -> str:
    return f"{FILE_OPEN}\n{text.rstrip()}\n{FILE_CLOSE}"


def format_trace(trace: str) -> str:
    trace = (trace or "").strip()
    if len(trace) > MAX_TRACE_CHARS:
        trace = trace[:MAX_TRACE_CHARS] + " …[truncated]"
    return f"{TRACE_OPEN}\n{trace}\n{TRACE_CLOSE}"


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + " …[truncated]"


def answer_label(letter: str | None, choices: Sequence[str]) -> str:
    """`D (text of D)` for a choice letter of a multiple-choice case, the answer as is otherwise, `(none)` for None."""
    if letter is None:
        return "(none)"
    index = LETTERS.find(letter.strip()) if len(letter.strip()) == 1 else -1
    if 0 <= index < len(choices):
        return f"{letter.strip()} ({_cut(choices[index], MAX_CHOICE_CHARS)})"
    return letter


def format_case_view(case: CaseSample) -> str:
    """What the solver was shown (question, lettered choices, context entries): the lines of one case."""
    lines = [f"Question: {case.question.strip()}"]
    if case.choices:
        lines.append(CHOICES_HEADING)
        lines += [f"{letter}. {_cut(choice, MAX_CHOICE_CHARS)}" for letter, choice in zip(LETTERS, case.choices)]
    if case.context:
        shown = case.context[:MAX_CONTEXT_ENTRIES]
        more = f" (first {len(shown)} of {len(case.context)})" if len(case.context) > len(shown) else ""
        lines.append(f"Context entries the agent could read with its tool{more}:")
        lines += [f"[{i}] {_cut(entry, MAX_CONTEXT_CHARS)}" for i, entry in enumerate(shown)]
    return "\n".join(lines)


def format_cases(cases: Sequence[CaseSample]) -> str:
    if not cases:
        return "(no failure cases)"
    blocks = []
    for i, c in enumerate(cases, 1):
        blocks.append(
            f"### Case {i} · qid {c.qid} · Task type: {c.task_type}\n"
            f"{format_case_view(c)}\n"
            f"Predicted: {answer_label(c.predicted, c.choices)} · Correct: {answer_label(c.answer, c.choices)}\n"
            f"Trace:\n{format_trace(c.trace_excerpt)}"
        )
    return "\n\n".join(blocks)


def format_rejected(rejected: Sequence[RejectedEdit | str]) -> str:
    lines = []
    for r in rejected:
        summary = r.summary if isinstance(r, RejectedEdit) else str(r)
        for line in summary.strip().splitlines():
            if line.strip():
                lines.append(line if line.lstrip().startswith("-") else f"- {line.strip()}")
    return "\n".join(lines) if lines else "(none)"


def skill_editor_messages(
    *,
    task_type: str,
    skill_file: str,
    skill_text: str,
    cases: Sequence[CaseSample],
    diagnoses: Sequence[str],
    rejected: Sequence[RejectedEdit | str],
    edit_budget: int,
    seeded_from: str | None = None,
    prompts: MetaPrompts | None = None,
) -> list[ChatMessage]:
    diag = "\n".join(f"- {' '.join(d.split())}" for d in diagnoses if d.strip()) or "(none)"
    new_file = ("" if seeded_from is None else
                f"New file: this task type has no skill file of its own yet and reads the shared {seeded_from}; the file below "
                "is a copy of it that would serve this task type only. Propose edits when these failures share a cause "
                "specific to this task type; otherwise reply no-change.\n")
    user = (
        f"Target file: {skill_file}\nTask type: {task_type}\nEdit budget: {edit_budget}\n{new_file}\n"
        f"{H_CURRENT_FILE}\n{_fence_file(skill_text)}\n\n"
        f"{H_FAILURES}\n{format_cases(cases)}\n\n"
        f"{H_DIAGNOSES}\n{diag}\n\n"
        f"{H_REJECTED} (already validated and rejected; do not propose them again)\n{format_rejected(rejected)}\n"
    )
    return [ChatMessage("system", (prompts or default_prompts()).system("skill_editor")), ChatMessage("user", user)]


def system_prompt_editor_messages(
    *, target_file: str, text: str, cases: Sequence[CaseSample], rejected: Sequence[RejectedEdit | str], edit_budget: int,
    prompts: MetaPrompts | None = None,
) -> list[ChatMessage]:
    user = (
        f"Target file: {target_file}\nEdit budget: {edit_budget}\n\n"
        f"{H_CURRENT_FILE}\n{_fence_file(text)}\n\n"
        f"{H_FAILURES}\n{format_cases(cases)}\n\n"
        f"{H_REJECTED} (already validated and rejected; do not propose them again)\n{format_rejected(rejected)}\n"
    )
    return [ChatMessage("system", (prompts or default_prompts()).system("system_prompt_editor")), ChatMessage("user", user)]


def tool_editor_messages(*, target_file: str, text: str, pack: ToolCasePack, edit_budget: int,
                         prompts: MetaPrompts | None = None) -> list[ChatMessage]:
    examples = "\n".join(f"- {k}: {' '.join(str(v).split())[:300]}" for k, v in sorted(pack.examples.items())) or "(none)"
    user = (
        f"Target file: {target_file}\nTool: {pack.tool}\nEdit budget: {edit_budget}\n\n"
        f"{H_CURRENT_FILE}\n{_fence_file(text)}\n\n"
        f"{H_TOOL_USAGE}\nCalls this epoch: {pack.calls}\nErrors: {pack.errors}\nExamples:\n{examples}\n"
    )
    return [ChatMessage("system", (prompts or default_prompts()).system("tool_editor")), ChatMessage("user", user)]


def diagnosis_messages(case: CaseSample, prompts: MetaPrompts | None = None) -> list[ChatMessage]:
    user = (
        f"Task type: {case.task_type}\nQuestion id: {case.qid}\n"
        f"{format_case_view(case)}\n"
        f"Agent answer: {answer_label(case.predicted, case.choices)}\nCorrect answer: {answer_label(case.answer, case.choices)}\n\n"
        f"Trace:\n{format_trace(case.trace_excerpt)}\n"
    )
    return [ChatMessage("system", (prompts or default_prompts()).system("diagnoser")), ChatMessage("user", user)]


def momentum_messages(*, task_type: str, skill_file: str, skill_text: str, previous_guidance: str, comparison: str,
                      prompts: MetaPrompts | None = None) -> list[ChatMessage]:
    user = (
        f"Target file: {skill_file}\nTask type: {task_type}\n\n"
        f"{H_CURRENT_FILE}\n{_fence_file(skill_text)}\n\n"
        f"{H_PREVIOUS_GUIDANCE}\n{previous_guidance.strip() or '(none)'}\n\n"
        f"{H_COMPARISON}\n{comparison}\n"
    )
    return [ChatMessage("system", (prompts or default_prompts()).system("momentum")), ChatMessage("user", user)]


def format_retry_message(error: str, fmt: str) -> ChatMessage:
    """Feedback after a reply that did not parse (one retry)."""
    return ChatMessage("user", f"Your reply could not be parsed ({error}). Reply again, strictly in FORMAT: {fmt}.")
