"""Structural guarantee: the training loop never sees the oracle (DESIGN §7)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUARDED = ("harness/loop", "harness/evolution", "harness/kernel")
FORBIDDEN = ("harness.sim.oracle", "harness.sim.calibration")  # calibration imports the oracle


def _imports(path: Path) -> list[str]:
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    return _imports_of_source(path.read_text(encoding="utf-8"), package)


def _imports_of_source(source: str, package: str) -> list[str]:
    tree = ast.parse(source)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names]
    return names


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_no_guarded_module_imports_the_oracle():
    offenders = []
    for guarded in GUARDED:
        for path in sorted((ROOT / guarded).rglob("*.py")):
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in _imports(path) if _forbidden(n)]
    assert not offenders, offenders


def test_the_checker_catches_an_oracle_import():
    sources = (
        "from harness.sim.oracle import Oracle\n",
        "import harness.sim.oracle\n",
        "from harness.sim import oracle\n",
        "from ..sim.oracle import Oracle\n",
        "from ..sim import calibration\n",
    )
    for source in sources:
        assert any(_forbidden(n) for n in _imports_of_source(source, "harness.loop")), source
    assert not any(_forbidden(n) for n in _imports_of_source("from harness.sim.world import World\n", "harness.loop"))


def test_importing_the_loop_side_packages_does_not_load_the_oracle():
    modules = []
    for guarded in GUARDED:
        for path in sorted((ROOT / guarded).rglob("*.py")):
            modules.append(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    code = (
        "import importlib, sys\n"
        "import harness.evolution.evolve, harness.evolution.diagnose, harness.evolution.momentum\n"
        f"for m in {modules!r}:\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except Exception as exc:  # another module mid-edit: the AST test above still covers its imports\n"
        "        print('not importable:', m, exc, file=sys.stderr)\n"
        f"bad = [m for m in {list(FORBIDDEN)!r} if m in sys.modules]\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
