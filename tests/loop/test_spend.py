"""USD counts every role (issue 14 item 8): a tiny simulated run with a price per role's model."""

from __future__ import annotations

import json

from conftest import tiny_cfg

from harness.llm.metering import SPEND_FILE, StageSpend
from harness.loop.runner import Runner
from harness.pipeline.collect import RunLayout, collect_run, prediction_totals, read_spend, spend_by_epoch

PRICED = ("+llm.models.editor=ed-model", "+llm.models.diagnoser=dg-model", "+llm.prices.sim-solver-1={input:1.0,output:2.0}",
          "+llm.prices.ed-model={input:30.0,output:60.0}", "+llm.prices.dg-model={input:50.0,output:100.0}")


def _run(root, cache_dir):
    cfg = tiny_cfg(*PRICED, f"llm.cache_dir={cache_dir}")
    runner = Runner(cfg, root)
    try:
        runner.train()
    finally:
        runner.ctx.close()
    layout = RunLayout.from_config(cfg, root)
    return collect_run(cfg, layout, with_oracle=False), layout


def test_usd_counts_every_role_and_a_replayed_run_reports_the_same(tmp_path):
    cache = tmp_path / "shared-cache"
    first, layout = _run(tmp_path / "a", cache)
    roles = first.usd_by_role
    assert {"solver", "diagnoser", "editor"} <= set(roles)
    assert all(roles[r] > 0 for r in ("solver", "diagnoser", "editor"))
    metrics = first.final_metrics()
    assert metrics["usd"] == round(sum(roles.values()), 6)
    assert metrics["usd"] > roles["solver"]  # the editor and diagnoser are no longer left out
    assert metrics["usd_editor"] == roles["editor"] and metrics["usd_diagnoser"] == roles["diagnoser"]
    # what the solver paid is exactly what the rollouts' predictions record (every fragment, the held-out included);
    # its USD also counts the rollouts a run asks twice (the same harness at the same sample index) at their price
    spend = StageSpend()
    for epoch_spend in spend_by_epoch(layout).values():
        spend.add(epoch_spend)
    spend.add(read_spend(layout.holdout))
    paid_by_rollouts = sum(t["usd"] for t in prediction_totals(layout).values())
    assert abs(spend.roles["solver"].usd_paid - paid_by_rollouts) < 1e-9
    assert spend.roles["solver"].usd >= spend.roles["solver"].usd_paid

    again, layout2 = _run(tmp_path / "b", cache)  # every call answered by the shared response cache
    assert again.usd_by_role == roles  # replayed calls count at the price they were paid
    spend = json.loads((layout2.step_stage("evolve", 1, 1) / SPEND_FILE).read_text())["roles"]
    assert spend["editor"]["calls"] == spend["editor"]["replayed"] > 0 and spend["editor"]["usd_paid"] == 0.0
