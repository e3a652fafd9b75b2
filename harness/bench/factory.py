"""Build the benchmark adapter named by `benchmark.name`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.bench.protocol import BenchmarkAdapter

BENCHMARKS = ("sim", "jsonl")


def build_benchmark(bench_cfg: Any, root: str | Path) -> BenchmarkAdapter:
    """"sim" (harness/bench/sim.py, the simulated world) or "jsonl" (the user's question file, relative to `root`)."""
    name = getattr(bench_cfg, "name", None)
    if name == "jsonl":
        from harness.bench.jsonl import JsonlBenchmark

        return JsonlBenchmark.from_config(bench_cfg, root)
    if name == "sim":
        from harness.bench.sim import SimBenchmark  # lazy: the world is only generated when asked for

        return SimBenchmark.from_config(bench_cfg)
    raise ValueError(f"benchmark.name: unknown benchmark {name!r}; expected one of {BENCHMARKS}")
