"""The preflight of `llm=openai`: one request that checks the endpoint before the first paid call.

`require_api_key` runs before any stage work (stages.train, every DVC stage that reads `llm`): a missing key is
one line naming the variable. `preflight` is `GET <base_url>/models`, sent by the provider before its first
chat completion in a process (a fully cached run never contacts the server, so a resume from the cache still
works with the server gone). It names, in one line, what makes the endpoint unusable:

- nothing listening at the URL (a refused connection is said as such, never as a timeout), a host that cannot
  be resolved, no answer within `llm.timeout_s`;
- the key refused (HTTP 401 / 403);
- a model of `llm.model` / `llm.models` the server does not serve, with the server's own list.

The URL is shown as its endpoint identity (scheme, host, port, path: never credentials or a query). A server
without `/models` (404, 405, 501) or with a server error there is not refused: the first completion will tell.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from harness.llm.protocol import LLMError, PreflightError

logger = logging.getLogger("harness.llm.preflight")

_NO_MODEL_LIST = frozenset({404, 405, 501})
_MAX_LISTED = 20


def require_api_key(llm_cfg: Any) -> None:
    """PreflightError naming `llm.api_key_env` when `llm=openai` has no API key (nothing to check for `sim`)."""
    if str(getattr(llm_cfg, "provider", "")) != "openai":
        return
    from harness.llm.openai_provider import resolve_api_key

    try:
        resolve_api_key(llm_cfg)
    except LLMError as exc:
        raise PreflightError(str(exc).removeprefix(f"[{exc.kind}] ")) from None


def models_url(base_url: str) -> str:
    """`<base_url>/models`, keeping the base URL's query (the SDK sends it with every request)."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/models", parts.query, ""))


def served_models(body: Any) -> list[str] | None:
    """The model ids of a `/models` reply (`{"data": [{"id": ...}, ...]}`), None when it is not that shape."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    ids = [str(item["id"]) for item in data if isinstance(item, dict) and item.get("id") is not None]
    return ids if ids or not data else None


def _connect_failure(exc: BaseException, where: str) -> str:
    """One line for a failed connection: refused, unknown host, or the transport's own words."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain and len(chain) < 12:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for inner in chain:
        if isinstance(inner, ConnectionRefusedError) or getattr(inner, "errno", None) == errno.ECONNREFUSED:
            return f"nothing is listening at {where} (connection refused): start the server or fix llm.base_url"
        if isinstance(inner, socket.gaierror):
            return f"cannot resolve the host of {where} ({inner.strerror or inner}): fix llm.base_url"
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower():
        return f"nothing is listening at {where} (connection refused): start the server or fix llm.base_url"
    return f"cannot connect to {where} ({type(exc).__name__}: {text[:200]}): check the server and llm.base_url"


async def preflight(base_url: str, api_key: str, models: Iterable[str], *, timeout_s: float, where: str,
                    api_key_env: str = "OPENAI_API_KEY") -> list[str] | None:
    """Check the endpoint with one `GET <base_url>/models`; the served model ids (None: the server lists none).

    Raises PreflightError with one line (see the module doc). `where` is how the URL is shown (no secrets)."""
    wanted = sorted(set(models))
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            reply = await asyncio.wait_for(client.get(models_url(base_url), headers={"Authorization": f"Bearer {api_key}"}),
                                           timeout_s)
    except (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError):
        raise PreflightError(f"{where} did not answer GET /models within llm.timeout_s={timeout_s:g} s: "
                             "check that the server is up and not overloaded") from None
    except (httpx.HTTPError, OSError) as exc:
        raise PreflightError(_connect_failure(exc, where)) from None
    status = reply.status_code
    if status in (401, 403):
        raise PreflightError(f"{where} refused the API key (HTTP {status} on GET /models): check the key in "
                             f"{api_key_env} (llm.api_key_env)")
    if status in _NO_MODEL_LIST or status >= 500 or status != 200:
        logger.info("preflight: GET %s/models answered HTTP %d; the model list is not checked", where, status)
        return None
    try:
        served = served_models(reply.json())
    except (json.JSONDecodeError, ValueError):
        served = None
    if served is None:
        logger.info("preflight: GET %s/models is not a model list; the model list is not checked", where)
        return None
    missing = [m for m in wanted if m not in served]
    if missing:
        shown = ", ".join(served[:_MAX_LISTED]) + (f", ... ({len(served)} in all)" if len(served) > _MAX_LISTED else "")
        raise PreflightError(f"{where} does not serve model {', '.join(repr(m) for m in missing)} "
                             f"(llm.model / llm.models); it serves: {shown or 'no model'}")
    return served
