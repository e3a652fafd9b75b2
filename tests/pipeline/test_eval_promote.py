"""`stages.eval`, `stages.promote` and `stages.diagnose` end to end on the simulated world (real subprocesses, temp dirs,
a temp MLflow store): the eval's intervals against the oracle, the promote refusals and success (the seed then starts a
tiny training), and a diagnosis that names what the world hides. Statistics of the intervals: tests/pipeline
test_eval_intervals below and the pure functions' tests at the end."""

from __future__ import annotations

import json
import math
import random
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.pipeline.evaluate import (
    EVAL_OUT_ENTRIES,
    SQLITE_SIDE_SUFFIXES,
    EvalInputError,
    accuracy_interval,
    check_out,
    cluster_interval,
    wilson_interval,
)
from harness.tree import HarnessTree
from tests.pipeline.support import BIN, REPO_ROOT, env, questions_and_harness, run

TINY = ("train=tiny", "tracking=none")


def _command(module: str, tmp_path: Path, *args: str, overrides: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    cache = f"llm.cache_dir={tmp_path / 'llmcache'}"
    extra = (*overrides, cache) if module != "stages.promote" else ()
    return subprocess.run([sys.executable, "-m", module, *args, *extra], cwd=REPO_ROOT, env=env(), capture_output=True,
                          text=True, timeout=600, check=False)


def _world(overrides: tuple[str, ...], tmp_path: Path):
    from harness.compose import build_benchmark
    from harness.config.load import load_config

    cfg = load_config(list(overrides), env_file=None, environ={})
    return build_benchmark(cfg.benchmark, tmp_path).world


def _one_line_error(done: subprocess.CompletedProcess, prefix: str) -> str:
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, done.stderr[-3000:]
    return lines[0]


def _entries(out: Path) -> list[str]:
    """The entries of a run's --out, SQLite's side files of the run log counted as the run log."""
    names = {p.name for p in out.iterdir()}
    return sorted({next((n.removesuffix(s) for s in SQLITE_SIDE_SUFFIXES if n.endswith(s)), n) for n in names})


def _covered(row: dict, value: float) -> bool:
    return row["ci_low"] - 1e-9 <= value <= row["ci_high"] + 1e-9


def test_eval_reports_per_type_intervals_that_contain_the_oracle(tmp_path, mlflow_db):
    from harness.sim.oracle import Oracle

    world = _world((), tmp_path)
    base = world.base_harness()
    base.save(tmp_path / "base")
    oracle = Oracle(world)
    done = _command("stages.eval", tmp_path, "--harness", str(tmp_path / "base"), "--pool", "all", "--out", str(tmp_path / "e1"),
                    overrides=(f"tracking.tracking_uri=sqlite:///{mlflow_db}",))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "e1" / "eval.json").read_text())
    assert report["interval_method"] == "wilson" and "Wilson" in done.stdout
    assert report["overall"]["questions"] == report["overall"]["rollouts"] == len(world.questions)
    assert _covered(report["overall"], oracle.expected_accuracy(base))
    types = world.task_type_names
    assert sorted(report["per_task_type"]) == sorted(types)
    covered = [t for t in types if _covered(report["per_task_type"][t], oracle.expected_accuracy(base, world.qids_of(t)))]
    assert len(covered) >= len(types) - 2, (covered, types)  # 95 % intervals: P(3+ of 11 miss) < 2 %
    for t in types:  # printed: one line per type with its interval
        row = report["per_task_type"][t]
        assert any(line.strip().startswith(f"{t}: ") and f"[{100 * row['ci_low']:.1f} %" in line for line in done.stdout.splitlines())
    assert report["parse_shares"]["parse_share_strict"] == 1.0 and report["parse_shares"]["parse_failure_rate"] == 0.0
    assert report["overall"]["soft_score"] is not None
    assert "| **all** |" in (tmp_path / "e1" / "eval.md").read_text()
    assert _entries(tmp_path / "e1") == sorted(n for n in EVAL_OUT_ENTRIES if "diagnosis" not in n)  # check_out covers them

    # the run log records what promote checks: questions_ref, the fingerprint
    conn = sqlite3.connect(tmp_path / "e1" / "runlog.sqlite")
    (run_id, questions_ref, meta), = conn.execute("SELECT run_id, questions_ref, meta FROM _runs").fetchall()
    conn.close()
    assert run_id == report["run_id"] and questions_ref.endswith(report["questions_ref"].rpartition("@")[2])
    assert json.loads(meta)["harness_fingerprint"] == base.fingerprint

    # one MLflow run, FINISHED, with the overall accuracy and its interval
    conn = sqlite3.connect(mlflow_db)
    runs = conn.execute("SELECT run_uuid, status FROM runs").fetchall()
    metrics = dict(conn.execute("SELECT key, value FROM latest_metrics WHERE run_uuid = ?", (runs[0][0],)).fetchall())
    conn.close()
    assert len(runs) == 1 and runs[0][1] == "FINISHED"
    assert metrics["eval_acc"] == pytest.approx(report["overall"]["accuracy"])
    assert metrics["eval_acc_ci_low"] < metrics["eval_acc"] < metrics["eval_acc_ci_high"]

    # K samples per question: the cluster-robust interval, over 2 x the rollouts, still around the oracle
    done = _command("stages.eval", tmp_path, "--harness", str(tmp_path / "base"), "--pool", "all", "--samples", "3",
                    "--no-tracking", "--out", str(tmp_path / "e3"))
    assert done.returncode == 0, done.stderr[-3000:]
    report3 = json.loads((tmp_path / "e3" / "eval.json").read_text())
    assert report3["interval_method"] == "cluster" and "cluster-robust" in done.stdout
    assert report3["overall"]["rollouts"] == 3 * len(world.questions) and report3["sample_indices"] == [4_000_000, 4_000_001, 4_000_002]
    assert _covered(report3["overall"], oracle.expected_accuracy(base))


def test_eval_errors_exit_2_with_one_line(tmp_path):
    missing = _command("stages.eval", tmp_path, "--harness", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"), overrides=TINY)
    assert "--harness" in _one_line_error(missing, "stages.eval:") and "not a directory" in missing.stderr
    _world(TINY, tmp_path).base_harness().save(tmp_path / "h")
    no_pools = _command("stages.eval", tmp_path, "--harness", str(tmp_path / "h"), "--pool", "test", "--out", str(tmp_path / "o"),
                        overrides=(*TINY, f"pools.path={tmp_path / 'absent.json'}"))
    line = _one_line_error(no_pools, "stages.eval:")
    assert str(tmp_path / "absent.json") in line and "dvc repro pools" in line
    bad_cfg = _command("stages.eval", tmp_path, "--harness", str(tmp_path / "h"), "--out", str(tmp_path / "o"),
                       overrides=(*TINY, "llm.concurrency=0"))
    assert bad_cfg.returncode == 2 and "Traceback" not in bad_cfg.stderr  # the config error lists its problems, one a line
    assert "llm.concurrency = 0: must be an integer >= 1" in bad_cfg.stderr
    assert not (tmp_path / "o").exists()  # a refused eval leaves nothing


def test_promote_refuses_without_a_matching_eval_and_promotes_with_one(tmp_path):
    world = _world(TINY, tmp_path)
    base = world.base_harness()
    base.save(tmp_path / "base")
    changed = HarnessTree({**base, "system_prompt.md": base["system_prompt.md"] + "\nAlways answer with the last choice.\n"})
    changed.save(tmp_path / "changed")
    seed = tmp_path / "seed"

    no_eval = _command("stages.promote", tmp_path, "--seed", str(seed), "--harness", str(tmp_path / "changed"))
    line = _one_line_error(no_eval, "stages.promote:")
    assert f"python -m stages.eval --harness {tmp_path / 'changed'} --out RUN_DIR" in line
    assert not seed.exists()

    done = _command("stages.eval", tmp_path, "--harness", str(tmp_path / "base"), "--out", str(tmp_path / "ev"), overrides=TINY)
    assert done.returncode == 0, done.stderr[-3000:]
    other = _command("stages.promote", tmp_path, "--seed", str(seed), "--eval", str(tmp_path / "ev"), "--harness", str(tmp_path / "changed"))
    line = _one_line_error(other, "stages.promote:")
    assert f"not this one ({changed.fingerprint})" in line and "python -m stages.eval --harness" in line
    not_an_eval = _command("stages.promote", tmp_path, "--seed", str(seed), "--eval", str(tmp_path / "base"))
    assert "no finished eval run" in _one_line_error(not_an_eval, "stages.promote:")
    assert not seed.exists()

    ok = _command("stages.promote", tmp_path, "--seed", str(seed), "--eval", str(tmp_path / "ev"), "--harness", str(tmp_path / "base"))
    assert ok.returncode == 0, ok.stderr[-3000:]
    from harness.store import read_seed

    promoted = read_seed(seed)
    report = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert promoted.meta["eval_run_id"] == report["run_id"] and promoted.questions_ref == report["questions_ref"]
    assert promoted.prompts.merged(promoted.skills.prefixed("skills")) == base
    again = _command("stages.promote", tmp_path, "--seed", str(seed), "--eval", str(tmp_path / "ev"))
    assert "immutable" in _one_line_error(again, "stages.promote:")

    # the seed starts a training run
    job = tmp_path / "train"
    run([str(BIN / "python"), "-m", "stages.train", f"train.init_seed={seed}", *TINY, "train.epochs=1", "quiet=true",
         f"llm.cache_dir={tmp_path / 'llmcache'}", f"hydra.run.dir={job}"], REPO_ROOT)
    assert (job / "reports" / "metrics.json").is_file()
    start = job / "state" / "init" / "workspace"
    from harness import workspace as wsp

    assert wsp.harness_view(start, "v0", "v0") == base

    # a workspace: its current versions are evaluated and recorded; promote checks them (versions path)
    final = job / "state" / "e1" / "slow" / "workspace"
    manifest = wsp.read_manifest(final)
    done = _command("stages.eval", tmp_path, "--harness", str(final), "--out", str(tmp_path / "ews"), overrides=TINY)
    assert done.returncode == 0, done.stderr[-3000:]
    conn = sqlite3.connect(tmp_path / "ews" / "runlog.sqlite")
    assert conn.execute("SELECT skills_version, prompts_version FROM _runs").fetchall() == [
        (manifest.skills_version, manifest.prompts_version)]
    conn.close()
    ws_seed = _command("stages.promote", tmp_path, "--seed", str(tmp_path / "ws-seed"), "--eval", str(tmp_path / "ews"),
                       "--harness", str(final))
    assert ws_seed.returncode == 0, ws_seed.stderr[-3000:]
    assert read_seed(tmp_path / "ws-seed").meta["skills_version"] == manifest.skills_version
    if (manifest.skills_version, manifest.prompts_version) != ("v0", "v0"):  # the run installed an edit: v0/v0 is another harness
        stale = _command("stages.promote", tmp_path, "--seed", str(tmp_path / "ws-seed2"), "--eval", str(tmp_path / "ews"),
                         "--harness", str(start))
        assert "not the requested 'v0'" in _one_line_error(stale, "stages.promote:")


def test_diagnose_writes_a_diagnosis_naming_the_worlds_cues(tmp_path):
    world = _world((), tmp_path)
    world.base_harness().save(tmp_path / "base")
    done = _command("stages.diagnose", tmp_path, "--harness", str(tmp_path / "base"), "--out", str(tmp_path / "d"),
                    overrides=("tracking=none",))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tmp_path / "d" / "diagnosis.json").read_text())
    assert doc["failures"] > 0 and doc["diagnosed"] == doc["failures"] - doc["unparseable"] > 0
    assert (tmp_path / "d" / "eval.json").is_file() and "## " in (tmp_path / "d" / "diagnosis.md").read_text()
    assert _entries(tmp_path / "d") == sorted(EVAL_OUT_ENTRIES)  # check_out covers them all
    # the simulator's wrong answers carry a hint (45 %: a missing insight, else a trap or neutral cue): every diagnosis
    # names a cue of its own type's rules, and the most named cue is an insight in more types than chance (4 of 11)
    top_is_insight = 0
    for task_type, block in doc["by_task_type"].items():
        cues = {rule.cue for rule in world.rules_of(task_type)}
        assert all(any(cue in text for cue in cues) for _, text in block["diagnoses"]), task_type
        counts = Counter(cue for _, text in block["diagnoses"] for cue in cues if cue in text)
        top_is_insight += counts.most_common(1)[0][0] in {rule.cue for rule in world.rules_of(task_type, "insight")}
    assert len(doc["by_task_type"]) == 11 and top_is_insight >= 6  # measured: 7


# ---------------------------------------------------------------- the intervals (pure functions)


def test_wilson_and_cluster_intervals_cover_at_their_level():
    rng = random.Random(7)
    p_questions = [rng.uniform(0.1, 0.9) for _ in range(80)]
    truth = sum(p_questions) / len(p_questions)
    hits_wilson = hits_cluster = 0
    trials = 400
    for _ in range(trials):
        one = {str(i): [rng.random() < p] for i, p in enumerate(p_questions)}
        three = {str(i): [rng.random() < p for _ in range(3)] for i, p in enumerate(p_questions)}
        w, c = accuracy_interval(one), accuracy_interval(three)
        assert w.method == "wilson" and c.method == "cluster"
        hits_wilson += w.low <= truth <= w.high
        hits_cluster += c.low <= truth <= c.high
    assert hits_wilson / trials >= 0.92 and hits_cluster / trials >= 0.92  # nominal 0.95, tolerance for 400 draws


def test_interval_edge_cases():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0.2 < high < 0.35
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(10, 10)[0] > 0.65
    estimate, low, high = cluster_interval([(1, 2), (2, 2), (0, 2)])
    assert estimate == pytest.approx(0.5) and 0.0 <= low < 0.5 < high <= 1.0
    assert accuracy_interval({}).estimate is None
    with pytest.raises(ValueError, match="n >= 1"):
        wilson_interval(0, 0)
    # identical clusters: no between-question spread, a zero-width cluster interval
    estimate, low, high = cluster_interval([(1, 2)] * 5)
    assert math.isclose(low, high) and math.isclose(estimate, 0.5)


def test_an_out_holding_any_entry_an_eval_writes_is_refused(tmp_path):
    """A stale or half-written questions.parquet (or any other entry of an earlier run) is found, named, and not
    overwritten; a directory with other files only is accepted."""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("an earlier file\n")
    assert check_out(tmp_path / "other") == tmp_path / "other" and check_out(tmp_path / "absent") == tmp_path / "absent"
    for name in EVAL_OUT_ENTRIES:
        out = tmp_path / f"with_{name}"
        out.mkdir()
        (out / name).write_bytes(b"PAR1 half-written")
        with pytest.raises(EvalInputError, match=f"already holds an eval run's {name};"):
            check_out(out)
        assert (out / name).read_bytes() == b"PAR1 half-written"


def test_an_eval_that_fails_for_a_server_reason_leaves_no_run_behind(tmp_path):
    """Nothing listening on a real closed port: exit 2, no partial runlog.sqlite / harness/ / questions.parquet that
    looks like a result or makes the next eval into the same --out refuse it. A directory the eval created is removed;
    a reused --out keeps its earlier files only."""
    from harness.llm.local_server import free_port

    questions = questions_and_harness(tmp_path)
    (tmp_path / "reused").mkdir()
    (tmp_path / "reused" / "notes.txt").write_text("an earlier file\n")
    closed = f"http://127.0.0.1:{free_port()}/v1"
    for out in ("new", "reused"):
        done = subprocess.run(
            [sys.executable, "-m", "stages.eval", "--harness", str(tmp_path / "h"), "--no-tracking", "--out", str(tmp_path / out),
             "llm=openai", "benchmark=jsonl", f"benchmark.path={questions}", f"llm.base_url={closed}", "llm.model=stand-in",
             f"llm.cache_dir={tmp_path / 'cache'}"],
            cwd=REPO_ROOT, env={**env(), "OPENAI_API_KEY": "local"}, capture_output=True, text=True, timeout=600, check=False)
        assert f"nothing is listening at {closed}" in _one_line_error(done, "stages.eval:")
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in (tmp_path / "reused").iterdir()) == ["notes.txt"]


def test_a_diagnose_whose_diagnoser_fails_after_the_eval_leaves_no_half_run(tmp_path):
    """The eval part finishes (run log, questions, harness written), then the server dies under the diagnoser's
    second request: exit 2 and nothing of the run left in --out, so the next diagnose into it is not refused and no
    eval without its eval.json looks like a result."""
    from tests.support.openai_server import FakeOpenAIServer

    questions = questions_and_harness(tmp_path)
    server = FakeOpenAIServer()

    def reply(body):  # every answer wrong (9 failures to diagnose); the first diagnosis request takes the server down
        system = body["messages"][0]["content"]
        if "FORMAT: diagnosis" in system:
            server.down = True
            return "<diagnosis>The agent skipped a step.</diagnosis>"
        return "Guessing.\nANSWER: B"

    server.reply = reply
    with server:
        done = subprocess.run(
            [sys.executable, "-m", "stages.diagnose", "--harness", str(tmp_path / "h"), "--no-tracking", "--out",
             str(tmp_path / "d"), "llm=openai", "benchmark=jsonl", f"benchmark.path={questions}",
             f"llm.base_url={server.base_url}", "llm.model=stand-in", "llm.concurrency=1", "llm.max_retries=0",
             "llm.timeout_s=20", f"llm.cache_dir={tmp_path / 'cache'}"],
            cwd=REPO_ROOT, env={**env(), "OPENAI_API_KEY": "local"}, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert sum("FORMAT: diagnosis" in r.body["messages"][0]["content"] for r in server.requests) >= 1  # the eval finished
    assert not (tmp_path / "d").exists(), sorted(p.name for p in (tmp_path / "d").iterdir())
