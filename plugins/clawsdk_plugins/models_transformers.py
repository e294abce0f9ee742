"""`transformers:PATH`: a Hugging Face checkpoint on CPU or GPU, batched by the shared engine.

Prompts that start alike (every rollout of a run shares the system prompt and the tool list, and
each turn of a conversation extends the last) are not encoded again: the key/value cache of what
a batch's prompts share is kept (a few entries, the least recently used dropped first), and each
generation starts from a copy of the entry that shares most with it, cut to what it shares, so only
the rest is prefilled. The entries belong to the weights they were computed with: a model whose
weights change in place must clear `prefixes` (the GRPO trainer does, before each step's rollouts).
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections import OrderedDict
from typing import Any

from clawsdk_plugins.local_engine import LocalChatModel, Request, need


def _pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TransformersModel(LocalChatModel):
    """A Hugging Face checkpoint (folder or hub id already in the local cache) through transformers."""

    backend = "transformers"

    @staticmethod
    def weights(name: str = "") -> str:
        """The local checkpoint folder a trainer starts from (clawsdk.train.resolve_weights)."""
        if not name:
            raise ValueError("the transformers backend needs a checkpoint: transformers:PATH")
        return name

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
        #: prompt prefix (token ids) -> its key/value cache at batch size 1; see prefix_cache()
        self.prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def _load(self) -> None:
        need("transformers", "embedded")
        torch = need("torch", "embedded")
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

    #: a shared prefix shorter than this is encoded with the rest; at most this many are kept
    PREFIX_MIN_TOKENS = 128
    PREFIX_ENTRIES = 4

    def prefix_cache(self, rows: list[list[int]]) -> tuple[int, Any]:
        """(n, cache): the key/value cache of the first n tokens every row shares; (0, None) when they
        share too little. It starts from the kept entry that shares most with the rows (cut to what
        they share), and when the rows share more, encodes the rest and keeps that as a new entry.
        Every row keeps at least one token to prefill. The cache may be a kept one: copy it before use."""
        import torch

        limit = min(len(r) for r in rows) - 1
        if limit < self.PREFIX_MIN_TOKENS:
            return 0, None
        first = rows[0]
        shared = limit
        for r in rows[1:]:
            shared = _common(r, first, shared)
        n, best = 0, None
        for key in self.prefixes:
            m = _common(key, first, min(len(key), shared))
            if m > n:
                n, best = m, key
        cache, owned = None, False
        if best is not None and n >= self.PREFIX_MIN_TOKENS:
            self.prefixes.move_to_end(best)
            cache = self.prefixes[best]
            if n < len(best):  # the entry runs on past what these rows share: a copy, cut
                cache, owned = copy.deepcopy(cache), True
                cache.crop(n - len(best))  # negative: drop that many from the end (every version)
        else:
            n = 0
        if shared - n >= self.PREFIX_MIN_TOKENS:  # worth keeping: encode the rest of what they share
            grown = cache if owned or cache is None else copy.deepcopy(cache)
            with torch.inference_mode():
                out = self.hf_model(input_ids=torch.tensor([first[n:shared]], device=self.hf_model.device),
                                    use_cache=True, **{self._cache_arg(): grown})
            n, cache = shared, out.get("cache", out.get("past_key_values"))
            self.prefixes[tuple(first[:n])] = cache
            while len(self.prefixes) > self.PREFIX_ENTRIES:
                self.prefixes.popitem(last=False)
        return n, cache

    def _cache_arg(self) -> str:
        """What this transformers calls the key/value cache argument (`cache` from 5.x on)."""
        import inspect

        return "cache" if "cache" in inspect.signature(type(self.hf_model).forward).parameters else "past_key_values"

    def _generate(self, requests: list[Request]) -> None:
        import torch
        from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria, \
            StoppingCriteriaList

        model, tok = self.hf_model, self.tokenizer
        device = model.device
        pad = tok.pad_token_id if tok.pad_token_id is not None else min(self.eos_ids, default=0)
        n_prefix, prefix = self.prefix_cache([r.prompt_ids for r in requests])
        rest = max(len(r.prompt_ids) - n_prefix for r in requests)
        width = n_prefix + rest
        ids = torch.full((len(requests), width), pad, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for i, r in enumerate(requests):
            # the shared prefix, then padding, then the row's own tokens: every row ends at the same
            # column, and positions (from the mask) run on from the prefix as if unpadded
            ids[i, :n_prefix] = torch.tensor(r.prompt_ids[:n_prefix], dtype=torch.long)
            mask[i, :n_prefix] = 1
            own = r.prompt_ids[n_prefix:]
            ids[i, width - len(own):] = torch.tensor(own, dtype=torch.long)
            mask[i, width - len(own):] = 1
        past = None
        if prefix is not None:
            past = copy.deepcopy(prefix)
            past.batch_repeat_interleave(len(requests))
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
        cached = {self._cache_arg(): past} if past is not None else {}
        with torch.inference_mode():
            model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config,
                           logits_processor=LogitsProcessorList([RawLogprobs()]),
                           stopping_criteria=StoppingCriteriaList([Limits()]), **cached)
        for r in requests:
            if r.finish_reason is None:
                r.finish_reason = "length"
            if not all(math.isfinite(x) for x in r.logprobs):
                r.logprobs = [x if math.isfinite(x) else -1e9 for x in r.logprobs]


def _common(a: Any, b: Any, limit: int) -> int:
    """How many leading tokens a and b share, up to limit."""
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n
