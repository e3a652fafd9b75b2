"""The simulated world (DESIGN §7): world, solver, roles, provider; oracle for benchmarks only.

Deliberately imports nothing: `harness.sim.oracle` must never be loaded by the
training loop, so nothing here pulls it in (see docs/sim.md).
"""
