"""Ledger of a round's rollouts and sessions, and the hard budget gates.

- k <= 3 (`check_k`), and at most 1 base + 2k candidates + k finals
  executions per round (<= 10), the same cap in both modes.
- `budget_usd` and `max_sessions` are hard gates: once the spend reaches
  the budget or the session count reaches the cap, the gate *trips* and
  stays tripped; no further editor or probe call is allowed, the remaining
  stages fall back, and the round is not written to the library.
- Sessions counted against `max_sessions` (seed 002): probes + editor stage
  attempts (first try and the validator revision). The format retry inside
  one edit (`.fmt2`), selection and reflection are recorded in the ledger
  but not counted; they are paid all the same, so each asks the gate first
  (`allow_session`): none is made once the gate has tripped or the spend has
  reached the budget. No paid call of any role follows a trip.
- Every ledger label is unique; duplicates are detected before any count
  is reported (a duplicate means the same work was booked twice).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAX_K = 3
MAX_EXECUTIONS_PER_ROUND = 10

ROLLOUT = "rollout"
SESSION = "session"


def check_k(k: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValueError(f"h2 k must be an integer in 1..{MAX_K} (got {k!r}); k > {MAX_K} exceeds the 10-execution round cap")
    return k


def executions_for(k: int) -> int:
    """1 base + 2k candidate probes + k finals."""
    n = 1 + 3 * check_k(k)
    assert n <= MAX_EXECUTIONS_PER_ROUND
    return n


class DuplicateLabelError(ValueError):
    pass


@dataclass(frozen=True)
class LedgerEntry:
    kind: str  # ROLLOUT | SESSION
    label: str
    role: str
    usd: float
    counted: bool = True  # counts against max_sessions (sessions) / the execution cap (rollouts)
    detail: str = ""


@dataclass
class Ledger:
    entries: list[LedgerEntry] = field(default_factory=list)

    def record(self, kind: str, label: str, role: str, usd: float, *, counted: bool = True, detail: str = "") -> LedgerEntry:
        if kind not in (ROLLOUT, SESSION):
            raise ValueError(f"ledger kind must be {ROLLOUT!r} or {SESSION!r}, got {kind!r}")
        if any(e.label == label for e in self.entries):
            raise DuplicateLabelError(f"ledger label {label!r} is already booked; every execution and session needs its own label")
        entry = LedgerEntry(kind, label, role, float(usd), counted, detail)
        self.entries.append(entry)
        return entry

    def duplicates(self) -> list[str]:
        return sorted(label for label, n in Counter(e.label for e in self.entries).items() if n > 1)

    def _checked(self) -> list[LedgerEntry]:
        dups = self.duplicates()
        if dups:
            raise DuplicateLabelError(f"duplicate ledger labels {dups}; counts would be wrong")
        return self.entries

    @property
    def total_usd(self) -> float:
        return sum(e.usd for e in self.entries)

    def summary(self) -> dict[str, Any]:
        entries = self._checked()
        rollouts = [e for e in entries if e.kind == ROLLOUT]
        sessions = [e for e in entries if e.kind == SESSION]
        return {
            "rollouts": len(rollouts),
            "sessions": len(sessions),
            "counted_sessions": sum(1 for e in sessions if e.counted),
            "rollout_usd": sum(e.usd for e in rollouts),
            "session_usd": sum(e.usd for e in sessions),
            "total_usd": sum(e.usd for e in entries),
        }

    def to_list(self) -> list[dict[str, Any]]:
        return [dict(e.__dict__) for e in self.entries]


@dataclass
class BudgetGate:
    """Hard gates over one round. `allow_*` returns False (and trips) once a cap is reached."""

    ledger: Ledger
    budget_usd: float | None = None
    max_sessions: int | None = None
    max_executions: int = MAX_EXECUTIONS_PER_ROUND
    tripped: str | None = None  # why the gate closed (sticky)
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ValueError(f"budget_usd must be >= 0, got {self.budget_usd}")
        if self.max_sessions is not None and self.max_sessions < 0:
            raise ValueError(f"max_sessions must be >= 0, got {self.max_sessions}")
        if self.max_executions > MAX_EXECUTIONS_PER_ROUND:
            raise ValueError(f"max_executions {self.max_executions} exceeds the round cap {MAX_EXECUTIONS_PER_ROUND}")

    def _counted(self, kind: str) -> int:
        return sum(1 for e in self.ledger.entries if e.kind == kind and e.counted)

    def _check(self) -> str | None:
        spent = self.ledger.total_usd
        if self.budget_usd is not None and spent >= self.budget_usd:
            return f"budget_usd {self.budget_usd:.4f} reached (spent {spent:.4f})"
        if self.max_sessions is not None and self._counted(SESSION) + self._counted(ROLLOUT) - self._counted_base() >= self.max_sessions:
            return f"max_sessions {self.max_sessions} reached"
        return None

    def _counted_base(self) -> int:
        # the base rollout is not a probe session
        return sum(1 for e in self.ledger.entries if e.kind == ROLLOUT and e.counted and e.role == "base")

    def allow(self, what: str, *, execution: bool = False) -> bool:
        """May the next editor/probe call (`what`, for the record) be made?"""
        if self.tripped is None:
            self.tripped = self._check()
        if self.tripped is None and execution and self._counted(ROLLOUT) >= self.max_executions:
            self.tripped = f"execution cap {self.max_executions} reached"
        if self.tripped is not None:
            self.refused.append(f"{what}: {self.tripped}")
            return False
        return True

    def allow_session(self, what: str, pending_usd: float = 0.0) -> bool:
        """May a paid session that does not count against `max_sessions` (selector, reflector, the format retry) be
        made? No once the gate has tripped (sticky), or when the spend so far plus `pending_usd` (an edit's cost not
        booked yet) has reached `budget_usd` (that trips it)."""
        spent = self.ledger.total_usd + pending_usd
        if self.tripped is None and self.budget_usd is not None and spent >= self.budget_usd:
            self.tripped = f"budget_usd {self.budget_usd:.4f} reached (spent {spent:.4f})"
        if self.tripped is not None:
            self.refused.append(f"{what}: {self.tripped}")
            return False
        return True

    def note_spend(self) -> None:
        """Re-check after a call was booked (a call can push the spend over the budget)."""
        if self.tripped is None and self.budget_usd is not None and self.ledger.total_usd > self.budget_usd:
            self.tripped = f"budget_usd {self.budget_usd:.4f} exceeded (spent {self.ledger.total_usd:.4f})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_usd": self.budget_usd,
            "max_sessions": self.max_sessions,
            "max_executions": self.max_executions,
            "tripped": self.tripped,
            "refused": list(self.refused),
        }


# ---------------------------------------------------------------- a stated budget for a whole improve run


def planned_llm_calls(tasks: int, k: int, n_modes: int, questions_per_task: int, judge: bool) -> tuple[int, int]:
    """(solver calls, editor-sized calls) a sweep of the sim executor makes at most, counting one agent call per
    question: every execution (1 base shared by the modes, then 3k per mode) answers each question of its task; per
    mode 3k editor sessions, each with at most one revision and one format retry, a selector and a reflector call;
    two judge calls (delivered and base deliverable) per task and mode."""
    executions = executions_for(k) + (n_modes - 1) * (executions_for(k) - 1)
    sessions = n_modes * (3 * check_k(k) * 3 + 2 + (2 if judge else 0))
    return tasks * executions * questions_per_task, tasks * sessions


@dataclass(frozen=True)
class CallRate:
    """Seconds per call measured on the configured server, for a solver-sized and an editor-sized reply."""

    solver_s: float
    editor_s: float

    def seconds(self, solver_calls: int, editor_calls: int) -> float:
        return solver_calls * self.solver_s + editor_calls * self.editor_s


class BudgetedProvider:
    """An LLMProvider that refuses every call (LLMError kind "budget") once `max_calls` calls were made or
    `max_seconds` passed since it was built; the Harness² roles treat a refused call as a failed one (the editor
    falls back, a probe is dead, the judge leaves the task ungraded), so the rounds still finish and are recorded."""

    def __init__(self, inner: Any, *, max_calls: int | None = None, max_seconds: float | None = None,
                 clock: Any = None):
        import time

        self.inner = inner
        self.name = inner.name
        self.structured_output = getattr(inner, "structured_output", None)
        self.max_calls, self.max_seconds = max_calls, max_seconds
        self._clock = clock or time.monotonic
        self._started = self._clock()
        self.calls = 0
        self.refused = 0
        self.tripped: str | None = None

    def model_for(self, role: Any) -> str:
        return self.inner.model_for(role)

    def elapsed(self) -> float:
        return self._clock() - self._started

    def _check(self) -> str | None:
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"improve.max_llm_calls = {self.max_calls} reached"
        if self.max_seconds is not None and self.elapsed() >= self.max_seconds:
            return f"improve.max_minutes = {self.max_seconds / 60:g} reached"
        return None

    async def complete(self, request: Any) -> Any:
        from harness.llm.protocol import LLMError

        self.tripped = self.tripped or self._check()
        if self.tripped is not None:
            self.refused += 1
            raise LLMError("budget", f"Harness² budget: {self.tripped}; call refused", role=request.role)
        self.calls += 1
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()
