"""What MLflow tracking costs a `dvc repro`: commits and tracking on/off, interleaved -> a Markdown table.

Each measurement is a `dvc repro` of a fresh `git clone` of a commit with the config snapshot of
`--overrides` (default `train=tiny train.early_stop_patience=5`: every stage runs, both epochs are
logged), tracking on (the default, a fresh local SQLite store) or off (`tracking.enabled=false`).
Variants run one after the other in rounds (A-on, A-off, B-on, B-off, A-on, ...), so a change of the
machine's load hits every variant alike; CPU is user + sys of the whole process tree (wait4), which a
shared machine disturbs less than wall time. Medians are reported, with the load average at start and end.

Usage: nice -n 10 python benchmarks/tracking_cost.py --commits ab4599d HEAD [--rounds 3] [--out PATH]
       [--overrides ...]  (`--overrides` alone: the embedded default config)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OVERRIDES = ("train=tiny", "train.early_stop_patience=5")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HT__", "MLFLOW_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def project(work: Path, commit: str, overrides: list[str], tracking: bool) -> Path:
    """A fresh clone of `commit` whose committed params.yaml is the snapshot of `overrides` (+ tracking off)."""
    dest = Path(tempfile.mkdtemp(prefix="clone-", dir=work))
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=dest, check=True)
    snapshot = [*overrides, *([] if tracking else ["tracking.enabled=false"])]
    subprocess.run([sys.executable, "-m", "harness.config.snapshot", *snapshot], cwd=dest, env=_env(), check=True,
                   stdout=subprocess.DEVNULL)
    if subprocess.run(["git", "diff", "--quiet"], cwd=dest).returncode:  # the default config: nothing to commit
        subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qam", "bench"],
                       cwd=dest, check=True)
    return dest


def timed_repro(cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of `dvc repro` in `cwd`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"dvc repro in {cwd} failed:\n{out[-4000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", nargs="+", default=["HEAD"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--overrides", nargs="*", default=list(DEFAULT_OVERRIDES))
    parser.add_argument("--out", default=None, help="Markdown file (default: print only)")
    args = parser.parse_args()
    commits = {c: subprocess.run(["git", "rev-parse", "--short", c], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.strip() for c in args.commits}
    variants = [(c, tracking) for c in commits.values() for tracking in (True, False)]
    results: dict[tuple[str, bool], list[tuple[float, float]]] = {v: [] for v in variants}
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="ht-tracking-cost-"))
    try:
        for r in range(args.rounds):
            for commit, tracking in variants:
                dest = project(work, commit, args.overrides, tracking)
                wall, cpu = timed_repro(dest)
                results[(commit, tracking)].append((wall, cpu))
                print(f"[tracking cost] round {r + 1}: {commit} tracking {'on' if tracking else 'off'}: "
                      f"{wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
                shutil.rmtree(dest, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    med = {v: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)) for v, runs in results.items()}
    lines = [
        "# What MLflow tracking costs a `dvc repro`",
        "",
        f"Command: `nice -n 10 python benchmarks/tracking_cost.py --commits {' '.join(args.commits)} --rounds {args.rounds}"
        f"{' --overrides ' + ' '.join(args.overrides) if list(args.overrides) != list(DEFAULT_OVERRIDES) else ''}`  ",
        f"Run at {time.strftime('%Y-%m-%d %H:%M:%S')}; {os.cpu_count()} cores; load average at start {load_start}, "
        f"at end {load_end}. Config: {' '.join(args.overrides)}; each run a fresh clone (fresh SQLite store, empty "
        "LLM response cache); variants interleaved in rounds. CPU = user + sys of the process tree (wait4).",
        "",
        "| commit | tracking | wall (median) | CPU (median) | CPU runs | tracking's CPU (on - off) |",
        "|---|---|---|---|---|---|",
    ]
    for commit, tracking in variants:
        wall, cpu = med[(commit, tracking)]
        extra = f"{cpu - med[(commit, False)][1]:+.1f} s" if tracking else ""
        runs = " / ".join(f"{c:.1f}" for _, c in results[(commit, tracking)])
        lines.append(f"| {commit} | {'on' if tracking else 'off'} | {wall:.1f} s | {cpu:.1f} s | {runs} | {extra} |")
    if len(commits) > 1:
        first, last = list(commits.values())[0], list(commits.values())[-1]
        lines += ["", f"{last} / {first}, tracking on: wall {med[(last, True)][0] / med[(first, True)][0]:.3f}, "
                      f"CPU {med[(last, True)][1] / med[(first, True)][1]:.3f}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
