"""Harness² on the CI model: the estimate `stages.improve` prints up front against the time the run then takes.

    python benchmarks/h2_real_estimate.py [--domain addition] [--minutes 30] [--tasks 1] [--questions 4]

Serves SmolLM2-135M-Instruct with harness/llm/local_server.py (DEFAULT_THREADS), writes the README's real-path
params.yaml (llm=openai benchmark=jsonl on examples/own-run/questions.jsonl, the token limits of benchmarks/real.py)
into a scratch directory and runs `python -m stages.improve --yes --domain D --no-tracking` there twice, with this
checkout's code: without a budget (the estimate and the opt-in line, nothing else runs) and with
`improve.max_minutes` (the run). Prints both outputs and the estimate against the measured wall time of the run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.llm.local_server import DEFAULT_THREADS, LlamaServer  # noqa: E402

QUESTIONS = ROOT / "examples" / "own-run" / "questions.jsonl"
TOKENS = ("llm.max_tokens=96", "+llm.max_tokens_by_role.editor=512", "+llm.max_tokens_by_role.diagnoser=256")


def write_params(directory: Path, base_url: str, model: str, domain: str, tasks: int, questions: int, *extra: str) -> None:
    from omegaconf import OmegaConf

    from harness.config.load import load_config

    cfg = load_config(["tracking=none", "llm=openai", "benchmark=jsonl", f"benchmark.path={QUESTIONS}", f"llm.base_url={base_url}",
                       f"llm.model={model}", *TOKENS, f"improve.domains=[{domain}]", f"improve.tasks_per_domain={tasks}",
                       f"improve.questions_per_task={questions}", *extra],
                      env_file=None, environ={})
    (directory / "params.yaml").write_text(OmegaConf.to_yaml(cfg))


def improve(directory: Path, domain: str) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-local"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "stages.improve", "--yes", "--domain", domain, "--no-tracking"], cwd=directory,
                          env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"stages.improve failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="addition")
    parser.add_argument("--tasks", type=int, default=1, help="improve.tasks_per_domain")
    parser.add_argument("--questions", type=int, default=4, help="improve.questions_per_task")
    parser.add_argument("--minutes", type=float, default=30.0, help="improve.max_minutes of the run")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="h2-real-"))
    with LlamaServer(threads=DEFAULT_THREADS, n_ctx=4096, seed=0) as server:
        write_params(scratch, server.base_url, server.model_id, args.domain, args.tasks, args.questions)
        opt_in, opt_in_s = improve(scratch, args.domain)
        print(f"--- without a budget ({opt_in_s:.1f} s):\n{opt_in}", flush=True)
        write_params(scratch, server.base_url, server.model_id, args.domain, args.tasks, args.questions,
                     f"improve.max_minutes={args.minutes:g}")
        ran, ran_s = improve(scratch, args.domain)
        print(f"--- improve.max_minutes={args.minutes:g} ({ran_s:.1f} s):\n{ran}", flush=True)
    estimate = re.search(r"-> about (.+?) if all are made", ran)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"estimate printed up front: about {estimate.group(1) if estimate else '?'}; measured wall time of the run: "
          f"{ran_s:.1f} s (incl. its own calibration and start-up)")


if __name__ == "__main__":
    main()
