"""The import-layer contract: every package of harness/ and stages/ sits in one layer and imports only lower layers.

Imports are read with `ast` from every module, including imports inside
functions (a lazy import is still a dependency). A "package" is a
subpackage of `harness` (harness/loop, harness/kernel, ...) or a top-level
module of it (harness/tree.py, harness/identity.py, ...); `stages` is one
package. Two packages of the same layer may not import each other.

The layers are not restated here: they are read from the "Dependency direction" table of docs/ARCHITECTURE.md, so
the test is exactly as strict as the documented contract. A new edge that would raise a package's layer (e.g.
`harness.sim -> harness.h2`, the edge behind an old cycle) fails here until the map is regenerated, which makes
the change of contract a visible diff of the architecture document. Registry strategy strings count as imports, and
MLflow may be imported by `harness/tracking` only.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = ("harness", "stages")

ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
LAYER_ROW = re.compile(r"^\| (\d+) \| `(harness\.[a-z_0-9]+|stages)` \|")


def documented_layers(text: str) -> dict[str, int]:
    """The contract is the documented one: package -> layer from docs/ARCHITECTURE.md's "Dependency direction" table."""
    section = text.split("### Dependency direction", 1)[-1].split("###", 1)[0]
    found = {m.group(2).removeprefix("harness."): int(m.group(1))
             for line in section.splitlines() if (m := LAYER_ROW.match(line))}
    assert found, f"{ARCHITECTURE}: no '| layer | `package` |' rows under '### Dependency direction'"
    return found


LAYER_OF = documented_layers(ARCHITECTURE.read_text(encoding="utf-8"))
KERNEL_FORBIDDEN = ("llm", "loop", "tracking", "pipeline")
# A registry names its strategies as lazy strings ("harness.kernel.rule_x:Rule"): a dependency like any import.
MODULE_STRING = re.compile(r"^((?:harness|stages)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?::[A-Za-z_][A-Za-z0-9_.]*)?$")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str | None:
    """`harness.loop.steps` -> "loop", `harness.tree` -> "tree", `stages.train` -> "stages", others None."""
    parts = module.split(".")
    if parts[0] == "stages":
        return "stages"
    if parts[0] != "harness" or len(parts) < 2:
        return None
    return parts[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, at any depth; `from harness import x` names harness.x;
    a string constant naming a first-party module ("harness.kernel.rule_x:Rule", "-m harness.llm.client_worker") counts."""
    this = module_name(path)
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = this.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from harness import loop` imports the subpackage harness.loop
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names if _exists(f"{module}.{alias.name}")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := MODULE_STRING.match(node.value)):
            if _exists(m.group(1)):
                found.append((node.lineno, m.group(1)))
    return found


def _exists(module: str) -> bool:
    """A first-party module or package of that dotted name exists (logger names like "harness.progress" do not)."""
    path = ROOT / Path(*module.split("."))
    return path.is_dir() or path.with_suffix(".py").exists()


def source_files() -> list[Path]:
    return sorted(p for root in SOURCE_ROOTS for p in (ROOT / root).rglob("*.py"))


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(importer package, imported package) -> ["path:line module", ...] over the whole tree."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in source_files():
        src = package_of(module_name(path))
        for line, module in imported_modules(path):
            dst = package_of(module)
            if src is None or dst is None or dst == src or module == "harness":
                continue
            edges.setdefault((src, dst), []).append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return edges


def find_cycle(edges) -> list[str] | None:
    graph: dict[str, set[str]] = {}
    for src, dst in edges:
        graph.setdefault(src, set()).add(dst)
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def layer_violations(edges) -> list[str]:
    problems = []
    for (src, dst), where in sorted(edges.items()):
        for name in (src, dst):
            if name not in LAYER_OF:
                problems.append(f"package {name!r} has no layer in docs/ARCHITECTURE.md: regenerate the module map ({where[0]})")
        if src in LAYER_OF and dst in LAYER_OF and LAYER_OF[dst] >= LAYER_OF[src]:
            relation = "the same layer" if LAYER_OF[dst] == LAYER_OF[src] else "a higher layer"
            problems += [f"{src} (layer {LAYER_OF[src]}) imports {dst} ({relation}, layer {LAYER_OF[dst]}): {w}" for w in where]
    return sorted(set(problems))


def test_every_package_has_a_layer():
    packages = {package_of(module_name(p)) for p in source_files()} - {None}
    assert sorted(packages - set(LAYER_OF)) == [], "packages without a documented layer: regenerate docs/ARCHITECTURE.md"
    assert sorted(set(LAYER_OF) - packages) == [], "docs/ARCHITECTURE.md names packages that do not exist"


def test_no_package_imports_a_higher_or_same_layer():
    assert layer_violations(package_edges()) == []


def test_no_cycle_between_packages():
    assert find_cycle(package_edges()) is None


def test_kernel_imports_nothing_from_llm_loop_tracking_or_pipeline():
    edges = package_edges()
    assert [w for (src, dst), where in edges.items() if src == "kernel" and dst in KERNEL_FORBIDDEN for w in where] == []


def mlflow_importers() -> list[str]:
    """Every import of mlflow outside harness/tracking: the tracking layer is its only importer (it costs ~2 s)."""
    return [f"{path.relative_to(ROOT)}:{line} imports {module}" for path in source_files()
            if package_of(module_name(path)) != "tracking"
            for line, module in imported_modules(path) if module == "mlflow" or module.startswith("mlflow.")]


def test_only_harness_tracking_imports_mlflow():
    assert mlflow_importers() == []


# ---------------------------------------------------------------- the checker itself


def _tree(tmp_path: Path, files: dict[str, str]) -> list[Path]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return sorted(tmp_path.rglob("*.py"))


def test_checker_sees_lazy_relative_and_from_package_imports(tmp_path, monkeypatch):
    files = _tree(tmp_path, {
        "harness/__init__.py": "",
        "harness/kernel/__init__.py": "",
        "harness/kernel/gate.py": "def f():\n    from harness.loop import steps\n",
        "harness/kernel/rules.py": "from ..llm.protocol import X\n",
        "harness/loop/__init__.py": "",
        "harness/loop/steps.py": "from harness import kernel\n",
        "harness/llm/__init__.py": "",
        "harness/llm/protocol.py": "",
    })
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "source_files", lambda: files)
    edges = package_edges()
    assert set(edges) == {("kernel", "loop"), ("kernel", "llm"), ("loop", "kernel")}
    assert find_cycle(edges) in (["kernel", "loop", "kernel"], ["loop", "kernel", "loop"])
    problems = layer_violations(edges)
    assert any(p.startswith(f"kernel (layer {LAYER_OF['kernel']}) imports loop (a higher layer") and "gate.py:2" in p for p in problems)
    assert any(p.startswith(f"kernel (layer {LAYER_OF['kernel']}) imports llm (a higher layer") and "rules.py:1" in p for p in problems)
    assert not any(p.startswith("loop ") for p in problems)


def test_checker_flags_same_layer_imports_and_unknown_packages(tmp_path, monkeypatch):
    files = _tree(tmp_path, {
        "harness/agent/__init__.py": "",
        "harness/agent/loop.py": "import harness.evolution.apply\nimport harness.newthing\n",
        "harness/evolution/__init__.py": "",
        "harness/evolution/apply.py": "",
        "harness/newthing.py": "",
    })
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "source_files", lambda: files)
    problems = layer_violations(package_edges())
    assert any(f"agent (layer {LAYER_OF['agent']}) imports evolution (the same layer" in p for p in problems)
    assert any("package 'newthing' has no layer" in p for p in problems)


@pytest.mark.parametrize("module, package", [("harness.loop.steps", "loop"), ("harness.tree", "tree"), ("stages.train", "stages"), ("omegaconf", None)])
def test_package_of(module, package):
    assert package_of(module) == package


def test_checker_sees_registry_strings_and_refuses_sim_importing_h2(tmp_path, monkeypatch):
    files = _tree(tmp_path, {
        "harness/config/__init__.py": "",
        "harness/config/registries.py": 'RULES = {"x": "harness.loop.rules:XRule"}\nLOG = "harness.progress"\n',
        "harness/loop/__init__.py": "",
        "harness/loop/rules.py": "",
        "harness/sim/__init__.py": "",
        "harness/sim/world.py": "from harness.h2 import run\n",
        "harness/h2/__init__.py": "",
        "harness/h2/run.py": "import mlflow\n",
    })
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "source_files", lambda: files)
    edges = package_edges()
    assert ("config", "loop") in edges  # only through the registry string; the logger name is not a module
    assert set(edges) == {("config", "loop"), ("sim", "h2")}
    problems = layer_violations(edges)
    assert any(p.startswith("config ") and "registries.py:1" in p for p in problems)
    assert any(p.startswith("sim ") and "imports h2" in p for p in problems)
    assert mlflow_importers() == ["harness/h2/run.py:1 imports mlflow"]
