"""The `openai` model backend: any OpenAI-compatible chat-completions endpoint.

vLLM and llama.cpp servers, SGLang, hosted APIs. Every call has a wall-clock limit; 429 and
5xx answers, dropped connections and timeouts are retried with exponential backoff (honouring
Retry-After), and so are answers that are not a chat completion (every field is checked before
use: clawsdk.models.completion); what still fails raises ModelError, which the runner retries and records as
unscored. Calls to one model share a named concurrency limit.

A conversation that no longer fits the server's context window (HTTP 400, in vLLM's, OpenAI's,
llama.cpp's or SGLang's words) raises ContextOverflow: the agent's failure once the conversation
holds its turns, so an agent cannot make its failure unscored by reading until it overflows. When
only `max_tokens` was too generous, the call is made again with what the window leaves.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import secrets
from typing import Any
from urllib.parse import urlparse

import anyio
from anyio.lowlevel import RunVar, current_token

from clawsdk.errors import ContextOverflow, ModelError
from clawsdk.hookspecs import hookimpl
from clawsdk.models import completion, toolcalls
from clawsdk.models.base import ChatResponse, Model
from clawsdk.models.completion import MalformedAnswer
from clawsdk.runtime.concurrency import report_model_status

try:  # mcp 2.x depends on httpx2; plain httpx has the same API
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_ENV = ("CLAWSDK_OPENAI_KEY", "OPENAI_API_KEY")
BASE_URL_ENV = ("CLAWSDK_OPENAI_BASE_URL", "OPENAI_BASE_URL")
RETRY_STATUS = {408, 409, 425, 429}
#: connections (and requests in flight) per HTTP connection pool; see OpenAIModel._http
POOL_SIZE = 16
SENT_PARAMS = ("max_tokens", "temperature", "top_p", "stop", "seed", "n", "presence_penalty",
               "frequency_penalty")

_LIMITERS: RunVar[dict[str, anyio.CapacityLimiter]] = RunVar("clawsdk_model_limiters")


def model_slots(name: str, capacity: int) -> anyio.CapacityLimiter:
    """The concurrency limit named `name` in this event loop (shared by every model of that name)."""
    try:
        table = _LIMITERS.get()
    except LookupError:
        table = {}
        _LIMITERS.set(table)
    limiter = table.get(name)
    if limiter is None:
        limiter = table[name] = anyio.CapacityLimiter(capacity)
    elif limiter.total_tokens < capacity:
        limiter.total_tokens = capacity
    return limiter


def _first_env(names: tuple[str, ...]) -> str | None:
    for n in names:
        if os.environ.get(n):
            return os.environ[n]
    return None


def normalize_base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"--base-url {url!r} is not an http(s) URL; give e.g. http://127.0.0.1:8000/v1")
    return url


class OpenAIModel(Model):
    """A model behind an OpenAI-compatible /chat/completions endpoint.

    tool_format: "native" sends tools in the request (the server's parser returns
    tool_calls; calls it leaves in the text are still found by the tool-loop agent);
    "clawsdk" renders tools into the system prompt in clawsdk's format and parses the text,
    for servers started without a tool parser.
    """

    def __init__(self, name: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0, retries: int = 4, backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 concurrency: int = 8, limit: str | None = None, tool_format: str = "native",
                 logprobs: bool = False, token_ids: bool = False, extra_body: dict | None = None,
                 headers: dict | None = None, context_window: int | None = None):
        if not name:
            raise ValueError("the openai backend needs a model name: --model openai:NAME "
                             "(the name the server knows, e.g. openai:Qwen/Qwen2.5-7B-Instruct)")
        if tool_format not in ("native", "clawsdk"):
            raise ValueError(f"tool_format must be 'native' or 'clawsdk', not {tool_format!r}")
        if concurrency < 1 or retries < 0 or timeout_s <= 0:
            raise ValueError("concurrency must be >= 1, retries >= 0 and timeout_s > 0")
        self.model_name = name
        self.name = f"openai:{name}"
        #: the server's window in tokens (vLLM's max_model_len): given, or learnt from its first overflow
        self.context_window = int(context_window) if context_window else None
        self.base_url = normalize_base_url(base_url or _first_env(BASE_URL_ENV) or DEFAULT_BASE_URL)
        self.api_key = api_key or _first_env(KEY_ENV)
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.concurrency = int(concurrency)
        self.limit_name = limit or f"{self.name}@{self.base_url}"
        self.tool_format = tool_format
        self.logprobs = logprobs
        self.token_ids = token_ids
        self.extra_body = dict(extra_body or {})
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        if self.api_key:
            self.headers["Authorization"] = f"Bearer {self.api_key}"
        host = urlparse(self.base_url).hostname or ""
        # a proxy from the environment must not swallow calls to a server on this machine
        self._trust_env = host not in ("127.0.0.1", "localhost", "::1")
        self._client: list[Any] | None = None
        self._client_token: Any = None
        self._next = 0

    def _http(self) -> Any:
        token = current_token()
        if self._client is None or self._client_token != token:
            # One connection pool scans all its queued requests and connections whenever a request
            # comes or goes, so a single pool under 1,000 concurrent calls spends its time there
            # (and httpx's default 100 connections queue the rest): pools of POOL_SIZE, round robin.
            n = max(1, -(-self.concurrency // POOL_SIZE))
            limits = httpx.Limits(max_connections=POOL_SIZE, max_keepalive_connections=POOL_SIZE)
            timeout = httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s))
            # one TLS context for all of them: loading the CA store costs tens of ms per client
            tls = httpx.create_ssl_context(trust_env=self._trust_env)
            self._client = [httpx.AsyncClient(timeout=timeout, limits=limits, verify=tls, trust_env=self._trust_env)
                            for _ in range(n)]
            self._client_token = token
            self._next = 0
        self._next = (self._next + 1) % len(self._client)
        return self._client[self._next]

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                     params: dict[str, Any]) -> dict[str, Any]:
        if self.tool_format == "clawsdk":
            body: dict[str, Any] = {"model": self.model_name, "messages": toolcalls.render_messages(messages, tools)}
        else:
            body = {"model": self.model_name, "messages": messages}
            if tools:
                body["tools"] = tools
                if params.get("tool_choice"):
                    body["tool_choice"] = params["tool_choice"]
        for key in SENT_PARAMS:
            if params.get(key) is not None:
                body[key] = params[key]
        if params.get("logprobs", self.logprobs):
            body["logprobs"] = True
        if params.get("token_ids", self.token_ids):
            body["return_token_ids"] = True  # vLLM >= 0.10.2
        body.update(self.extra_body)
        return body

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        clipped = params.pop("_clipped", False)
        body = self.request_body(messages, tools, params)
        data = json.dumps(body).encode()  # ASCII JSON: a lone surrogate anywhere in it goes as its escape
        timeout = float(params.get("timeout_s") or self.timeout_s)
        url = self.base_url + "/chat/completions"
        slots = model_slots(self.limit_name, self.concurrency)
        last, last_raw = "no attempt made", None
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            try:
                async with slots:
                    with anyio.fail_after(timeout):
                        response = await self._http().post(url, content=data, headers=self.headers)
                        raw_body = response.content
            except TimeoutError:
                last = f"no answer within {timeout:g} s"
            except httpx.HTTPError as e:  # connection refused or dropped, protocol errors
                last = f"{type(e).__name__}: {e}"
            else:
                status = response.status_code
                report_model_status(status)  # -c auto counts 429/503, retried ones too
                if status < 400:
                    try:
                        return self._response(raw_body)
                    except MalformedAnswer as e:  # a garbled answer is the server's failure: retried
                        last, last_raw = f"the answer is not a chat completion: {e}", completion.capped(raw_body)
                else:
                    detail = _error_detail(raw_body)
                    overflow = context_overflow(raw_body) if status in (400, 413) else None
                    if overflow is not None:
                        window, prompt_tokens = overflow
                        self.context_window = window or self.context_window
                        room = window - prompt_tokens if window and prompt_tokens else 0
                        if room > 0 and not clipped and (body.get("max_tokens") or 1 << 62) > room:
                            # only the answer's allowance was too much: ask for what the window leaves
                            return await self.chat(messages, tools, **dict(params, max_tokens=room, _clipped=True))
                        raise ContextOverflow(f"{self.name} at {url}: HTTP {status}: {detail}", messages,
                                              window=window, prompt_tokens=prompt_tokens)
                    if status not in RETRY_STATUS and status < 500:
                        hint = " (check the API key: --agent-opt api_key=... or $OPENAI_API_KEY)" if status in (401, 403) else ""
                        raise ModelError(f"{self.name} at {url}: HTTP {status}: {detail}{hint}")
                    last, last_raw = f"HTTP {status}: {detail}", None
                    retry_after = _retry_after(response.headers.get("retry-after"))
            if attempt == self.retries:
                break
            delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.75 + random.random() / 2)
            if retry_after is not None:
                delay = min(max(delay, retry_after), self.max_backoff_s)
            log.info("%s: %s; retry %d/%d in %.1f s", self.name, last, attempt + 1, self.retries, delay)
            await anyio.sleep(delay)
        raise ModelError(f"{self.name} at {url} failed after {self.retries + 1} attempt(s): {last}", raw=last_raw)

    def _response(self, raw_body: bytes) -> ChatResponse:
        """The answer as a ChatResponse; MalformedAnswer when it is not a chat completion."""
        try:
            data = json.loads(raw_body)
        except ValueError as e:
            raise MalformedAnswer(f"the body is not JSON ({e})") from None
        c = completion.read_completion(data)
        if self.tool_format == "clawsdk":
            msg = toolcalls.message_from_text(c.message.get("content") or "")
        else:
            msg = {"role": "assistant", "content": c.message.get("content")}
            calls = [dict(call, id=call["id"] or "call_" + secrets.token_hex(6))
                     for call in c.message.get("tool_calls") or []]
            if calls:
                msg["tool_calls"] = calls
        for extra in ("reasoning_content", "reasoning"):
            if c.message.get(extra):
                msg[extra] = c.message[extra]
        return ChatResponse(message=msg, usage=c.usage, finish_reason=c.finish_reason,
                            prompt_token_ids=c.prompt_token_ids, completion_token_ids=c.completion_token_ids,
                            logprobs=c.logprobs, raw=data)

    async def aclose(self) -> None:
        for client in self._client or ():
            try:
                await client.aclose()
            except Exception:  # a client of another event loop
                pass
        self._client = None


def _error_detail(raw: bytes) -> str:
    try:
        data = json.loads(raw)
        err = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(err)[:500]
    except ValueError:
        return raw[:300].decode("utf-8", "replace") or "(empty body)"


_OVERFLOW = re.compile(r"context[ _](?:length|window|size)|maximum model length|max_model_len|too long to fit|"
                       r"exceeds? the (?:available )?context|too long and exceeds", re.I)
_WINDOW = [re.compile(p, re.I) for p in (
    r"maximum context length is (\d+)", r"maximum model length(?: is| of)? (\d+)", r"context window of (\d+)",
    r"context length\W{0,3}(\d+)", r"exceeds? (?:the )?limit of (\d+)")]
_PROMPT = [re.compile(p, re.I) for p in (
    r"request has (\d+) (?:input|prompt) tokens", r"messages resulted in (\d+) tokens", r"prompt length of (\d+)",
    r"total length (\d+)", r"input prompt \((\d+) tokens\)", r"the input \((\d+) tokens\)")]
_PARTS = re.compile(r"(\d+) in the (?:messages|functions|tools)", re.I)


def context_overflow(raw: bytes) -> tuple[int | None, int | None] | None:
    """(window, prompt tokens) when an error body says the request does not fit the context window
    (either may be None where the server does not say); None for any other error."""
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    err = data.get("error", data) if isinstance(data, dict) else None
    err = err if isinstance(err, dict) else {}
    text = str(err.get("message") or "") if err else raw[:2000].decode("utf-8", "replace")
    codes = {str(err.get(k) or "") for k in ("code", "type")}
    if not (codes & {"context_length_exceeded", "exceed_context_size_error"} or _OVERFLOW.search(text)):
        return None

    def number(value: Any, patterns: list[re.Pattern]) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        for pattern in patterns:
            if m := pattern.search(text):
                return int(m.group(1))
        return None

    window = number(err.get("n_ctx"), _WINDOW)
    parts = [int(n) for n in _PARTS.findall(text)]  # OpenAI: "(900 in the messages, 40 in the functions, ...)"
    prompt_tokens = number(err.get("n_prompt_tokens"), _PROMPT) or (sum(parts) or None)
    return window, prompt_tokens


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


@hookimpl
def register_models(register):
    register("openai", OpenAIModel)
