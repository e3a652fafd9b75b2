from __future__ import annotations

import asyncio

from harness.h2.report import judge_delivered, render_report
from harness.h2.roles import FunctionResponder, Judge
from harness.h2.run import run_sweep

from .conftest import ToyTask, make_roles


def test_report_judges_selected_runs_ungraded_on_failure_and_warns(tmp_path):
    tasks = [ToyTask(task_id="toy-0"), ToyTask(task_id="toy-1")]
    never = lambda r, m, k: "<no-change>keep</no-change>"  # noqa: E731
    sweep = asyncio.run(run_sweep(tasks, make_roles(editor=never), run_dir=tmp_path, run_tag="t1", k=1, modes=("parallel", "sequential")))
    calls = []

    def grade(role, messages, key):
        calls.append(key)
        return "<grade>0.75</grade><why>fine</why>" if "toy-0" in key else "no idea"

    scores = asyncio.run(judge_delivered(sweep.results, {t.task_id: t for t in tasks}, Judge(FunctionResponder(grade)), "t1"))
    assert len(calls) == 4  # one per delivered run
    assert scores[("toy-0", "parallel", 1)].value == 0.75 and scores[("toy-1", "parallel", 1)].value is None
    text = render_report(sweep.results, scores)
    assert "ungraded" in text and "judge failed" in text
    assert "the base harness was delivered on 100% of tasks" in text
    assert "k = 1 noise floor" in text
