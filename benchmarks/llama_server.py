"""The CI model's server: build flags, extra buffer types and thread count, measured in one run.

    pip wheel --no-cache-dir --no-deps 'llama-cpp-python[server]==0.3.36' -w /tmp/wheels-native   # CMAKE_ARGS without
    python benchmarks/llama_server.py --native-wheel /tmp/wheels-native/llama_cpp_python-0.3.36-*.whl \
        --build-times 'portable: <wall time of the install>' 'native: <wall time of pip wheel>'

Serves SmolLM2-135M-Instruct with harness/llm/local_server.py (LlamaServer) and sends the same chat prompt
`--completions` times (temperature 0, `--max-tokens`), through the product's OpenAIProvider; a configuration's
figure is the median of completion tokens / request wall time (the first, warm-up request not counted). The
configurations:

- build: the installed llama-cpp-python (built with -DGGML_NATIVE=OFF) vs a natively built wheel (`--native-wheel`,
  unpacked into a scratch directory put first on the server's PYTHONPATH), 1 thread;
- extra buffer types: off (the product's default) vs on (llama.cpp's default), portable build, 1 thread;
- threads: 1 vs 2, without and with a busy loop beside the server (`python -c "while True: pass"`).

`--rounds` passes over the configurations in turn, so that a machine whose load varies (other jobs) weighs on each
alike; the 1-minute load average of each round is in the table. Prints every figure and the ratios, and writes
reports/benchmarks/llama_server.md. Wall time ~10 min on a 2-core machine (the 2-thread server beside a busy loop
is the slow one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.config.schema import LLMConfig  # noqa: E402
from harness.contracts.roles import Role  # noqa: E402
from harness.llm.local_server import BUILD_FLAGS, DEFAULT_THREADS, LlamaServer  # noqa: E402
from harness.llm.openai_provider import OpenAIProvider  # noqa: E402
from harness.llm.protocol import ChatMessage, LLMRequest  # noqa: E402

REPORT = ROOT / "reports/benchmarks/llama_server.md"
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


@dataclass
class Config:
    name: str
    build: str  # "portable" | "native"
    threads: int
    loaded: bool
    extra_buffer_types: bool = False


@dataclass
class Result:
    config: Config
    tokens_per_s: list[float]
    ready_s: list[float]
    load_avg: list[float]
    system_info: str

    @property
    def median(self) -> float:
        return statistics.median(self.tokens_per_s)


CONFIGS = (
    Config("portable, 1 thread", "portable", 1, False),
    Config("native, 1 thread", "native", 1, False),
    Config("portable, extra buffer types on, 1 thread", "portable", 1, False, extra_buffer_types=True),
    Config("portable, 2 threads", "portable", 2, False),
    Config("portable, 1 thread, + busy loop", "portable", 1, True),
    Config("portable, 2 threads, + busy loop", "portable", 2, True),
)


def unpack_wheel(wheel: Path) -> Path:
    """The wheel's files in a scratch directory (a wheel is a zip of site-packages content)."""
    target = Path(tempfile.mkdtemp(prefix="llama-native-"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def system_info(env: dict[str, str]) -> str:
    """llama.cpp's compiled CPU features of the llama_cpp that `env` imports."""
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode().strip())"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return done.stdout.strip()


async def completions(server: LlamaServer, n: int, max_tokens: int, budget_s: float) -> list[float]:
    """Up to `n` rates after a warm-up; past `budget_s` seconds it stops once 3 are measured (a slow configuration)."""
    cfg = LLMConfig(provider="openai", model=server.model_id, base_url=server.base_url, timeout_s=900.0, max_retries=0,
                    max_tokens=max_tokens)
    llm = OpenAIProvider(cfg)
    request = LLMRequest.make(Role.SOLVER, [ChatMessage("user", PROMPT)], temperature=0.0, max_tokens=max_tokens)
    rates: list[float] = []
    deadline = time.perf_counter() + budget_s
    try:
        for i in range(n + 1):
            if len(rates) >= 3 and time.perf_counter() > deadline:
                break
            started = time.perf_counter()
            with server.watch():
                response = await llm.complete(request)
            elapsed = time.perf_counter() - started
            tokens = response.usage.completion_tokens if response.usage else 0
            if tokens < max_tokens // 2:
                raise RuntimeError(f"only {tokens} completion tokens of {max_tokens}: the rate would be mostly prompt time")
            if i:  # the first request warms the server up
                rates.append(tokens / elapsed)
    finally:
        await llm.aclose()
    return rates


def measure(config: Config, native_site: Path | None, n: int, max_tokens: int, budget_s: float) -> Result:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(native_site), os.environ.get("PYTHONPATH", "")]))} \
        if config.build == "native" else {}
    if config.build == "native" and native_site is None:
        raise SystemExit("benchmarks/llama_server.py: the native configuration needs --native-wheel")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if config.loaded else None
    try:
        time.sleep(1.0 if busy else 0.0)
        started = time.perf_counter()
        with LlamaServer(threads=config.threads, extra_buffer_types=config.extra_buffer_types, env=env) as server:
            ready_s = time.perf_counter() - started
            rates = asyncio.run(completions(server, n, max_tokens, budget_s))
        load = os.getloadavg()[0]
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    result = Result(config, rates, [ready_s], [load], system_info(env))
    print(f"{config.name}: median {result.median:.1f} tokens/s over {len(rates)} completions "
          f"({', '.join(f'{r:.1f}' for r in rates)}), ready in {ready_s:.1f} s, load {load:.2f}", flush=True)
    return result


def merge(rounds: list[Result]) -> Result:
    """One configuration's rounds as one result (all rates, every round's ready time and load)."""
    return Result(rounds[0].config, [r for x in rounds for r in x.tokens_per_s], [t for x in rounds for t in x.ready_s],
                  [v for x in rounds for v in x.load_avg], rounds[0].system_info)


def ratio(results: dict[str, Result], a: str, b: str) -> str:
    if a not in results or b not in results:
        return "not measured in this run"
    return f"{results[a].median / results[b].median:.2f}"


def render(results: dict[str, Result], args: argparse.Namespace, wall_s: float) -> str:
    lines = [
        "# The CI model's server: build flags, extra buffer types, threads",
        "",
        f"`python benchmarks/llama_server.py {shlex.join(sys.argv[1:])}`",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"{_cpu_model()}; Python {platform.python_version()}; llama-cpp-python 0.3.36; "
        f"SmolLM2-135M-Instruct Q4_1. One prompt, temperature 0, max_tokens {args.max_tokens}, "
        f"{args.rounds} rounds over the configurations in turn (so that the machine's varying load hits each alike), each round "
        f"a fresh server, one warm-up and up to {args.completions} completions (at least 3; fewer past {args.budget_s:.0f} s); "
        f"the figure is the median over all rounds' completions; tokens/s = completion tokens / request wall time "
        f"through OpenAIProvider. Load = 1-minute load average at the end of the configuration (other processes share "
        f"the machine: nothing here is idle). \"+ busy loop\": `python -c \"while True: pass\"` runs beside the server. Wall time of "
        f"this run: {wall_s / 60:.1f} min.",
        "",
        "| configuration | median tokens/s | all (in order) | server ready (s, median) | load (range) |",
        "|---|---:|---|---:|---:|",
    ]
    for r in results.values():
        lines.append(f"| {r.config.name} | {r.median:.1f} | {', '.join(f'{x:.1f}' for x in r.tokens_per_s)} | "
                     f"{statistics.median(r.ready_s):.1f} | {min(r.load_avg):.1f}-{max(r.load_avg):.1f} |")
    names = [c.name for c in CONFIGS]
    lines += [
        "",
        "Ratios (measured in this run):",
        "",
        f"- native / portable build (1 thread): {ratio(results, names[1], names[0])}",
        f"- extra buffer types on / off (portable, 1 thread): {ratio(results, names[2], names[0])}",
        f"- 2 threads / 1 thread: {ratio(results, names[3], names[0])}",
        f"- 1 thread / 2 threads, + busy loop: {ratio(results, names[4], names[5])}",
        "",
        "Compiled CPU features (llama_print_system_info):",
        "",
        *[f"- {r.config.build}{' (the same flags without -DGGML_NATIVE=OFF)' if r.config.build == 'native' else f' (`{BUILD_FLAGS}`)'}: "
          f"`{r.system_info}`" for r in {r.config.build: r for r in results.values()}.values()],
        "",
        "Wheel build / install wall time (cold pip cache, this machine):",
        "",
        *[f"- {t}" for t in args.build_times],
        "",
        f"The product's default: DEFAULT_THREADS = {DEFAULT_THREADS}, extra buffer types off, the portable build flags "
        "(harness/llm/local_server.py).",
        "",
    ]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--native-wheel", type=Path, help="a llama-cpp-python wheel built with GGML_NATIVE on")
    parser.add_argument("--only", nargs="*", type=int, help="measure only these configurations (0-based indices of CONFIGS)")
    parser.add_argument("--completions", type=int, default=3, help="per configuration and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--budget-s", type=float, default=120.0, help="per configuration: stop after 3 completions past this")
    parser.add_argument("--build-times", nargs="*", default=[], help="build wall times measured outside, as 'name=time (how)'")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args()
    started = time.perf_counter()
    native_site = unpack_wheel(args.native_wheel) if args.native_wheel else None
    chosen = [c for i, c in enumerate(CONFIGS) if args.only is None or i in args.only]
    rounds: dict[str, list[Result]] = {c.name: [] for c in chosen}
    for _ in range(args.rounds):
        for c in chosen:
            rounds[c.name].append(measure(c, native_site, args.completions, args.max_tokens, args.budget_s))
    results = {name: merge(done) for name, done in rounds.items()}
    text = render(results, args, time.perf_counter() - started)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
