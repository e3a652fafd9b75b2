import sys
import textwrap

import pytest

from harness.executors.command import CommandExecutor, CommandTemplateError, install_tree
from harness.executors.types import ExecutionRequest
from harness.tree import HarnessTree, TreePathError

FAKE_AGENT = textwrap.dedent(
    """
    import os, sys, time, pathlib
    wd = pathlib.Path(sys.argv[1]); mode = sys.argv[2]
    prompt = (wd / ".harness_prompt.md").read_text()
    agents = (wd / "AGENTS.md").read_text() if (wd / "AGENTS.md").exists() else "<none>"
    if mode == "sleep":
        time.sleep(60)
    if mode == "fail":
        print("boom", file=sys.stderr); sys.exit(3)
    data = (wd / "data.csv").read_text()
    total = sum(float(x) for x in data.split())
    (wd / "out").mkdir(exist_ok=True)
    (wd / "out" / "total.txt").write_text(f"{total:.2f}")
    print(f"AGENTS says: {agents.strip()}")
    print(f"prompt: {prompt.strip()}")
    """
)


@pytest.fixture
def agent(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(FAKE_AGENT)
    source = tmp_path / "source"
    source.mkdir()
    (source / "data.csv").write_text("100.25 -20.10 5.00")
    (source / "AGENTS.md").write_text("source version, must be overridden")
    return script, source


def _request(source, label="probe-1", agents="Sum every amount with its sign."):
    return ExecutionRequest(label=label, role="probe", prompt="Total the ledger", source_dir=source,
                            harness=HarnessTree({"AGENTS.md": agents}))


def test_runs_agent_in_fresh_worktree_with_harness_over_source(agent, tmp_path):
    script, source = agent
    ex = CommandExecutor([sys.executable, str(script), "{workdir}", "ok"], timeout_s=30, work_root=tmp_path / "wt")
    result = ex.execute(_request(source))
    assert result.ok, result.error
    assert "AGENTS says: Sum every amount with its sign." in result.text  # harness file won over the source copy
    assert "prompt: Total the ledger" in result.text
    assert result.deliverable_files == {"out/total.txt": "85.15"}
    assert list((tmp_path / "wt").iterdir()) == []  # worktree removed
    assert (source / "AGENTS.md").read_text() == "source version, must be overridden"  # source untouched


def test_timeout_kills_agent_and_records_error(agent, tmp_path):
    script, source = agent
    ex = CommandExecutor([sys.executable, str(script), "{workdir}", "sleep"], timeout_s=1.0)
    result = ex.execute(_request(source))
    assert not result.ok and result.status == "timeout"
    assert "timeout" in result.error
    assert result.duration_s < 15


def test_nonzero_exit_is_a_failed_rollout_with_transcript(agent):
    script, source = agent
    result = CommandExecutor([sys.executable, str(script), "{workdir}", "fail"], timeout_s=30).execute(_request(source))
    assert not result.ok and result.status == "exit:3"
    assert "boom" in result.transcript


def test_missing_binary_is_recorded_not_raised(agent):
    _, source = agent
    result = CommandExecutor(["/nonexistent/agent-binary", "{workdir}"]).execute(_request(source))
    assert not result.ok and result.status == "spawn_error"


@pytest.mark.parametrize("flag", ["--dangerously-bypass-approvals-and-sandbox", "--dangerously-skip-permissions",
                                  "--sandbox=danger-full-access", "--yolo"])
def test_sandbox_disabling_flags_are_refused(flag):
    with pytest.raises(CommandTemplateError, match="sandbox"):
        CommandExecutor(["codex", "exec", flag, "{prompt}"])


def test_install_tree_never_escapes_the_worktree(tmp_path):
    with pytest.raises(TreePathError):
        install_tree(tmp_path, {"../outside.md": "x"})
    with pytest.raises(TreePathError):
        install_tree(tmp_path, {"/etc/passwd": "x"})
    outside = tmp_path.parent / "target-outside"
    outside.mkdir(exist_ok=True)
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="escapes|symlink"):
        install_tree(tmp_path, {"link/file.md": "x"})
    assert not (outside / "file.md").exists()
