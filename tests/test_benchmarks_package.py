"""benchmarks/ is a package: every script runs both as `python -m benchmarks.<name>` and as `python benchmarks/<name>.py`,
and no test loads a benchmark by its file path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the scripts that import other benchmark modules or the report helper (the ones a broken import would break)
SCRIPTS = ("gate", "fdr", "futility", "soft_gate", "evidence_floor", "lambda_curve", "zero_sum_pool", "ideal_decisions",
           "cert_bets")


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_benchmark_runs_as_a_module_and_as_a_script(name):
    for command in ([sys.executable, "-m", f"benchmarks.{name}", "--help"], [sys.executable, f"benchmarks/{name}.py", "--help"]):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{' '.join(command[1:])}: {done.stderr[-800:]}"
        assert "usage:" in done.stdout


def test_no_test_loads_a_benchmark_by_file_path():
    offenders = []
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path != Path(__file__).resolve() and "spec_from_file_location" in text and '"benchmarks"' in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], f"import these as `from benchmarks import <name>`: {offenders}"


def test_publish_writes_the_page_and_its_results_json(tmp_path):
    import json
    import math

    import numpy as np

    from benchmarks._report import publish, table

    page = tmp_path / "deep" / "bench.md"
    results = {"rows": [{"p": np.float64(0.25), "n": np.int64(3), "nan": math.nan}], "caps": {400: (1, 2)}, "arr": np.arange(3)}
    json_path = publish(page, "\n".join(["# t", *table(["a", "b|c"], [[1, "x|y"]])]), results)
    assert json_path == tmp_path / "deep" / "bench.json"
    assert page.read_text() == "# t\n| a | b\\|c |\n|---|---|\n| 1 | x\\|y |\n"
    assert json.loads(json_path.read_text()) == {"rows": [{"p": 0.25, "n": 3, "nan": None}], "caps": {"400": [1, 2]}, "arr": [0, 1, 2]}
