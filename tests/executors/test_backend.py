import sys

import pytest

from harness.executors.backend import InProcessBackend, make_backend, ray_available
from harness.executors.command import CommandExecutor
from harness.executors.types import ExecutionRequest
from harness.tree import HarnessTree

AGENT = "import sys,pathlib; print(pathlib.Path(sys.argv[1], 'AGENTS.md').read_text())"


def _requests(n):
    return [ExecutionRequest(label=f"p{i}", role="probe", prompt="p", harness=HarnessTree({"AGENTS.md": f"tree {i}"}))
            for i in range(n)]


def test_inprocess_backend_runs_each_request(tmp_path):
    ex = CommandExecutor([sys.executable, "-c", AGENT, "{workdir}"], timeout_s=30)
    results = InProcessBackend(max_workers=2).run_all(ex, _requests(3))
    assert [r.text for r in results] == ["tree 0", "tree 1", "tree 2"]


def test_unknown_backend_is_an_error():
    with pytest.raises(ValueError, match="executor.backend"):
        make_backend("threads")


@pytest.mark.slow
@pytest.mark.skipif(not ray_available(), reason="ray is not installed (pip install '.[ray]')")
def test_ray_backend_runs_probes_as_ray_tasks(tmp_path):
    import ray

    ex = CommandExecutor([sys.executable, "-c", AGENT, "{workdir}"], timeout_s=60)
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        backend = make_backend("ray")
        results = backend.run_all(ex, _requests(3))
    finally:
        ray.shutdown()
    assert [r.text for r in results] == ["tree 0", "tree 1", "tree 2"]
    assert all(r.ok for r in results)
