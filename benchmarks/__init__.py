"""The benchmarks: scripts that measure the product and write reports/benchmarks/<name>.md (+ .json).

Run one as `python -m benchmarks.<name>` or `python benchmarks/<name>.py` (both work); tests import them as
`from benchmarks import <name>`. Every benchmark that simulates a gate runs it on the kernel's one gate loop
(`benchmarks._engine.gate_now` -> `harness.kernel.engine.run_gate`); `benchmarks._report` writes the results JSON
and renders the Markdown tables.
"""
