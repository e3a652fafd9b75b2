"""Kill trials: `kill -9` a `train=tiny` run at random moments, resume it, compare with an uninterrupted run.

Three families of runs are killed (`--families`): `dvc repro` (each stage its own process), `python -m
stages.train` in one process (re-run in the same run directory: `hydra.run.dir`), and a two-job sweep
(`--multirun gate.lambda=0.5,2.0`, re-run in the same `hydra.sweep.dir`). Each family has its own uninterrupted
reference; its report lists trials, identical, rows lost / duplicated, repaid calls and MLflow runs per training run.

The code measured is one commit (`--commit`, default HEAD), exported with `git archive` into the work directory:
every project is built from that snapshot, never from the live working tree, and the commit is in the summary.
One uninterrupted reference `dvc repro` (MLflow on, SQLite store in the project) is timed; then each trial makes
a fresh project copy (its own response cache and tracking database), starts `dvc repro`, kills its whole
process group with SIGKILL at a uniformly random moment of the reference's duration (inside `--window`), runs
`dvc repro` again to the end and compares. A kill that lands after the run already finished is no real kill: it
is reported (killed_running false) and more trials are drawn until `--trials` kills landed while running (at most
`--max-trials` in all). Per trial:

- survived: the resumed run exits 0 and its final artifacts (metrics, delivered harness, holdout, pools, plots)
  and version history are byte-identical to the reference's;
- rows lost / duplicated: per run-log table, rows the resumed chain lacks / holds in excess of the reference's,
  plus prediction keys (run_id, qid, sample_index) of the reference missing (and keys seen twice);
- repeated provider calls: calls the resumed run paid for responses already stored before the kill (persisted
  cache misses minus new stored responses; a call in flight at the moment of the kill is not visible here);
- MLflow duplicates: FINISHED runs beyond one, and RUNNING runs left behind;
- DVC's own state: when the kill left `.dvc/tmp/rwlock` or `dvc.lock` empty (DVC rewrites both in place;
  treeverse/dvc#7615) the resume is refused; that trial does not survive, the file is removed and the checks above
  run on one more resume (without dvc.lock DVC runs the stages again; the response cache answers their calls).

Usage: nice -n 10 python benchmarks/kill_trials.py [--commit REV] [--trials 10] [--seed 0] [--quick]
           [--families dvc,train,sweep] [--out summary.json] [--out-md reports/benchmarks/kill_trials.md]
A reduced form runs in CI: tests/pipeline/test_kill_trials.py (1 epoch x 1 step, 1 trial, on the working tree).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.pipeline.support import BIN, cache_counts, env, file_digests, make_project, table_rows  # noqa: E402

OVERRIDES = ("train=tiny",)  # tracking on: MLflow duplicates are part of what is measured
QUICK = ("train=tiny", "train.epochs=1", "pools.diagnosis_size=4")  # CI's reduced form: 1 epoch x 1 step
REPRO = ("dvc", "repro", "report")
TRAIN_DIR = "runs/killed"  # stages.train's run directory: fixed, so the re-run resumes it
SWEEP_DIR = "multirun/killed"
SWEEP = ("--multirun", "gate.lambda=0.5,2.0")


@dataclass(frozen=True)
class Family:
    """A kind of run that is killed: its command (python/dvc from the venv) and where its training runs' outputs are
    (relative to the project: "" for `dvc repro`, the run directory of `stages.train`, each job's of a sweep)."""

    name: str
    command: tuple[str, ...]
    bases: tuple[str, ...]


def family(name: str, overrides: tuple[str, ...]) -> Family:
    """`dvc` (params.yaml holds the overrides), `train` or `sweep` (the overrides on the command line)."""
    train = ("python", "-m", "stages.train", *overrides)
    if name == "dvc":
        return Family(name, REPRO, ("",))
    if name == "train":
        return Family(name, (*train, f"hydra.run.dir={TRAIN_DIR}"), (TRAIN_DIR,))
    if name == "sweep":
        # --multirun before the overrides: Hydra's argparse takes no flag after its positional overrides
        return Family(name, (*train[:3], SWEEP[0], *overrides, *SWEEP[1:], f"hydra.sweep.dir={SWEEP_DIR}"),
                      (f"{SWEEP_DIR}/0", f"{SWEEP_DIR}/1"))
    raise SystemExit(f"--families: unknown family {name!r} (dvc, train, sweep)")


FAMILIES = ("dvc", "train", "sweep")
FINAL_ARTIFACTS = ("reports/metrics.json", "reports/plots", "state/holdout/delivered", "state/holdout/holdout.json",
                   "data/pools.json")
LOG_TABLES = ("predictions", "traces", "validation_flags", "_runs", "dual_metric_eval", "shadow_gate",
              "holdout_eval", "quadrant_pair", "gate_evidence")


@dataclass
class Trial:
    kill_after_s: float
    killed_running: bool  # the repro was still running when the kill landed
    killed_stage: str  # the stage command(s) running at the kill ("" when none was, e.g. DVC between stages)
    finished_after_s: float | None  # when the repro ended on its own before the kill (not a real kill)
    resumed_exit: int
    identical: bool
    rows_lost: int
    rows_duplicated: int
    duplicate_prediction_keys: int
    repeated_calls: int
    mlflow_finished: int
    mlflow_running: int
    # the kill left DVC's own .dvc/tmp/rwlock or dvc.lock unreadable (DVC rewrites them in place), the resume was
    # refused, that file was removed and `dvc repro` run once more; its exit code:
    dvc_state_removed: str = ""
    repaired_exit: int | None = None
    family: str = "dvc"
    training_runs: int = 1  # training runs of the family (a sweep's jobs)
    mlflow_parents: int = 0  # sweep parent runs (one expected for a sweep, whatever was killed)

    @property
    def intact(self) -> bool:
        """The final resume exited 0 and nothing was lost, duplicated, repaid or left RUNNING: one FINISHED MLflow
        run per training run (and one parent run for a sweep)."""
        final_exit = self.repaired_exit if self.dvc_state_removed else self.resumed_exit
        return (final_exit == 0 and self.identical and self.rows_lost == 0 and self.rows_duplicated == 0
                and self.repeated_calls == 0 and self.mlflow_finished == self.training_runs
                and self.mlflow_running == 0 and self.mlflow_parents == (1 if self.family == "sweep" else 0))

    @property
    def survived(self) -> bool:
        """Intact after one plain `dvc repro`, with no hand repair."""
        return self.resumed_exit == 0 and self.intact


def final_state(project: Path, bases: tuple[str, ...] = ("",)) -> dict:
    """Artifacts' digests, run-log rows per table and the version history of the finished training runs whose
    outputs are under `bases` (relative to `project`)."""
    from harness.loop.state import read_lineage, resolve_fragments
    from harness.store import list_versions, read_version

    digests: dict[str, str] = {}
    rows: Counter = Counter()
    keys: Counter = Counter()
    versions: dict[str, list] = {}
    for base in bases:
        root = project / base if base else project
        for name in FINAL_ARTIFACTS:
            path = root / name
            digests.update({f"{base}:{name}/{k}": v for k, v in file_digests(path).items()} if path.is_dir()
                           else {f"{base}:{name}": file_digests(path.parent)[path.name]})
        slow = max(root.glob("state/e*/slow/workspace"), key=lambda p: int(p.parent.parent.name[1:]))
        # lineage paths are relative to the project root the run ran in
        fragments = resolve_fragments(project, read_lineage(slow.parent)) + [root / "state/holdout/runlog.sqlite"]
        # rows per table, and each prediction's key (run_id, qid, sample_index): row contents hold timings
        rows.update({f"{base}:{table}": len(table_rows(fragments, table)) for table in LOG_TABLES})
        keys.update((base, *row[:3]) for row in table_rows(fragments, "predictions"))
        versions.update({f"{base}:{kind}": [(v, read_version(slow / kind, v).tree.fingerprint)
                                            for v in list_versions(slow / kind)] for kind in ("skills", "prompts")})
    return {"digests": digests, "rows": dict(rows), "prediction_keys": keys, "versions": versions}


def mlflow_runs(project: Path) -> tuple[int, int]:
    """(FINISHED, RUNNING) active training runs (not sweep parents) in the project's MLflow database."""
    counts = mlflow_counts(project)
    return counts["training_finished"], counts["running"]


def mlflow_counts(project: Path) -> dict[str, int]:
    """Active runs of the project's MLflow database: training runs FINISHED, any run RUNNING, sweep parent runs,
    and parent runs without a child (a re-run sweep that opened a second parent)."""
    db = project / "mlflow.db"
    out = {"training_finished": 0, "running": 0, "parents": 0, "empty_parents": 0}
    if not db.is_file():
        return out
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT r.run_uuid, r.status, (SELECT value FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = 'harness.kind'),"
            " (SELECT value FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = 'mlflow.parentRunId')"
            " FROM runs r WHERE r.lifecycle_stage = 'active'").fetchall()
    finally:
        conn.close()
    children = Counter(parent for _, _, kind, parent in rows if kind != "sweep" and parent is not None)
    for run_id, status, kind, _ in rows:
        out["running"] += status == "RUNNING"
        out["parents"] += kind == "sweep"
        out["empty_parents"] += kind == "sweep" and children[run_id] == 0
        out["training_finished"] += kind != "sweep" and status == "FINISHED"
    return out


def _argv(command: tuple[str, ...]) -> list[str]:
    return [str(BIN / command[0]), *command[1:]]


def _repro(project: Path, timeout: float = 1800, command: tuple[str, ...] = REPRO) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(command), cwd=project, env=env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def export_commit(rev: str, dest: Path, repo: Path = REPO_ROOT) -> tuple[str, Path]:
    """(full sha, directory) of `rev`'s tracked files exported into `dest` with `git archive`."""
    done = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"--commit {rev}: not a commit of {repo}")
    sha = done.stdout.strip()
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "-o", str(archive), sha], check=True)
    dest.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return sha, dest


# DVC's own files that it rewrites in place (open "w" then dump), so a kill can leave them empty, and the message
# with which the next `dvc repro` refuses to run then (DVC 3.x)
DVC_STATE_FILES = ((".dvc/tmp/rwlock", "Unable to read RWLock-file"), ("dvc.lock", "dvc.lock' validation failed"))


def _readable(path: Path) -> bool:
    import yaml  # JSON is YAML: one parser for both files

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and bool(data)


def remove_unreadable_dvc_state(project: Path, stderr: str) -> str:
    """Remove the DVC state file (.dvc/tmp/rwlock or dvc.lock) DVC refused to run on because a kill left it
    unreadable; only safe with no `dvc` running in the project. The removed path ("" when none)."""
    for name, refusal in DVC_STATE_FILES:
        path = project / name
        if refusal in stderr and path.is_file() and not _readable(path):
            path.unlink()
            return name
    return ""


def check_code_source(project: Path) -> None:
    """The stages of `project` import its own copy of the code, not the editable install's live tree."""
    probe = ("import harness, stages, hydra_plugins.harness_resolvers as r; "
             "print(harness.__file__); print(stages.__file__); print(r.__file__)")
    done = subprocess.run([str(BIN / "python"), "-c", probe], cwd=project, env=env(), capture_output=True, text=True,
                          check=True)
    outside = [line for line in done.stdout.split() if not Path(line).resolve().is_relative_to(project.resolve())]
    if outside:
        raise SystemExit(f"{project}: its stages would import code from outside the project: {outside}")


def running_stages(pgid: int) -> str:
    """The `python -m stages.*` command lines of process group `pgid`, e.g. 'gate --epoch 1 --step 2'."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # fields after the command name: state, ppid, pgrp, ...
                continue
            argv = (stat.parent / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
        if "-m" in argv and argv.index("-m") + 1 < len(argv) and argv[argv.index("-m") + 1].startswith("stages."):
            module_at = argv.index("-m") + 1
            words = [argv[module_at].removeprefix("stages.")]
            words += [f"{a} {b}" for a, b in zip(argv[module_at + 1:], argv[module_at + 2:])
                      if a in ("--epoch", "--step")]
            found.append(" ".join(words))
    return "; ".join(sorted(set(found)))


def reference_run(workdir: Path, overrides: tuple[str, ...] = OVERRIDES, source: Path = REPO_ROOT,
                  kind: Family | None = None) -> tuple[dict, float]:
    kind = kind or family("dvc", overrides)
    project = make_project(workdir / f"reference-{kind.name}", overrides=overrides, source=source)
    check_code_source(project)
    started = time.monotonic()
    done = _repro(project, command=kind.command)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"reference {kind.name} run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {"state": final_state(project, kind.bases), "mlflow": mlflow_runs(project),
            "mlflow_counts": mlflow_counts(project)}, seconds


def one_trial(workdir: Path, index: int, kill_after_s: float, reference: dict,
              overrides: tuple[str, ...] = OVERRIDES, source: Path = REPO_ROOT, kind: Family | None = None) -> Trial:
    kind = kind or family("dvc", overrides)
    project = make_project(workdir / f"trial-{kind.name}{index}", overrides=overrides, source=source)
    proc = subprocess.Popen(_argv(kind.command), cwd=project, env=env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < kill_after_s:
        time.sleep(0.05)
    running = proc.poll() is None
    finished_after = None if running else round(time.monotonic() - started, 2)
    stage = ""
    if running:
        stage = running_stages(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kill_after_s = round(kill_after_s, 2)
    cache_file = project / ".cache" / "llm" / "responses.sqlite"
    entries_at_kill, misses_at_kill = cache_counts(project) if cache_file.is_file() else (0, 0)
    resumed = _repro(project, command=kind.command)
    resumed_exit, state_removed, repaired_exit = resumed.returncode, "", None
    if resumed.returncode != 0:
        (workdir / f"trial-{kind.name}{index}.resume.log").write_text(resumed.stdout + "\n--- stderr ---\n" + resumed.stderr)
        print(f"{kind.name} trial {index}: resumed run failed:\n{resumed.stderr[-2000:]}", file=sys.stderr)
        state_removed = remove_unreadable_dvc_state(project, resumed.stderr) if kind.name == "dvc" else ""
        if state_removed:
            print(f"trial {index}: removed the unreadable {state_removed}, dvc repro again", file=sys.stderr)
            resumed = _repro(project, command=kind.command)
            repaired_exit = resumed.returncode
    counts = mlflow_counts(project)
    extra: dict[str, Any] = {"family": kind.name, "training_runs": len(kind.bases), "mlflow_parents": counts["parents"]}
    if resumed.returncode != 0:
        return Trial(kill_after_s, running, stage, finished_after, resumed_exit, False, -1, -1, -1, -1,
                     *mlflow_runs(project), state_removed, repaired_exit, **extra)
    state = final_state(project, kind.bases)
    want_keys, have_keys = reference["state"]["prediction_keys"], state["prediction_keys"]
    lost = sum((want_keys - have_keys).values()) + sum(max(n - state["rows"][t], 0)
                                                       for t, n in reference["state"]["rows"].items())
    duplicated = sum(max(state["rows"][t] - n, 0) for t, n in reference["state"]["rows"].items())
    entries, misses = cache_counts(project)
    identical = state["digests"] == reference["state"]["digests"] and state["versions"] == reference["state"]["versions"]
    return Trial(kill_after_s, running, stage, finished_after, resumed_exit, identical, lost, duplicated,
                 sum(n - 1 for n in have_keys.values() if n > 1), (misses - misses_at_kill) - (entries - entries_at_kill),
                 *mlflow_runs(project), state_removed, repaired_exit, **extra)


def run_family(kind: Family, trials: int, rng: random.Random, workdir: Path, *, overrides: tuple[str, ...],
               window: tuple[float, float], source: Path, max_trials: int | None) -> tuple[dict, float, float, list[Trial]]:
    """One family's reference and trials: (reference, its seconds, the shortest run seen, trials)."""
    reference, seconds = reference_run(workdir, overrides, source, kind)
    print(f"reference {kind.name}: {seconds:.1f} s, MLflow {reference['mlflow_counts']}", flush=True)
    results: list[Trial] = []
    duration = seconds
    while sum(t.killed_running for t in results) < trials and len(results) < (max_trials or 2 * trials):
        kill_after = rng.uniform(*window) * duration
        trial = one_trial(workdir, len(results), kill_after, reference, overrides, source, kind)
        print(f"{kind.name} trial {len(results)}: kill after {trial.kill_after_s:.1f} s, survived={trial.survived} "
              f"{asdict(trial)}", flush=True)
        results.append(trial)
        duration = min(duration, trial.finished_after_s or duration)
    return reference, seconds, duration, results


def family_figures(results: list[Trial], reference: dict, seconds: float) -> dict:
    """The counts of one family: trials, identical, lost / duplicated rows, repaid calls, MLflow runs per run."""
    runs = sum(t.training_runs for t in results)
    return {
        "reference_seconds": round(seconds, 1), "reference_mlflow": reference["mlflow_counts"],
        "trials": len(results), "killed_running": sum(t.killed_running for t in results),
        "survived": sum(t.survived for t in results), "identical": sum(t.identical for t in results),
        "rows_lost": sum(max(t.rows_lost, 0) for t in results),
        "rows_duplicated": sum(max(t.rows_duplicated, 0) for t in results),
        "repeated_calls": sum(max(t.repeated_calls, 0) for t in results),
        "training_runs": runs,
        "mlflow_finished": sum(t.mlflow_finished for t in results),
        "mlflow_runs_per_training_run": round(sum(t.mlflow_finished for t in results) / runs, 3) if runs else None,
        "mlflow_running": sum(t.mlflow_running for t in results),
        "mlflow_parents": sum(t.mlflow_parents for t in results),
    }


def run_trials(trials: int, seed: int, workdir: Path, *, overrides: tuple[str, ...] = OVERRIDES,
               window: tuple[float, float] = (0.02, 0.9), source: Path = REPO_ROOT, commit: str | None = None,
               max_trials: int | None = None, families: tuple[str, ...] = ("dvc",)) -> dict:
    """For each family, kills at uniform random fractions `window` of an uninterrupted run's duration until `trials`
    of them landed while the run was running (at most `max_trials`, default 2 x `trials`, in all). The duration is
    the shortest seen: the reference's, or a trial's that finished before its kill (a cold first run is slower).
    `source` is the tree the projects are built from; `commit` names it in the summary (None: the working tree).
    The top-level figures add up every family; `families` holds each one's."""
    rng = random.Random(seed)
    results: list[Trial] = []
    per_family: dict[str, dict] = {}
    first: tuple[dict, float, float] | None = None
    for name in families:
        kind = family(name, overrides)
        reference, seconds, duration, found = run_family(kind, trials, rng, workdir, overrides=overrides,
                                                         window=window, source=source, max_trials=max_trials)
        first = first or (reference, seconds, duration)
        per_family[name] = {**family_figures(found, reference, seconds), "command": " ".join(kind.command),
                            "shortest_run_seconds": round(duration, 1)}
        results += found
    assert first is not None, "no family"
    real = [t for t in results if t.killed_running]
    return {
        "commit": commit or f"working tree {source}", "overrides": list(overrides), "seed": seed, "window": list(window),
        "reference_seconds": round(first[1], 1), "shortest_run_seconds": round(first[2], 1),
        "reference_mlflow": first[0]["mlflow"],
        "families": per_family,
        "trials": len(results),
        "killed_running": len(real),
        "survived": sum(t.survived for t in results),
        "survived_real_kills": sum(t.survived for t in real),
        "failed_trials": [i for i, t in enumerate(results) if not t.survived],
        "dvc_state_unreadable": dict(Counter(t.dvc_state_removed for t in results if t.dvc_state_removed)),
        "intact_after_dvc_state_removal": sum(t.intact for t in results if t.dvc_state_removed),
        "rows_lost": sum(max(t.rows_lost, 0) for t in results),
        "rows_duplicated": sum(max(t.rows_duplicated, 0) for t in results),
        "duplicate_prediction_keys": sum(max(t.duplicate_prediction_keys, 0) for t in results),
        "repeated_calls": sum(max(t.repeated_calls, 0) for t in results),
        "mlflow_duplicates": sum(max(t.mlflow_finished - t.training_runs, 0) for t in results),
        "mlflow_running": sum(t.mlflow_running for t in results),
        "per_trial": [{**asdict(t), "intact": t.intact, "survived": t.survived} for t in results],
    }


FAMILY_TITLES = {"dvc": "`dvc repro`", "train": "`python -m stages.train` (same run dir)",
                 "sweep": "2-job sweep (same sweep dir)"}


def family_table(families: dict) -> list[str]:
    """One row per family: trials, identical, lost / duplicated rows, repaid calls, MLflow runs per training run."""
    if not families:
        return []
    lines = ["| family | reference (s) | trials (real kills) | survived | identical | rows lost | rows duplicated "
             "| repaid calls | MLflow runs per training run | RUNNING left | sweep parents |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, f in families.items():
        lines.append(f"| {FAMILY_TITLES.get(name, name)} | {f['reference_seconds']} | {f['trials']} ({f['killed_running']}) "
                     f"| {f['survived']} / {f['trials']} | {f['identical']} / {f['trials']} | {f['rows_lost']} "
                     f"| {f['rows_duplicated']} | {f['repeated_calls']} | {f['mlflow_runs_per_training_run']} "
                     f"({f['mlflow_finished']} FINISHED / {f['training_runs']}) | {f['mlflow_running']} "
                     f"| {f['mlflow_parents'] if name == 'sweep' else '-'} |")
    return [*lines, ""]


def render_markdown(summary: dict) -> str:
    """The report page of one full run (reports/benchmarks/kill_trials.md)."""
    ok = summary["survived"] == summary["trials"] and summary["failed_trials"] == []
    unreadable_total = sum(summary["dvc_state_unreadable"].values())
    unreadable = ", ".join(f"`{name}` {n}" for name, n in sorted(summary["dvc_state_unreadable"].items())) or "none"
    lines = [
        "# Kill trials: `kill -9` of a `train=tiny` run (`dvc repro`, `stages.train`, a sweep), then the same command again",
        "",
        f"Generated by `{summary['command']}` (benchmarks/kill_trials.py), {summary['finished_utc']}.",
        "",
        f"- commit measured: `{summary['commit']}` (exported with `git archive`; every project is built from it)",
        f"- overrides: `{' '.join(summary['overrides'])}` (MLflow on, SQLite store per project), seed {summary['seed']}",
        f"- kill times drawn uniformly in [{summary['window'][0]}, {summary['window'][1]}] x the shortest "
        "uninterrupted run of the family seen so far (its reference, or a trial that finished before its kill)",
        f"- wall time {summary['wall_seconds']} s, load average at the end {summary['load_average']}",
        "",
        *family_table(summary.get("families", {})),
        "| figure (all families) | value |",
        "|---|---|",
        f"| trials | {summary['trials']} |",
        f"| real kills (landed while the run ran) | {summary['killed_running']} |",
        f"| survived (all trials) | {summary['survived']} / {summary['trials']} |",
        f"| survived (real kills) | {summary['survived_real_kills']} / {summary['killed_running']} |",
        f"| kills that left DVC's own state unreadable (resume refused) | {unreadable_total} ({unreadable}) |",
        f"| ... of those, intact after removing that file and `dvc repro` | "
        f"{summary['intact_after_dvc_state_removal']} / {unreadable_total} |",
        f"| run-log rows lost / duplicated | {summary['rows_lost']} / {summary['rows_duplicated']} |",
        f"| duplicate prediction keys (run_id, qid, sample_index) | {summary['duplicate_prediction_keys']} |",
        f"| repeated provider calls | {summary['repeated_calls']} |",
        f"| MLflow FINISHED duplicates | {summary['mlflow_duplicates']} |",
        f"| MLflow RUNNING zombies | {summary['mlflow_running']} |",
        "",
        "Survived: the resumed `dvc repro` exits 0, its final artifacts (metrics, plots, delivered harness, holdout,",
        "pools) and version history are byte-identical to the reference's, no run-log row is lost or duplicated, no",
        "provider call is paid twice, and MLflow holds exactly one FINISHED run and no RUNNING one. Rows, calls and",
        "MLflow figures are counted after the last resume (after removing an unreadable DVC file, where one was).",
        "",
        "| trial | family | kill after (s) | real kill | running at the kill | resumed exit | identical | rows lost / dup "
        "| repeated calls | MLflow FINISHED / RUNNING | survived |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, t in enumerate(summary["per_trial"]):
        done = f"no (done at {t['finished_after_s']} s)"
        resume = (f"{t['resumed_exit']}; {t['dvc_state_removed']} removed, then {t['repaired_exit']}"
                  if t["dvc_state_removed"]
                  else str(t["resumed_exit"]))
        lines.append(f"| {index} | {t.get('family', 'dvc')} | {t['kill_after_s']} | {'yes' if t['killed_running'] else done} "
                     f"| {t['killed_stage'] or '-'} | {resume} | {'yes' if t['identical'] else 'NO'} "
                     f"| {t['rows_lost']} / {t['rows_duplicated']} | {t['repeated_calls']} "
                     f"| {t['mlflow_finished']} / {t['mlflow_running']} | {'yes' if t['survived'] else 'NO'} |")
    lines += ["", "All trials survived." if ok else f"Failed trials: {summary['failed_trials']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="HEAD", help="the commit measured (exported with git archive)")
    parser.add_argument("--trials", type=int, default=10, help="real kills wanted (kills landing while running)")
    parser.add_argument("--max-trials", type=int, default=None, help="trials at most (default 2 x --trials)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=float, nargs=2, default=(0.02, 0.9), metavar=("FROM", "TO"),
                        help="kill times: fractions of the reference duration")
    parser.add_argument("--quick", action="store_true", help="1 epoch x 1 step (CI's reduced form), not the figure")
    parser.add_argument("--families", default="dvc,train,sweep",
                        help="comma-separated: dvc (dvc repro), train (python -m stages.train), sweep (2-job multirun)")
    parser.add_argument("--out", type=Path, default=None, help="write the summary as JSON here")
    parser.add_argument("--out-md", type=Path, default=None, help="write the report page (markdown) here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the projects here (default: a temp dir)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kill_trials_") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        commit, source = export_commit(args.commit, workdir / "source")
        sys.path.insert(0, str(source))  # the analysis (run logs, versions) reads with the measured commit's code
        import harness
        if not Path(harness.__file__).resolve().is_relative_to(source.resolve()):
            raise SystemExit(f"harness imported from {harness.__file__}, not from the export {source}")
        print(f"measuring commit {commit} (exported to {source})", flush=True)
        summary = run_trials(args.trials, args.seed, workdir, overrides=QUICK if args.quick else OVERRIDES,
                             window=tuple(args.window), source=source, commit=commit, max_trials=args.max_trials,
                             families=tuple(name.strip() for name in args.families.split(",") if name.strip()))
    summary["command"] = shlex.join(["python", "benchmarks/kill_trials.py", *(sys.argv[1:] if argv is None else argv)])
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    summary["load_average"] = [round(x, 2) for x in os.getloadavg()]
    summary["finished_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.out_md is not None:
        args.out_md.parent.mkdir(parents=True, exist_ok=True)
        args.out_md.write_text(render_markdown(summary), encoding="utf-8")
    wanted = args.trials * len(summary["families"])
    return 0 if summary["survived"] == summary["trials"] and summary["killed_running"] >= wanted else 1


if __name__ == "__main__":
    sys.exit(main())
