"""Where the proxy's calls go: an OpenAI-compatible HTTP server (vLLM, llama.cpp, a hosted API), or a clawsdk model
backend in this process (the embedded model, transformers), which `clawsdk models serve` puts behind the same
front. Both answer a chat-completions body as an HTTP answer would: a status, then the JSON or the event stream.

`check_base_url` is the one look at an HTTP upstream before a run starts: a wrong URL is one line, not every
rollout's retried `model_error`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from clawsdk._http import public_url

if TYPE_CHECKING:
    from clawsdk.models.base import ChatResponse, Model


class UpstreamError(Exception):
    """The upstream could not be reached, or broke off its answer."""


class Answer:
    """An upstream's answer: `status_code`, `headers`, and its body whole (`read`) or as it comes (`chunks`)."""

    status_code: int = 200
    headers: dict[str, str]

    async def read(self) -> bytes:
        raise NotImplementedError

    def chunks(self) -> AsyncIterator[str]:
        raise NotImplementedError


class HttpUpstream:
    """An OpenAI-compatible base URL (…/v1): POST /chat/completions, GET /models."""

    def __init__(self, url: str, key: str | None = None, *, timeout_s: float = 600.0):
        parsed = urlparse(url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"upstream {url!r} is not an http(s) URL; give e.g. --upstream http://127.0.0.1:8000/v1")
        self.url = url.strip().rstrip("/")
        self.shown = public_url(self.url)  # what messages and records name
        self.key = key
        self.timeout_s = timeout_s

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.key:
            headers["authorization"] = f"Bearer {self.key}"
        return headers

    def redact(self, text: str) -> str:
        """`text` with the upstream URL as it was given (credentials, query) replaced by the public one."""
        text = text.replace(self.url, self.shown)
        password = urlparse(self.url).password
        return text.replace(password, "***") if password else text

    @contextlib.asynccontextmanager
    async def open(self, data: bytes, stream: bool) -> AsyncIterator[Answer]:
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=self.timeout_s) as client, \
                    client.stream("POST", f"{self.url}/chat/completions", content=data, headers=self.headers()) as r:
                yield _HttpAnswer(r, self)
        except httpx2.HTTPError as e:
            raise UpstreamError(self.redact(f"upstream {self.shown} failed: {type(e).__name__}: {e}")) from e

    async def models(self) -> tuple[int, Any]:
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=30) as client:
                r = await client.get(f"{self.url}/models", headers=self.headers())
            return r.status_code, r.json()
        except Exception as e:
            return 502, {"error": {"message": self.redact(f"upstream {self.shown}: {type(e).__name__}: {e}")}}


class _HttpAnswer(Answer):
    def __init__(self, response: Any, upstream: HttpUpstream):
        self.r = response
        self.up = upstream
        self.status_code = response.status_code
        self.headers = response.headers

    async def read(self) -> bytes:
        import httpx2

        try:
            return await self.r.aread()
        except httpx2.HTTPError as e:
            raise UpstreamError(self.up.redact(f"upstream {self.up.shown} failed: {type(e).__name__}: {e}")) from e

    async def chunks(self) -> AsyncIterator[str]:
        import httpx2

        try:
            async for chunk in self.r.aiter_text():
                yield chunk
        except httpx2.HTTPError as e:
            raise UpstreamError(self.up.redact(f"upstream {self.up.shown} failed: {type(e).__name__}: {e}")) from e


#: chat-completions fields a clawsdk Model takes as chat() params
MODEL_PARAMS = ("max_tokens", "temperature", "top_p", "stop", "seed", "tool_choice")


class ModelUpstream:
    """A clawsdk model backend (`Model.chat`) answering chat-completions bodies: token ids and logprobs come with
    every answer where the backend gives them (the local backends do), as vLLM gives them."""

    def __init__(self, model: Model, name: str | None = None):
        self.model = model
        self.name = name or model.name
        self.shown = f"model {self.name}"

    def redact(self, text: str) -> str:
        return text

    @contextlib.asynccontextmanager
    async def open(self, data: bytes, stream: bool) -> AsyncIterator[Answer]:
        from clawsdk.errors import ModelError

        body = json.loads(data)
        params = {k: body[k] for k in MODEL_PARAMS if body.get(k) is not None}
        if body.get("max_completion_tokens") and "max_tokens" not in params:
            params["max_tokens"] = body["max_completion_tokens"]
        try:
            response = await self.model.chat(body["messages"], body.get("tools"), **params)
        except ModelError as e:
            yield _Made(502, {"error": {"message": f"{self.name}: {e}", "type": "upstream_error"}})
            return
        completion = completion_of(response, body.get("model") or self.name)
        yield _Made(200, completion, stream=stream)

    async def models(self) -> tuple[int, Any]:
        return 200, {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "clawsdk"}]}


def completion_of(response: ChatResponse, model: str) -> dict[str, Any]:
    """A ChatResponse as a chat completion, token ids and logprobs where vLLM puts them (`prompt_token_ids`,
    `choices[0].token_ids`, `choices[0].logprobs.content`)."""
    message = {"role": "assistant", "content": response.message.get("content")}
    if response.message.get("tool_calls"):
        message["tool_calls"] = response.message["tool_calls"]
    finish = "tool_calls" if message.get("tool_calls") else (response.finish_reason or "stop")
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if response.completion_token_ids is not None:
        choice["token_ids"] = list(response.completion_token_ids)
    if response.logprobs is not None:
        ids: list[int | None] = [None] * len(response.logprobs)
        if response.completion_token_ids:
            ids = list(response.completion_token_ids)
        choice["logprobs"] = {"content": [{"token": f"token_id:{t}", "logprob": lp, "bytes": None, "top_logprobs": []}
                                          for t, lp in zip(ids, response.logprobs, strict=True)]}
    out: dict[str, Any] = {"id": f"chatcmpl-{secrets.token_hex(8)}", "object": "chat.completion",
                           "created": int(time.time()), "model": model, "choices": [choice],
                           "usage": {"prompt_tokens": response.usage.get("prompt_tokens", 0),
                                     "completion_tokens": response.usage.get("completion_tokens", 0),
                                     "total_tokens": response.usage.get("prompt_tokens", 0)
                                     + response.usage.get("completion_tokens", 0)}}
    if response.prompt_token_ids is not None:
        out["prompt_token_ids"] = list(response.prompt_token_ids)
    return out


def chunks_of(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks a streaming server sends: the text, each tool call, then the finish
    reason with the token ids, then the usage."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    base = {"id": completion.get("id"), "object": "chat.completion.chunk",
            "created": completion.get("created") or int(time.time()), "model": completion.get("model")}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": message.get("content") or ""}]
    for i, tc in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": i, "id": tc.get("id"), "type": "function", "function": tc["function"]}]})
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    last: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}
    for key in ("token_ids", "logprobs"):
        if key in choice:
            last[key] = choice[key]
    chunks.append({**base, "choices": [last]})
    tail: dict[str, Any] = {**base, "choices": [], "usage": completion.get("usage")}
    if "prompt_token_ids" in completion:
        tail["prompt_token_ids"] = completion["prompt_token_ids"]
    chunks.append(tail)
    return chunks


class _Made(Answer):
    def __init__(self, status: int, body: dict[str, Any], *, stream: bool = False):
        self.status_code = status
        self.body = body
        self.stream = stream and status < 400
        self.headers = {"content-type": "text/event-stream" if self.stream else "application/json"}

    async def read(self) -> bytes:
        return json.dumps(self.body).encode()

    async def chunks(self) -> AsyncIterator[str]:
        if not self.stream:
            yield json.dumps(self.body)
            return
        for chunk in chunks_of(self.body):
            yield f"data: {json.dumps(chunk)}\n\n"
        yield "data: [DONE]\n\n"


async def check_base_url(url: str, key: str | None = None, *, timeout_s: float = 10.0) -> None:
    """Raise ValueError (one line: the URL, what answered, what to do) unless `url` answers as an OpenAI-compatible
    base URL: GET /models (every serving model server has it; nothing is generated)."""
    import httpx2

    shown = public_url(url)
    up = HttpUpstream(url, key)
    try:
        async with httpx2.AsyncClient(timeout=timeout_s) as client:
            r = await client.get(f"{up.url}/models", headers=up.headers())
    except httpx2.HTTPError as e:
        raise ValueError(f"--base-url {shown} cannot be reached ({type(e).__name__}: {up.redact(str(e))}): is the "
                         "model server running, and is this its address?") from None
    if r.status_code in (401, 403):
        raise ValueError(f"--base-url {shown} refused the API key (HTTP {r.status_code}): set the variable the agent "
                         "reads it from (OPENAI_API_KEY, or --agent-opt api_key_env=VAR)")
    if r.status_code in (404, 405):
        hint = " (an OpenAI-compatible base URL usually ends in /v1)" if not up.url.endswith("/v1") else ""
        raise ValueError(f"--base-url {shown} has no /models (HTTP {r.status_code}): it is not an OpenAI-compatible "
                         f"base URL{hint}")
