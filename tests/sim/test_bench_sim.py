import pytest

from harness.bench.protocol import BenchmarkAdapter, ToolArgumentError, UnknownToolError
from harness.sim.benchmark import SimBenchmark
from harness.sim.world import World


def test_sim_benchmark_is_a_benchmark_adapter():
    bench = SimBenchmark(World.generate(7, n_task_types=4, questions_per_type=10))
    assert isinstance(bench, BenchmarkAdapter)
    assert bench.name == "sim" and bench.task_types == tuple(bench.world.task_type_names)
    assert len(bench.questions()) == 40
    assert "tools/lookup_frames.md" in bench.base_harness()
    assert [t.name for t in bench.tools()] == ["lookup_frames"]


def test_scoring_and_deterministic_tool():
    bench = SimBenchmark(World.generate(7))
    q = bench.questions()[0]
    wrong = next(L for L in "ABCD" if L != q.answer)
    assert bench.score(q, q.answer) and bench.score(q, f"({q.answer})")
    assert not bench.score(q, wrong) and not bench.score(q, None)
    dispatch = bench.tool_dispatch(q)
    out = dispatch("lookup_frames", {"focus": "the cup"})
    assert out == SimBenchmark(World.generate(7)).tool_dispatch(q)("lookup_frames", {"focus": "the cup"})
    assert out != dispatch("lookup_frames", {"focus": "the door"})
    with pytest.raises(UnknownToolError):
        dispatch("search_web", {})
    with pytest.raises(ToolArgumentError, match="focus"):
        dispatch("lookup_frames", {"focus": ""})
