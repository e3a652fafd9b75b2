"""`python -m stages.compare` end to end on the simulated world: exit codes, the certificate file, one MLflow run.

The candidates are built from the world's own rules, so their true effect is known (the oracle): insights in every
skill file help by ~+12 points, a trap per skill file hurts by ~-13. The engine's validity is tested in
tests/kernel/test_certificate.py; here the command's contract.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contracts.certificate import read_certificate
from harness.contracts.solver import resolve_skill_file
from harness.kernel.certificate import EXACT_ZERO
from harness.tree import HarnessTree
from tests.pipeline.support import REPO_ROOT, env, questions_and_harness

SMALL = ("benchmark.n_task_types=4", "benchmark.questions_per_type=30", "pools.test_size=30", "pools.val_size=40",
         "pools.diagnosis_size=50", "pools.eval_min_per_class=10", "batching.batch_size=25")


def _trees(tmp_path: Path) -> dict[str, Path]:
    from harness.compose import build_benchmark
    from harness.config.load import load_config
    from harness.sim.oracle import Oracle

    cfg = load_config(list(SMALL), env_file=None, environ={})
    world = build_benchmark(cfg.benchmark, tmp_path).world
    base = world.base_harness()
    variants = {"good": dict(base.items()), "bad": dict(base.items())}
    for t in world.task_type_names:
        path = resolve_skill_file(base, t)
        for name, kind in (("good", "insight"), ("bad", "trap")):
            rules = world.rules_of(t, kind)
            if rules and rules[0].text not in variants[name][path]:
                variants[name][path] = variants[name][path].rstrip("\n") + f"\n- {rules[0].text}\n"
    oracle = Oracle(world)
    out = {"base": tmp_path / "base"}
    base.save(out["base"])
    for name, files in variants.items():
        tree = HarnessTree(files)
        tree.save(tmp_path / name)
        out[name] = tmp_path / name
        effect = oracle.expected_accuracy(tree) - oracle.expected_accuracy(base)
        assert (effect > 0.05) if name == "good" else (effect < -0.05), (name, effect)
    return out


def _compare(tmp_path: Path, *args: str, tracking_uri: str | None = None) -> subprocess.CompletedProcess:
    overrides = list(SMALL) + ([f"tracking.tracking_uri={tracking_uri}"] if tracking_uri else [])
    return subprocess.run([sys.executable, "-m", "stages.compare", *args, *overrides], cwd=REPO_ROOT, env=env(),
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_compare_certifies_a_helpful_change_and_refuses_a_harmful_one(tmp_path, mlflow_db):
    trees = _trees(tmp_path)
    uri = f"sqlite:///{mlflow_db}"
    good = _compare(tmp_path, "--candidate", str(trees["good"]), "--baseline", str(trees["base"]), "--out", str(tmp_path / "g"),
                    tracking_uri=uri)
    assert good.returncode == 0, good.stderr[-3000:]
    assert "certified better than baseline" in good.stdout
    cert = read_certificate(tmp_path / "g")
    attempt = cert.attempts[0]
    assert cert.certified and cert.delivered == "candidate" and cert.population["pool"] == "all"
    assert 0 < attempt.lower_bound <= attempt.estimate <= attempt.upper_bound
    assert attempt.rollouts == 2 * attempt.pairs and attempt.pairs <= 300
    assert "pairs" in good.stderr and "log E" in good.stderr  # the live progress lines

    bad = _compare(tmp_path, "--candidate", str(trees["bad"]), "--baseline", str(trees["base"]), "--out", str(tmp_path / "b"),
                   "--no-tracking")
    assert bad.returncode == 1, bad.stderr[-3000:]
    cert = read_certificate(tmp_path / "b")
    assert not cert.certified and cert.delivered == "baseline"
    assert cert.attempts[0].upper_bound is not None and cert.attempts[0].estimate < 0

    # one MLflow run, for the tracked comparison only, FINISHED, with the certificate's metrics and file
    conn = sqlite3.connect(mlflow_db)
    try:
        runs = conn.execute("SELECT run_uuid, status FROM runs").fetchall()
        assert len(runs) == 1 and runs[0][1] == "FINISHED"
        metrics = dict(conn.execute("SELECT key, value FROM latest_metrics WHERE run_uuid = ?", (runs[0][0],)).fetchall())
        tags = dict(conn.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (runs[0][0],)).fetchall())
    finally:
        conn.close()
    assert metrics["certify_certified"] == 1.0 and metrics["certify_lower_bound"] > 0
    assert tags["harness.kind"] == "compare" and tags["harness.certified"] == "true"


def test_compare_errors_exit_2_with_one_line(tmp_path):
    missing = _compare(tmp_path, "--candidate", str(tmp_path / "nowhere"), "--no-tracking", "--out", str(tmp_path / "o"))
    assert missing.returncode == 2
    assert f"--candidate {tmp_path / 'nowhere'}: not a directory" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_cfg = _compare(tmp_path, "--candidate", str(tmp_path), "--alpha", "0.9", "--no-tracking", "--out", str(tmp_path / "o"))
    assert bad_cfg.returncode == 2 and "certify.alpha" in bad_cfg.stderr and "Traceback" not in bad_cfg.stderr
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "system_prompt.md").write_text("Answer with one letter.\n")
    no_pools = _compare(tmp_path, "--candidate", str(tmp_path / "h"), "--pool", "test", "--no-tracking", "--out", str(tmp_path / "o"),
                        "pools.path=" + str(tmp_path / "absent.json"))
    assert no_pools.returncode == 2 and "--pool test" in no_pools.stderr


def test_a_bad_harness_tree_is_named_by_its_flag_and_path_not_by_a_config_key(tmp_path):
    """--candidate / --baseline are flags: the error names the flag and the path the user gave, never
    benchmark.harness_dir (a config key the user did not set)."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex" / "system_prompt.md").write_text("Answer with one letter.\n")
    runs = {"native": _compare(tmp_path, "--candidate", str(tmp_path / "empty"), "--no-tracking", "--out", str(tmp_path / "o")),
            "codex": _compare(tmp_path, "--candidate", str(tmp_path / "codex"), "--baseline", str(tmp_path / "codex"),
                              "--no-tracking", "--out", str(tmp_path / "o"), "benchmark.harness_surface=codex"),
            "baseline": _compare(tmp_path, "--candidate", str(tmp_path / "codex"), "--baseline", str(tmp_path / "empty"),
                                 "--no-tracking", "--out", str(tmp_path / "o"))}
    assert f"error: --candidate {tmp_path / 'empty'}: not a harness tree: no system_prompt.md" in runs["native"].stderr
    assert f"error: --candidate {tmp_path / 'codex'}: not a harness tree: a codex harness needs AGENTS.md" in runs["codex"].stderr
    assert f"error: --baseline {tmp_path / 'empty'}: not a harness tree: no system_prompt.md" in runs["baseline"].stderr
    for run in runs.values():
        assert run.returncode == 2 and "benchmark.harness_dir" not in run.stderr and "Traceback" not in run.stderr


@pytest.mark.slow
def test_compare_of_a_one_file_edit_asks_only_the_questions_that_read_it(tmp_path):
    """certify.skip_identical: a person's edit of one skill file; the other task types read byte-identical input, so
    only the edited type's questions are asked and the output says how many of the pool that was."""
    from harness.compose import build_benchmark
    from harness.config.load import load_config

    world = build_benchmark(load_config(list(SMALL), env_file=None, environ={}).benchmark, tmp_path).world
    base = world.base_harness()
    edited = next(t for t in sorted(world.task_type_names) if world.rules_of(t, "insight"))
    path = resolve_skill_file(base, edited)
    base.save(tmp_path / "base")
    base.with_files({path: base[path].rstrip("\n") + f"\n- {world.rules_of(edited, 'insight')[0].text}\n"}).save(tmp_path / "one")
    run = _compare(tmp_path, "--candidate", str(tmp_path / "one"), "--baseline", str(tmp_path / "base"), "--out",
                   str(tmp_path / "o"), "--no-tracking")
    assert run.returncode in (0, 1), run.stderr[-3000:]
    cert = read_certificate(tmp_path / "o")
    attempt = cert.attempts[0]
    n, own = len(world.questions), sum(q.task_type == edited for q in world.questions)
    assert cert.population["n_questions"] == n and attempt.asked_questions == own and attempt.pairs > 0
    assert f"asked {own} of {n} questions (the other {n - own} read identical input)" in run.stdout
    rows = {r.task_type: r for r in attempt.per_task_type}
    assert [t for t, r in sorted(rows.items()) if not r.identical_input] == [edited]
    assert all(r.pairs == 0 and r.estimate == 0.0 for t, r in rows.items() if t != edited)


def test_compare_of_an_unchanged_copy_is_non_inferior_with_a_margin_and_not_better_without(tmp_path):
    """A copy of the baseline with a note no question reads: every question reads identical input, Delta = 0 exactly.
    --margin certifies it without a rollout (0 > -margin); without a margin it is not certified (0 is not better)."""
    from harness.compose import build_benchmark
    from harness.config.load import load_config

    base = build_benchmark(load_config(list(SMALL), env_file=None, environ={}).benchmark, tmp_path).world.base_harness()
    base.save(tmp_path / "base")
    base.with_files({"skills/NOTES.md": "why these skills read as they do\n"}).save(tmp_path / "copy")
    runs = {m: _compare(tmp_path, "--candidate", str(tmp_path / "copy"), "--baseline", str(tmp_path / "base"), "--margin", m,
                        "--out", str(tmp_path / f"m{m}"), "--no-tracking") for m in ("0.02", "0")}
    assert runs["0.02"].returncode == 0, runs["0.02"].stderr[-3000:]
    cert = read_certificate(tmp_path / "m0.02")
    attempt = cert.attempts[0]
    assert cert.certified and cert.delivered == "candidate" and cert.kind == "non_inferiority" and cert.rollouts == 0
    assert (attempt.pairs, attempt.estimate, attempt.lower_bound, attempt.upper_bound) == (0, 0.0, 0.0, 0.0)
    assert EXACT_ZERO in cert.summary and EXACT_ZERO in runs["0.02"].stdout
    assert runs["0"].returncode == 1, runs["0"].stderr[-3000:]
    cert = read_certificate(tmp_path / "m0")
    assert not cert.certified and cert.delivered == "baseline" and cert.rollouts == 0


def test_compare_of_an_identical_tree_is_non_inferior_with_a_margin_and_nothing_to_certify_without(tmp_path):
    """The same tree on both sides: Delta = 0 exactly, as for a change no question reads. --margin certifies it
    without a rollout (a CI check on a change that left the harness alone passes); without one, nothing to certify."""
    from harness.compose import build_benchmark
    from harness.config.load import load_config

    base = build_benchmark(load_config(list(SMALL), env_file=None, environ={}).benchmark, tmp_path).world.base_harness()
    base.save(tmp_path / "base")
    base.save(tmp_path / "same")
    runs = {m: _compare(tmp_path, "--candidate", str(tmp_path / "same"), "--baseline", str(tmp_path / "base"), "--margin", m,
                        "--out", str(tmp_path / f"m{m}"), "--no-tracking") for m in ("0.02", "0")}
    assert runs["0.02"].returncode == 0, runs["0.02"].stderr[-3000:]
    cert = read_certificate(tmp_path / "m0.02")
    assert cert.certified and cert.delivered == "candidate" and cert.rollouts == 0
    assert EXACT_ZERO in cert.summary and cert.attempts[0].pairs == 0
    assert runs["0"].returncode == 1, runs["0"].stderr[-3000:]
    cert = read_certificate(tmp_path / "m0")
    assert not cert.certified and cert.rollouts == 0 and "nothing to certify" in cert.summary


@pytest.mark.slow
def test_compare_and_eval_against_a_server_print_their_own_lines_not_one_per_http_request(tmp_path):
    """Against an OpenAI-compatible server, the documented output is one line per look (docs/compare.md) and the
    summary; the HTTP client's INFO line per request ("HTTP Request: POST ...": 2 per pair) is third-party chatter."""
    from tests.support.openai_server import FakeOpenAIServer

    questions = questions_and_harness(tmp_path)
    with FakeOpenAIServer() as server:
        config = ["llm=openai", "benchmark=jsonl", f"benchmark.path={questions}", f"llm.base_url={server.base_url}",
                  "llm.model=stand-in", f"llm.cache_dir={tmp_path / 'cache'}"]
        runs = {module: subprocess.run(
            [sys.executable, "-m", module, *args, "--no-tracking", "--out", str(tmp_path / module), *config],
            cwd=REPO_ROOT, env={**env(), "OPENAI_API_KEY": "local"}, capture_output=True, text=True, timeout=600)
            for module, args in (("stages.compare", ["--candidate", str(tmp_path / "h"), "--max-pairs", "20"]),
                                 ("stages.eval", ["--harness", str(tmp_path / "h")]))}
    compared, evaluated = runs["stages.compare"], runs["stages.eval"]
    assert compared.returncode == 1, compared.stderr  # the stand-in answers A to both arms: nothing to certify
    assert "[compare candidate] pairs 20/20" in compared.stderr
    assert evaluated.returncode == 0, evaluated.stderr
    for run in (compared, evaluated):
        assert "HTTP Request:" not in run.stderr + run.stdout


@pytest.mark.slow
def test_compare_masks_the_api_keys_value_in_its_log_lines(tmp_path):
    """README "Secrets": entry points attach the redaction filter to their log handlers. Here the key's value reaches
    a real log line (the candidate's directory is named like it; `[compare] <candidate> vs ...`) and is masked."""
    key = "local-key-4f9c2e"
    candidate = tmp_path / key
    _trees(tmp_path)["base"].rename(candidate)
    compared = subprocess.run(
        [sys.executable, "-m", "stages.compare", "--candidate", str(candidate), "--no-tracking", "--out",
         str(tmp_path / "o"), *SMALL], cwd=REPO_ROOT, env={**env(), "OPENAI_API_KEY": key}, capture_output=True,
        text=True, timeout=600, check=False)
    assert compared.returncode == 1, compared.stderr  # the starting harness itself: nothing to certify
    assert "[compare] " in compared.stderr and "***REDACTED***" in compared.stderr
    assert key not in compared.stderr + compared.stdout


def test_a_compare_that_fails_for_a_server_reason_leaves_no_run_behind(tmp_path):
    """Exit 2 for the server (nothing listening on a real closed port; a model the server does not serve): no
    half-written runs/compare/<time>/runlog.sqlite that looks like a result. A directory the run created is removed;
    a reused --out keeps its earlier files and gets no run log."""
    from harness.llm.local_server import free_port
    from tests.support.openai_server import FakeOpenAIServer

    questions = questions_and_harness(tmp_path)
    (tmp_path / "reused").mkdir()
    (tmp_path / "reused" / "notes.txt").write_text("an earlier file\n")

    def compare(base_url: str, out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "stages.compare", "--candidate", str(tmp_path / "h"), "--no-tracking", "--out", str(out),
             "llm=openai", "benchmark=jsonl", f"benchmark.path={questions}", f"llm.base_url={base_url}",
             "llm.model=stand-in", f"llm.cache_dir={tmp_path / 'cache'}"],
            cwd=REPO_ROOT, env={**env(), "OPENAI_API_KEY": "local"}, capture_output=True, text=True, timeout=600)

    closed = f"http://127.0.0.1:{free_port()}/v1"
    refused = {out: compare(closed, tmp_path / out) for out in ("new", "reused")}
    for run in refused.values():
        assert run.returncode == 2, run.stderr
        assert f"nothing is listening at {closed}" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in (tmp_path / "reused").iterdir()) == ["notes.txt"]

    with FakeOpenAIServer(served_models=("another-model",)) as server:
        unserved = compare(server.base_url, tmp_path / "unserved")
    assert unserved.returncode == 2 and "does not serve model 'stand-in'" in unserved.stderr, unserved.stderr
    assert not (tmp_path / "unserved").exists()


def test_compare_masks_the_api_keys_value_in_its_error_line(tmp_path):
    """The `error: ...` line is print()ed, around the log handlers' redaction filter: it is masked the same way. The
    key's value reaches the error (the missing candidate's path is named like it), for a secret-looking variable
    (OPENAI_API_KEY) and for one only llm.api_key_env names."""
    key = "local-key-4f9c2e"
    missing = tmp_path / key
    for variable, overrides in (("OPENAI_API_KEY", []), ("LLM_SERVICE_VALUE", ["llm.api_key_env=LLM_SERVICE_VALUE"])):
        compared = subprocess.run(
            [sys.executable, "-m", "stages.compare", "--candidate", str(missing), "--no-tracking", "--out",
             str(tmp_path / "o"), "llm=openai", *overrides, *SMALL], cwd=REPO_ROOT, env={**env(), variable: key},
            capture_output=True, text=True, timeout=600, check=False)
        assert compared.returncode == 2, compared.stderr
        assert f"error: --candidate {tmp_path / '***REDACTED***'}: not a directory" in compared.stderr, compared.stderr
        assert key not in compared.stderr + compared.stdout


def test_compare_tells_a_fault_from_a_verdict_and_never_reuses_an_earlier_runs_out(tmp_path):
    """Exit 1 means "not certified" only. An --out that is a file or that already holds a compare's run log or
    certificate (an earlier run, finished or stopped) is refused with exit 2, before any rollout and without touching
    what is there; a fault after the verdict (here: the MLflow store cannot be written) is exit 2 with one line, and
    the certificate it had written is removed: a run that did not finish never looks like a result."""
    from harness.compose import build_benchmark
    from harness.config.load import load_config

    base = build_benchmark(load_config(list(SMALL), env_file=None, environ={}).benchmark, tmp_path).world.base_harness()
    base.save(tmp_path / "base")
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "runlog.sqlite-wal").write_bytes(b"")  # what a stopped run's log leaves beside it
    same = ("--candidate", str(tmp_path / "base"), "--baseline", str(tmp_path / "base"), "--margin", "0.02")
    runs = {"file": _compare(tmp_path, *same, "--no-tracking", "--out", str(tmp_path / "afile")),
            "used": _compare(tmp_path, *same, "--no-tracking", "--out", str(tmp_path / "used")),
            "store": _compare(tmp_path, *same, "--out", str(tmp_path / "o"),
                              tracking_uri="sqlite:////proc/harness-no-such-dir/mlflow.db")}  # passes the config check
    for run in runs.values():
        assert run.returncode == 2, run.stderr[-3000:]
        assert "Traceback" not in run.stderr and run.stdout == "", run.stderr[-3000:]
    assert f"error: --out {tmp_path / 'afile'}: not a directory" in runs["file"].stderr
    assert "already holds a compare's runlog.sqlite-wal; choose another directory" in runs["used"].stderr
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == ["runlog.sqlite-wal"]
    assert (tmp_path / "afile").read_text() == "not a directory\n"
    assert "error: " in runs["store"].stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_compare_stopped_by_sigterm_exits_143_and_leaves_nothing(tmp_path):
    """SIGTERM (how `timeout`, CI and `kill` stop a job) unwinds like Ctrl-C: exit 143, one line, and the --out the
    run created is gone with its partial run log, so the next compare into it starts clean."""
    import signal
    import time

    from tests.support.openai_server import FakeOpenAIServer

    questions = questions_and_harness(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "system_prompt.md").write_text("Answer with one letter, A or B.\n")
    out = tmp_path / "o"
    with FakeOpenAIServer(latency_s=0.3, served_models=("stand-in",)) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stages.compare", "--candidate", str(tmp_path / "c"), "--baseline", str(tmp_path / "h"),
             "--no-tracking", "--out", str(out), "llm=openai", "benchmark=jsonl", f"benchmark.path={questions}",
             f"llm.base_url={server.base_url}", "llm.model=stand-in", f"llm.cache_dir={tmp_path / 'cache'}",
             "llm.concurrency=1", "certify.futility=none"],
            cwd=REPO_ROOT, env={**env(), "OPENAI_API_KEY": "local"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        deadline = time.monotonic() + 120
        while server.n_requests < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None and (out / "runlog.sqlite").exists(), "the compare did not reach its rollouts"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr[-3000:]
    assert "stages.compare: stopped by SIGTERM before its result" in stderr and "Traceback" not in stderr
    assert stdout == "" and not out.exists()
