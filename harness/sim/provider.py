"""`SimProvider`: the simulated world behind the real `LLMProvider` protocol.

Routing: a system message that contains the solver protocol section
(harness/contracts/solver.py) is a solver/probe call; otherwise the system
message's `FORMAT: <name>` line picks the role handler (harness/sim/roles.py).
A request that is neither raises `LLMError("bad_request")` naming what was
expected. Usage is counted as chars/4; cost comes from `llm.prices`
(USD per million tokens, default 0).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from typing import Any

from harness.contracts.logprobs import TokenLogprob
from harness.contracts.solver import PROTOCOL_HEAD, question_text_of
from harness.llm.protocol import LLMError, LLMRequest, LLMResponse, Role, Usage

from .roles import HANDLERS, stream_for
from .solver import SolverModel, render_solver_reply
from .world import World

_FORMAT = re.compile(r"^FORMAT:\s*([A-Za-z0-9_\-]+)\s*$", re.MULTILINE)


class SimProvider:
    """Answers every role from the world's hidden truth. Stateless apart from parse caches."""

    name = "sim"
    structured_output = False  # answers the text formats only: reply_format_of takes "text" without a probe call

    def __init__(self, world: World, cfg: Any = None):
        self.world = world
        self.cfg = cfg
        self.solver = SolverModel(world)
        self._models: dict[str, str] = dict(getattr(cfg, "models", None) or {})
        self._default_model = str(getattr(cfg, "model", None) or "sim-solver-1")
        self._prices: dict[str, dict[str, float]] = {k: dict(v) for k, v in (getattr(cfg, "prices", None) or {}).items()}
        params = json.dumps(dataclasses.asdict(world.params), sort_keys=True, default=str)
        # which world answers: its seed and generation parameters (another world is another cache key)
        self.endpoint = f"sim://world/{world.seed}/{hashlib.sha256(params.encode()).hexdigest()[:16]}"

    def model_for(self, role: Role) -> str:
        return self._models.get(Role(role).value, self._default_model)

    def request_identity(self, request: LLMRequest) -> dict[str, Any]:
        # the world reads no sampling parameter but the sample index: the request's own params are all there is
        return {"provider": self.name, "endpoint": self.endpoint, "model": self.model_for(request.role), "params": request.params_dict}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        text, logprobs = self._answer(request)
        model = self.model_for(request.role)
        prompt_chars = sum(len(m.content) for m in request.messages)
        usage = Usage(prompt_tokens=prompt_chars // 4, completion_tokens=len(text) // 4)
        price = self._prices.get(model)
        cost = 0.0
        if price:
            cost = (usage.prompt_tokens * float(price.get("input", 0.0)) + usage.completion_tokens * float(price.get("output", 0.0))) / 1e6
        return LLMResponse(text=text, model=model, provider=self.name, usage=usage, cost_usd=cost, latency_s=time.perf_counter() - started,
                           logprobs=logprobs)

    def reply(self, request: LLMRequest) -> str:
        return self._answer(request)[0]

    def _answer(self, request: LLMRequest) -> tuple[str, tuple[TokenLogprob, ...] | None]:
        """(reply text, token log-probabilities when the request asks for them: `logprobs` true, solver replies only)."""
        messages = request.messages
        if not messages or messages[0].role != "system":
            raise LLMError("bad_request", "sim provider: the first message must be the system message", role=request.role)
        system = messages[0].content
        if PROTOCOL_HEAD in system:
            return self._solve(request)
        m = _FORMAT.search(system)
        if not m:
            raise LLMError("bad_request", "sim provider: system message has neither the solver protocol nor a 'FORMAT: <name>' line", role=request.role)
        handler = HANDLERS.get(m.group(1))
        if handler is None:
            raise LLMError("bad_request", f"sim provider: unknown FORMAT {m.group(1)!r}; expected one of {sorted(HANDLERS)}", role=request.role)
        text = handler(self.world, messages, stream_for(self.world, m.group(1), messages, request.sample_index))
        return text, (_plain_logprobs(text) if request.params_dict.get("logprobs") else None)

    def _solve(self, request: LLMRequest) -> tuple[str, tuple[TokenLogprob, ...] | None]:
        messages = request.messages
        if len(messages) < 2:
            raise LLMError("bad_request", "sim solver: expected a user message with the question", role=request.role)
        text = question_text_of(messages[1].content)
        qid = self.world.qid_by_text.get(text) if text is not None else None
        if qid is None:
            raise LLMError("bad_request", f"sim solver: question not in the world (seed {self.world.seed}): {(text or messages[1].content)[:80]!r}", role=request.role)
        read = self.solver.read(messages[0].content)
        draw = self.solver.draw(read, qid, request.sample_index)
        first_turn = not any(m.role == "assistant" for m in messages[2:])
        text = render_solver_reply(draw, first_turn, read.tools[0] if read.tools else None, qid)
        params = request.params_dict
        if not params.get("logprobs"):
            return text, None
        if not text.endswith(f"ANSWER: {draw.letter}"):  # a tool call: no answer letter in this reply
            return text, _plain_logprobs(text)
        dist = self.solver.letter_distribution(read, qid, request.sample_index, draw)
        top_k = max(1, int(params.get("top_logprobs") or 1))
        top = tuple((letter, math.log(p) if p > 0 else -math.inf) for letter, p in sorted(dist.items(), key=lambda kv: -kv[1])[:top_k])
        chosen = dist[draw.letter]
        return text, (TokenLogprob(text[:-1], 0.0), TokenLogprob(draw.letter, math.log(chosen) if chosen > 0 else -math.inf, top))


def _plain_logprobs(text: str) -> tuple[TokenLogprob, ...]:
    """A reply without an answer letter as one token the world states with certainty."""
    return (TokenLogprob(text, 0.0),)
