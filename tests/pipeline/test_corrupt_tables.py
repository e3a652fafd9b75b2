"""Corrupt state is named by its source file (issue 31 item 6): a real tiny training run stopped after its first
gate; its files are then emptied or garbled by hand, and the stage that reads them refuses, naming the file to repair
(not the copy a stage carries) and the stage that rewrites it."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from harness.inputs import InputFileError

pytestmark = pytest.mark.timeout(300)


class Stop(BaseException):
    """Ends the run after a chosen stage (not an Exception: nothing in the loop may swallow it)."""


def _cfg():
    from harness.config.load import load_config

    return load_config(["train=tiny", "tracking=none", "train.epochs=1"], env_file=None, environ={})


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """A tiny run stopped after gate@e1.s1 (rollout, evolve and gate of step 1 done)."""
    from harness.loop.runner import Runner

    root = tmp_path_factory.mktemp("stopped")

    def stop_after_gate(item) -> None:
        if item.name == "gate@e1.s1":
            raise Stop

    runner = Runner(_cfg(), root)
    try:
        with pytest.raises(Stop):
            runner.train(after_stage=stop_after_gate)
    finally:
        runner.ctx.close()
    return root


def _copy(stopped: Path, tmp_path: Path) -> Path:
    root = tmp_path / "run"
    shutil.copytree(stopped, root)
    return root


def test_an_emptied_run_log_table_is_named_not_read_as_no_failures(stopped: Path, tmp_path: Path) -> None:
    from harness.loop.runner import Runner

    root = _copy(stopped, tmp_path)
    shutil.rmtree(root / "state" / "e1" / "s1" / "evolve")  # evolve runs again, on the emptied table
    shutil.rmtree(root / "state" / "e1" / "s1" / "gate")
    runlog = root / "state" / "e1" / "s1" / "rollout" / "runlog.sqlite"
    with sqlite3.connect(runlog) as conn:
        assert conn.execute("SELECT COUNT(*) FROM predictions").fetchone()[0] > 0
        conn.execute("DELETE FROM predictions")
    resumed = Runner(_cfg(), root)
    try:
        with pytest.raises(InputFileError) as info:
            resumed.train()
    finally:
        resumed.ctx.close()
    message = str(info.value)
    assert message.startswith(f"{runlog}: the run log holds 0 scored prediction rows of run tiny_e1_s1")
    assert "the table was emptied or truncated" in message and "re-run the stage that wrote it" in message
    assert not (root / "state" / "e1" / "s1" / "evolve" / "DONE.json").exists()


def test_a_truncated_checkpoint_is_named_at_its_source_not_the_copy(stopped: Path, tmp_path: Path) -> None:
    from harness.loop.checkpoint import CheckpointError
    from harness.loop.state import CHECKPOINT, open_carried_state

    root = _copy(stopped, tmp_path)
    source = root / "state" / "e1" / "s1" / "gate" / CHECKPOINT
    source.write_text(source.read_text()[:100])
    with pytest.raises(CheckpointError) as info:
        open_carried_state(source.parent, root / "state" / "e1" / "s2" / "gate", "previous step", "gate@e1.s2")
    assert str(info.value).startswith(f"{source}: checkpoint is not valid JSON"), str(info.value)
    assert "re-run the stage that wrote it" in str(info.value)


def test_a_state_written_with_a_baseline_cache_file_still_opens_and_drops_it(stopped: Path, tmp_path: Path) -> None:
    """Issue 29 removed the baseline cache: a state directory written before (with a baseline_cache.jsonl, here even
    garbled) is opened as before, and the file is not carried into the next state."""
    from harness.loop.state import CHECKPOINT, open_carried_state

    root = _copy(stopped, tmp_path)
    source = root / "state" / "e1" / "s1" / "gate"
    (source / "baseline_cache.jsonl").write_text("{not json\n")
    out = root / "state" / "e1" / "s2" / "gate"
    carried = open_carried_state(source, out, "previous step", "gate@e1.s2")
    assert carried is not None and carried.progress.step == 1
    assert (out / CHECKPOINT).is_file() and not (out / "baseline_cache.jsonl").exists()
