"""Kill trials: `kill -9` a `train=tiny` `dvc repro` at random moments, resume it, compare with an uninterrupted run.

One uninterrupted reference `dvc repro` (MLflow on, SQLite store in the project) is timed; then each trial makes
a fresh project copy (its own response cache and tracking database), starts `dvc repro`, kills its whole
process group with SIGKILL at a uniformly random moment of the reference's duration, runs `dvc repro` again to
the end and compares:

- survived: the resumed run exits 0 and its final artifacts (metrics, delivered harness, holdout, pools, plots)
  and version history are byte-identical to the reference's;
- rows lost / duplicated: per run-log table, rows the resumed chain lacks / holds in excess of the reference's,
  plus prediction keys (run_id, qid, sample_index) of the reference missing (and keys seen twice);
- repeated provider calls: calls the resumed run paid for responses already stored before the kill (persisted
  cache misses minus new stored responses; a call in flight at the moment of the kill is not visible here);
- MLflow duplicates: FINISHED runs beyond one, and RUNNING runs left behind.

Usage: nice -n 10 python benchmarks/kill_trials.py [--trials 10] [--seed 0] [--quick] [--out summary.json]
A reduced form runs in CI: tests/pipeline/test_kill_trials.py (1 epoch x 1 step, 1 trial).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.pipeline.support import BIN, cache_counts, env, file_digests, make_project, table_rows  # noqa: E402

OVERRIDES = ("train=tiny",)  # tracking on: MLflow duplicates are part of what is measured
QUICK = ("train=tiny", "train.epochs=1", "pools.diagnosis_size=4")  # CI's reduced form: 1 epoch x 1 step
REPRO = ("dvc", "repro", "report")
FINAL_ARTIFACTS = ("reports/metrics.json", "reports/plots", "state/holdout/delivered", "state/holdout/holdout.json",
                   "data/pools.json")
LOG_TABLES = ("predictions", "traces", "validation_flags", "_runs", "dual_metric_eval", "shadow_gate",
              "holdout_eval", "quadrant_pair", "gate_evidence")


@dataclass
class Trial:
    kill_after_s: float
    killed_running: bool  # the repro was still running when the kill landed
    resumed_exit: int
    identical: bool
    rows_lost: int
    rows_duplicated: int
    duplicate_prediction_keys: int
    repeated_calls: int
    mlflow_finished: int
    mlflow_running: int

    @property
    def survived(self) -> bool:
        return (self.resumed_exit == 0 and self.identical and self.rows_lost == 0 and self.rows_duplicated == 0
                and self.repeated_calls == 0 and self.mlflow_finished == 1 and self.mlflow_running == 0)


def final_state(project: Path) -> dict:
    """Artifacts' digests, run-log rows per table and the version history of a finished run."""
    from harness.loop.state import read_lineage, resolve_fragments
    from harness.store import list_versions, read_version

    digests: dict[str, str] = {}
    for name in FINAL_ARTIFACTS:
        path = project / name
        digests.update({f"{name}/{k}": v for k, v in file_digests(path).items()} if path.is_dir()
                       else {name: file_digests(path.parent)[path.name]})
    slow = max(project.glob("state/e*/slow/workspace"), key=lambda p: int(p.parent.parent.name[1:]))
    fragments = resolve_fragments(project, read_lineage(slow.parent)) + [project / "state/holdout/runlog.sqlite"]
    # rows per table, and each prediction's key (run_id, qid, sample_index): row contents hold timings
    rows = {table: len(table_rows(fragments, table)) for table in LOG_TABLES}
    keys = Counter(row[:3] for row in table_rows(fragments, "predictions"))
    versions = {kind: [(v, read_version(slow / kind, v).tree.fingerprint) for v in list_versions(slow / kind)]
                for kind in ("skills", "prompts")}
    return {"digests": digests, "rows": rows, "prediction_keys": keys, "versions": versions}


def mlflow_runs(project: Path) -> tuple[int, int]:
    """(FINISHED, RUNNING) active runs in the project's MLflow database."""
    db = project / "mlflow.db"
    if not db.is_file():
        return 0, 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        counts = dict(conn.execute("SELECT status, COUNT(*) FROM runs WHERE lifecycle_stage = 'active' GROUP BY status"))
    finally:
        conn.close()
    return int(counts.get("FINISHED", 0)), int(counts.get("RUNNING", 0))


def _repro(project: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dvc"), *REPRO[1:]], cwd=project, env=env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def reference_run(workdir: Path, overrides: tuple[str, ...] = OVERRIDES) -> tuple[dict, float]:
    project = make_project(workdir / "reference", overrides=overrides)
    started = time.monotonic()
    done = _repro(project)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"reference dvc repro failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {"state": final_state(project), "mlflow": mlflow_runs(project)}, seconds


def one_trial(workdir: Path, index: int, kill_after_s: float, reference: dict,
              overrides: tuple[str, ...] = OVERRIDES) -> Trial:
    project = make_project(workdir / f"trial{index}", overrides=overrides)
    proc = subprocess.Popen([str(BIN / "dvc"), *REPRO[1:]], cwd=project, env=env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(kill_after_s)
    running = proc.poll() is None
    if running:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    cache_file = project / ".cache" / "llm" / "responses.sqlite"
    entries_at_kill, misses_at_kill = cache_counts(project) if cache_file.is_file() else (0, 0)
    resumed = _repro(project)
    if resumed.returncode != 0:
        print(f"trial {index}: resumed dvc repro failed:\n{resumed.stderr[-2000:]}", file=sys.stderr)
        return Trial(kill_after_s, running, resumed.returncode, False, -1, -1, -1, -1, *mlflow_runs(project))
    state = final_state(project)
    want_keys, have_keys = reference["state"]["prediction_keys"], state["prediction_keys"]
    lost = sum((want_keys - have_keys).values()) + sum(max(n - state["rows"][t], 0)
                                                       for t, n in reference["state"]["rows"].items())
    duplicated = sum(max(state["rows"][t] - n, 0) for t, n in reference["state"]["rows"].items())
    keys = have_keys
    entries, misses = cache_counts(project)
    identical = state["digests"] == reference["state"]["digests"] and state["versions"] == reference["state"]["versions"]
    return Trial(round(kill_after_s, 2), running, 0, identical, lost, duplicated,
                 sum(n - 1 for n in keys.values() if n > 1), (misses - misses_at_kill) - (entries - entries_at_kill),
                 *mlflow_runs(project))


def run_trials(trials: int, seed: int, workdir: Path, *, overrides: tuple[str, ...] = OVERRIDES,
               window: tuple[float, float] = (0.03, 0.97)) -> dict:
    """`trials` kills at uniform random fractions `window` of the reference's duration."""
    reference, seconds = reference_run(workdir, overrides)
    print(f"reference dvc repro: {seconds:.1f} s, MLflow (FINISHED, RUNNING) = {reference['mlflow']}", flush=True)
    rng = random.Random(seed)
    results = []
    for index in range(trials):
        kill_after = rng.uniform(*window) * seconds
        trial = one_trial(workdir, index, kill_after, reference, overrides)
        print(f"trial {index}: kill after {trial.kill_after_s:.1f} s, survived={trial.survived} {asdict(trial)}",
              flush=True)
        results.append(trial)
    return {
        "overrides": list(overrides), "reference_seconds": round(seconds, 1), "reference_mlflow": reference["mlflow"], "trials": len(results),
        "killed_while_running": sum(t.killed_running for t in results),
        "survived": sum(t.survived for t in results),
        "rows_lost": sum(max(t.rows_lost, 0) for t in results),
        "rows_duplicated": sum(max(t.rows_duplicated, 0) for t in results),
        "duplicate_prediction_keys": sum(max(t.duplicate_prediction_keys, 0) for t in results),
        "repeated_calls": sum(max(t.repeated_calls, 0) for t in results),
        "mlflow_duplicates": sum(max(t.mlflow_finished - 1, 0) for t in results),
        "mlflow_running": sum(t.mlflow_running for t in results),
        "per_trial": [{**asdict(t), "survived": t.survived} for t in results],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1 epoch x 1 step (CI's reduced form), not the figure")
    parser.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the projects here (default: a temp dir)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kill_trials_") as tmp:
        summary = run_trials(args.trials, args.seed, args.workdir or Path(tmp),
                             overrides=QUICK if args.quick else OVERRIDES)
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    summary["load_average"] = os.getloadavg()
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if summary["survived"] == summary["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
