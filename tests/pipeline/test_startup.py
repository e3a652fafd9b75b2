"""Stage start-up stays cheap: no stage entry point or pipeline module imports mlflow at import time."""

from __future__ import annotations

import subprocess
import sys

from tests.pipeline.support import REPO_ROOT


def test_entry_points_do_not_import_mlflow() -> None:
    code = (
        "import sys\n"
        "import stages.prepare, stages.pools, stages.batches, stages.rollout, stages.evolve, stages.gate\n"
        "import stages.slow, stages.holdout, stages.report, stages.library\n"
        "import harness.pipeline.entry, harness.pipeline.chain, harness.pipeline.report, harness.tracking.hydra_callback\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mlflow', 'pandas', 'scipy', 'sqlalchemy'))\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
