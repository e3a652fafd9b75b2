"""What a stage's LLM calls cost, per role: `MeteredProvider` counts every reply that passes through it.

Every role is counted (solver, diagnoser, editor, selector, reflector, judge, probe), whether the reply
came from the server or from the response cache. `usd` is the cost of the work: a replayed reply counts
at the price it was paid when it was first stored (`LLMResponse.replayed_usd`), so a run resumed from the
cache reports the same USD as an uninterrupted one; `usd_paid` is what this execution paid. `seconds` is the
wall time this execution waited for the replies (a replayed reply: the cache lookup), summed over calls that may
overlap (`llm.concurrency`): a measurement of the execution, so the run report shows it outside its
deterministic part (reports/timing.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.llm.protocol import LLMRequest, LLMResponse, Role

SPEND_FILE = "llm_spend.json"


@dataclass
class RoleSpend:
    calls: int = 0  # replies received (from the server or the cache)
    replayed: int = 0  # of which answered by the response cache
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0  # cost of the calls (replayed ones at their original price)
    usd_paid: float = 0.0  # paid by this execution
    seconds: float = 0.0  # summed reply latency of this execution (replayed replies: the cache lookup)

    def add(self, other: RoleSpend) -> None:
        self.seconds = math.fsum((self.seconds, other.seconds))
        self.calls += other.calls
        self.replayed += other.replayed
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.usd = math.fsum((self.usd, other.usd))
        self.usd_paid = math.fsum((self.usd_paid, other.usd_paid))


@dataclass
class StageSpend:
    """role name -> RoleSpend of one stage (JSON: `{"roles": {role: {...}}}`)."""

    roles: dict[str, RoleSpend] = field(default_factory=dict)

    @property
    def usd(self) -> float:
        return math.fsum(r.usd for r in self.roles.values())

    def add(self, other: StageSpend) -> None:
        for role, spend in other.roles.items():
            self.roles.setdefault(role, RoleSpend()).add(spend)

    def to_json(self) -> dict[str, Any]:
        return {"roles": {role: asdict(spend) for role, spend in sorted(self.roles.items())}}

    @classmethod
    def from_json(cls, data: Any, *, where: str) -> StageSpend:
        """From `to_json` output; ValueError naming `where` and the field when the document is malformed."""
        roles = data.get("roles") if isinstance(data, dict) else None
        if not isinstance(roles, dict):
            raise ValueError(f"{where}: expected an object with a 'roles' mapping")
        known = {r.value for r in Role}
        out = cls()
        for role, fields in roles.items():
            if role not in known:
                raise ValueError(f"{where}: roles.{role}: unknown role; expected one of {sorted(known)}")
            try:
                out.roles[role] = RoleSpend(**fields)
            except TypeError as exc:
                raise ValueError(f"{where}: roles.{role}: {exc}") from None
        return out


class MeteredProvider:
    """An LLMProvider that counts what every reply cost, per role, and passes everything else through.

    `take()` returns the spend since the previous `take()` (one stage's calls: stages run one after another
    on a context) and starts a new count.
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = inner.name
        self.structured_output = getattr(inner, "structured_output", None)  # a declared capability passes through
        self._spend = StageSpend()

    def model_for(self, role: Role) -> str:
        return self.inner.model_for(role)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        response = await self.inner.complete(request)
        self.record(Role(request.role), response)
        return response

    async def complete_overhead(self, request: LLMRequest) -> LLMResponse:
        """A call each process makes once whatever the run's work (the reply-format probe, harness/evolution/ask.py):
        not the run's work, so it adds only to what this execution paid and waited (`usd_paid`, `seconds`), never to
        calls, tokens or `usd`: a run split over processes (a resume, one process a DVC stage) reports the same work
        as the same run in one process, and a replayed run the same as the first."""
        response = await self.inner.complete(request)
        spend = self._spend.roles.setdefault(Role(request.role).value, RoleSpend())
        spend.add(RoleSpend(usd_paid=float(response.cost_usd), seconds=float(response.latency_s)))
        return response

    def record(self, role: Role, response: LLMResponse) -> None:
        spend = self._spend.roles.setdefault(role.value, RoleSpend())
        spend.add(RoleSpend(calls=1, replayed=int(response.cached), prompt_tokens=response.usage.prompt_tokens,
                            completion_tokens=response.usage.completion_tokens,
                            usd=float(response.replayed_usd if response.cached else response.cost_usd),
                            usd_paid=float(response.cost_usd), seconds=float(response.latency_s)))

    def take(self) -> StageSpend:
        spend, self._spend = self._spend, StageSpend()
        return spend

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()
