"""Stage start-up stays cheap: every `dvc repro` stage is a fresh process (~60 of them), so heavy
modules are imported only where they are used.

- no stage entry point or pipeline module imports mlflow/pandas/scipy/sqlalchemy at import time;
- a training stage's whole import set (entry point, config loading, the loop's stage functions)
  and loading the config snapshot (`load_params`) pull in neither Hydra (only composing needs it)
  nor scipy (only the gate's statistics need it);
- reading the questions Parquet file does not import pandas.
"""

from __future__ import annotations

import subprocess
import sys

from tests.pipeline.support import REPO_ROOT

HEAVY = ("mlflow", "pandas", "scipy", "sqlalchemy")
HEAVY_FOR_STAGES = HEAVY + ("hydra", "pyarrow.dataset", "openai")


def _run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _heavy_check(names: tuple[str, ...]) -> str:
    return (
        f"heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {names!r}))\n"
        "assert not heavy, heavy\n"
    )


def test_entry_points_do_not_import_mlflow() -> None:
    _run(
        "import sys\n"
        "import stages.prepare, stages.pools, stages.batches, stages.rollout, stages.evolve, stages.gate\n"
        "import stages.slow, stages.holdout, stages.report, stages.library\n"
        "import harness.pipeline.entry, harness.loop.runner, harness.pipeline.report, harness.tracking.hydra_callback\n"
        + _heavy_check(HEAVY)
    )


def test_training_stage_imports_and_config_snapshot_skip_hydra_and_scipy(tmp_path) -> None:
    """What `python -m stages.rollout ...` imports before its work: entry, config snapshot, stage functions."""
    _run(
        "import sys\n"
        "import stages.rollout, stages.evolve, stages.gate, stages.slow, stages.batches, stages.holdout\n"
        "import harness.config.load, harness.loop.runner, harness.loop.state\n"
        "from harness.pipeline.entry import load_stage_config\n"
        "cfg = load_stage_config(__import__('pathlib').Path('params.yaml'))\n"
        "assert cfg.train.epochs >= 1\n"
        + _heavy_check(HEAVY_FOR_STAGES)
    )


def test_reading_questions_does_not_import_pandas(tmp_path) -> None:
    from harness.questions import Question, write_questions

    path = tmp_path / "q.parquet"
    write_questions(path, [Question(qid="q1", task_type="t", question="2+2?", answer="4")])
    _run(
        "import sys\n"
        "from harness.questions import read_questions\n"
        f"assert [q.qid for q in read_questions({str(path)!r})] == ['q1']\n"
        + _heavy_check(("pandas", "pyarrow.dataset"))
    )


def test_composing_still_registers_the_schema_after_a_hydra_free_import() -> None:
    """harness.config imported first (no Hydra: schema not yet registered), then load_config composes conf/."""
    _run(
        "import sys\n"
        "import harness.config\n"
        "assert 'hydra' not in sys.modules\n"
        "from harness.config.load import load_config\n"
        "cfg = load_config(['train=tiny', 'tracking=none'], env_file=None, environ={})\n"
        "assert cfg.train.epochs >= 1\n"
    )
