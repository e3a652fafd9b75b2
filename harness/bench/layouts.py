"""A harness tree in another substrate's layout <-> the native layout the trainer trains.

The trainer's solver reads the native layout (harness/contracts/solver.py):
`system_prompt.md`, `tools/<name>.md`, `skills/<task_type>/SKILL.md`. A Codex
or OpenCode tree (the surfaces of harness/h2/surfaces.py; this module sits below them so that no
training stage depends on Harness² code, and tests/bench/test_layouts.py keeps the two tables equal) starts training through `to_native`
and is delivered back through `from_native`:

- the substrate's main always-on file is the system prompt (`AGENTS.md`,
  `systemprompt.md`); OpenCode's other always-on files (`guardrails.md`,
  `LongTermMEMORY.md`) are appended to it as marked sections, because the
  solver reads every always-on word in one system prompt;
- a marked section `<!-- harness:section <path> -->` runs to the next marker
  or the end; `from_native` writes each section back to its own file;
- tool guides: OpenCode's `tool_descriptions/tool_guidance.md` is the tool
  guide `tools/tool_guidance.md`; Codex has no tool-guide file, so native
  guides travel inside `AGENTS.md` as marked `tools/<name>.md` sections;
- skills move between `skills/<name>/` and `.agents/skills/<name>/` (Codex);
  a substrate that requires frontmatter gets `name`/`description` added;
- every other file (scripts, hooks, sub-agents, plugins) passes through
  unchanged: training never edits it, export writes it back.

`from_native(to_native(tree))` is `tree` for trees without marker text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.tree import HarnessTree

SYSTEM_PROMPT = "system_prompt.md"
TOOLS = "tools/"
SKILLS = "skills/"
_MARKER = re.compile(r"^<!-- harness:section (\S+) -->[ \t]*$", re.M)
_SKILL_FILE = re.compile(r"^(?P<name>[^/]+)/SKILL\.md$")


@dataclass(frozen=True)
class Layout:
    prompt_file: str  # the substrate's main always-on file: the native system prompt
    merged: tuple[str, ...]  # other always-on files, merged into the system prompt as marked sections
    skill_prefix: str
    tool_file: str | None  # the substrate's one tool-guide file (None: guides are sections of prompt_file)
    frontmatter_required: bool = False  # skills need `name`/`description` frontmatter (Surface.skill_frontmatter_required)


LAYOUTS = {
    "native": Layout(SYSTEM_PROMPT, (), SKILLS, None),
    "codex": Layout("AGENTS.md", (), ".agents/skills/", None, frontmatter_required=True),
    "opencode": Layout("systemprompt.md", ("guardrails.md", "LongTermMEMORY.md"), "skills/", "tool_descriptions/tool_guidance.md",
                       frontmatter_required=True),
}
TOOL_GUIDE_NAME = "tool_guidance"  # the native name of OpenCode's tool-guide file


def layout_for(surface: str) -> Layout:
    if surface not in LAYOUTS:
        raise ValueError(f"unknown harness surface {surface!r}; expected one of {sorted(LAYOUTS)}")
    return LAYOUTS[surface]


def split_sections(text: str) -> tuple[str, dict[str, str]]:
    """(text before the first marker, {path: section text}) of a text with `<!-- harness:section -->` markers."""
    marks = list(_MARKER.finditer(text))
    if not marks:
        return text, {}
    sections = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        sections[mark.group(1)] = text[mark.end():end].strip("\n") + "\n"
    return text[: marks[0].start()].rstrip("\n") + "\n", sections


def join_sections(main: str, sections: dict[str, str]) -> str:
    parts = [main.rstrip("\n")] + [f"<!-- harness:section {path} -->\n{text.rstrip()}" for path, text in sections.items()]
    return "\n\n".join(parts) + "\n"


def _with_frontmatter(name: str, text: str) -> str:
    if text.startswith("---"):
        return text
    return f"---\nname: {name}\ndescription: Use for {name} questions.\n---\n\n{text}"


def to_native(tree: HarnessTree, surface: str) -> HarnessTree:
    """`tree` (laid out for `surface`) in the native layout; ValueError names a missing main file."""
    layout = layout_for(surface)
    if surface == "native":
        return tree
    if layout.prompt_file not in tree:
        raise ValueError(f"a {surface} harness needs {layout.prompt_file} (the always-on file the system prompt comes from); "
                         f"the tree has {sorted(tree)[:8]}")
    main, sections = split_sections(tree[layout.prompt_file])
    files = {f"{path}": text for path, text in sections.items() if path.startswith(TOOLS)}
    kept = {path: text for path, text in sections.items() if not path.startswith(TOOLS)}
    kept.update({path: tree[path] for path in layout.merged if path in tree})
    files[SYSTEM_PROMPT] = join_sections(main, kept) if kept else main
    if layout.tool_file and layout.tool_file in tree:
        files[f"{TOOLS}{TOOL_GUIDE_NAME}.md"] = tree[layout.tool_file]
    handled = {layout.prompt_file, *layout.merged, *([layout.tool_file] if layout.tool_file else [])}
    for path, text in tree.items():
        if path in handled:
            continue
        skill = _SKILL_FILE.match(path[len(layout.skill_prefix):]) if path.startswith(layout.skill_prefix) else None
        files[f"{SKILLS}{skill.group('name')}/SKILL.md" if skill else path] = text
    return HarnessTree(files)


def load_in_layout(directory: Path, surface: str) -> HarnessTree:
    """The harness tree at `directory`, laid out for `surface`, in the native layout. The ValueError says what is
    wrong, not where: the caller names the directory the way the user gave it (a flag, a config key)."""
    if not directory.is_dir():
        raise ValueError("not a directory")
    try:
        tree = to_native(HarnessTree.load(directory), surface)
    except ValueError as exc:
        raise ValueError(f"not a harness tree: {exc}") from None
    if SYSTEM_PROMPT not in tree:
        raise ValueError(f"not a harness tree: no {SYSTEM_PROMPT} (native layout: system_prompt.md, tools/, "
                         "skills/<task_type>/SKILL.md)")
    return tree


def from_native(tree: HarnessTree, surface: str) -> HarnessTree:
    """A native tree laid out for `surface` (the inverse of `to_native`)."""
    layout = layout_for(surface)
    if surface == "native":
        return tree
    required = layout.frontmatter_required
    main, sections = split_sections(tree.get(SYSTEM_PROMPT, ""))
    files = {path: text for path, text in sections.items() if path in layout.merged}
    rest = {path: text for path, text in sections.items() if path not in layout.merged}
    tools = {path: text for path, text in tree.items() if path.startswith(TOOLS)}
    if layout.tool_file:
        only = f"{TOOLS}{TOOL_GUIDE_NAME}.md"
        if set(tools) == {only}:
            files[layout.tool_file] = tools[only]
        elif tools:
            files[layout.tool_file] = join_sections("", tools).lstrip("\n")
    else:
        rest.update(tools)
    files[layout.prompt_file] = join_sections(main, rest) if rest else main
    for path, text in tree.items():
        if path == SYSTEM_PROMPT or path.startswith(TOOLS):
            continue
        skill = _SKILL_FILE.match(path[len(SKILLS):]) if path.startswith(SKILLS) else None
        if skill:
            name = skill.group("name")
            files[f"{layout.skill_prefix}{name}/SKILL.md"] = _with_frontmatter(name, text) if required else text
        else:
            files[path] = text
    return HarnessTree(files)
