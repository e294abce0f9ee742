"""The batching engine every in-process model backend shares: prompting, parsing, the queue.

Concurrent rollouts share one model: their requests queue up and one generation thread per event
loop serves them in batches, so the loop stays free. A backend that can (transformers) takes queued
requests into a batch that is running as its rows end, and answers each row as soon as it ends: a
rollout goes on with its tool call while the others decode. Every generation has a wall-clock limit
(the `timeout_s` of the call): a model that runs on is cut there and the response says finish_reason
"timeout" (the tool-loop agent records agent_timeout). Token ids and logprobs (of the sampled tokens,
under the model's raw distribution) come with every response. A backend subclasses `LocalChatModel`
and implements `_load` and `_generate`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio.lowlevel import current_token

from clawsdk.errors import ContextOverflow, ModelError
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


def hub_kernels() -> bool:
    """Whether transformers may fetch kernels from the Hugging Face Hub and run them (`use_kernels`).

    transformers 5 does by default: on CUDA, `model.train()` downloads `kernels-community/*` code, so
    training fails on a machine without the Hub and runs code nobody installed. clawsdk loads models
    with it off, like `trust_remote_code`; transformers' own `USE_HUB_KERNELS=1` turns it on."""
    return os.environ.get("USE_HUB_KERNELS", "").strip().upper() in {"1", "Y", "YES", "TRUE", "ON"}


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
    # filled by the generation thread
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    error: BaseException | None = None
    woken: bool = False

    @property
    def answered(self) -> bool:
        return self.finish_reason is not None or self.error is not None

    def sampling(self) -> tuple:
        return (round(self.temperature, 6), self.top_p, self.seed)


class Batch:
    """What a backend's `_generate` serves: `requests`, and the queue behind them. `join(n)` takes up
    to n more queued requests that sample alike (none for seeded sampling, whose draws would then
    depend on who joined when); `answer(r)` hands an ended row back to its caller at once."""

    def __init__(self, state: _LoopState, requests: list[Request]):
        self.state = state
        self.requests = requests
        self.joined: list[Request] = []

    def join(self, n: int) -> list[Request]:
        head = self.requests[0]
        if n <= 0 or (head.seed is not None and head.temperature > 0):
            return []
        taken = self.state.take(n, head.sampling())
        self.joined += taken
        return [r for r in taken if not _expired(r, self)]

    def answer(self, r: Request) -> None:
        if r.woken:
            return
        r.woken = True
        _call_soon(self.state.token, r.done.set)

    def everyone(self) -> list[Request]:
        return self.requests + self.joined


def _expired(r: Request, batch: Batch) -> bool:
    """A request cancelled, or whose time ran out in the queue, is answered without a row."""
    if not r.cancelled and now_past(r):
        r.finish_reason = "timeout"
    if r.cancelled or r.answered:
        r.finish_reason = r.finish_reason or "cancelled"
        batch.answer(r)
        return True
    return False


def _call_soon(token: Any, fn: Any) -> None:
    """Have the event loop of `token` call fn, without waiting for it: a loop that is ending may never
    run it, and the generation thread must not hang on that."""
    native = token.native_token  # an asyncio loop, or a trio token
    try:
        (getattr(native, "call_soon_threadsafe", None) or native.run_sync_soon)(fn)
    except Exception:  # the event loop is gone: nobody is waiting
        pass


class _LoopState:
    """One event loop's queue, and whether a generation thread serves it."""

    def __init__(self) -> None:
        self.token = current_token()
        self.mutex = threading.Lock()
        self.pending: list[Request] = []
        self.serving = False
        self.thread: threading.Thread | None = None
        self.batch: Batch | None = None  # what the thread generates now
        _STATES.add(self)

    def cancel_all(self) -> None:
        with self.mutex:
            for r in self.pending + (self.batch.everyone() if self.batch else []):
                r.cancelled = True

    def take(self, n: int, sampling: tuple | None = None) -> list[Request]:
        """Up to n queued requests, in order, that sample like `sampling` (like the first, when None)."""
        with self.mutex:
            taken: list = []
            for r in self.pending:
                if len(taken) >= n:
                    break
                if sampling is None:
                    sampling = r.sampling()
                if r.sampling() == sampling:
                    taken.append(r)
            for r in taken:
                self.pending.remove(r)
            return taken


_STATES: weakref.WeakSet[_LoopState] = weakref.WeakSet()
EXIT_WAIT_S = 60


@atexit.register
def _stop_generating() -> None:
    """At interpreter exit, every row is cancelled and the generation threads are waited for (each stops at
    its next token; a prefill in progress ends first). A daemon thread still inside torch when the
    interpreter went down aborted the process: `clawsdk run` exited 134 after a rollout whose agent ran out
    of time while the model was answering, its summary already printed."""
    states = list(_STATES)
    for state in states:
        state.cancel_all()
    for state in states:
        if state.thread is not None and state.thread.is_alive() and state.thread is not threading.current_thread():
            state.thread.join(EXIT_WAIT_S)


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
        self._gen_lock = threading.Lock()
        self._loaded = False
        self._load_failure: str | None = None
        self._state: _LoopState | None = None

    # ---- subclasses --------------------------------------------------------------------

    def _load(self) -> None:
        """Load weights and tokenizer (in a worker thread); set self.tokenizer and context_window."""
        raise NotImplementedError

    def _generate(self, batch: Batch) -> None:
        """Generate for every request of the batch (they sample alike), filling token_ids, logprobs and
        finish_reason; stop a row when it is cancelled, past its deadline or at max_new_tokens. A backend
        that can takes more rows in with `batch.join` and hands each back with `batch.answer` as it ends;
        whatever it does not hand back is answered when it returns."""
        raise NotImplementedError

    # ---- shared ------------------------------------------------------------------------

    def load(self) -> None:
        """Load now (blocking). Otherwise the first chat() loads in a worker thread.

        A load that fails raises ModelError, and so does every later load of this engine, at once: each
        rollout of a run (and each retry) loaded again, and a hub name with no network spent 2.5 minutes
        in download retries every time before the same error."""
        with self._load_lock:
            if self._load_failure is not None:
                raise ModelError(self._load_failure)
            if not self._loaded:
                started = time.perf_counter()
                try:
                    self._load()
                except Exception as e:
                    self._load_failure = (str(e) if isinstance(e, ModelError) else
                                          f"{self.name} failed to load: {type(e).__name__}: {e}")
                    raise ModelError(self._load_failure) from e
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
            await anyio.to_thread.run_sync(self.load)
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
            raise ContextOverflow(f"the conversation ({len(prompt_ids)} tokens) does not fit {self.name}'s context "
                                  f"window of {window} tokens", messages, window=window, prompt_tokens=len(prompt_ids))
        max_new = max(1, min(int(params.get("max_tokens") or 512), window - len(prompt_ids)))
        timeout = float(params.get("timeout_s") or self.timeout_s)
        req = Request(prompt_ids=prompt_ids, max_new_tokens=max_new,
                       temperature=float(params.get("temperature") or 0.0), top_p=params.get("top_p"),
                       seed=params.get("seed"), stop=stop,
                       deadline=time.monotonic() + timeout, done=anyio.Event())
        state = self._loop_state()
        with state.mutex:
            state.pending.append(req)
            start, state.serving = not state.serving, True
        if start:  # once the loop has run what is ready: requests made together start as one batch
            thread = threading.Thread(target=self._serve, args=(state,), name=f"clawsdk-{self.backend}", daemon=True)
            state.thread = thread
            _call_soon(state.token, thread.start)
        try:
            await req.done.wait()
        except BaseException:
            req.cancelled = True  # the generation thread drops its row at the next token
            with state.mutex:
                if req in state.pending:
                    state.pending.remove(req)
            raise
        if req.error is not None:
            raise ModelError(f"{self.name} generation failed: {type(req.error).__name__}: {req.error}")
        try:
            return self._response(req, prefix)
        except Exception as e:  # a tokenizer that cannot decode what was generated: the backend's failure
            raise ModelError(f"{self.name} could not decode its output: {type(e).__name__}: {e}") from e

    def _serve(self, state: _LoopState) -> None:
        """The generation thread of one event loop: batches from the queue until it is empty."""
        while True:
            with state.mutex:
                if not state.pending:
                    state.serving = False
                    state.batch = None  # nothing of the last batch stays alive between generations
                    return
            batch = state.batch = Batch(state, state.take(self.max_batch))
            try:
                with self._gen_lock:  # one generation at a time, also across event loops
                    batch.requests = [r for r in batch.requests if not _expired(r, batch)]
                    if batch.requests:
                        self._generate(batch)
            except Exception as e:  # handed to every waiter as a ModelError
                log.exception("%s: generation failed", self.name)
                # logged whole; the waiters get it without its traceback, whose frames hold the batch's key/value
                # caches and logits (after CUDA ran out of memory, the next batch would find it still full)
                e.__traceback__ = None
                for r in batch.everyone():
                    if not r.answered:
                        r.error = e
            except BaseException as e:  # the thread itself is going: nobody may wait forever
                with state.mutex:
                    rest, state.pending, state.serving = state.pending, [], False
                for r in batch.everyone() + rest:
                    r.error = r.error or e
                    batch.answer(r)
                raise
            for r in batch.everyone():
                if not r.answered:
                    r.finish_reason = "cancelled"
                batch.answer(r)

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
