"""No code outside the registries compares a config value with a registered strategy name (issue 29 item 1):
the loop and the stages read a trait of the registry entry instead (`rule.sequential`, `FDR_PROCEDURES[..].run_level`),
so adding a strategy never means finding the `== "betting"` that should now also say `or "mine"`."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.config.registries import CHOICE_REGISTRIES

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("harness", "stages")
# the registries themselves may name their entries
ALLOWED = {"harness/kernel/registry.py", "harness/config/registries.py"}
NAMES = frozenset(name for registry in CHOICE_REGISTRIES.values() for name in registry.names())
# the last part of every choosing key (gate.rule -> rule, evolve.method -> method) plus `name` (an entry's own name)
AXES = frozenset({key.rsplit(".", 1)[-1] for key in CHOICE_REGISTRIES} | {"name"})


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _axis(node: ast.AST) -> str | None:
    """The config axis an expression reads: `params.rule`, `rule`, `cfg["rule"]`, `c.value("gate.rule")`."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        keys = _strings(node.slice)
        return next(iter(keys)).rsplit(".", 1)[-1] if keys else None
    if isinstance(node, ast.Call) and node.args:
        keys = _strings(node.args[0])
        return next(iter(keys)).rsplit(".", 1)[-1] if keys else None
    return None


def name_comparisons(source: str) -> list[tuple[int, str, list[str]]]:
    """(line, axis, names) of every comparison of a config axis with registered strategy names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for a in sides:
            axis = _axis(a)
            named = sorted(set().union(*(_strings(b) for b in sides if b is not a)) & NAMES)
            if axis in AXES and named:
                found.append((node.lineno, axis, named))
    return found


def test_the_scan_finds_a_planted_comparison() -> None:
    planted = ('if params.rule == "betting": pass\n'
               'if cfg.gate.fdr in ("none", "x"): pass\n'
               'if c.value("evolve.method") != "candidates": pass\n'
               'if rule.name == "sequential": pass\n'
               'if marker != "none": pass\n')  # not a config axis: left alone
    assert [(line, axis) for line, axis, _ in name_comparisons(planted)] == [(1, "rule"), (2, "fdr"), (3, "method"), (4, "name")]


def test_no_strategy_name_comparison_outside_the_registries() -> None:
    hits = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            hits += [f"{rel}:{line}: {axis} compared with {names}" for line, axis, names in name_comparisons(path.read_text())]
    assert not hits, "read a trait of the registry entry instead of comparing names:\n" + "\n".join(hits)
