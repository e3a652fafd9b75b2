"""The registries behind every config key that chooses a strategy, as config validation reads them.

`gate.rule`, `gate.plan`, `gate.fdr` and `gate.futility` are kernel registries (objects); `evolve.method`
(the proposer) lives in the loop (`harness.loop.proposers.PROPOSERS`), so only
its names are here: config load neither imports the loop nor makes every stage
depend on the proposers' code.
"""

from __future__ import annotations

from typing import Any

from harness.kernel.fdr import FDR_PROCEDURES
from harness.kernel.futility import FUTILITY_RULES
from harness.kernel.plans import SAMPLING_PLANS
from harness.kernel.registry import Registry
from harness.kernel.rules import RULES

# evolve.method: the proposers registered in harness.loop.proposers.PROPOSERS (the loop checks the two agree);
# only the names and the evolve.* keys each one alone reads live here, so loading the config neither imports nor
# depends on the proposers' code
PROPOSER_CHOICES: Registry[tuple[str, ...]] = Registry("evolve.method", {
    "candidates": ("evolve.candidates_path",),
    "h2": (),
    "reflective": (),
})
PROPOSER_NAMES: tuple[str, ...] = PROPOSER_CHOICES.names()

# config key -> registry, for config validation (`one_of` over the registered names)
CHOICE_REGISTRIES: dict[str, Registry[Any]] = {
    RULES.key: RULES,
    SAMPLING_PLANS.key: SAMPLING_PLANS,
    FDR_PROCEDURES.key: FDR_PROCEDURES,
    FUTILITY_RULES.key: FUTILITY_RULES,
    PROPOSER_CHOICES.key: PROPOSER_CHOICES,
}
