"""The same 4-job sweep (`+sweep=gate_lambda train=tiny`) on three launchers -> reports/benchmarks/scale_sweep.{md,json}.

Launchers: `hydra/launcher=joblib` (n_jobs=2, one node), `hydra/launcher=processes` (n_jobs=2) and `hydra/launcher=ray`
on a local 2-node Ray cluster (head + one worker node on 127.0.0.1, 1 CPU each: tests/support/ray_cluster.py). All
three have 2 job slots. Each sweep runs in a fresh copy of the project (its own LLM response cache) with its own
SQLite MLflow store, one after the other, in one run of this script.

Figures per launcher:
- wall: the whole `python -m stages.train ...` command;
- sweep: the MLflow parent run's time (from the callback's start of the multirun to its end: the launcher's part,
  without the command's own start-up and config pre-check, which are the same for every launcher);
- training: each child run's time (the job's own training, start to end of its MLflow run);
- overhead per job = (slots x sweep - sum of training) / jobs: the slot time a job spends outside its training
  (process or worker start, imports, config composition, waiting for a slot left idle).

Usage: nice -n 5 python benchmarks/scale_sweep.py [--out reports/benchmarks/scale_sweep.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._report import publish, table  # noqa: E402
from tests.pipeline.support import BIN, env, make_project  # noqa: E402
from tests.support.ray_cluster import local_cluster  # noqa: E402

SWEEP = ("+sweep=gate_lambda", "train=tiny")  # gate.lambda = 0.1,0.25,0.5,1.0 (conf/sweep/gate_lambda.yaml): 4 jobs
SLOTS = 2
LAUNCHERS = {
    "joblib": ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={SLOTS}"],
    "processes": ["hydra/launcher=processes", f"hydra.launcher.n_jobs={SLOTS}"],
    "ray (2 nodes)": ["hydra/launcher=ray"],
}


def sweep(project: Path, launcher: list[str], db: Path, extra_env: dict[str, str] | None) -> dict:
    """Run the sweep in `project`; its wall time and the MLflow parent/children times."""
    from mlflow.tracking import MlflowClient

    args = [str(BIN / "python"), "-m", "stages.train", *SWEEP, *launcher, f"tracking.tracking_uri=sqlite:///{db}",
            "hydra.sweep.dir=multirun/bench", "quiet=true"]
    started = time.perf_counter()
    done = subprocess.run(args, cwd=project, env=env(extra_env), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("harness-trainer")
    if experiment is None:
        raise RuntimeError(f"sqlite:///{db}: no MLflow experiment 'harness-trainer' after the sweep {' '.join(args)}")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("harness.kind") == "sweep")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    training = sorted((c.info.end_time - c.info.start_time) / 1000 for c in children)
    sweep_s = (parent.info.end_time - parent.info.start_time) / 1000
    return {"wall_s": wall, "sweep_s": sweep_s, "jobs": len(children), "training_s": training,
            "overhead_per_job_s": (SLOTS * sweep_s - sum(training)) / len(children),
            "accepted": sorted(int(c.data.metrics.get("accepted", -1)) for c in children),
            "statuses": sorted(c.info.status for c in children)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports/benchmarks/scale_sweep.md")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="scale-sweep-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        with local_cluster(work / "cluster") as cluster:
            cluster_up_s = time.perf_counter() - started
            for name, launcher in LAUNCHERS.items():
                project = make_project(work / f"project-{name.split()[0]}", overrides=("train=tiny",))
                extra = cluster.env if name.startswith("ray") else None
                results[name] = sweep(project, launcher, work / f"{name.split()[0]}.db", extra)
                print(name, {k: v for k, v in results[name].items() if k != "training_s"}, flush=True)
    load_end = os.getloadavg()
    base = results["joblib"]
    rows = []
    for name, r in results.items():
        rows.append([name, f"{r['wall_s']:.1f}", f"{r['sweep_s']:.1f}", f"{statistics.mean(r['training_s']):.1f}",
                     f"{r['overhead_per_job_s']:.1f}", f"{r['wall_s'] / base['wall_s']:.2f}",
                     " ".join(map(str, r["accepted"])), ",".join(sorted(set(r["statuses"])))])
    text = "\n".join([
        "# One sweep, three launchers: joblib, processes, a 2-node Ray cluster",
        "",
        f"`nice -n 5 python benchmarks/scale_sweep.py` — `python -m stages.train {' '.join(SWEEP)}` (4 jobs, "
        f"{SLOTS} job slots on every launcher), each in a fresh project copy with its own SQLite MLflow store, "
        "one after the other in one run. Ray: head + one worker node on 127.0.0.1 (`ray start`, 1 CPU each; "
        f"started in {cluster_up_s:.0f} s, not counted). Machine: {os.cpu_count()} cores shared with other work, "
        f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end; Python {platform.python_version()}.",
        "",
        *table(["launcher", "wall s", "sweep s (parent run)", "mean job training s", "overhead per job s",
                "wall / joblib", "accepted per job", "child runs"], rows),
        "",
        "overhead per job = (slots x sweep - sum of the jobs' training) / jobs: the slot time a job spends outside",
        "its own training (process or Ray worker start, imports, config composition, idle slot). One run on a shared",
        "2-core machine: the ratios are of this run only; a real cluster adds a node's CPUs per node.",
    ])
    publish(args.out, text, {"sweep": list(SWEEP), "slots": SLOTS, "cluster_up_s": cluster_up_s,
                             "load_start": load_start, "load_end": load_end, "launchers": results}, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
