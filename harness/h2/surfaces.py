"""Editable surfaces of a harness tree, one per agent substrate.

A surface says which relative paths of a `HarnessTree` an editor may write,
which of them are *always-on* (injected into every turn, so they count
against a character cap) and which are loaded *on demand* (skills,
sub-agents, scripts, hooks, plugins). Anything off the surface is rejected
by the validator. Three substrates:

- ``native`` — this project's solver (harness/contracts/solver.py):
  always-on ``system_prompt.md`` and ``tools/<name>.md``; on demand
  ``skills/<task_type>/SKILL.md`` (routed by task type, so no trigger lines
  and no frontmatter are required).
- ``codex`` — always-on ``AGENTS.md`` (cap 8,000 chars);
  ``.agents/skills/<name>/SKILL.md`` (+ ``scripts/<file>``),
  ``sub_agents/<name>/AGENT.md``, ``scripts/<name>.py``, ``.codex/hooks.json``.
- ``opencode`` — always-on ``systemprompt.md``, ``guardrails.md``,
  ``LongTermMEMORY.md``, ``tool_descriptions/tool_guidance.md`` (cap 24,000
  together); ``skills/<name>/SKILL.md``, ``sub_agents/<name>/AGENT.md``,
  ``scripts/<name>.py``, ``plugin/<name>.ts``.

Fingerprint and diff are the tree's own (`HarnessTree.fingerprint`: first 16
hex of sha1 over sorted (path, bytes), caches ignored; `HarnessTree.diff`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

from harness.tree import HarnessTree

NAME_PATTERN = r"[a-z0-9][a-z0-9_-]*"
NAME_RE = re.compile(rf"^{NAME_PATTERN}$")

# File kinds a surface path can have.
ALWAYS_ON = "always_on"
SKILL = "skill"
SKILL_SCRIPT = "skill_script"
SUB_AGENT = "sub_agent"
SCRIPT = "script"
HOOKS = "hooks"
PLUGIN = "plugin"


@dataclass(frozen=True)
class PathRule:
    """One family of surface paths, written as a template with `{name}` placeholders.

    `{name}` and `{file}` must match NAME_PATTERN (a `{file}` keeps its
    extension from `extensions`). Fixed segments must match literally.
    """

    template: str
    kind: str

    def regex(self, extensions: tuple[str, ...]) -> re.Pattern[str]:
        ext = "|".join(re.escape(e) for e in extensions) or r"\.py"
        pattern = re.escape(self.template)
        pattern = pattern.replace(re.escape("{name}"), f"(?P<name>{NAME_PATTERN})")
        pattern = pattern.replace(re.escape("{file}"), f"(?P<file>{NAME_PATTERN})(?:{ext})")
        return re.compile(f"^{pattern}$")

    def loose_regex(self) -> re.Pattern[str]:
        """Same shape with any segment text: tells 'bad name' apart from 'off surface'."""
        pattern = re.escape(self.template)
        pattern = pattern.replace(re.escape("{name}"), r"(?P<name>[^/]+)")
        pattern = pattern.replace(re.escape("{file}"), r"(?P<file>[^/]+)")
        return re.compile(f"^{pattern}$")


@dataclass(frozen=True)
class Surface:
    name: str
    always_on: tuple[PathRule, ...]
    on_demand: tuple[PathRule, ...]
    always_on_cap: int
    required_always_on: tuple[str, ...]  # always-on files that must exist and be non-empty
    trigger_file: str | None  # where auto-trigger lines go; None = skills need no trigger line
    skill_frontmatter_required: bool
    sub_agents_allowed: bool
    hook_events: tuple[str, ...] = ()
    script_extensions: tuple[str, ...] = (".py",)
    description: str = ""

    @property
    def rules(self) -> tuple[PathRule, ...]:
        return self.always_on + self.on_demand

    def classify(self, path: str) -> str | None:
        """Kind of `path` on this surface, or None when it is off the surface."""
        for rule in self.rules:
            exts = self.script_extensions if rule.kind == SKILL_SCRIPT else (".py",)
            if rule.regex(exts).match(path):
                return rule.kind
        return None

    def near_miss(self, path: str) -> PathRule | None:
        """The rule whose shape `path` has although a name segment is not allowed."""
        for rule in self.rules:
            if rule.loose_regex().match(path):
                return rule
        return None

    def is_always_on(self, path: str) -> bool:
        return self.classify(path) == ALWAYS_ON

    def editable_paths_text(self) -> str:
        """Human-readable list of the surface for prompts and error messages."""
        on = ", ".join(r.template for r in self.always_on)
        dem = ", ".join(r.template for r in self.on_demand)
        return (
            f"always-on (cap {self.always_on_cap:,} chars together): {on}; on demand: {dem}; "
            f"names match {NAME_PATTERN}"
        )


NATIVE = Surface(
    name="native",
    always_on=(PathRule("system_prompt.md", ALWAYS_ON), PathRule("tools/{name}.md", ALWAYS_ON)),
    on_demand=(PathRule("skills/{name}/SKILL.md", SKILL),),
    always_on_cap=24_000,
    required_always_on=("system_prompt.md",),
    trigger_file=None,
    skill_frontmatter_required=False,
    sub_agents_allowed=False,
    description="this project's solver: system prompt and tool guides every turn, the task type's skill on demand",
)

CODEX_HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")

CODEX = Surface(
    name="codex",
    always_on=(PathRule("AGENTS.md", ALWAYS_ON),),
    on_demand=(
        PathRule(".agents/skills/{name}/SKILL.md", SKILL),
        PathRule(".agents/skills/{name}/scripts/{file}", SKILL_SCRIPT),
        PathRule("sub_agents/{name}/AGENT.md", SUB_AGENT),
        PathRule("scripts/{file}", SCRIPT),
        PathRule(".codex/hooks.json", HOOKS),
    ),
    always_on_cap=8_000,
    required_always_on=("AGENTS.md",),
    trigger_file="AGENTS.md",
    skill_frontmatter_required=True,
    sub_agents_allowed=True,
    hook_events=CODEX_HOOK_EVENTS,
    script_extensions=(".py", ".sh"),
    description="Codex CLI: AGENTS.md injected every turn, skills/sub-agents/scripts/hooks on demand",
)

OPENCODE = Surface(
    name="opencode",
    always_on=(
        PathRule("systemprompt.md", ALWAYS_ON),
        PathRule("guardrails.md", ALWAYS_ON),
        PathRule("LongTermMEMORY.md", ALWAYS_ON),
        PathRule("tool_descriptions/tool_guidance.md", ALWAYS_ON),
    ),
    on_demand=(
        PathRule("skills/{name}/SKILL.md", SKILL),
        PathRule("sub_agents/{name}/AGENT.md", SUB_AGENT),
        PathRule("scripts/{file}", SCRIPT),
        PathRule("plugin/{name}.ts", PLUGIN),
    ),
    always_on_cap=24_000,
    required_always_on=("systemprompt.md",),
    trigger_file="systemprompt.md",
    skill_frontmatter_required=True,
    sub_agents_allowed=True,
    description="OpenCode: four always-on files, skills/sub-agents/scripts/plugins on demand",
)

SURFACES: dict[str, Surface] = {s.name: s for s in (NATIVE, CODEX, OPENCODE)}


def surface_for(name: str) -> Surface:
    try:
        return SURFACES[name]
    except KeyError:
        raise ValueError(f"unknown harness surface {name!r}; expected one of {sorted(SURFACES)}") from None


def skill_name(surface: Surface, path: str) -> str | None:
    """Folder name of the skill whose SKILL.md is `path` (None if `path` is not a skill)."""
    for rule in surface.on_demand:
        if rule.kind == SKILL:
            m = rule.regex(()).match(path)
            if m:
                return m.group("name")
    return None


def always_on_chars(surface: Surface, tree: Mapping[str, str]) -> int:
    return sum(len(text) for path, text in tree.items() if surface.is_always_on(path))


@dataclass(frozen=True)
class Census:
    """What a tree holds on a surface (returned with every validator verdict)."""

    always_on_chars: int
    always_on_cap: int
    files: int
    skills: int
    sub_agents: int
    scripts: int
    hooks: int
    plugins: int
    off_surface: int

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def count_hook_commands(text: str) -> int:
    """Number of hook commands in a hooks.json text (0 when it does not parse)."""
    try:
        data = json.loads(text)
        return sum(len(m.get("hooks", [])) for ms in data.get("hooks", {}).values() for m in ms)
    except (ValueError, AttributeError, TypeError):
        return 0


def census(surface: Surface, tree: Mapping[str, str]) -> Census:
    kinds: dict[str, int] = {}
    hooks = 0
    for path, text in tree.items():
        kind = surface.classify(path) or "off"
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == HOOKS:
            hooks += count_hook_commands(text)
    return Census(
        always_on_chars=always_on_chars(surface, tree),
        always_on_cap=surface.always_on_cap,
        files=len(tree),
        skills=kinds.get(SKILL, 0),
        sub_agents=kinds.get(SUB_AGENT, 0),
        scripts=kinds.get(SCRIPT, 0) + kinds.get(SKILL_SCRIPT, 0),
        hooks=hooks,
        plugins=kinds.get(PLUGIN, 0),
        off_surface=kinds.get("off", 0),
    )


def fingerprint(tree: HarnessTree) -> str:
    """The tree's fingerprint (first 16 hex of sha1 over sorted path + bytes, caches ignored)."""
    return tree.fingerprint


def line_jaccard(a: Mapping[str, str], b: Mapping[str, str]) -> float:
    """Jaccard similarity of the sets of (path, non-blank line) of two trees; 1.0 for two empty trees."""
    la = {(p, line.strip()) for p, t in a.items() for line in t.splitlines() if line.strip()}
    lb = {(p, line.strip()) for p, t in b.items() for line in t.splitlines() if line.strip()}
    if not la and not lb:
        return 1.0
    return len(la & lb) / len(la | lb)
