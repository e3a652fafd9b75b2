"""The registries behind every config key that chooses a strategy, as config validation reads them.

`gate.rule` and `gate.ladder` are kernel registries (objects); `evolve.method`
(the proposer) lives in the loop, so its registry holds lazy "module:function"
paths that only the loop resolves (`harness.loop.stages.evolve`); config load
reads the names without importing the loop.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.kernel.plans import SAMPLING_PLANS
from harness.kernel.registry import Registry
from harness.kernel.rules import RULES

# evolve.method -> stage function (ctx, epoch, step, prev_state, rollout, out) -> None
PROPOSERS: Registry[Callable[..., Any]] = Registry("evolve.method", {
    "reflective": "harness.loop.stages.evolve:stage_evolve_reflective",
    "h2": "harness.loop.evolve_h2:stage_evolve_h2",
})

# config key -> registry, for config validation (`one_of` over the registered names)
CHOICE_REGISTRIES: dict[str, Registry[Any]] = {
    RULES.key: RULES,
    SAMPLING_PLANS.key: SAMPLING_PLANS,
    PROPOSERS.key: PROPOSERS,
}
