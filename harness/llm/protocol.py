"""The one async provider protocol every LLM backend implements.

Messages and params in; text, token usage, USD cost and latency out. Every
call names its role, and the provider picks the role's model (falling back to
the shared default). `sample_index` is part of the request so that the same
prompt can be sampled again on purpose (the gate needs fresh samples) while a
re-run of the same work hits the response cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from harness.contracts.logprobs import TokenLogprob
from harness.contracts.roles import Role

__all__ = ["CacheableProvider", "ChatMessage", "LLMError", "LLMProvider", "LLMRequest", "LLMResponse", "LocalStoreError",
           "PreflightError", "Role", "StageStopError", "Usage", "sample_seed"]

# `seed` sent with a request: its sample index modulo a prime below 2**31 (llama.cpp and OpenAI take a 32-bit
# seed). Two sample indices less than SEED_MODULUS apart (every rollout sample of one gate) never share a seed.
SEED_MODULUS = 2**31 - 1


def sample_seed(sample_index: int) -> int:
    """The sampling seed of `sample_index`: distinct samples ask a seed-honouring server for distinct draws."""
    return int(sample_index) % SEED_MODULUS


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class LLMRequest:
    role: Role
    messages: tuple[ChatMessage, ...]
    params: tuple[tuple[str, Any], ...] = ()  # sorted (key, value) pairs: temperature, max_tokens, ...
    sample_index: int = 0

    @staticmethod
    def make(role: Role, messages: list[ChatMessage] | tuple[ChatMessage, ...], *, sample_index: int = 0, **params: Any) -> LLMRequest:
        return LLMRequest(role=Role(role), messages=tuple(messages), params=tuple(sorted(params.items())), sample_index=sample_index)

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMResponse:
    text: str
    model: str
    provider: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    replayed_usd: float = 0.0  # cached: what the reply cost when it was first paid (cost_usd is 0 now)
    logprobs: tuple[TokenLogprob, ...] | None = None  # per generated token, when the request asked for them


class StageStopError(RuntimeError):
    """Not an outcome of a rollout: the stage stops with this one-line message (the agent loop and the
    rollout runner re-raise it instead of recording an infrastructure failure)."""


class LocalStoreError(StageStopError):
    """A failure on our side of a call (the response cache file, the disk): never the model's failure.

    It is not an outcome of the rollout (not infra, not wrong): it aborts the
    stage, whose message names the file and the cause.
    """


class PreflightError(StageStopError):
    """The endpoint cannot serve the run (no API key, nothing listening, key refused, model not served): found by
    the preflight request before the first paid call (harness/llm/preflight.py)."""


class LLMError(RuntimeError):
    """A call that failed for good (after retries). `kind` says why.

    kinds: "timeout", "rate_limit", "server", "connection", "bad_response",
    "auth", "bad_request", "budget".
    """

    def __init__(self, kind: str, message: str, *, role: Role | None = None, model: str | None = None):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.role = role
        self.model = model

    @property
    def is_infra(self) -> bool:
        """Infrastructure failures are not evidence about the harness."""
        return self.kind in {"timeout", "rate_limit", "server", "connection", "bad_response"}


@runtime_checkable
class LLMProvider(Protocol):
    @property
    def name(self) -> str: ...  # read-only: a wrapper may derive it from the provider it wraps

    def model_for(self, role: Role) -> str: ...

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Return the response or raise LLMError. Never hangs past its timeout."""
        ...


@runtime_checkable
class CacheableProvider(LLMProvider, Protocol):
    """A provider whose replies the response cache may replay (harness/llm/cache.py)."""

    def request_identity(self, request: LLMRequest) -> dict[str, Any]:
        """Everything besides the messages and the sample index that decides the reply to `request`, as JSON data:
        `provider`, `endpoint` (which server or world answers; never a credential), `model`, and `params` (every
        sampling parameter as sent, the provider's defaults and the seed included). Two requests with equal
        identities, messages and sample index must be answered by the same distribution."""
        ...
