import logging

import pytest

from harness.executors.remote import TaskServiceExecutor, make_bundle, preflight_checks, unwrap_result_text
from harness.executors.types import ExecutionRequest
from harness.tree import HarnessTree
from tests.support.task_service import TaskService

KEY = "sk-test-secret-123456789"


@pytest.fixture
def service(monkeypatch):
    monkeypatch.setenv("TASK_SERVICE_API_KEY", KEY)
    with TaskService(api_key=KEY) as svc:
        yield svc


def _executor(service, **kw):
    return TaskServiceExecutor(base_url=service.url, run_tag="run-a", poll_interval_s=0.01, **kw)


def _request(label="inv-1", prompt="do the task"):
    return ExecutionRequest(label=label, role="probe", prompt=prompt, harness=HarnessTree({"AGENTS.md": "be careful"}))


def test_end_to_end_task_roundtrip(service, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    source = tmp_path / "src"
    source.mkdir()
    (source / "data.csv").write_text("1 2 3")
    ex = _executor(service, task_options={"model": "gpt-x"})
    result = ex.execute(ExecutionRequest(label="inv-1", role="probe", prompt="p", source_dir=source,
                                         harness=HarnessTree({"AGENTS.md": "x"})))
    assert result.ok, result.error
    # the envelope is unwrapped once: the reply is the agent's text, not the JSON envelope
    assert result.text == "I read: AGENTS.md,data.csv"
    assert result.cost_usd == pytest.approx(0.0125)
    assert '"type": "start"' in result.transcript
    assert result.deliverable_files == {"answer.txt": "I read: AGENTS.md,data.csv"}  # '../escape.txt' dropped
    task = service.tasks[result.task_id]
    assert task["key"] == "h2-run-a-probe-inv-1"
    assert task["options"] == {"model": "gpt-x"}
    # the key travels only as X-API-Key and never reaches the log
    assert all(h.get("X-API-Key") == KEY for m, p, h in service.requests if p != "/health")
    assert KEY not in caplog.text


def test_rerun_with_same_tag_resumes_the_same_task(service):
    ex = _executor(service)
    first = ex.execute(_request())
    second = ex.execute(_request())
    assert first.task_id == second.task_id
    assert len(service.tasks) == 1


def test_timeout_cancels_the_task(service):
    service.slow_prompts.add("slow")
    ex = _executor(service, timeout_s=0.3)
    result = ex.execute(_request(prompt="slow"))
    assert not result.ok and result.status == "timeout"
    assert service.cancelled == [result.task_id]


def test_failed_task_and_unreadable_files(service):
    service.fail_prompts.add("bad")
    service.files_conflict = True
    ex = _executor(service)
    result = ex.execute(_request(prompt="bad"))
    assert not result.ok and result.status == "failed" and "agent crashed" in result.error
    assert result.deliverable_files == {}


def test_wrong_key_is_a_recorded_create_error(service, monkeypatch):
    monkeypatch.setenv("TASK_SERVICE_API_KEY", "wrong")
    result = _executor(service).execute(_request())
    assert not result.ok and result.status == "create_error" and "401" in result.error
    assert "wrong" not in result.error


def test_unwrap_result_text():
    assert unwrap_result_text('{"text": "hello", "status": "completed"}') == "hello"
    assert unwrap_result_text("plain reply") == "plain reply"
    assert unwrap_result_text(None) == ""


def test_bundle_puts_harness_over_source(tmp_path):
    import io
    import tarfile
    (tmp_path / "AGENTS.md").write_text("old")
    data = make_bundle({"AGENTS.md": "new"}, tmp_path)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        assert tar.extractfile("AGENTS.md").read() == b"new"


def test_preflight_creates_no_task(service, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "AGENTS.md").write_text("x")
    ex = _executor(service)
    assert preflight_checks(run_tag="run-a", base_dir=base, prompt="p", source_dir=None, executor=ex) == []
    problems = preflight_checks(run_tag="-bad", base_dir=tmp_path / "missing", prompt=" ",
                                source_dir=tmp_path / "nosrc", executor=ex)
    assert len(problems) == 4
    assert service.tasks == {}


def test_preflight_reports_service_down(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "AGENTS.md").write_text("x")
    ex = TaskServiceExecutor(base_url="http://127.0.0.1:9", run_tag="run-a", request_timeout_s=1)
    problems = preflight_checks(run_tag="run-a", base_dir=base, prompt="p", source_dir=None, executor=ex)
    assert any("/health" in p for p in problems)
