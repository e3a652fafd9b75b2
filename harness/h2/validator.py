"""Harness tree validator: every rule of research/harness2.md, one message per failure.

`validate_tree(files, surface)` returns a `Verdict`: `ok`, the list of
`errors` (each names the file and says what to change, so an editor can fix
the tree from the message alone), the tree as it will be adopted (with
auto-added trigger lines), what was auto-added, and a `Census`.

Rules (rule ids appear in messages as ``[rule]``):
  path-safety      relative POSIX path, no '..', no absolute path
  path-name        every name segment matches [a-z0-9][a-z0-9_-]*
  off-surface      the path is one of the surface's templates
  always-on-cap    always-on files together <= the surface cap
  always-on-empty  required always-on files exist and are non-empty
  skill-description  skills carry frontmatter `description:` (surfaces that route by trigger)
  skill-name       frontmatter `name:` (when present or required) equals the skill folder
  skill-trigger    each skill is named in always-on text; a trigger line is auto-added
                   from its description when the cap allows
  sub-agent        sub-agents only on surfaces that allow them, each with `description:`
  script-compile   every .py file compiles (compile(), never executed)
  script-ref       every `python[3] <path>/scripts/x.py` mentioned in text ships in the tree
  hooks            hooks JSON = {"hooks": {Event: [{"hooks": [{"type": "command", "command": "..."}]}]}}
                   with whitelisted events
  adapter          checks supplied by the task adapter
  grader-verdict   no grader verdict, rubric score or answer key anywhere in the tree
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from harness.h2.surfaces import (
    ALWAYS_ON,
    HOOKS,
    NAME_PATTERN,
    NAME_RE,
    SCRIPT,
    SKILL,
    SKILL_SCRIPT,
    SUB_AGENT,
    Census,
    Surface,
    always_on_chars,
    census,
    skill_name,
)
from harness.h2.verdicts import scan_files
from harness.tree import HarnessTree, TreePathError, check_relative_path

AdapterCheck = Callable[[HarnessTree], Sequence[str]]

_FRONTMATTER_RE = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
_SCRIPT_REF_RE = re.compile(r"\bpython3?\s+(?:\./)?((?:[A-Za-z0-9_.-]+/)*scripts/[A-Za-z0-9_.-]+\.py)\b")
_SUB_AGENT_SHAPE = re.compile(r"^(?:\.?[A-Za-z_]+/)*sub_agents/[^/]+/AGENT\.md$")
_HOOK_ALLOWED_KEYS = {"type", "command", "timeout"}
_MATCHER_ALLOWED_KEYS = {"matcher", "hooks"}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    errors: tuple[str, ...]
    tree: HarnessTree | None  # the tree to adopt (auto-trigger lines added); None when paths were unsafe
    auto_added: tuple[str, ...]
    census: Census | None

    def feedback(self) -> str:
        """The errors as a bullet list, fed back to the editor on the one revision."""
        return "\n".join(f"- {e}" for e in self.errors)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "errors": list(self.errors),
            "auto_added": list(self.auto_added),
            "census": self.census.to_dict() if self.census else None,
            "fingerprint": self.tree.fingerprint if self.tree is not None else None,
        }


def parse_frontmatter(text: str) -> dict[str, str] | None:
    """`key: value` pairs of a leading '---' block, or None when there is no frontmatter."""
    m = _FRONTMATTER_RE.match(text)
    if not m:
        return None
    fields: dict[str, str] = {}
    for line in m.group(1).splitlines():
        if ":" in line and not line.startswith((" ", "\t", "#")):
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def trigger_line(name: str, description: str) -> str:
    return f"- Skill `{name}`: use when {description.strip().rstrip('.')}."


def _name_mentioned(name: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_-])", text) is not None


def _check_paths(surface: Surface, files: Mapping[str, str], errors: list[str]) -> dict[str, str]:
    safe: dict[str, str] = {}
    for path, text in files.items():
        try:
            norm = check_relative_path(path)
        except TreePathError as exc:
            errors.append(f"[path-safety] {exc}")
            continue
        kind = surface.classify(norm)
        if kind is None and not surface.sub_agents_allowed and _SUB_AGENT_SHAPE.match(norm):
            errors.append(f"[sub-agent] {norm}: sub-agents are not allowed on the {surface.name} surface ({surface.editable_paths_text()})")
            continue
        if kind is None:
            near = surface.near_miss(norm)
            if near is not None:
                bad = [seg for seg in norm.split("/") if seg not in near.template.split("/")]
                errors.append(
                    f"[path-name] {norm}: name segment(s) {bad} must match {NAME_PATTERN} "
                    f"(lower-case letters, digits, '_' and '-', starting with a letter or digit)"
                )
            else:
                errors.append(f"[off-surface] {norm}: not an editable path of the {surface.name} surface ({surface.editable_paths_text()})")
            continue
        if not isinstance(text, str):
            errors.append(f"[path-safety] {norm}: content must be text")
            continue
        safe[norm] = text
    return safe


def _check_skills(surface: Surface, files: dict[str, str], errors: list[str]) -> dict[str, str]:
    """Frontmatter rules; returns {skill name: description} for trigger checks."""
    descriptions: dict[str, str] = {}
    for path, text in files.items():
        if surface.classify(path) != SKILL:
            continue
        folder = skill_name(surface, path)
        assert folder is not None
        fm = parse_frontmatter(text)
        if fm is None:
            if surface.skill_frontmatter_required:
                errors.append(
                    f"[skill-description] {path}: missing frontmatter; start the file with "
                    f"'---\\nname: {folder}\\ndescription: <when to use this skill>\\n---'"
                )
            continue
        if "name" in fm or surface.skill_frontmatter_required:
            if fm.get("name") != folder:
                errors.append(f"[skill-name] {path}: frontmatter name is {fm.get('name')!r} but the skill folder is {folder!r}; they must be equal")
        desc = fm.get("description", "")
        if not desc and surface.skill_frontmatter_required:
            errors.append(f"[skill-description] {path}: frontmatter has no non-empty 'description:' line saying when to use the skill")
        descriptions[folder] = desc
    return descriptions


def _add_triggers(
    surface: Surface, files: dict[str, str], descriptions: dict[str, str], errors: list[str]
) -> tuple[dict[str, str], list[str]]:
    if surface.trigger_file is None:
        return files, []
    added: list[str] = []
    always_text = "\n".join(t for p, t in files.items() if surface.is_always_on(p))
    missing = [n for n in sorted(descriptions) if not _name_mentioned(n, always_text)]
    if not missing:
        return files, []
    out = dict(files)
    for name in missing:
        desc = descriptions[name]
        if not desc:
            errors.append(f"[skill-trigger] skill {name!r} is not named in always-on text and has no description to build a trigger line from")
            continue
        line = trigger_line(name, desc)
        base = out.get(surface.trigger_file, "")
        sep = "" if not base or base.endswith("\n") else "\n"
        candidate = base + sep + line + "\n"
        if always_on_chars(surface, {**out, surface.trigger_file: candidate}) > surface.always_on_cap:
            errors.append(
                f"[skill-trigger] skill {name!r} is not named in always-on text and the trigger line "
                f"({len(line) + 1} chars) does not fit under the {surface.always_on_cap:,}-char always-on cap; "
                f"shorten {surface.trigger_file} or name the skill there yourself"
            )
            continue
        out[surface.trigger_file] = candidate
        added.append(f"{surface.trigger_file}: {line}")
    return out, added


def _check_hooks(surface: Surface, path: str, text: str, errors: list[str]) -> None:
    shape = 'expected {"hooks": {"<Event>": [{"hooks": [{"type": "command", "command": "..."}]}]}}'
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        errors.append(f"[hooks] {path}: not valid JSON ({exc}); {shape}")
        return
    if not isinstance(data, dict) or set(data) != {"hooks"} or not isinstance(data["hooks"], dict):
        errors.append(f"[hooks] {path}: top level must be an object with the single key 'hooks' mapping events to lists; {shape}")
        return
    for event, matchers in data["hooks"].items():
        if event not in surface.hook_events:
            errors.append(f"[hooks] {path}: event {event!r} is not allowed; allowed events: {', '.join(surface.hook_events)}")
            continue
        if not isinstance(matchers, list) or not matchers:
            errors.append(f"[hooks] {path}: hooks.{event} must be a non-empty list of objects with a 'hooks' list")
            continue
        for i, matcher in enumerate(matchers):
            where = f"hooks.{event}[{i}]"
            if not isinstance(matcher, dict) or not isinstance(matcher.get("hooks"), list) or not matcher["hooks"]:
                errors.append(f"[hooks] {path}: {where} must be an object with a non-empty 'hooks' list")
                continue
            extra = set(matcher) - _MATCHER_ALLOWED_KEYS
            if extra:
                errors.append(f"[hooks] {path}: {where} has unknown keys {sorted(extra)}; allowed: matcher, hooks")
            if "matcher" in matcher and not isinstance(matcher["matcher"], str):
                errors.append(f"[hooks] {path}: {where}.matcher must be a string")
            for j, hook in enumerate(matcher["hooks"]):
                hw = f"{where}.hooks[{j}]"
                if not isinstance(hook, dict):
                    errors.append(f"[hooks] {path}: {hw} must be an object")
                    continue
                if hook.get("type") != "command":
                    errors.append(f"[hooks] {path}: {hw}.type must be \"command\", got {hook.get('type')!r}")
                if not isinstance(hook.get("command"), str) or not hook["command"].strip():
                    errors.append(f"[hooks] {path}: {hw}.command must be a non-empty string")
                extra = set(hook) - _HOOK_ALLOWED_KEYS
                if extra:
                    errors.append(f"[hooks] {path}: {hw} has unknown keys {sorted(extra)}; allowed: type, command, timeout")
                if "timeout" in hook and (not isinstance(hook["timeout"], (int, float)) or isinstance(hook["timeout"], bool) or hook["timeout"] <= 0):
                    errors.append(f"[hooks] {path}: {hw}.timeout must be a positive number of seconds")


def _check_script_refs(files: dict[str, str], errors: list[str]) -> None:
    for path, text in files.items():
        if path.endswith(".py"):
            continue
        base_dir = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        for ref in sorted(set(_SCRIPT_REF_RE.findall(text))):
            ref = ref.removeprefix("./")
            if ref in files or (base_dir + ref) in files:
                continue
            errors.append(f"[script-ref] {path}: refers to 'python {ref}' but neither {ref!r}" + (f" nor {base_dir + ref!r}" if base_dir else "") + " ships in the tree; add the script or remove the reference")


def validate_tree(
    files: Mapping[str, str],
    surface: Surface,
    *,
    adapter_checks: Sequence[AdapterCheck] = (),
    auto_trigger: bool = True,
) -> Verdict:
    """Check `files` (path -> text; a HarnessTree or a raw mapping) against every rule."""
    errors: list[str] = []
    safe = _check_paths(surface, files, errors)

    for required in surface.required_always_on:
        if not safe.get(required, "").strip():
            errors.append(f"[always-on-empty] {required}: required always-on file is {'empty' if required in safe else 'missing'}; it must state how the agent works")

    descriptions = _check_skills(surface, safe, errors)

    for path, text in safe.items():
        kind = surface.classify(path)
        if kind == SUB_AGENT:
            if not surface.sub_agents_allowed:
                errors.append(f"[sub-agent] {path}: sub-agents are not allowed on the {surface.name} surface")
            fm = parse_frontmatter(text)
            folder = path.split("/")[-2]
            if fm is None or not fm.get("description"):
                errors.append(f"[sub-agent] {path}: needs frontmatter with a non-empty 'description:' ('---\\nname: {folder}\\ndescription: ...\\n---')")
            elif "name" in fm and fm["name"] != folder:
                errors.append(f"[sub-agent] {path}: frontmatter name is {fm['name']!r} but the folder is {folder!r}")
        if path.endswith(".py") and kind in (SKILL_SCRIPT, SCRIPT):
            try:
                compile(text, path, "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", None)
                errors.append(f"[script-compile] {path}: does not compile{f' (line {line})' if line else ''}: {getattr(exc, 'msg', exc)}")
        if kind == HOOKS:
            if not surface.hook_events:
                errors.append(f"[hooks] {path}: hooks are not allowed on the {surface.name} surface")
            else:
                _check_hooks(surface, path, text, errors)

    _check_script_refs(safe, errors)

    adopted, added = (_add_triggers(surface, safe, descriptions, errors) if auto_trigger else (safe, []))
    if not auto_trigger and surface.trigger_file is not None:
        always_text = "\n".join(t for p, t in safe.items() if surface.is_always_on(p))
        for name in sorted(descriptions):
            if not _name_mentioned(name, always_text):
                errors.append(f"[skill-trigger] skill {name!r} is not named in any always-on file; add a trigger line to {surface.trigger_file}")

    total = always_on_chars(surface, adopted)
    if total > surface.always_on_cap:
        parts = ", ".join(f"{p}={len(t):,}" for p, t in sorted(adopted.items()) if surface.classify(p) == ALWAYS_ON)
        errors.append(f"[always-on-cap] always-on text is {total:,} chars ({parts}); the {surface.name} cap is {surface.always_on_cap:,}; move detail into skills or scripts")

    for hit in scan_files(adopted):
        errors.append(f"[grader-verdict] {hit.message()}")

    tree = HarnessTree(adopted)
    for check in adapter_checks:
        try:
            messages = list(check(tree))
        except Exception as exc:  # an adapter check that crashes is a rejection, not a crash of the round
            messages = [f"adapter check {getattr(check, '__name__', check)!r} failed: {type(exc).__name__}: {exc}"]
        errors.extend(f"[adapter] {m}" for m in messages)
    return Verdict(ok=not errors, errors=tuple(errors), tree=tree, auto_added=tuple(added), census=census(surface, adopted))


__all__ = ["Verdict", "validate_tree", "parse_frontmatter", "trigger_line", "AdapterCheck", "NAME_RE"]
