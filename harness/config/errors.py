"""Configuration errors: every violation names the key, the value and the rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class Violation:
    """One broken rule: `key` (dotted, e.g. `gate.lambda_dir`), the offending value, the rule."""

    key: str
    value: Any
    rule: str

    def __str__(self) -> str:
        return f"{self.key} = {self.value!r}: {self.rule}"


class ConfigError(ValueError):
    """Invalid configuration. `violations` lists every broken rule (possibly one)."""

    def __init__(self, violations: Iterable[Violation] | str, *, header: str = "invalid configuration") -> None:
        if isinstance(violations, str):
            self.violations: tuple[Violation, ...] = ()
            message = violations
        else:
            self.violations = tuple(violations)
            lines = [f"  - {violation}" for violation in self.violations]
            count = len(self.violations)
            message = f"{header} ({count} problem{'s' if count != 1 else ''}):\n" + "\n".join(lines)
        super().__init__(message)

    @property
    def keys(self) -> list[str]:
        """The dotted keys named by the violations (empty for a free-text error)."""
        return [violation.key for violation in self.violations]
