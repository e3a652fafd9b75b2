"""The run report says what happened (issue 32 item 4), on a real small run: `python -m stages.train` (train=tiny, the
simulated world) and `dvc repro` of the same config. Every proposed edit with its decision and cause, the held-out table
with Wilson intervals, LLM calls per stage and role, wall time in timing.md, and the gates' progress lines; every number
is checked against what the stages wrote (evolve.json, the gate reports, llm_spend.json, holdout.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.pipeline.collect import cause_of
from harness.pipeline.evaluate import wilson_interval
from harness.pipeline.render import render_markdown, tried_lines
from harness.pipeline.summary import Proposal, RunSummary
from tests.pipeline.support import BIN, TEST_OVERRIDES, make_project, run

pytestmark = pytest.mark.slow

OVERRIDES = ("train=tiny", "tracking=none")  # train=tiny's 2 epochs x 2 steps: accepts and rejects on the sim
PROGRESS_ENV = {"HARNESS_GATE_PROGRESS_S": "0"}  # a line after every block (the default, 10 s, prints none on the sim)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    project = make_project(tmp_path_factory.mktemp("tried") / "project")
    done = run([str(BIN / "python"), "-m", "stages.train", *OVERRIDES, "hydra.run.dir=runs/job"], project, extra_env=PROGRESS_ENV)
    return {"project": project, "dir": project / "runs" / "job", "log": done.stdout + done.stderr}


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _rows(section: str, first_header: str) -> list[list[str]]:
    lines = section.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _stage_docs(job_dir: Path, name: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((job_dir / "state").glob(f"e*/s*/{name}"))]


def test_every_proposed_edit_is_listed_with_the_gates_decision_and_cause(job: dict) -> None:
    report = (job["dir"] / "reports" / "report.md").read_text()
    tried = _section(report, "What was tried")
    rows = _rows(tried, "epoch.step")
    evolve = _stage_docs(job["dir"], "evolve/evolve.json")
    proposed = sum(len(d["candidates"]) + sum(s["action"] == "skipped_no_change" for s in d["skipped"]) for d in evolve)
    assert len(rows) == proposed > 0
    decisions = {(f"{d['epoch']}.{d['step']}", r["task_type"]): r for d in _stage_docs(job["dir"], "gate/report.json")
                 for r in d["skills"] if r["n_pairs"]}
    gated = [row for row in rows if (row[0], row[1]) in decisions]
    assert len(gated) == len(decisions) > 0  # every gate's decision is on a proposal's row
    for row in gated:
        decided = decisions[(row[0], row[1])]
        assert row[5] == decided["action"] and row[7] == f"{decided['log_e']:.4f}" and row[8] == str(decided["n_pairs"])
        assert row[9] == decided["reason"].replace("|", "\\|")
        assert row[6] == "accepted" if decided["action"] == "accept" else row[6] in ("budget", "settled", "futility", "evidence_against", "screen")
        assert row[3] and row[3] != "(no edit)"  # the proposed text, as diff lines
    assert {row[5] for row in gated} >= {"accept", "reject"}  # this run has both: both are explained
    # the outcome table sums to the proposals, and the first line counts the gates' pairs and ties
    outcome_rows = _rows(tried, "outcome")
    assert sum(int(n) for _, n in outcome_rows) == proposed
    pairs = sum(r["n_pairs"] for r in decisions.values())
    ties = sum(r["ties"] for r in decisions.values())
    assert f"{proposed} edits proposed; {len(decisions)} gates ran {pairs} pairs:" in tried and f"{ties} ties" in tried
    cases = sum(d["diagnosis_cases"] for d in evolve)
    unparseable = sum(d["diagnosis_unparseable"] for d in evolve)
    assert cases > 0 and f"Diagnoser: {unparseable} of {cases} failure diagnoses did not parse" in tried
    assert f"[report] {proposed} edits proposed; {len(decisions)} gates ran {pairs} pairs:" in job["log"]  # in the run's output too


def test_llm_calls_per_stage_and_role_match_the_stages_spend_and_timing_has_seconds(job: dict) -> None:
    report = (job["dir"] / "reports" / "report.md").read_text()
    rows = _rows(_section(report, "LLM calls per stage and role"), "stage")
    expected: dict[tuple[str, str], list[int]] = {}
    for spend_file in (job["dir"] / "state").rglob("llm_spend.json"):
        kind = spend_file.parent.name
        for role, r in json.loads(spend_file.read_text())["roles"].items():
            total = expected.setdefault((kind, role), [0, 0, 0])
            total[0] += r["calls"]
            total[1] += r["prompt_tokens"]
            total[2] += r["completion_tokens"]
    shown = {(row[0], row[1]): [int(row[2]), int(row[3]), int(row[4])] for row in rows}
    assert shown == expected
    assert {("evolve", "editor"), ("evolve", "diagnoser"), ("gate", "solver")} <= set(shown)
    certificate = json.loads((job["dir"] / "state" / "certify" / "certificate.json").read_text())
    # the certificate asks the solver only when training delivered something other than the base
    assert (("certify", "solver") in shown) == (certificate["rollouts"] > 0)
    timing = (job["dir"] / "reports" / "timing.md").read_text()
    timed = {(row[0], row[1]): row for row in _rows(timing, "stage")}
    assert set(timed) == set(expected)
    for key, row in timed.items():
        assert int(row[2]) == expected[key][0] and float(row[4]) >= 0.0
    assert "timing.md" in report and "seconds" not in _section(report, "LLM calls per stage and role").split("\n\n", 2)[2]


def test_the_held_out_table_carries_wilson_intervals(job: dict) -> None:
    report = (job["dir"] / "reports" / "report.md").read_text()
    rows = _rows(_section(report, "Held-out evaluation (test pool)"), "which")
    assert {row[0] for row in rows} >= {"base", "delivered"}
    for row in rows:
        n, acc = int(row[3]), float(row[4])
        low, high = wilson_interval(round(acc * n), n)
        assert row[5] == f"[{low:.4f}, {high:.4f}]" and low <= acc <= high
    assert "Wilson" in report


def test_gates_print_progress_lines_with_pairs_log_e_and_time_left(job: dict) -> None:
    decisions = [r for d in _stage_docs(job["dir"], "gate/report.json") for r in d["skills"] if r["n_pairs"]]
    lines = re.findall(r"\[gate@e\d\.s\d (\S+)\] block (\d+): (\d+)/(\d+) pairs, log E (-?[\d.]+) \(accept at [\d.]+\);"
                       r" (at most .* left at [\d.]+ pairs/s|decided: \w+.*)", job["log"])
    assert len([line for line in lines if line[5].startswith("decided")]) == len(decisions)  # one closing line per gate
    for decided in decisions:
        final = [line for line in lines if line[0] == decided["task_type"] and line[5].startswith(f"decided: {decided['action']}")
                 and int(line[2]) == decided["n_pairs"]]
        assert final and float(final[-1][4]) == pytest.approx(decided["log_e"], abs=0.006)
    assert any(line[5].startswith("at most") for line in lines)  # the lines before the decision give the time left


def test_dvc_repro_prints_the_gate_progress_and_writes_the_same_report(job: dict) -> None:
    project = job["project"]
    done = run(["dvc", "repro", "report"], project, extra_env=PROGRESS_ENV)
    assert re.search(r"\[gate@e1\.s1 \S+\] block 1: \d+/\d+ pairs, log E", done.stderr + done.stdout)
    # TEST_OVERRIDES is the project's params.yaml (1 epoch): compare with a stages.train job of the same config
    run([str(BIN / "python"), "-m", "stages.train", *TEST_OVERRIDES, "hydra.run.dir=runs/same"], project)
    assert (project / "runs/same/reports/report.md").read_text() == (project / "reports/report.md").read_text()
    assert (project / "reports/timing.md").is_file()


def _proposal(cause: str, action: str = "reject") -> Proposal:
    return Proposal(1, 1, "t", "t/SKILL.md", "reflective", "+ a line", 1, 1, action, cause, "why")


def test_when_nothing_is_installed_the_report_names_the_largest_measured_cause() -> None:
    summary = RunSummary(run_name="r", benchmark="jsonl", epochs=(), gates=(), holdout=(), gate_paths={}, accept_threshold=1.0,
                         reject_threshold=-2.0, proposals=(_proposal("budget"), _proposal("budget"), _proposal("parse_failure", "skipped_no_change"),
                                                           _proposal("futility")), diagnosis_cases=9, diagnosis_unparseable=4)
    lines = tried_lines(summary)
    assert lines[-1] == ("Nothing was installed. Largest measured cause: gate undecided at its pair budget (gate.max_pairs) "
                         "(2 of 4 proposals); gate undecided at its pair budget (gate.max_pairs): 2, gate stopped for futility: 1, "
                         "editor reply did not parse: 1.")
    assert "Diagnoser: 4 of 9 failure diagnoses did not parse" in lines[1]
    installed = RunSummary(**{**summary.__dict__, "proposals": summary.proposals + (_proposal("accepted", "accept"),)})
    assert not any(line.startswith("Nothing was installed") for line in tried_lines(installed))
    assert "Nothing was installed." in render_markdown(summary)


@pytest.mark.parametrize(("action", "reason", "cause"), [
    ("reject", "betting_budget: at the end of the budget (20 pairs); weighted mean gain +0.0000, z = 0.00 < sqrt(2 lambda) = 1.41", "budget"),
    ("reject", "undecided: 400 pairs without a decision", "budget"),
    ("reject", "betting_budget: settled after 12 pairs: the 28 pairs left would change the decision with probability < 0.050; "
               "weighted mean gain -0.0500, z = -0.60 < sqrt(2 lambda) = 0.71", "settled"),
    ("reject", "futility: 1 wins - 4 losses <= 0 after 40 pairs", "futility"),
    ("reject", "betting_budget: the e-process for gain >= 0.05 reached log E(harm) 2.1", "evidence_against"),
    ("reject", "direction log-LR = -2.400 <= lambda_dir -2.3", "evidence_against"),
    ("reject", "McNemar p = 0.31 > 0.05", "evidence_against"),
    ("reject", "screen failed: 0 wins, 2 losses, 5 ties on the step's questions", "screen"),
    ("accept", "betting_budget: log E reached 1.2 >= lambda 1.0", "accepted"),
    ("probation", "undecided: probation", "probation"),
    ("skipped_stale", "skill file changed earlier in this step", "stale"),
])
def test_each_gate_reason_gets_its_cause(action: str, reason: str, cause: str) -> None:
    assert cause_of(action, reason) == cause


def test_an_editor_reply_without_a_candidate_gets_its_cause() -> None:
    assert cause_of("skipped_no_change", "editor JSON: no 'edits'", parse_error="editor JSON: no 'edits'") == "parse_failure"
    assert cause_of("skipped_no_change", "the skill already covers it") == "no_change"
    assert cause_of("skipped_no_change", "no edit applied", edits_proposed=2) == "not_applied"
