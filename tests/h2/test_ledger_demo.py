from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "h2_ledger_demo.py"


def load_demo():
    spec = importlib.util.spec_from_file_location("h2_ledger_demo", DEMO)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["h2_ledger_demo"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("mode,k", [("parallel", 1), ("sequential", 2)])
def test_demo_prints_signed_total_and_writes_library(tmp_path, capsys, mode, k):
    demo = load_demo()
    assert demo.main(["--mode", mode, "--k", str(k), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("Total: 85.15")
    lib = tmp_path / "library" / "demo" / mode / "accounting"
    assert (lib / "INDEX.md").read_text().count("ledger-1") == 1
    assert "Decimal(row" in (lib / "harnesses" / "ledger-1" / "harness" / "scripts" / "total.py").read_text()
    assert "signed" in (lib / "harnesses" / "ledger-1" / "EXPERIENCE.md").read_text()
    # the base really computes 105.25, and the answer file never reached an editor
    base_rollout = (tmp_path / "ledger-1" / mode / "contexts" / "inv1" / "rollouts")
    assert "Total: 105.25" in "".join(p.read_text() for p in base_rollout.iterdir())
    assert not list((tmp_path / "ledger-1" / mode / "contexts").rglob("expected_total.txt"))
