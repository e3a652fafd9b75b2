"""`llm=openai`: any OpenAI-compatible server through the official SDK.

Works against hosted APIs and local servers (vLLM, llama.cpp server,
Ollama) via `llm.base_url`. The SDK's own retries are off so this module
owns the policy: per-attempt deadline `llm.timeout_s`; exponential backoff
with jitter on 429 / 5xx / timeouts / connection errors (`llm.max_retries`,
`llm.backoff_base_s`, `llm.backoff_max_s`); malformed bodies and empty
choice lists are `bad_response`, retried at most `MAX_BAD_RESPONSE_RETRIES`
times. Cost comes from `llm.prices`. The API key is read from the
environment only and never appears in a log line or an exception message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import ssl
import sys
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse, urlsplit

import httpx
import openai

from harness.contracts.logprobs import TokenLogprob, parse_logprobs
from harness.llm.backoff import backoff_delay, parse_retry_after
from harness.llm.client_ipc import RemoteAttemptError
from harness.llm.preflight import preflight
from harness.llm.prices import cost_usd, has_price, validate_prices
from harness.llm.protocol import LLMError, LLMRequest, LLMResponse, PreflightError, Role, StageStopError, Usage, sample_seed
from harness.llm.roles import check_role_names, model_for_role

if TYPE_CHECKING:
    from harness.llm.client_pool import ClientProcessPool

logger = logging.getLogger("harness.llm.openai")

MAX_BAD_RESPONSE_RETRIES = 2
# far beyond any context window or llm.max_tokens: a request or reply this large is a broken harness file or server
MAX_REQUEST_CHARS = 2_000_000
MAX_REPLY_CHARS = 1_000_000
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
LOCAL_DUMMY_KEY = "local-no-key"
RETRYABLE_KINDS = frozenset({"timeout", "rate_limit", "server", "connection"})
_MAX_MESSAGE_CHARS = 300
# httpcore's pool scans every connection for every queued request (quadratic in pool size), so
# in-flight requests are spread over several small client pools instead of one big one
REQUESTS_PER_CLIENT = 8
MAX_CLIENTS = 64
# with the SDK's aiohttp transport (`openai[aiohttp]`, i.e. httpx-aiohttp installed) one pool scales:
# it costs about half the client CPU per request of httpx/httpcore/anyio (reports/benchmarks/inference.md)
AIOHTTP_REQUESTS_PER_CLIENT = 1_000_000


def aiohttp_transport_available() -> bool:
    """True when the SDK's documented aiohttp HTTP client (`openai.DefaultAioHttpClient`) can be built."""
    try:
        import httpx_aiohttp  # noqa: F401  (the dependency of the `openai[aiohttp]` extra)
    except ImportError:
        return False
    return True


DEFAULT_ENDPOINT = "https://api.openai.com/v1"  # the SDK's endpoint when llm.base_url is null


def endpoint_identity(base_url: str | None) -> str:
    """Which server answers: `scheme://host:port/path` of `base_url` (lower-cased scheme and host, default port
    made explicit, no trailing slash). Credentials (user:password@), the query and the fragment are left out,
    so the identity (part of every cache key) can never hold a secret."""
    parts = urlsplit(base_url or DEFAULT_ENDPOINT)
    scheme = (parts.scheme or "http").lower()
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"llm.base_url: the port is not a number ({exc})") from None
    if not parts.hostname:
        raise ValueError("llm.base_url: expected an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")
    port = port or {"http": 80, "https": 443}.get(scheme)
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}{'' if port is None else f':{port}'}{parts.path.rstrip('/')}"


def is_local_base_url(base_url: str | None) -> bool:
    if not base_url:
        return False
    return (urlparse(base_url).hostname or "") in LOCAL_HOSTS


def resolve_api_key(llm_cfg: Any) -> str:
    """The key named by `llm.api_key_env`, read from the environment (or `.env` via config.secrets).

    A local base_url without a key gets a dummy key; any other missing key is
    an LLMError("auth") naming the variable (never its value).
    """
    from harness.config.secrets import get_api_key  # environment first, then .env

    env_name = getattr(llm_cfg, "api_key_env", None) or "OPENAI_API_KEY"
    key = get_api_key(llm_cfg, required=False)
    if key:
        return key
    base_url = getattr(llm_cfg, "base_url", None)
    if is_local_base_url(base_url):
        return LOCAL_DUMMY_KEY
    raise LLMError(
        "auth",
        f"environment variable {env_name} (llm.api_key_env) is not set; it must hold the API key for "
        f"{base_url or 'the default OpenAI endpoint'} (a local base_url such as http://127.0.0.1:8000/v1 needs no key)",
    )


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced, truncated for logs."""
    if secret and secret != LOCAL_DUMMY_KEY:
        text = text.replace(secret, "***")
    return text[:_MAX_MESSAGE_CHARS]


def describe_error(exc: BaseException) -> str:
    """One-line description of an attempt's exception (not yet redacted)."""
    if isinstance(exc, RemoteAttemptError):
        return exc.detail  # described (and redacted) in the client worker process
    return f"{type(exc).__name__}: {exc}"


def classify_error(exc: BaseException) -> tuple[str, float | None]:
    """(LLMError kind, Retry-After seconds or None) for an exception raised by one attempt."""
    if isinstance(exc, RemoteAttemptError):
        return exc.kind, exc.retry_after  # classified by this function in the client worker process
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        # the transport's own exception decides: httpx-aiohttp maps every aiohttp connection error
        # (refused connect, server disconnected) to httpx.ConnectTimeout, i.e. the SDK's APITimeoutError
        return _transport_kind(exc) or ("timeout" if isinstance(exc, openai.APITimeoutError) else "connection"), None
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", None  # our whole-attempt deadline
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = _retry_after_seconds(exc)
        if status == 429:
            return "rate_limit", retry_after
        if status in (401, 403):
            return "auth", None
        if status == 408:
            return "timeout", retry_after
        if status == 409 or status >= 500:
            return "server", retry_after
        return "bad_request", None
    if isinstance(exc, (json.JSONDecodeError, ValueError, openai.APIResponseValidationError)):
        return "bad_response", None
    return "bad_response", None


def _transport_kind(exc: BaseException) -> str | None:
    """"timeout" or "connection" from the innermost transport exception behind `exc` (None: nothing known).

    A timeout of the socket or of the server (asyncio/aiohttp timeouts, httpx's *Timeout raised by httpcore)
    is a timeout; any other connection failure (refused, reset, closed by the server, DNS) is a connection
    error, whatever exception the transport adapter wrapped it in."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(chain) < 12 and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    for inner in reversed(chain[1:]):  # the root cause first
        if isinstance(inner, (TimeoutError, asyncio.TimeoutError, httpx.TimeoutException)) and not _is_aiohttp_connection_error(inner):
            return "timeout"
        if isinstance(inner, (ConnectionError, OSError, httpx.NetworkError)) or _is_aiohttp_connection_error(inner):
            return "connection"
    return None


def _is_aiohttp_connection_error(exc: BaseException) -> bool:
    """An aiohttp connection failure that is not a timeout (aiohttp is optional: the httpx transport has none)."""
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return False
    return isinstance(exc, aiohttp.ClientConnectionError) and not isinstance(exc, aiohttp.ServerTimeoutError)


def _retry_after_seconds(exc: openai.APIStatusError) -> float | None:
    try:
        return parse_retry_after(exc.response.headers.get("retry-after"))
    except AttributeError:
        return None


def extract_completion(body: Any) -> tuple[str, Usage | None]:
    """(text, usage or None) of a chat-completion JSON body; ValueError naming what is wrong (token
    log-probabilities: `parse_logprobs(body["choices"][0])`)."""
    if not isinstance(body, dict):
        raise ValueError(f"response body is not a JSON object (got {type(body).__name__})")
    choices = body.get("choices")
    if not isinstance(choices, list):
        raise ValueError("response has no 'choices' list")
    if not choices:
        raise ValueError("response has an empty choice list")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ValueError("choices[0].message.content is missing or not a string")
    if len(content) > MAX_REPLY_CHARS:
        raise ValueError(f"choices[0].message.content holds {len(content):,} characters, more than the {MAX_REPLY_CHARS:,} "
                         "any reply may have (a server ignoring max_tokens?); not stored")
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return content, None
    try:
        return content, Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"response usage is malformed: {exc}") from exc


def build_client(api_key: str, base_url: str | None, timeout_s: float, transport: str, ssl_context: ssl.SSLContext) -> openai.AsyncOpenAI:
    """One `AsyncOpenAI` client with its own connection pool; the SDK's retries are off (ours are in `complete`)."""
    if transport == "aiohttp":
        http_client = openai.DefaultAioHttpClient(verify=ssl_context, timeout=timeout_s)
    else:
        http_client = openai.DefaultAsyncHttpxClient(verify=ssl_context, timeout=timeout_s)
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0, http_client=http_client)


async def post_chat_completion(client: openai.AsyncOpenAI, timeout_s: float, *, body: dict[str, Any] | None = None,
                               content: bytes | None = None) -> bytes:
    """One attempt: POST /chat/completions through the SDK under a whole-attempt deadline; the raw response body.

    `body` is the payload as a dict, `content` the same already serialised (client worker processes get bytes).
    Status errors, timeouts and connection errors are the SDK's exceptions, for `classify_error`.
    """
    async with asyncio.timeout(timeout_s):  # whole-attempt deadline (httpx's is per phase)
        # the SDK's documented low-level call (its status errors, headers, timeouts) with a plain JSON
        # payload and the raw response: skips create()'s TypedDict transform of the messages and the
        # model construction of the reply (milliseconds per call), extract_completion validates it
        response = await client.post("/chat/completions", body=body, content=content, cast_to=httpx.Response)
        return response.content


def client_processes_of(llm_cfg: Any) -> int:
    """`llm.client_processes` (1 when the key is absent): an integer >= 1, else ValueError naming the key."""
    value = getattr(llm_cfg, "client_processes", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"llm.client_processes must be an integer >= 1 (1 = the SDK runs in this process), got {value!r}")
    return value


def concurrency_of(llm_cfg: Any) -> int:
    """`llm.concurrency`: requests in flight at once, over every role and stage of the run (an integer >= 1)."""
    value = getattr(llm_cfg, "concurrency", None)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"llm.concurrency must be an integer >= 1 (requests in flight at once), got {value!r}")
    return value


def retry_after_max_of(llm_cfg: Any) -> float:
    """`llm.retry_after_max_s`: the longest Retry-After honoured, >= `llm.backoff_max_s` (ValueError naming the key)."""
    value = getattr(llm_cfg, "retry_after_max_s", None)
    backoff_max = float(llm_cfg.backoff_max_s)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= backoff_max:
        raise ValueError(f"llm.retry_after_max_s must be a number >= llm.backoff_max_s ({backoff_max}), got {value!r}")
    return float(value)


class RequestTooLargeError(StageStopError):
    """A request larger than MAX_REQUEST_CHARS: every call would carry it, so the stage stops (never sent, never paid)."""


def check_request_size(request: LLMRequest) -> None:
    """RequestTooLargeError naming the role, the size and the largest message when the request exceeds MAX_REQUEST_CHARS."""
    sizes = [len(m.content) for m in request.messages]
    if sum(sizes) <= MAX_REQUEST_CHARS:
        return
    largest = max(range(len(sizes)), key=sizes.__getitem__)
    role = request.messages[largest].role
    hint = (" (the system message is built from the harness files: system_prompt.md, tools/*.md and the skill file; "
            "shrink the largest of them)") if role == "system" else ""
    raise RequestTooLargeError(f"{request.role.value} request of {sum(sizes):,} characters exceeds {MAX_REQUEST_CHARS:,}; its "
                               f"largest message is the {role} message ({sizes[largest]:,} characters){hint}; nothing was sent")


class _LoopResources:
    """What one event loop owns: its client pools (in-process SDK) and its `llm.concurrency` request slots."""

    def __init__(self, loop: asyncio.AbstractEventLoop, concurrency: int):
        self.loop = loop
        self.slots = asyncio.Semaphore(concurrency)
        self.clients: list[openai.AsyncOpenAI] = []
        self.in_flight: list[int] = []
        self.closer: Any = None  # the async generator that closes the pools at the loop's shutdown
        self.preflight_lock = asyncio.Lock()  # the first requests of a loop wait for one preflight


class OpenAIProvider:
    """LLMProvider over `openai.AsyncOpenAI` with this module's retry policy."""

    name = "openai"

    def __init__(self, llm_cfg: Any, *, api_key: str | None = None, rng: random.Random | None = None, sleep=asyncio.sleep,
                 client_pool: ClientProcessPool | None = None, preflight: bool = True):
        """`client_pool`: worker processes to share (e.g. between providers of one process); the caller closes
        it, and its endpoint and timeout must be this config's. Without it, `llm.client_processes` > 1 starts
        a pool owned (and closed by `aclose`) by this provider. `preflight=False`: no endpoint check before the
        first call (a caller that checked already, or a test of how a single attempt fails)."""
        check_role_names(llm_cfg)
        self._cfg = llm_cfg
        self._prices = dict(getattr(llm_cfg, "prices", None) or {})
        validate_prices(self._prices)
        self._timeout_s = float(llm_cfg.timeout_s)
        if self._timeout_s <= 0:
            raise ValueError(f"llm.timeout_s must be > 0, got {self._timeout_s}")
        self._max_retries = int(llm_cfg.max_retries)
        if self._max_retries < 0:
            raise ValueError(f"llm.max_retries must be >= 0, got {self._max_retries}")
        self._backoff_base_s = float(llm_cfg.backoff_base_s)
        self._backoff_max_s = float(llm_cfg.backoff_max_s)
        self._api_key = api_key or resolve_api_key(llm_cfg)
        self._base_url = getattr(llm_cfg, "base_url", None) or None
        # base_url null: the SDK reads OPENAI_BASE_URL, else its default endpoint
        self.endpoint = endpoint_identity(self._base_url or os.environ.get("OPENAI_BASE_URL"))
        self.concurrency = concurrency_of(llm_cfg)
        self._retry_after_max_s = retry_after_max_of(llm_cfg)
        self._spare_clients: list[openai.AsyncOpenAI] = []
        self._res: _LoopResources | None = None
        self._ssl_context: ssl.SSLContext | None = None
        self.transport = "aiohttp" if aiohttp_transport_available() else "httpx"
        self._requests_per_client = AIOHTTP_REQUESTS_PER_CLIENT if self.transport == "aiohttp" else REQUESTS_PER_CLIENT
        self.client_processes = client_processes_of(llm_cfg)
        self._pool = client_pool
        self._owns_pool = False
        if client_pool is not None:
            if (client_pool.base_url, client_pool.timeout_s) != (self._base_url, self._timeout_s):
                raise ValueError(f"the shared client pool serves {client_pool.base_url} with timeout {client_pool.timeout_s} s, "
                                 f"but llm.base_url / llm.timeout_s are {self._base_url} / {self._timeout_s} s")
            self.client_processes = client_pool.n_processes
        elif self.client_processes > 1:  # the SDK's per-request CPU is spread over worker processes, started lazily
            from harness.llm.client_pool import ClientProcessPool

            self._pool = ClientProcessPool(self.client_processes, api_key=self._api_key, base_url=self._base_url,
                                           timeout_s=self._timeout_s, api_key_env=getattr(llm_cfg, "api_key_env", None))
            self._owns_pool = True
        else:
            self._spare_clients.append(self._new_client())  # first client now: its lazy imports take seconds on a busy machine
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._warned_no_price: set[str] = set()
        self._warned_no_usage: set[str] = set()
        self._preflight_passed = not preflight
        self._preflight_error: PreflightError | None = None

    def model_for(self, role: Role) -> str:
        return model_for_role(self._cfg, role)

    @property
    def client_pids(self) -> list[int]:
        """Process ids of the live client worker processes (empty when the SDK runs in this process)."""
        return self._pool.pids if self._pool is not None else []

    def _new_client(self) -> openai.AsyncOpenAI:
        if self._ssl_context is None:  # building one costs ~80 ms (CA bundle): share it between pools
            self._ssl_context = httpx.create_ssl_context()
        return build_client(self._api_key, self._base_url, self._timeout_s, self.transport, self._ssl_context)

    async def _loop_resources(self) -> _LoopResources:
        """The client pools and request slots of the running event loop, set up on its first call.

        Connections belong to the event loop that opened them, so each `asyncio.run` gets its own pools; they
        are closed when that loop shuts down (`_close_at_loop_end`), so no client session is ever left open."""
        loop = asyncio.get_running_loop()
        res = self._res
        if res is not None and res.loop is loop:
            return res
        res = _LoopResources(loop, self.concurrency)
        if self._spare_clients:  # built in __init__, before any loop: no connection opened yet
            res.clients, res.in_flight = self._spare_clients, [0] * len(self._spare_clients)
            self._spare_clients = []
        self._res = res
        res.closer = self._close_at_loop_end(res)
        await res.closer.__anext__()  # started: the loop's shutdown_asyncgens() (asyncio.run) finishes it
        return res

    async def _close_at_loop_end(self, res: _LoopResources):
        """An async generator held open while `res.loop` runs; `loop.shutdown_asyncgens()` closes it, and its
        `finally` closes the loop's client pools on that loop (asyncio.run and uvloop.run both call it)."""
        try:
            yield
        finally:
            await self._close_clients(res)

    async def _close_clients(self, res: _LoopResources) -> None:
        clients, res.clients, res.in_flight = res.clients, [], []
        if self._res is res:
            self._res = None
        for client in clients:
            await client.close()

    def _acquire_client(self, res: _LoopResources) -> int:
        """Index of the least busy client pool of `res`, opening a new one when all are full."""
        if res.in_flight:
            best = min(range(len(res.in_flight)), key=res.in_flight.__getitem__)
            if res.in_flight[best] < self._requests_per_client or len(res.clients) >= MAX_CLIENTS:
                res.in_flight[best] += 1
                return best
        res.clients.append(self._new_client())
        res.in_flight.append(1)
        return len(res.clients) - 1

    async def aclose(self) -> None:
        """Stop the client worker processes, or close the pools of the current event loop (a finished loop closed
        its own). The provider stays usable: a later call opens new pools / starts new workers."""
        if self._pool is not None:
            if self._owns_pool:
                await self._pool.aclose()
            return
        res = self._res
        if res is not None and res.loop is asyncio.get_running_loop():
            await self._close_clients(res)

    def sampling_params(self, request: LLMRequest) -> dict[str, Any]:
        """Every sampling parameter the request is sent with: `llm.temperature` / the role's max_tokens
        (`llm.max_tokens_by_role`, else `llm.max_tokens`) unless the request sets its own, and a `seed` from the
        sample index (distinct samples, distinct seeds) unless it sets one."""
        params: dict[str, Any] = {"temperature": float(self._cfg.temperature), "max_tokens": self._max_tokens(request.role.value),
                                  "seed": sample_seed(request.sample_index)}
        params.update(request.params_dict)
        return params

    def _max_tokens(self, role: str) -> int:
        by_role = self._cfg.max_tokens_by_role or {}
        return int(by_role[role]) if role in by_role else int(self._cfg.max_tokens)

    def request_identity(self, request: LLMRequest) -> dict[str, Any]:
        return {"provider": self.name, "endpoint": self.endpoint, "model": self.model_for(request.role),
                "params": self.sampling_params(request)}

    def _payload(self, request: LLMRequest, model: str) -> dict[str, Any]:
        return {"model": model, "messages": [m.to_dict() for m in request.messages], **self.sampling_params(request)}

    def configured_models(self) -> list[str]:
        """Every model this config can ask: `llm.model` and each `llm.models` entry."""
        models = {str(m) for m in (getattr(self._cfg, "models", None) or {}).values() if m}
        if getattr(self._cfg, "model", None):
            models.add(str(self._cfg.model))
        return sorted(models)

    async def check_endpoint(self) -> None:
        """The preflight (harness/llm/preflight.py), once per provider: before its first chat completion; a failure
        is remembered and raised again for every later call (PreflightError stops the stage)."""
        if self._preflight_passed:
            return
        if self._preflight_error is not None:
            raise self._preflight_error
        res = await self._loop_resources()
        async with res.preflight_lock:
            if self._preflight_passed:
                return
            if self._preflight_error is not None:
                raise self._preflight_error
            try:
                await preflight(self._base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT, self._api_key,
                                self.configured_models(), timeout_s=self._timeout_s, where=self.endpoint,
                                api_key_env=getattr(self._cfg, "api_key_env", None) or "OPENAI_API_KEY")
            except PreflightError as exc:  # its message never holds the key (preflight.py builds it without)
                self._preflight_error = exc
                raise
            self._preflight_passed = True

    async def _attempt(self, payload: dict[str, Any]) -> Any:
        """The JSON reply of one attempt, in this process or in a client worker process, holding one of the
        loop's `llm.concurrency` request slots while it is in flight (never while a retry waits)."""
        res = await self._loop_resources()
        async with res.slots:
            if self._pool is not None:
                return json.loads(await self._pool.post(json.dumps(payload).encode()))
            index = self._acquire_client(res)
            client = res.clients[index]
            try:
                return json.loads(await post_chat_completion(client, self._timeout_s, body=payload))
            finally:
                if index < len(res.in_flight) and res.clients[index] is client:
                    res.in_flight[index] -= 1

    async def complete(self, request: LLMRequest) -> LLMResponse:
        check_request_size(request)
        await self.check_endpoint()
        model = self.model_for(request.role)
        payload = self._payload(request, model)
        started = time.perf_counter()
        attempt = 0
        bad_responses = 0
        while True:
            kind: str
            retry_after: float | None = None
            try:
                completion = await self._attempt(payload)
                text, usage = extract_completion(completion)
                logprobs = parse_logprobs(completion["choices"][0]) if payload.get("logprobs") else None
                return self._response(text, usage, model, request, started, logprobs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # classified below; nothing escapes unclassified
                kind, retry_after = classify_error(exc)
                detail = redact(describe_error(exc), self._api_key)
                status = getattr(exc, "status_code", None)
            retryable = kind in RETRYABLE_KINDS or (kind == "bad_response" and bad_responses < min(MAX_BAD_RESPONSE_RETRIES, self._max_retries))
            if kind == "bad_response":
                bad_responses += 1
            if kind == "bad_request" and status == 404:  # no such route (a base URL without /v1) or no such model
                detail += (f" (HTTP 404 from {self.endpoint}: check llm.base_url, which OpenAI-compatible servers usually "
                           "serve under /v1, e.g. http://127.0.0.1:8080/v1, and llm.model / llm.models)")
            elif kind == "bad_request" and payload.get("logprobs"):
                detail += (f" (the request asked for token log-probabilities, llm.top_logprobs={payload.get('top_logprobs')}; "
                           "set llm.top_logprobs=0 if this server or model does not return them)")
            if not retryable or attempt >= self._max_retries:
                logger.warning("%s call to model %s failed for good after %d attempt(s): %s", request.role.value, model, attempt + 1, detail)
                raise LLMError(kind, f"{request.role.value} call to model {model!r} failed after {attempt + 1} attempt(s): {detail}", role=request.role, model=model)
            delay = backoff_delay(attempt, base_s=self._backoff_base_s, max_s=self._backoff_max_s, rng=self._rng, retry_after_s=retry_after,
                                  retry_after_max_s=self._retry_after_max_s)
            logger.info("%s call to model %s: %s (%s); retry %d/%d in %.2fs", request.role.value, model, kind, detail, attempt + 1, self._max_retries, delay)
            attempt += 1
            await self._sleep(delay)

    def _response(self, text: str, usage: Usage | None, model: str, request: LLMRequest, started: float,
                  logprobs: tuple[TokenLogprob, ...] | None = None) -> LLMResponse:
        if usage is None:
            if model not in self._warned_no_usage:
                self._warned_no_usage.add(model)
                logger.warning("model %s returned no token usage; tokens and cost are recorded as 0", model)
            usage = Usage()
        if self._prices and not has_price(self._prices, model) and model not in self._warned_no_price:
            self._warned_no_price.add(model)
            logger.warning("llm.prices has no entry for model %s; its calls paid now are recorded at 0 USD (replies replayed from the cache keep the price they were paid at)", model)
        return LLMResponse(
            text=text,
            model=model,
            provider=self.name,
            usage=usage,
            cost_usd=cost_usd(self._prices, model, usage),
            latency_s=time.perf_counter() - started,
            logprobs=logprobs,
        )
