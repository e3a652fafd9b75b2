"""Harness² ledger demo (seed 002): deterministic roles, no model, no network.

The task: total the ledger 100.25 / -20.10 / 5.00. The base harness (Codex
surface) ships a skill whose script sums only positive amounts (105.25).
One Harness² round — INV and DOM proposals, probes, composition, final
rollout, selection, reflection — delivers a harness whose script takes the
signed sum, prints ``Total: 85.15`` and writes the experience library.

    python examples/h2_ledger_demo.py --mode parallel --out runs/h2-demo
    python examples/h2_ledger_demo.py --mode sequential --k 2

Executing a task = running the harness's own script on the ledger in a
subprocess (this demo's agent). The editors never run scripts; the validator
only compiles them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from harness.h2.adapters import Observation, Rollout
from harness.h2.library import Library
from harness.h2.roles import Editor, FunctionResponder, Reflector, Roles, Selector
from harness.h2.run import improve_task
from harness.h2.surfaces import CODEX, Surface
from harness.llm.protocol import ChatMessage, Role
from harness.tree import HarnessTree

LEDGER = "date,description,amount\n2026-01-02,invoice 17,100.25\n2026-01-05,refund 3,-20.10\n2026-01-09,fee,5.00\n"

BASE_SCRIPT = '''import csv
import sys

total = 0.0
with open(sys.argv[1], newline="") as fh:
    for row in csv.DictReader(fh):
        amount = float(row["amount"])
        if amount > 0:
            total += amount
print(f"Total: {total:.2f}")
'''

SIGNED_SCRIPT = '''import csv
import sys
from decimal import Decimal

total = Decimal("0")
with open(sys.argv[1], newline="") as fh:
    for row in csv.DictReader(fh):
        total += Decimal(row["amount"])  # signed: refunds and credits reduce the total
print(f"Total: {total:.2f}")
'''

SKILL = """---
name: ledger-total
description: totalling a ledger CSV
---
Run `python scripts/total.py <ledger.csv>` and report its last line.
"""

BASE_TREE = HarnessTree({
    "AGENTS.md": "# Agent\nYou total ledgers. Use the ledger-total skill.\n",
    ".agents/skills/ledger-total/SKILL.md": SKILL,
    "scripts/total.py": BASE_SCRIPT,
})


@dataclass
class LedgerTask:
    task_id: str = "ledger-1"
    domain: str = "accounting"
    surface: Surface = CODEX
    leak_globs: tuple[str, ...] = ("*expected*", "*answer_key*")

    @property
    def prompt(self) -> str:
        return "Total the amounts of source/ledger.csv. The deliverable is one line 'Total: <amount>'."

    def task_header(self) -> str:
        return "Task type: ledger-total"

    def base_harness(self) -> HarnessTree:
        return BASE_TREE

    def source_files(self) -> Mapping[str, str]:
        return {"ledger.csv": LEDGER, "expected_total.txt": "85.15\n"}  # the answer file is a leak: never shown to editors

    def validate_tree(self, tree: HarnessTree) -> Sequence[str]:
        return [] if "scripts/total.py" in tree else ["scripts/total.py must ship: the agent runs it to total the ledger"]

    async def execute(self, label: str, harness: HarnessTree) -> Rollout:
        with tempfile.TemporaryDirectory() as tmp:
            harness.save(Path(tmp) / "ws")
            (Path(tmp) / "ws" / "ledger.csv").write_text(LEDGER)
            try:
                proc = subprocess.run([sys.executable, "-I", "scripts/total.py", "ledger.csv"], cwd=Path(tmp) / "ws", capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired:
                return Rollout(label, harness.fingerprint, False, "", error="script timed out")
        obs = (Observation("1", "input", "python scripts/total.py ledger.csv"), Observation("1", "output", proc.stdout + proc.stderr))
        ok = proc.returncode == 0
        return Rollout(label, harness.fingerprint, ok, proc.stdout.strip().splitlines()[-1] if ok and proc.stdout.strip() else "", obs, error=None if ok else f"exit {proc.returncode}")


def _user(messages: list[ChatMessage]) -> str:
    return messages[-1].content


def deterministic_editor(role: Role, messages: list[ChatMessage], key: str) -> str:
    """INV: no change; DOM: signed-sum script; compose: adopt the DOM candidate when the pool shows it."""
    system = messages[0].content
    stage = re.search(r"^STAGE: (\w+)$", system, re.M).group(1)  # type: ignore[union-attr]
    user = _user(messages)
    if stage == "inv":
        return "<no-change>The procedure (run the skill's script, report its line) is sound; the defect is in what is summed.</no-change>"
    if stage == "dom":
        if "Decimal(row" in user:
            return "<no-change>The script already takes the signed sum.</no-change>"
        return (
            f"=== HARNESS FILE: scripts/total.py ===\n{SIGNED_SCRIPT}=== END HARNESS FILE ===\n"
            "<notes>A ledger total is the signed sum: the refund of -20.10 was dropped by the positive-only filter (rollout shows 105.25).</notes>"
        )
    pool = user.split("## Pool", 1)[-1]
    if "Decimal(row" in pool and "DOM, adopted" in pool:
        return f"=== HARNESS FILE: scripts/total.py ===\n{SIGNED_SCRIPT}=== END HARNESS FILE ===\n<notes>Kept the DOM candidate: its probe totals refunds.</notes>"
    return "<no-change>No candidate in the pool is supported by its probe.</no-change>"


def deterministic_selector(role: Role, messages: list[ChatMessage], key: str) -> str:
    cands = dict(re.findall(r"^## Candidate (\w+)\n(.*?)(?=^## |\Z)", _user(messages), re.M | re.S))
    choice = min(cands, key=lambda c: (cands[c].strip() != "Total: 85.15", c))
    return f"```choice\n{choice}\n```\n<why>its total includes the refund</why>"


def deterministic_reflector(role: Role, messages: list[ChatMessage], key: str) -> str:
    exp = {
        "cue": "a ledger has negative amounts (refunds, credits)",
        "lesson": "total the signed amounts with Decimal; never filter by sign",
        "evidence": "base rollout printed Total: 105.25 (refund dropped); the adopted script printed Total: 85.15",
        "confidence": 0.9,
    }
    return f"<experience>{json.dumps(exp)}</experience>\n<edits>scripts/total.py: signed Decimal sum</edits>"


def demo_roles() -> Roles:
    return Roles(
        editor=Editor(FunctionResponder(deterministic_editor)),
        selector=Selector(FunctionResponder(deterministic_selector)),
        reflector=Reflector(FunctionResponder(deterministic_reflector)),
    )


async def run_demo(out: Path, mode: str, k: int, run_tag: str = "demo") -> dict:
    task = LedgerTask()
    library = Library(out / "library", run_tag, mode, task.domain)
    result = await improve_task(task, demo_roles(), work_dir=out / task.task_id / mode, k=k, mode=mode, run_tag=run_tag, library=library, budget_usd=5.0)
    return result.summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("parallel", "sequential"), default="parallel")
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="run directory (default: a temporary directory)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        summary = asyncio.run(run_demo(out, args.mode, args.k))
        base = summary["base_rollout"]["label"]
        print(f"base harness {summary['base_fingerprint']}: see {base}")
        for st in summary["stages"]:
            print(f"  {st['stage']:8s} {st['label']:12s} {st['status']:9s} {st['detail'][:70]}")
        print(f"selection: {summary['selection']['method']} -> {summary['selection']['chosen']}")
        print(f"library: {summary['library']}")
        print(summary["delivered_deliverable"])
        return 0 if summary["delivered_deliverable"].strip() == "Total: 85.15" else 1


if __name__ == "__main__":
    sys.exit(main())
