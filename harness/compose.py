"""The composition root: builds the configured benchmark and LLM provider from config.

It sits above harness/llm, harness/bench and harness/sim, so none of those
needs to know the others: the simulated provider is given the simulated
world here, and the real path never imports the simulator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.bench.protocol import BenchmarkAdapter
from harness.llm.cache import CachedProvider, ResponseCache
from harness.llm.protocol import LLMProvider

BENCHMARKS = ("sim", "jsonl")
PROVIDERS = ("sim", "openai")


def build_benchmark(bench_cfg: Any, root: str | Path) -> BenchmarkAdapter:
    """`benchmark.name` = "sim" (harness/sim/benchmark.py, the simulated world) or "jsonl" (the user's question file, relative to `root`)."""
    name = getattr(bench_cfg, "name", None)
    if name == "jsonl":
        from harness.bench.jsonl import JsonlBenchmark

        return JsonlBenchmark.from_config(bench_cfg, root, base=start_harness(bench_cfg, root))
    if name == "sim":
        from harness.sim.benchmark import (
            SimBenchmark,  # lazy: the world is only generated when asked for
        )

        return SimBenchmark.from_config(bench_cfg)
    raise ValueError(f"benchmark.name: unknown benchmark {name!r}; expected one of {BENCHMARKS}")


def start_harness(bench_cfg: Any, root: str | Path) -> Any:
    """The user's starting harness (`benchmark.harness_dir` in the layout `benchmark.harness_surface`) in the
    native layout, or None (the benchmark's own base harness)."""
    harness_dir = getattr(bench_cfg, "harness_dir", None)
    if not harness_dir:
        return None
    from harness.bench.jsonl import load_harness_dir

    directory = Path(harness_dir) if Path(harness_dir).is_absolute() else Path(root) / harness_dir
    return load_harness_dir(directory, str(getattr(bench_cfg, "harness_surface", "native")))


def build_provider(llm_cfg: Any, *, world: Any = None, cache: ResponseCache | None = None) -> LLMProvider:
    """`llm.provider` = "sim" (needs the simulated `world`) or "openai"; wrapped in CachedProvider when `cache` is given."""
    kind = getattr(llm_cfg, "provider", None)
    provider: LLMProvider
    if kind == "sim":
        if world is None:
            raise ValueError("llm.provider=sim needs the simulated world (use benchmark=sim, or llm=openai for real questions)")
        from harness.sim.provider import (
            SimProvider,  # lazy: the sim world is not needed on the real path
        )

        provider = SimProvider(world, llm_cfg)
    elif kind == "openai":
        from harness.llm.openai_provider import (
            OpenAIProvider,  # lazy: importing openai costs ~0.3 s
        )

        provider = OpenAIProvider(llm_cfg)
    else:
        raise ValueError(f"llm.provider: unknown provider {kind!r}; expected one of {PROVIDERS}")
    if cache is not None:
        return CachedProvider(provider, cache)
    return provider
