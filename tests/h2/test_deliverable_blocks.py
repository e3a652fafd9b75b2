"""`DELIVERABLE FILE` blocks in a probe's reply become deliverable files (issue 28 item 6b, seed 002).

The contract (harness/contracts/harness2.py) both writes and parses the block; a probe through the real
command executor (a fake CLI agent that only replies) delivers the files its reply carries; a malformed block
stays reply text and is recorded, and the probe is not dead for it.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

from harness.contracts.harness2 import parse_deliverable_blocks, render_deliverable
from harness.executors.command import CommandExecutor
from harness.executors.types import ExecutionResult
from harness.h2.executor_adapters import CommandTaskAdapter, result_to_rollout
from harness.identity import idempotency_key
from tests.h2.conftest import BASE

REPLY = ("Done: the ledger is totalled.\n"
         "=== DELIVERABLE FILE: out/report.md ===\ntotal 85.15\n=== END DELIVERABLE FILE ===\n"
         "=== DELIVERABLE FILE: notes.txt ===\n=== END DELIVERABLE FILE ===\n")


def test_render_then_parse_gives_back_the_text_and_the_files() -> None:
    files = {"out/report.md": "total 85.15\n", "a.csv": "x,y\n1,2\n"}
    parsed = parse_deliverable_blocks(render_deliverable("All done.", files))
    assert parsed.files == files and parsed.text.strip() == "All done." and parsed.errors == ()


def test_blocks_in_a_reply_are_files_and_leave_the_reply_text() -> None:
    parsed = parse_deliverable_blocks(REPLY)
    assert parsed.files == {"out/report.md": "total 85.15\n", "notes.txt": ""}
    assert parsed.text == "Done: the ledger is totalled." and parsed.errors == ()


def test_malformed_blocks_stay_text_and_are_recorded() -> None:
    reply = ("=== DELIVERABLE FILE: ../escape.md ===\nx\n=== END DELIVERABLE FILE ===\n"
             "=== DELIVERABLE FILE: ok.md ===\nfirst\n=== END DELIVERABLE FILE ===\n"
             "=== DELIVERABLE FILE: ok.md ===\nsecond\n=== END DELIVERABLE FILE ===\n"
             "=== DELIVERABLE FILE: open.md ===\nnever closed\n")
    parsed = parse_deliverable_blocks(reply)
    assert parsed.files == {"ok.md": "first\n"}
    assert len(parsed.errors) == 3
    assert parsed.errors[0].startswith("line 1: unsafe path") and "given twice" in parsed.errors[1]
    assert parsed.errors[2].startswith("line 10: deliverable block 'open.md' is never closed")
    assert "../escape.md" in parsed.text and "second" in parsed.text and "never closed" in parsed.text  # nothing lost


def test_the_endpoint_file_wins_over_a_reply_block_on_the_same_path() -> None:
    result = ExecutionResult(label="p", ok=True, text=REPLY, deliverable_files={"out/report.md": "total 85.15 (worktree)\n"})
    rollout = result_to_rollout("key", BASE, result)
    assert rollout.deliverable_files == {"out/report.md": "total 85.15 (worktree)\n", "notes.txt": ""}
    assert rollout.meta["deliverable_blocks"] == {"from_reply": ["notes.txt", "out/report.md"], "endpoint_won": ["out/report.md"], "errors": []}
    assert rollout.deliverable.count("=== DELIVERABLE FILE: out/report.md ===") == 1  # not repeated from the reply


AGENT = textwrap.dedent(
    """
    import sys
    if sys.argv[1] == "bad":
        print("Here it is.\\n=== DELIVERABLE FILE: report.md ===\\ntotal 85.15")
    else:
        print("Here it is.\\n=== DELIVERABLE FILE: report.md ===\\ntotal 85.15\\n=== END DELIVERABLE FILE ===")
    """
)


def _probe(tmp_path, mode: str):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    executor = CommandExecutor([sys.executable, str(script), mode, "{workdir}"], timeout_s=30, work_root=tmp_path / "wt")
    adapter = CommandTaskAdapter(task_id="ledger-1", domain="accounting", prompt="Total the ledger.", base=BASE, executor=executor, run_tag="t")
    return asyncio.run(adapter.execute(idempotency_key("t", "probe", f"ledger-1.{mode}"), BASE))


def test_a_command_probe_that_only_replies_delivers_the_files_of_its_blocks(tmp_path) -> None:
    rollout = _probe(tmp_path, "good")
    assert rollout.ok and rollout.deliverable_files == {"report.md": "total 85.15\n"}
    assert rollout.deliverable == "Here it is.\n\n=== DELIVERABLE FILE: report.md ===\ntotal 85.15\n=== END DELIVERABLE FILE ===\n"


def test_a_malformed_block_in_a_probe_reply_is_a_recorded_fallback_not_a_dead_probe(tmp_path) -> None:
    rollout = _probe(tmp_path, "bad")
    assert rollout.ok and rollout.deliverable_files == {}
    assert "total 85.15" in rollout.deliverable  # kept as reply text
    (error,) = rollout.meta["deliverable_blocks"]["errors"]
    assert "'report.md' is never closed" in error
    assert any(o.kind == "error" and o.content == f"deliverable block dropped: {error}" for o in rollout.observations)
