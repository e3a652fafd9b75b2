from .bench_loader import load_gate_benchmark


def test_quick_benchmark_runs_and_writes_its_report(tmp_path):
    out = tmp_path / "gate.md"
    assert load_gate_benchmark().main(["--quick", "--runs", "40", "--pop-runs", "3", "--out", str(out)]) == 0
    text = out.read_text()
    for heading in ("## 1. Grid", "### 1b.", "## 1c.", "## 2. Negative control", "## 3. Every `gate.rule`", "## 4. Information ladder", "## 5. Ladder orderings", "## 6. Trade-off null", "## Targets"):
        assert heading in text
    assert "python benchmarks/gate.py --quick" in text
    assert text.count("| 0.2 | +0 |") == 2  # one row per grid cell, block 20 and block 10
    assert "LEAK control" in text
