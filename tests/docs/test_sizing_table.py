"""docs/own-run.md "Budget sizing": the table is what harness/kernel/sizing.py computes for these settings (issue 32 item 3).

    python tests/docs/test_sizing_table.py --write     # regenerate the table in docs/own-run.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.config.load import load_config  # noqa: E402
from harness.kernel.certificate import CertifyParams  # noqa: E402
from harness.kernel.sizing import sizing_table  # noqa: E402
from harness.kernel.types import gate_params_from_config  # noqa: E402

DOC = ROOT / "docs" / "own-run.md"
BEGIN, END = "<!-- sizing-table:begin -->", "<!-- sizing-table:end -->"
GATES = (("default", ()), ("`gate.max_pairs=20`", ("gate.max_pairs=20",)), ("`gate.max_pairs=100`", ("gate.max_pairs=100",)),
         ("strict (`gate=strict`)", ("gate=strict",)),
         ("strict, `gate.max_pairs=40 gate.block_size=10` (issue 32's run)", ("gate=strict", "gate.max_pairs=40", "gate.block_size=10")))
CERTIFICATES = (("certificate (default)", ()), ("`certify.max_pairs=100`", ("certify.max_pairs=100",)))
CERTIFY_FIELDS = ("alpha", "max_pairs", "block_size", "margin", "useful_fraction", "flag_drop", "min_type_pairs")


def expected_table() -> str:
    rows: list = []
    for label, overrides in GATES:
        rows.append((label, gate_params_from_config(load_config(list(overrides), env_file=None, environ={}).gate)))
    for label, overrides in CERTIFICATES:
        cfg = load_config(list(overrides), env_file=None, environ={})
        rows.append((label, CertifyParams(**{k: cfg.certify[k] for k in CERTIFY_FIELDS})))
    return sizing_table(rows)


def _documented(text: str) -> str:
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n")


@pytest.mark.slow  # sizes strict budgets up to ~2,500 pairs (~20 s)
def test_the_budget_sizing_table_is_the_computed_one() -> None:
    table = expected_table()
    assert _documented(DOC.read_text(encoding="utf-8")) == table, (
        "docs/own-run.md Budget sizing is out of date; run `python tests/docs/test_sizing_table.py --write`:\n" + table)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(text[:text.index(BEGIN) + len(BEGIN)] + "\n" + expected_table() + "\n" + text[text.index(END):], encoding="utf-8")
