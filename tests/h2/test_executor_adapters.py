"""Task adapters and roles over the real executors: a fake CLI agent script and a local task service."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from harness.executors.command import CommandExecutor
from harness.executors.remote import TaskServiceExecutor
from harness.h2.executor_adapters import CommandTaskAdapter, ServiceTaskAdapter, executor_for_role, render_deliverable, service_roles, split_key
from harness.h2.run import improve_task
from harness.identity import idempotency_key
from harness.llm.protocol import ChatMessage, LLMError, Role
from tests.h2.conftest import BASE, make_roles
from tests.support.task_service import TaskService

# The fake CLI agent: reads the installed harness and the task source, writes a deliverable,
# tries to write outside its worktree and to smuggle a symlink out (neither may come back).
AGENT = textwrap.dedent(
    """
    import os, sys, time, pathlib, re
    wd = pathlib.Path(sys.argv[1]); mode = sys.argv[2]
    if mode == "sleep":
        time.sleep(30)
    agents = (wd / "AGENTS.md").read_text()
    level = int(re.search(r"level: (\\d+)", agents).group(1))
    total = sum(float(x) for x in (wd / "data.csv").read_text().split())
    (wd / "out").mkdir(exist_ok=True)
    (wd / "out" / "report.md").write_text(f"total {total:.2f} at level {level}\\n")
    (wd.parent / f"outside-{wd.name}.txt").write_text("escaped")
    os.symlink("/etc/hostname", wd / "link.txt")
    print(f"cwd={os.getcwd()} ppid={os.getppid()}")
    print(f"level {level}")
    """
)
TAG = "exec-t"


@pytest.fixture
def agent_task(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    source = tmp_path / "source"
    source.mkdir()
    (source / "data.csv").write_text("100.25 -20.10 5.00")
    (source / "AGENTS.md").write_text("source copy, replaced by the harness\nlevel: 99\n")
    (source / "answer_key.txt").write_text("85.15")
    return script, source


def _command_adapter(script, source, work_root, mode="ok", timeout=30.0, backend=None):
    ex = CommandExecutor([sys.executable, str(script), "{workdir}", mode], timeout_s=timeout, work_root=work_root)
    return CommandTaskAdapter(task_id="ledger-1", domain="accounting", prompt="Total the ledger.", base=BASE,
                              source_dir=source, executor=ex, backend=backend, run_tag=TAG)


def test_split_key_roundtrip():
    key = idempotency_key(TAG, "probe", "ledger-1.parallel.k1.probe-inv1")
    assert split_key(key, TAG) == ("probe", "ledger-1.parallel.k1.probe-inv1")
    assert split_key("other", TAG) == ("probe", "other")


def test_command_probe_installs_harness_over_source_and_reads_deliverables_back(agent_task, tmp_path):
    script, source = agent_task
    work_root = tmp_path / "wt"
    adapter = _command_adapter(script, source, work_root)
    key = idempotency_key(TAG, "probe", "ledger-1.probe-inv1")
    rollout = asyncio.run(adapter.execute(key, BASE))
    assert rollout.ok, rollout.error
    assert rollout.label == key and rollout.harness_fingerprint == BASE.fingerprint
    assert "level 0" in rollout.observations[0].content  # the harness AGENTS.md (level 0) won over the source copy (99)
    assert rollout.deliverable_files == {"out/report.md": "total 85.15 at level 0\n"}
    assert "=== DELIVERABLE FILE: out/report.md ===\ntotal 85.15 at level 0\n=== END DELIVERABLE FILE ===" in rollout.deliverable
    # the worktree lived under work_root and is gone; nothing outside it or behind a symlink came back
    cwd = Path(re.search(r"cwd=(\S+)", rollout.observations[0].content).group(1))
    assert cwd.parent == work_root.resolve()
    assert [p.name for p in work_root.iterdir()] == [f"outside-{cwd.name}.txt"]  # written by the agent, not collected
    assert "link.txt" not in rollout.deliverable_files
    assert (source / "AGENTS.md").read_text().startswith("source copy")
    # evidence: source text files for the editor (leak globs are removed later by the context builder)
    assert set(adapter.source_files()) == {"data.csv", "AGENTS.md", "answer_key.txt"}


def test_command_probe_timeout_is_a_dead_rollout(agent_task, tmp_path):
    script, source = agent_task
    adapter = _command_adapter(script, source, tmp_path / "wt", mode="sleep", timeout=0.5)
    rollout = asyncio.run(adapter.execute(idempotency_key(TAG, "probe", "x"), BASE))
    assert not rollout.ok and rollout.meta["status"] == "timeout"
    assert "timeout" in rollout.error and rollout.deliverable == ""


def test_command_adapter_in_a_full_round(agent_task, tmp_path):
    """improve_task over a real CLI agent: the editor's bumped level shows up in the probes' deliverables."""
    script, source = agent_task
    adapter = _command_adapter(script, source, tmp_path / "wt")
    res = asyncio.run(improve_task(adapter, make_roles(), work_dir=tmp_path / "run", k=1, run_tag=TAG))
    assert not res.summary["dead_probes"] and not res.summary["fallbacks"]
    assert "level: 2" in res.delivered["AGENTS.md"]  # compose took the DOM proposal (+2)
    assert "total 85.15 at level 2" in res.summary["delivered_deliverable"]
    ctx = tmp_path / "run" / "contexts" / "agg1"
    assert (ctx / "source" / "data.csv").is_file() and not (ctx / "source" / "answer_key.txt").exists()


# ------------------------------------------------------------------ task service

KEY = "sk-h2-adapter-test"


def _role(task) -> str:
    return task["key"].split("-")[3]  # h2-<tag>-<role>-<label>; TAG has one '-'


def service_agent(calls):
    """Answers each role like a file-reading agent would; records what every task's bundle held."""

    def respond(task, files):
        role = _role(task)
        calls.append((role, task["key"], sorted(files)))
        if role == "editor":
            agents = files["context/harness/AGENTS.md"].decode()
            level = int(re.search(r"level: (\d+)", agents).group(1))
            if task["key"].endswith(".fmt2") or "inv1" not in task["key"]:
                return (f"=== HARNESS FILE: AGENTS.md ===\n# Agent\nUse the ledger skill.\nlevel: {level + 1}\n"
                        "=== END HARNESS FILE ===\n<notes>one level up</notes>")
            return "<notes>I changed AGENTS.md</notes>"  # claims a change without a block: a format error
        if role == "selector":
            return "```choice\nA\n```\n<why>first</why>"
        if role == "reflector":
            return '<experience>{"cue": "c", "lesson": "l", "evidence": "e"}</experience>'
        if role == "judge":
            return "<grade>0.75</grade><why>fine</why>"
        level = re.search(r"level: (\d+)", files.get("AGENTS.md", b"").decode()).group(1)
        return f"level {level}; files {','.join(sorted(files))}"

    return respond


@pytest.fixture
def service(monkeypatch):
    monkeypatch.setenv("TASK_SERVICE_API_KEY", KEY)
    with TaskService(api_key=KEY) as svc:
        yield svc


def _service_adapter(service, source, model=None, role_models=None):
    ex = TaskServiceExecutor(base_url=service.url, run_tag=TAG, poll_interval_s=0.01)
    probe_ex = executor_for_role(ex, "probe", model, role_models or {})
    return ServiceTaskAdapter(task_id="ledger-1", domain="accounting", prompt="Total the ledger.", base=BASE,
                              source_dir=source, executor=probe_ex, run_tag=TAG), ex


def test_service_probe_bundle_reply_and_files(service, agent_task):
    _script, source = agent_task
    calls: list = []
    service.responder = service_agent(calls)
    adapter, _ex = _service_adapter(service, source)
    key = idempotency_key(TAG, "probe", "ledger-1.probe-inv1")
    rollout = asyncio.run(adapter.execute(key, BASE))
    assert rollout.ok, rollout.error
    task = service.tasks[rollout.meta["task_id"]]
    assert task["key"] == key  # the executor re-derives exactly the recursion's key
    # one unwrapped reply (not the JSON envelope); the bundle held the source with the harness over it
    assert rollout.deliverable.startswith("level 0; files .agents/skills/ledger/SKILL.md,AGENTS.md,answer_key.txt,data.csv,scripts/total.py\n")
    assert set(rollout.deliverable_files) == {"answer.txt"}  # '../escape.txt' from the service is dropped
    assert rollout.cost_usd == pytest.approx(0.0125)


def test_service_round_end_to_end_and_resume_by_idempotency_key(service, agent_task, tmp_path):
    _script, source = agent_task
    calls: list = []
    service.responder = service_agent(calls)
    adapter, ex = _service_adapter(service, source, "shared-m", {"editor": "edit-m"})
    roles = service_roles(ex, model="shared-m", role_models={"editor": "edit-m"})
    res = asyncio.run(improve_task(adapter, roles, work_dir=tmp_path / "run", k=1, run_tag=TAG))
    roles_seen = [c[0] for c in calls]
    assert roles_seen.count("editor") == 4  # inv1 (+ .fmt2 retry), dom1, agg1
    inv = next(r for r in res.summary["stages"] if r["label"] == "inv1")
    assert inv["status"] == "adopted" and any(e.startswith("format:") for e in inv["errors"])
    assert any(k.endswith("editor-ledger-1.parallel.k1.inv1.fmt2") for _r, k, _f in calls)
    # the editor task's bundle is the evidence context: task, source minus leak globs, current harness
    editor_files = next(f for r, _k, f in calls if r == "editor")
    assert {"context/task.md", "context/source/data.csv", "context/harness/AGENTS.md"} <= set(editor_files)
    assert "context/source/answer_key.txt" not in editor_files
    assert res.summary["experience"] is None  # no library given
    assert "level: 1" in res.delivered["AGENTS.md"]  # every editor task raised the base's level 0 by one
    models = {_role(t): t["options"].get("model") for t in service.tasks.values()}
    assert models == {"base": "shared-m", "probe": "shared-m", "editor": "edit-m"}
    n_tasks = len(service.tasks)
    # a crash before the completion mark: re-running with the same run tag reuses every task (no new ones)
    shutil.rmtree(tmp_path / "run")
    again = asyncio.run(improve_task(adapter, roles, work_dir=tmp_path / "run", k=1, run_tag=TAG))
    assert len(service.tasks) == n_tasks
    assert again.delivered == res.delivered


def test_service_editor_failure_is_a_recorded_fallback(service, agent_task, tmp_path):
    _script, source = agent_task
    calls: list = []
    service.responder = service_agent(calls)
    adapter, ex = _service_adapter(service, source)
    roles = service_roles(ex)
    service.fail_prompts = _FailEditor()
    res = asyncio.run(improve_task(adapter, roles, work_dir=tmp_path / "run", k=1, run_tag=TAG))
    assert res.delivered_is_base
    assert len(res.summary["fallbacks"]) == 3 and all("editor call failed" in f for f in res.summary["fallbacks"])


class _FailEditor(set):
    """`prompt in fail_prompts` is true for editor prompts (their system text names the output format)."""

    def __contains__(self, prompt) -> bool:
        return "FORMAT: harness-file-blocks" in prompt


class _FailEvery(set):
    def __contains__(self, prompt) -> bool:
        return True


def test_service_role_task_failure_is_an_infra_llm_error_the_role_records(service):
    service.responder = service_agent([])
    service.fail_prompts = _FailEvery()
    roles = service_roles(TaskServiceExecutor(base_url=service.url, run_tag=TAG, poll_interval_s=0.01), model="m")
    selection = asyncio.run(roles.selector.select(key=idempotency_key(TAG, "selector", "ledger-1.select"), task_id="ledger-1",
                                                  task_header="", prompt="Total the ledger.", candidates={"A": "x", "B": "y"}))
    # before: LLMError(msg) lacked its kind, so the failed task raised TypeError out of the selector
    assert selection.choice is None and selection.call is None
    assert selection.error.startswith("selector call failed: [server] selector task ") and "agent crashed" in selection.error
    with pytest.raises(LLMError) as caught:
        asyncio.run(roles.selector.responder(Role.JUDGE, [ChatMessage("user", "grade this")], idempotency_key(TAG, "judge", "j1")))
    assert caught.value.kind == "server" and caught.value.is_infra
    assert (caught.value.role, caught.value.model) == (Role.JUDGE, "m")


def test_render_deliverable_keeps_whole_files():
    text = render_deliverable("done", {"b.md": "x", "a.md": "y\n"})
    assert text.index("a.md") < text.index("b.md") and "=== DELIVERABLE FILE: b.md ===\nx\n=== END" in text


def test_role_models_unknown_role_is_an_error(service):
    ex = TaskServiceExecutor(base_url=service.url, run_tag=TAG)
    with pytest.raises(ValueError, match="improve.service.role_models"):
        service_roles(ex, role_models={"critic": "m"})


@pytest.mark.slow
def test_command_probes_run_as_ray_tasks(agent_task, tmp_path):
    ray = pytest.importorskip("ray")
    from harness.executors.backend import make_backend

    script, source = agent_task
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        adapter = _command_adapter(script, source, tmp_path / "wt", backend=make_backend("ray"))

        async def two():
            return await asyncio.gather(*(adapter.execute(idempotency_key(TAG, "probe", f"p{i}"), BASE) for i in range(2)))

        rollouts = asyncio.run(two())
    finally:
        ray.shutdown()
    assert all(r.ok for r in rollouts), [r.error for r in rollouts]
    parents = {int(re.search(r"ppid=(\d+)", r.observations[0].content).group(1)) for r in rollouts}
    assert os.getpid() not in parents  # the agents were started by Ray worker processes, not by this process
    assert all(r.deliverable_files == {"out/report.md": "total 85.15 at level 0\n"} for r in rollouts)
