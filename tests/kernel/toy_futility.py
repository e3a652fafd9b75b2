"""A toy futility rule written the way a new strategy is added (issue 29): one file with its own frozen params
dataclass and `check()`, plus one registry line (in the test that uses it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from harness.kernel.futility import FutilityView
from harness.kernel.registry import is_number, params_of


@dataclass(frozen=True)
class HalfwayParams:
    futility_gain: float = 0.10  # an existing gate key, read under its own meaning: the gain worth waiting for

    def check(self) -> list[tuple[str, str]]:
        ok = is_number(self.futility_gain) and 0 < self.futility_gain <= 0.5
        return [] if ok else [("futility_gain", "halfway rule: must be in (0, 0.5]")]


@dataclass(frozen=True)
class HalfwayFutility:
    """Stops at half the budget when the mean weighted difference is below its own futility_gain."""

    name: str = "halfway"
    params_type: ClassVar[type] = HalfwayParams

    def stop(self, view: FutilityView, params) -> Optional[str]:
        own = params_of(HalfwayParams, params)
        n = len(view.z)
        if n and view.remaining <= n and sum(view.z) / n < own.futility_gain:
            return f"futility (halfway): mean gain {sum(view.z) / n:+.3f} < {own.futility_gain} after {n} pairs"
        return None
