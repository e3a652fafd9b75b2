"""The loop's "gradient step": ask the editor for edit ops and apply them (seed 000 §15/§16).

`evolve_single_skill` edits one skill file under an edit budget,
`evolve_system_prompt` / `evolve_single_tool` do the same for the slow update.
Each makes one editor call, in the provider's reply format (JSON under a
schema where the provider enforces one, else the `<edit>` text format;
harness/evolution/ask.py), recorded in `EvolutionRecord.reply_format`; a
reply that does not parse gets one retry with the parser's message as
feedback, and a second failure is recorded in `EvolutionRecord.parse_error`
with the text unchanged (never applied). A reply that parses but proposes
nothing applicable (structured output: edits the schema admits that cannot be
applied, harness/contracts/structured.py) is a no-change whose reason is
recorded, and such edits are in `apply_report` as `invalid` with theirs; so
is a reply whose edits all fail to apply (`not_found`, `duplicate`, ...):
`no_change_reason` then lists each edit's status. Provider errors
(`LLMError`) propagate: the caller decides (the response cache makes a re-run
free).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.contracts.evolution import EDIT_OPS_CONTRACT, FORMAT_EDIT_OPS, EditOps, parse_edit_ops
from harness.contracts.structured import EDIT_OPS_JSON_INSTRUCTION, edit_ops_schema, parse_edit_ops_json
from harness.kernel.types import CaseSample, EvolutionRecord, RejectedEdit, SkillCasePack, SystemCasePack, ToolCasePack
from harness.llm.protocol import ChatMessage, LLMProvider, Role

from .apply import apply_edits
from .ask import ReplyContract, ask_parsed
from .prompts import MetaPrompts, skill_editor_messages, system_prompt_editor_messages, tool_editor_messages

SYSTEM_PROMPT_FILE = "system_prompt.md"
NO_APPLIED_EDIT_SUMMARY = "(no edit of this candidate was applied; the file was unchanged, so nothing was validated)"


def edit_ops_contract(edit_budget: int) -> ReplyContract[EditOps]:
    """The editor's reply: `<edit>` blocks (text) or their JSON form with at most `edit_budget` edits."""
    return ReplyContract(FORMAT_EDIT_OPS, parse_edit_ops, "edit_ops", edit_ops_schema(edit_budget), parse_edit_ops_json,
                         EDIT_OPS_JSON_INSTRUCTION, EDIT_OPS_CONTRACT)


async def ask_edit_ops(llm: LLMProvider, messages: list[ChatMessage], sample_index: int, *, edit_budget: int = 1,
                       reply_format: str | None = None) -> tuple[EditOps | None, str, float, str]:
    """(ops, parse_error, usd, reply format): one retry with feedback after a format error.

    `reply_format` None: the provider's probed format (structured JSON where it enforces a schema, else text).
    """
    ops, error, usd, fmt = await ask_parsed(llm, Role.EDITOR, messages, edit_ops_contract(edit_budget), sample_index, reply_format=reply_format)
    return ops, (f"editor reply unparseable twice: {error}" if error else ""), usd, fmt


def _record(task_type: str, target: str, text: str, ops: EditOps | None, error: str, usd: float, budget: int, max_chars: int | None,
            reply_format: str = "") -> EvolutionRecord:
    record = EvolutionRecord(task_type=task_type, skill_file=target, old_text=text, new_text=text, usd=usd, parse_error=error,
                             reply_format=reply_format)
    if ops is None:
        return record
    refused = [a.edit for a in ops.refused]  # admitted by the reply format, not applicable: recorded `invalid` with the reason
    if ops.no_change is not None:
        record.no_change_reason = ops.no_change
        record.edits, record.apply_report = refused, list(ops.refused)
        return record
    record.edits = list(ops.edits) + refused
    record.new_text, report = apply_edits(text, list(ops.edits), budget, max_chars=max_chars)
    record.apply_report = report + list(ops.refused)
    if not record.changed:  # proposed, none applicable: a no-change whose reason is each edit's status
        record.no_change_reason = "no edit applied: " + "; ".join(
            f"{a.edit.op} {a.status}" + (f" ({a.detail})" if a.detail else "") for a in record.apply_report)
    return record


def _cases(case_pack: SkillCasePack | Sequence[CaseSample]) -> list[CaseSample]:
    return list(case_pack.cases) if isinstance(case_pack, SkillCasePack) else list(case_pack)


async def evolve_single_skill(
    llm: LLMProvider,
    *,
    task_type: str,
    skill_file: str,
    skill_text: str,
    case_pack: SkillCasePack | Sequence[CaseSample],
    diagnoses: Sequence[str],
    rejected: Sequence[RejectedEdit | str],
    edit_budget: int,
    sample_index: int,
    max_chars: int | None = None,
    reply_format: str | None = None,
    seeded_from: str | None = None,
    prompts: MetaPrompts | None = None,
) -> EvolutionRecord:
    """Propose and apply at most `edit_budget` edits to one skill file.

    `rejected` is the blacklist of previously rejected *applied* edits (see
    `rejected_summary`); the editor is told not to repeat them. `seeded_from`:
    `skill_file` is a new file for `task_type` alone, `skill_text` its seed copied from that shared file.
    """
    if edit_budget < 1:
        raise ValueError(f"edit_budget must be >= 1, got {edit_budget}")
    messages = skill_editor_messages(
        task_type=task_type, skill_file=skill_file, skill_text=skill_text, cases=_cases(case_pack), diagnoses=diagnoses, rejected=rejected,
        edit_budget=edit_budget, seeded_from=seeded_from, prompts=prompts,
    )
    ops, error, usd, fmt = await ask_edit_ops(llm, messages, sample_index, edit_budget=edit_budget, reply_format=reply_format)
    return _record(task_type, skill_file, skill_text, ops, error, usd, edit_budget, max_chars, fmt)


async def evolve_system_prompt(
    llm: LLMProvider,
    *,
    system_prompt_text: str,
    case_pack: SystemCasePack | Sequence[CaseSample],
    rejected: Sequence[RejectedEdit | str] = (),
    edit_budget: int,
    sample_index: int,
    max_chars: int | None = None,
    reply_format: str | None = None,
    prompts: MetaPrompts | None = None,
) -> EvolutionRecord:
    """Slow update of the always-on system prompt from an epoch's failures."""
    if edit_budget < 1:
        raise ValueError(f"edit_budget must be >= 1, got {edit_budget}")
    cases = list(case_pack.cases) if isinstance(case_pack, SystemCasePack) else list(case_pack)
    messages = system_prompt_editor_messages(target_file=SYSTEM_PROMPT_FILE, text=system_prompt_text, cases=cases, rejected=rejected, edit_budget=edit_budget,
                                            prompts=prompts)
    ops, error, usd, fmt = await ask_edit_ops(llm, messages, sample_index, edit_budget=edit_budget, reply_format=reply_format)
    return _record("_system", SYSTEM_PROMPT_FILE, system_prompt_text, ops, error, usd, edit_budget, max_chars, fmt)


async def evolve_single_tool(
    llm: LLMProvider, *, tool: str, tool_text: str, case_pack: ToolCasePack, edit_budget: int, sample_index: int, max_chars: int | None = None,
    reply_format: str | None = None, prompts: MetaPrompts | None = None,
) -> EvolutionRecord:
    """Slow update of one tool guide (`tools/<tool>.md`) from an epoch's tool usage."""
    if edit_budget < 1:
        raise ValueError(f"edit_budget must be >= 1, got {edit_budget}")
    target = f"tools/{tool}.md"
    messages = tool_editor_messages(target_file=target, text=tool_text, pack=case_pack, edit_budget=edit_budget, prompts=prompts)
    ops, error, usd, fmt = await ask_edit_ops(llm, messages, sample_index, edit_budget=edit_budget, reply_format=reply_format)
    return _record(f"_tool:{tool}", target, tool_text, ops, error, usd, edit_budget, max_chars, fmt)


def describe_edit(op: str, text: str, old: str) -> str:
    one = lambda s: " ".join((s or "").split())  # noqa: E731
    if op == "add":
        return f"add: {one(text)}"
    if op == "delete":
        return f"delete: {one(old)}"
    return f"replace: {one(old)} -> {one(text)}"


def rejected_summary(record: EvolutionRecord) -> str:
    """Blacklist text for a rejected candidate: ONLY its applied edits.

    Edits that were not applied never reached the candidate text and were
    never validated, so listing them would mark untested ideas as "known bad".
    With no applied edit the summary is a defensive note naming none.
    """
    applied = [a.edit for a in record.apply_report if a.status == "applied"]
    if not applied:
        return NO_APPLIED_EDIT_SUMMARY
    return "\n".join(f"- {describe_edit(e.op, e.text, e.old)}" for e in applied)
