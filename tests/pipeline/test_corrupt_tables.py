"""Empty tables where rows are expected are refused (issue 31 item 6): a real tiny training run, its rollout's run
log emptied by hand, then resumed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from harness.inputs import InputFileError

pytestmark = pytest.mark.timeout(300)


class Stop(BaseException):
    """Ends the run after a chosen stage (not an Exception: nothing in the loop may swallow it)."""


def test_an_emptied_run_log_table_is_named_not_read_as_no_failures(tmp_path: Path) -> None:
    from harness.config.load import load_config
    from harness.loop.runner import Runner

    cfg = load_config(["train=tiny", "tracking=none", "train.epochs=1"], env_file=None, environ={})

    def stop_after_rollout(item) -> None:
        if item.name == "rollout@e1.s1":
            raise Stop

    runner = Runner(cfg, tmp_path)
    try:
        with pytest.raises(Stop):
            runner.train(after_stage=stop_after_rollout)
    finally:
        runner.ctx.close()
    runlog = tmp_path / "state" / "e1" / "s1" / "rollout" / "runlog.sqlite"
    with sqlite3.connect(runlog) as conn:
        assert conn.execute("SELECT COUNT(*) FROM predictions").fetchone()[0] > 0
        conn.execute("DELETE FROM predictions")
    resumed = Runner(cfg, tmp_path)
    try:
        with pytest.raises(InputFileError) as info:
            resumed.train()
    finally:
        resumed.ctx.close()
    message = str(info.value)
    assert message.startswith(f"{runlog}: the run log holds 0 scored prediction rows of run tiny_e1_s1")
    assert "the table was emptied or truncated" in message and "re-run the stage that wrote it" in message
    assert not (tmp_path / "state" / "e1" / "s1" / "evolve" / "DONE.json").exists()
