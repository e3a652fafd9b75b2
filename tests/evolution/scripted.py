"""A test-only LLMProvider that replays queued replies and records requests.

Like a text-only server it refuses `response_format` (bad_request), so the
structured-output probe settles on the text format without using a reply.
"""

from __future__ import annotations

from harness.llm.protocol import LLMError, LLMRequest, LLMResponse, Role, Usage


class ScriptedLLM:
    name = "scripted"

    def __init__(self, replies: list[str], usd_per_call: float = 0.01):
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []
        self.usd = usd_per_call

    def model_for(self, role: Role) -> str:
        return "scripted-model"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if "response_format" in request.params_dict:
            raise LLMError("bad_request", "scripted: response_format is not supported", role=request.role)
        self.requests.append(request)
        if not self.replies:
            raise AssertionError("ScriptedLLM ran out of replies")
        return LLMResponse(self.replies.pop(0), "scripted-model", self.name, Usage(1, 1), self.usd)
