"""Load benchmarks/gate.py as a module (benchmarks/ is not an installed package)."""

import importlib.util
import sys
from pathlib import Path

GATE_BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "gate.py"


def load_gate_benchmark():
    name = "gate_benchmark_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GATE_BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
