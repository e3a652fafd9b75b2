"""What code a pipeline stage runs, derived from its imports, and a content fingerprint of it for DVC.

A stage's code is the import closure of its entry module (`stages.<name>`):
every first-party module reachable through `import` / `from ... import`
statements anywhere in a module's source (function-local imports included,
since the stages import their heavy modules inside the stage call), through
`importlib.import_module("<literal>")`, and through `"-m", "<module>"`
argument pairs (worker processes started as `python -m <module>`), through a
registry's lazy `"harness.x.y:attr"` strategy strings, plus the
`__init__.py` of every package on the way. First-party means the module
resolves to a file under the project root; third-party imports are left out
(their versions are the environment's business, not the pipeline's).

The `library` stage of dvc.yaml depends on the whole source tree and writes
one fingerprint file per stage entry point; every other stage depends on its
own fingerprint file. A moved or new module is followed automatically; a
change to a module outside a stage's closure rewrites that stage's file with
identical content, so DVC does not re-run it.

    python -m harness.pipeline.code_fingerprint --closure stages.rollout   # the files rollout@ runs
    python -m harness.pipeline.code_fingerprint --graph                    # the package import graph
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENTRY_PACKAGE = "stages"


@dataclass
class ModuleIndex:
    """Resolves dotted module names to files under `root` and caches each file's imports."""

    root: Path
    _imports: dict[str, frozenset[str]] = field(default_factory=dict)

    def file_of(self, module: str) -> Path | None:
        """root/a/b.py or root/a/b/__init__.py for "a.b"; None when `module` is not first-party."""
        base = self.root.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def is_package(self, module: str) -> bool:
        return self.root.joinpath(*module.split("."), "__init__.py").is_file()

    def imports_of(self, module: str) -> frozenset[str]:
        """First-party modules `module` imports (directly, at any nesting level of its source)."""
        if module not in self._imports:
            path = self.file_of(module)
            if path is None:
                raise ModuleNotFoundError(f"{module}: no {module.replace('.', '/')}.py or package under {self.root}")
            self._imports[module] = frozenset(n for n in referenced_modules(path, module, self.is_package(module))
                                              if self.file_of(n) is not None)
        return self._imports[module]

    def closure(self, entries: Iterable[str]) -> set[str]:
        """Every first-party module reachable from `entries`, with the parent packages each import runs."""
        seen: set[str] = set()
        todo = list(entries)
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            if self.file_of(module) is None:
                raise ModuleNotFoundError(f"{module}: no {module.replace('.', '/')}.py or package under {self.root}")
            seen.add(module)
            parts = module.split(".")
            todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
            todo.extend(self.imports_of(module))
        return seen


def referenced_modules(path: Path, module: str, is_package: bool) -> set[str]:
    """Dotted names `path` (the source of `module`) may import: for `from a import b` both "a" and "a.b"
    (the caller keeps the ones that resolve to files)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        raise SyntaxError(f"{path}: cannot parse for its imports: {exc}") from exc
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package, path)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and _is_import_module(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
        elif isinstance(node, (ast.List, ast.Tuple)):
            names.update(_dash_m_modules(node.elts))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _LAZY_PATH.fullmatch(node.value):
            names.add(node.value.partition(":")[0])  # a registry's lazy "module:attribute" strategy
    return {n for n in names if n}


_LAZY_PATH = re.compile(r"(?:harness|stages)(?:\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*")


def _absolute(name: str | None, level: int, package: str, path: Path) -> str:
    if level == 0:
        return name or ""
    parts = package.split(".") if package else []
    if level - 1 > len(parts):
        raise ImportError(f"{path}: relative import beyond the top-level package")
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module")


def _dash_m_modules(elements: list[ast.expr]) -> set[str]:
    """"<module>" of every adjacent ("-m", "<module>") pair of string constants."""
    found = set()
    for flag, value in zip(elements, elements[1:]):
        if (isinstance(flag, ast.Constant) and flag.value == "-m" and isinstance(value, ast.Constant)
                and isinstance(value.value, str)):
            found.add(value.value)
    return found


def closure_files(entries: Iterable[str], root: Path, index: ModuleIndex | None = None) -> list[Path]:
    """The source files of the import closure of `entries`, sorted by relative path."""
    index = index or ModuleIndex(Path(root))
    files = {index.file_of(m) for m in index.closure(entries)}
    return sorted((f for f in files if f is not None), key=lambda p: p.relative_to(root).as_posix())


def fingerprint(files: Iterable[Path], root: Path) -> dict:
    """{"digest": sha256 over all files, "files": {relative path: sha256}} (deterministic, order-free)."""
    digests = {}
    for file in files:
        file = Path(file)
        if not file.is_file():
            raise FileNotFoundError(f"library file {file} does not exist")
        digests[file.relative_to(root).as_posix()] = hashlib.sha256(file.read_bytes()).hexdigest()
    overall = hashlib.sha256()
    for relative in sorted(digests):
        overall.update(f"{relative}\0{digests[relative]}\n".encode())
    return {"digest": overall.hexdigest(), "files": dict(sorted(digests.items()))}


def stage_fingerprints(stages: Iterable[str], root: Path) -> dict[str, dict]:
    """{stage: fingerprint of the import closure of `stages.<stage>`} (one shared parse of each module)."""
    root = Path(root).resolve()
    index = ModuleIndex(root)
    return {stage: fingerprint(closure_files([f"{ENTRY_PACKAGE}.{stage}"], root, index), root) for stage in stages}


def package_of(module: str, depth: int = 2) -> str:
    """"harness.loop.steps" -> "harness.loop": the unit of the architecture's module map."""
    return ".".join(module.split(".")[:depth])


def module_graph(root: Path, packages: Iterable[str] = ("harness", ENTRY_PACKAGE)) -> dict[str, set[str]]:
    """{module: first-party modules it imports} for every module under the `packages` directories."""
    root = Path(root).resolve()
    index = ModuleIndex(root)
    graph: dict[str, set[str]] = {}
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            module = ".".join(parts)
            graph[module] = set(index.imports_of(module)) - {module}
    return graph


def package_graph(graph: Mapping[str, set[str]], depth: int = 2) -> dict[str, set[str]]:
    """The module graph folded to packages (`package_of`), self-edges dropped."""
    folded: dict[str, set[str]] = {}
    for module, imports in graph.items():
        source = package_of(module, depth)
        folded.setdefault(source, set()).update(package_of(m, depth) for m in imports)
    return {p: deps - {p} for p, deps in sorted(folded.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.pipeline.code_fingerprint", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--closure", metavar="MODULE", help="print the files of MODULE's import closure")
    group.add_argument("--graph", action="store_true", help="print each package and the packages it imports")
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.closure:
        for path in closure_files([args.closure], root):
            print(path.relative_to(root).as_posix())
        return 0
    for package, deps in package_graph(module_graph(root)).items():
        print(f"{package}: {' '.join(sorted(deps))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
