"""The proposers (`evolve.method`): one registry, lazily resolved stage functions.

Entries are "module:function" paths so that importing this registry does not
import Harness²; the code fingerprint counts them as imports, so only the
evolve stage (which imports this module) depends on the proposers' code.
Config validation checks `evolve.method` against `PROPOSER_NAMES`
(harness/config/registries.py, which must not import the loop); the two are
kept equal by the check below and by tests/kernel/test_registries.py.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.config.registries import PROPOSER_NAMES
from harness.kernel.registry import Registry

# evolve.method -> stage function (ctx, epoch, step, prev_state, rollout, out) -> None
PROPOSERS: Registry[Callable[..., Any]] = Registry("evolve.method", {
    "reflective": "harness.loop.stages.evolve:stage_evolve_reflective",
    "h2": "harness.loop.evolve_h2:stage_evolve_h2",
    "candidates": "harness.loop.candidates:stage_evolve_candidates",
})

if PROPOSERS.names() != PROPOSER_NAMES:
    raise RuntimeError(f"evolve.method: registry {PROPOSERS.names()} != config names {PROPOSER_NAMES}")
