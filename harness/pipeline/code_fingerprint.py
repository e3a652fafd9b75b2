"""What code a pipeline stage runs, derived from its imports, and a content fingerprint of it for DVC.

A stage's code is the import closure of its entry module (`stages.<name>`):
every first-party module reachable through `import` / `from ... import`
statements anywhere in a module's source (function-local imports included,
since the stages import their heavy modules inside the stage call), through
`importlib.import_module("<literal>")`, and through `"-m", "<module>"`
argument pairs (worker processes started as `python -m <module>`), through a
registry's lazy `"harness.x.y:attr"` strategy strings, plus the
`__init__.py` of every package on the way, plus the data files a module
declares in `DATA_FILES` (the meta-prompt templates of harness/evolution/prompts.py). First-party means the module
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
    _data_files: dict[Path, frozenset[Path]] = field(default_factory=dict)

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

    def data_files_of(self, path: Path) -> frozenset[Path]:
        """`data_files_of(path)`, parsed once per file (every stage's closure shares most files)."""
        if path not in self._data_files:
            self._data_files[path] = frozenset(data_files_of(path))
        return self._data_files[path]

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


DATA_FILES_NAME = "DATA_FILES"


def data_files_of(path: Path) -> set[Path]:
    """The files a module declares it reads: a module-level `DATA_FILES = ("templates/*.md", ...)` of glob
    patterns relative to the module's directory (e.g. harness/evolution/prompts.py and its templates)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[Path] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == DATA_FILES_NAME for t in node.targets):
            elements = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else []
            patterns = [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if not isinstance(node.value, (ast.Tuple, ast.List)) or len(patterns) != len(elements):
                raise ValueError(f"{path}:{node.lineno}: {DATA_FILES_NAME} must be a tuple of string literals (glob patterns)")
            for pattern in patterns:
                found.update(p for p in path.parent.glob(pattern) if p.is_file())
    return found


def closure_files(entries: Iterable[str], root: Path, index: ModuleIndex | None = None) -> list[Path]:
    """The source files of the import closure of `entries`, and the data files they declare, sorted by relative path."""
    index = index or ModuleIndex(Path(root))
    files = {f for f in (index.file_of(m) for m in index.closure(entries)) if f is not None}
    files |= {data for f in list(files) for data in index.data_files_of(f)}
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


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


def package_of(module: str) -> str:
    """The unit of the architecture's module map: "harness.loop.steps" -> "harness.loop", "stages.gate" -> "stages"."""
    parts = module.split(".")
    return parts[0] if parts[0] == ENTRY_PACKAGE else ".".join(parts[:2])


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_files(root: Path, packages: Iterable[str] = ("harness", ENTRY_PACKAGE)) -> list[Path]:
    """Every module file under the `packages` directories, sorted."""
    root = Path(root).resolve()
    return sorted((p for top in packages for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts),
                  key=lambda p: p.relative_to(root).as_posix())


def module_graph(root: Path, packages: Iterable[str] = ("harness", ENTRY_PACKAGE)) -> dict[str, set[str]]:
    """{module: first-party modules it imports} for every module under the `packages` directories."""
    root = Path(root).resolve()
    index = ModuleIndex(root)
    graph: dict[str, set[str]] = {}
    for path in module_files(root, packages):
        module = module_name(path, root)
        graph[module] = set(index.imports_of(module)) - {module}
    return graph


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded to packages (`package_of`); self-edges and the bare root packages dropped."""
    folded: dict[str, set[str]] = {}
    for module, imports in graph.items():
        source = package_of(module)
        if "." not in source and source != ENTRY_PACKAGE:
            continue  # harness/__init__.py: the namespace, not a unit
        folded.setdefault(source, set()).update(package_of(m) for m in imports if "." in package_of(m) or m == ENTRY_PACKAGE)
    return {p: deps - {p} for p, deps in sorted(folded.items())}


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of `graph` (Tarjan), each sorted; components in dependency order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def layers(graph: Mapping[str, set[str]]) -> dict[str, int]:
    """Layer of each node: 0 imports nothing, otherwise 1 + the highest layer it imports (a cycle shares one layer)."""
    layer: dict[str, int] = {}
    for component in strongly_connected(graph):  # dependencies come first
        members = set(component)
        deps = {d for m in component for d in graph.get(m, ()) if d not in members}
        level = 1 + max((layer[d] for d in deps), default=-1)
        layer.update({m: level for m in component})
    return layer


def _docstring_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_bytes(), filename=str(path))) or ""
    line = doc.strip().split("\n")[0].strip()
    return line.replace("|", "\\|")


MAP_BEGIN = "<!-- module map: generated by `python -m harness.pipeline.code_fingerprint --module-map --write docs/ARCHITECTURE.md` -->"
MAP_END = "<!-- end of the generated module map -->"


def module_map(root: Path) -> str:
    """The Markdown module map: packages by layer with what each imports, then every module's docstring line."""
    root = Path(root).resolve()
    graph = module_graph(root)
    packages = package_graph(graph)
    level = layers(packages)
    cycles = [c for c in strongly_connected(packages) if len(c) > 1]
    out = [MAP_BEGIN, "", "### Dependency direction", "",
           "Layer 0 imports no other first-party package; every other package imports only packages of lower layers"
           + (", except inside the import cycles listed below." if cycles else "."), "",
           "| layer | package | imports |", "|---|---|---|"]
    for package in sorted(packages, key=lambda p: (level[p], p)):
        deps = ", ".join(f"`{d}`" for d in sorted(packages[package], key=lambda d: (level.get(d, 0), d))) or "—"
        out.append(f"| {level[package]} | `{package}` | {deps} |")
    if cycles:
        out += ["", "Import cycles (packages that import each other, directly or through others):", ""]
        out += [f"- {' ↔ '.join(f'`{p}`' for p in cycle)}" for cycle in cycles]
    out += ["", "### Modules", ""]
    by_directory: dict[str, list[tuple[Path, str]]] = {}
    for path in module_files(root):
        line = _docstring_line(path)
        if path.name == "__init__.py" and not line:
            continue  # an empty package marker
        by_directory.setdefault(path.parent.relative_to(root).as_posix(), []).append((path, line))
    for directory in sorted(by_directory):
        out += [f"#### `{directory}/`", "", "| module | holds |", "|---|---|"]
        out += [f"| `{path.relative_to(root).as_posix()}` | {line or '—'} |" for path, line in by_directory[directory]]
        out.append("")
    out.append(MAP_END)
    return "\n".join(out) + "\n"


def replace_module_map(document: str, generated: str) -> str:
    """`document` with the text between the map markers (inclusive) replaced by `generated`."""
    start, end = document.find(MAP_BEGIN), document.find(MAP_END)
    if start < 0 or end < start:
        raise ValueError("the document has no generated module map (its begin/end markers are missing)")
    return document[:start] + generated + document[end + len(MAP_END) + 1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.pipeline.code_fingerprint", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--closure", metavar="MODULE", help="print the files of MODULE's import closure")
    group.add_argument("--graph", action="store_true", help="print each package and the packages it imports")
    group.add_argument("--module-map", action="store_true", help="print the Markdown module map of docs/ARCHITECTURE.md")
    parser.add_argument("--write", type=Path, help="with --module-map: replace the map inside this document")
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.closure:
        for path in closure_files([args.closure], root):
            print(path.relative_to(root).as_posix())
    elif args.graph:
        for package, deps in package_graph(module_graph(root)).items():
            print(f"{package}: {' '.join(sorted(deps))}")
    elif args.write:
        args.write.write_text(replace_module_map(args.write.read_text(encoding="utf-8"), module_map(root)), encoding="utf-8")
    else:
        sys.stdout.write(module_map(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
