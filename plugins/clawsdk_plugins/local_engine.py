"""The batching engine every in-process model backend shares: prompting, parsing, the queue.

Concurrent rollouts share one model: their requests queue up and run as one batched
generation in a worker thread, so the event loop stays free. Every generation has a
wall-clock limit (the `timeout_s` of the call): a model that runs on is cut there and the
response says finish_reason "timeout" (the tool-loop agent records agent_timeout).
Token ids and logprobs (of the sampled tokens, under the model's raw distribution) come with
every response. A backend subclasses `LocalChatModel` and implements `_load` and `_generate`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.lowlevel import current_token

from clawsdk.errors import AgentError, ModelError
from clawsdk.models import toolcalls
from clawsdk.models.base import ChatResponse, Model

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where converted models live: $CLAWSDK_CACHE_DIR, else $XDG_CACHE_HOME/clawsdk, else ~/.cache/clawsdk."""
    root = os.environ.get("CLAWSDK_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "clawsdk"


def need(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ModelError(f"this model backend needs {module!r} ({e}); install it with "
                         f"pip install 'clawsdk[{extra}]'") from None


@dataclass
class Request:
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float
    top_p: float | None
    seed: int | None
    stop: list[str]
    deadline: float
    done: anyio.Event
    cancelled: bool = False
    in_flight: bool = False
    # filled by the generation thread
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    error: BaseException | None = None

    @property
    def answered(self) -> bool:
        return self.finish_reason is not None or self.error is not None

    def sampling(self) -> tuple:
        return (round(self.temperature, 6), self.top_p, self.seed)


class _Batch:
    """The requests of one generation; whoever is still waiting is woken when it ends."""

    def __init__(self, requests: list[Request]):
        self.requests = requests
        self.lock = threading.Lock()
        self.finished = False
        self.abandoned = False

    def wake(self) -> None:
        for r in self.requests:
            r.done.set()


class _LoopState:
    def __init__(self) -> None:
        self.token = current_token()
        self.lock = anyio.Lock()
        self.pending: list[Request] = []


class LocalChatModel(Model):
    """Prompting, parsing, the batching queue and the wall-clock limit; subclasses load and generate."""

    backend = "local"

    def __init__(self, *, max_batch: int = 8, timeout_s: float = 300.0, tool_format: str = "auto",
                 context_window: int | None = None):
        if tool_format not in ("auto", "clawsdk", "template"):
            raise ValueError(f"tool_format must be auto, clawsdk or template, not {tool_format!r}")
        if max_batch < 1 or timeout_s <= 0:
            raise ValueError("max_batch must be >= 1 and timeout_s > 0")
        self.max_batch = int(max_batch)
        self.timeout_s = float(timeout_s)
        self.tool_format = tool_format
        self.context_window = context_window
        self.tokenizer: Any = None
        self._load_lock = threading.Lock()
        self._gen_lock = threading.Lock()  # one generation at a time, also across abandoned batches
        self._loaded = False
        self._state: _LoopState | None = None

    # ---- subclasses --------------------------------------------------------------------

    def _load(self) -> None:
        """Load weights and tokenizer (in a worker thread); set self.tokenizer and context_window."""
        raise NotImplementedError

    def _generate(self, requests: list[Request]) -> None:
        """Generate for every request (same sampling settings), filling token_ids, logprobs and
        finish_reason; stop a row when it is cancelled, past its deadline or at max_new_tokens."""
        raise NotImplementedError

    # ---- shared ------------------------------------------------------------------------

    def load(self) -> None:
        """Load now (blocking). Otherwise the first chat() loads in a worker thread."""
        with self._load_lock:
            if not self._loaded:
                started = time.perf_counter()
                self._load()
                self._loaded = True
                log.info("%s loaded in %.1f s", self.name, time.perf_counter() - started)

    def uses_template_tools(self) -> bool:
        if self.tool_format != "auto":
            return self.tool_format == "template"
        template = getattr(self.tokenizer, "chat_template", None) or ""
        return isinstance(template, str) and "tools" in template and "tool_call" in template

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               prefix: str = "") -> list[int]:
        """The prompt's token ids: the chat template over clawsdk's tool format (or the template's own),
        then `prefix`, the start of the answer."""
        tok = self.tokenizer
        if self.uses_template_tools():
            msgs = []
            for m in messages:
                if m.get("tool_calls"):  # templates expect arguments as objects
                    m = {**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": toolcalls.arguments_of(c)}}
                                             for c in m["tool_calls"]]}
                msgs.append(m)
            text = tok.apply_chat_template(msgs, tools=tools or None, add_generation_prompt=True, tokenize=False)
        else:
            text = tok.apply_chat_template(toolcalls.render_messages(messages, tools), add_generation_prompt=True,
                                           tokenize=False)
        return list(tok(text + prefix, add_special_tokens=False)["input_ids"])

    def _loop_state(self) -> _LoopState:
        token = current_token()
        if self._state is None or self._state.token != token:
            self._state = _LoopState()
        return self._state

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        if not self._loaded:
            try:
                await anyio.to_thread.run_sync(self.load)
            except ModelError:
                raise
            except Exception as e:
                raise ModelError(f"{self.name} failed to load: {type(e).__name__}: {e}") from e
        stop = params.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        prefix = ""
        if tools and params.get("tool_choice") == "required":
            # the answer starts inside a tool call, and ends with it: one call per turn
            prefix = toolcalls.TOOL_CALL_OPEN + "\n"
            stop.append(toolcalls.TOOL_CALL_CLOSE)
        prompt_ids = self.render(messages, tools, prefix)
        window = self.context_window or 1 << 30
        if len(prompt_ids) >= window - 1:
            raise AgentError(f"the conversation ({len(prompt_ids)} tokens) no longer fits {self.name}'s context "
                             f"window of {window} tokens")
        max_new = max(1, min(int(params.get("max_tokens") or 512), window - len(prompt_ids)))
        timeout = float(params.get("timeout_s") or self.timeout_s)
        req = Request(prompt_ids=prompt_ids, max_new_tokens=max_new,
                       temperature=float(params.get("temperature") or 0.0), top_p=params.get("top_p"),
                       seed=params.get("seed"), stop=stop,
                       deadline=time.monotonic() + timeout, done=anyio.Event())
        state = self._loop_state()
        state.pending.append(req)
        try:
            while not req.answered:
                if req.in_flight:
                    await req.done.wait()
                    continue
                async with state.lock:
                    if req.answered or req.in_flight:
                        continue
                    batch = self._take(state.pending, req)
                    await self._run(batch, req)
        except BaseException:
            req.cancelled = True
            if req in state.pending:
                state.pending.remove(req)
            raise
        if req.error is not None:
            raise ModelError(f"{self.name} generation failed: {type(req.error).__name__}: {req.error}")
        try:
            return self._response(req, prefix)
        except Exception as e:  # a tokenizer that cannot decode what was generated: the backend's failure
            raise ModelError(f"{self.name} could not decode its output: {type(e).__name__}: {e}") from e

    def _take(self, pending: list[Request], own: Request) -> _Batch:
        batch = [own]
        for r in pending:
            if len(batch) >= self.max_batch:
                break
            if r is not own and not r.cancelled and r.sampling() == own.sampling():
                batch.append(r)
        for r in batch:
            pending.remove(r)
            r.in_flight = True
        return _Batch(batch)

    async def _run(self, batch: _Batch, own: Request) -> None:
        try:
            await anyio.to_thread.run_sync(self._work, batch, abandon_on_cancel=True)
        except BaseException:
            own.cancelled = True  # the thread stops this row at its next token
            with batch.lock:
                batch.abandoned = True
                finished = batch.finished
            if finished:
                batch.wake()
            raise
        batch.wake()

    def _work(self, batch: _Batch) -> None:
        """In a worker thread: generate, then wake waiters if the task that started us is gone."""
        try:
            with self._gen_lock:
                for r in batch.requests:
                    if not r.cancelled and now_past(r):  # its time ran out in the queue
                        r.finish_reason = "timeout"
                live = [r for r in batch.requests if not r.cancelled and r.finish_reason is None]
                if live:
                    self._generate(live)
                for r in batch.requests:
                    if r.finish_reason is None and r.error is None:
                        r.finish_reason = "cancelled"
        except Exception as e:  # noqa: BLE001 - handed to every waiter as a ModelError
            log.exception("%s: generation failed", self.name)
            for r in batch.requests:
                r.error = e
        finally:
            with batch.lock:
                batch.finished = True
                abandoned = batch.abandoned
            if abandoned:
                try:
                    anyio.from_thread.run_sync(batch.wake)
                except Exception:  # noqa: BLE001 - the event loop is gone: nobody is waiting
                    pass

    def _response(self, req: Request, prefix: str = "") -> ChatResponse:
        text = self.tokenizer.decode(req.token_ids, skip_special_tokens=True)
        for s in req.stop:  # the stop string ends the answer, as with OpenAI servers
            if s in text:
                text = text[: text.index(s)] + (s if s == toolcalls.TOOL_CALL_CLOSE else "")
        text = prefix + text
        message = toolcalls.message_from_text(text)
        return ChatResponse(
            message=message,
            usage={"prompt_tokens": len(req.prompt_ids), "completion_tokens": len(req.token_ids)},
            finish_reason="tool_calls" if message.get("tool_calls") and req.finish_reason == "stop"
            else req.finish_reason,
            prompt_token_ids=req.prompt_ids,
            completion_token_ids=req.token_ids,
            logprobs=req.logprobs or None,
            raw=text,
        )


def now_past(r: Request) -> bool:
    return time.monotonic() > r.deadline
