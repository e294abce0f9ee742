"""`transformers:PATH`: a Hugging Face checkpoint on CPU or GPU, batched by the shared engine.

What a prompt shares with an earlier one is not encoded again. Every rollout of a run starts with the
same system prompt and tool list, and each turn of a conversation extends the last one with a tool
result. So the key/value cache of each sequence the model has seen (a prompt; a prompt and its answer)
is kept, the least recently used dropped past PREFIX_BYTES. A generation encodes each row's prompt
from the kept entry that shares most with it, then decodes the rows together, each from its own
cache; a row that ends leaves, and a request that arrives takes its place at the next step. Decoding
writes into room kept ahead rather than concatenating (`_growing_layer`). The entries
belong to the weights they were computed with: a model whose weights change in place must clear
`prefixes` (the GRPO trainer does, before each step's rollouts).
"""

from __future__ import annotations

import inspect
import math
import os
import time
from collections import OrderedDict
from typing import Any

from clawsdk.errors import ModelError
from clawsdk_plugins.models.local_engine import Batch, LocalChatModel, Request, hub_kernels, need


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
        self.path = os.path.expanduser(str(name))
        self.name = f"transformers:{self.path}"
        self.device = device
        self.dtype = dtype
        self.gguf_file = gguf_file
        self.trust_remote_code = trust_remote_code
        self.threads = threads
        self.hf_model: Any = None
        self.eos_ids: set[int] = set()
        #: token ids -> their key/value cache, per layer at batch size 1; see prefill()
        self.prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def _load(self) -> None:
        if self.path.startswith(("/", "./", "../")) and not os.path.exists(self.path):
            raise ModelError(f"{self.name}: no such folder; give a checkpoint folder (with config.json) or a "
                             "Hugging Face model id")
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
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype, use_kernels=hub_kernels(), **kwargs)
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
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        # only caches that are plain keys and values (no sliding window, no shared or linear layers) can be
        # cut, kept and put beside another's
        layers = DynamicCache(config=cfg).layers
        self._plain_layers = bool(layers) and all(type(layer) is DynamicLayer for layer in layers)
        self._n_layers = len(layers)
        params = inspect.signature(type(self.hf_model).forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"  # `cache` from 5.x on
        self._last_logits_only = "logits_to_keep" in params

    #: a kept prompt prefix shorter than this is encoded again; kept entries hold at most this many bytes
    PREFIX_MIN_TOKENS = 128
    PREFIX_BYTES = 4 << 30

    def _cache(self, rows: list[tuple[int, Any]], width: int, room: int, capacity: int = 0) -> Any:
        """A cache for len(rows) sequences: row i holds the first n tokens of its kept entry, left-aligned
        in `width` columns (the rest masked off), with room for `room` more tokens before it grows and
        for `capacity` rows in all (rows that join later)."""
        from transformers import Cache

        cache = Cache(layers=[_growing_layer()() for _ in range(self._n_layers)])
        if width == 0:
            return cache
        some = next(entry for n, entry in rows if n)
        for li, layer in enumerate(cache.layers):
            k0, v0 = some[li]
            size = (max(capacity, len(rows)), k0.shape[1], width + room, k0.shape[3])
            keys, values = k0.new_empty(size), v0.new_empty(size)
            for i, (n, entry) in enumerate(rows):
                if n:
                    keys[i, :, :n] = entry[li][0][0, :, :n]
                    values[i, :, :n] = entry[li][1][0, :, :n]
                keys[i, :, n:width] = 0  # masked off, but read: garbage could be inf or nan
                values[i, :, n:width] = 0
            layer.lazy_initialization(keys, values)
            layer.room = (keys, values)
            layer.keys, layer.values = keys[:len(rows), :, :width], values[:len(rows), :, :width]
        return cache

    def _nearest(self, row: list[int]) -> tuple[int, Any]:
        """(n, entry): the kept entry that shares most with row, and how many tokens it shares (at most
        all but the row's last); (0, None) when none shares PREFIX_MIN_TOKENS."""
        n, best = 0, None
        limit = len(row) - 1
        for key in self.prefixes:
            m = _common(key, row, min(len(key), limit))
            if m > n:
                n, best = m, key
        if best is None or n < self.PREFIX_MIN_TOKENS:
            return 0, None
        self.prefixes.move_to_end(best)
        return n, self.prefixes[best]

    def _keep(self, tokens: tuple[int, ...], entry: Any) -> None:
        """Keep a sequence's key/value cache (per layer, batch size 1): entries it extends are dropped
        (it serves whatever they served), then the least recently used past PREFIX_BYTES."""
        if len(tokens) < self.PREFIX_MIN_TOKENS:
            return
        for key in [k for k in self.prefixes if len(k) <= len(tokens) and tokens[:len(k)] == k]:
            del self.prefixes[key]
        self.prefixes[tokens] = entry
        size = sum(_nbytes(e) for e in self.prefixes.values())
        while len(self.prefixes) > 1 and size > self.PREFIX_BYTES:
            size -= _nbytes(self.prefixes.popitem(last=False)[1])

    def prefill(self, row: list[int]) -> tuple[int, Any]:
        """(n, entry): the key/value cache of all but the row's last token (n of them), per layer at batch
        size 1. It starts from the kept entry that shares most with the row and encodes only the rest;
        the result is kept for the rows (and the next turns) that start alike."""
        import torch

        n, entry = self._nearest(row)
        todo = row[n:-1]
        if not todo:
            return n, entry
        cache = self._cache([(n, entry)], n, len(todo))
        with torch.inference_mode():
            self._forward(torch.tensor([todo]), cache)
        entry = [(layer.keys, layer.values) for layer in cache.layers]
        self._keep(tuple(row[:-1]), entry)
        return len(row) - 1, entry

    def _keep_row(self, r: Request, cache: Any, b: int, columns: Any) -> None:
        """Keep what row b of the decoding cache was fed (its prompt, then its answer but the last token),
        the columns its mask marks: the conversation's next turn starts with it."""
        tokens = tuple(r.prompt_ids) + tuple(r.token_ids[:-1])
        if len(tokens) < self.PREFIX_MIN_TOKENS:
            return
        self._keep(tokens, _columns(cache, b, columns.nonzero().squeeze(1)))

    def _forward(self, ids: Any, cache: Any, **kwargs: Any) -> Any:
        """The model on `ids` after what `cache` holds, which it extends; the logits of the last position
        only (where the model can say so: a prompt's logits for every position would take gigabytes)."""
        if self._last_logits_only:
            kwargs["logits_to_keep"] = 1
        return self.hf_model(input_ids=ids.to(self.hf_model.device), use_cache=True, **{self._cache_arg: cache},
                             **kwargs)

    def _generate(self, batch: Batch) -> None:
        """Decode the batch's rows side by side, one token each per step. A row that ends is kept, handed
        back and leaves; queued requests take the free places between steps."""
        import torch

        head = batch.requests[0]
        generator = None
        if head.seed is not None:
            generator = torch.Generator(device=self.hf_model.device).manual_seed(int(head.seed))
        tok = self.tokenizer
        state = self._packed(None, [(r, *self.prefill(r.prompt_ids)) for r in batch.requests]) \
            if self._plain_layers else self._padded(batch.requests)
        with torch.inference_mode():
            while state.rows:
                out = self._forward(state.feed, state.cache, attention_mask=state.mask, position_ids=state.positions)
                logits = out.logits[:, -1].float()
                picked = _pick(logits, head.temperature, head.top_p, generator)
                logprobs = torch.log_softmax(logits, dim=-1).gather(1, picked[:, None]).squeeze(1).tolist()
                new = picked.tolist()
                now = time.monotonic()
                stay = []
                for b, r in enumerate(state.rows):
                    r.token_ids.append(new[b])
                    r.logprobs.append(logprobs[b] if math.isfinite(logprobs[b]) else -1e9)
                    if new[b] in self.eos_ids:
                        r.finish_reason = "stop"
                    elif r.stop and any(s in tok.decode(r.token_ids[-24:]) for s in r.stop):
                        r.finish_reason = "stop"
                    elif len(r.token_ids) >= r.max_new_tokens:
                        r.finish_reason = "length"
                    elif r.cancelled:
                        r.finish_reason = "cancelled"
                    elif now > r.deadline:
                        r.finish_reason = "timeout"
                    if r.finish_reason is None:
                        stay.append(b)
                        continue
                    if self._plain_layers:
                        self._keep_row(r, state.cache, b, state.mask[b])
                    batch.answer(r)
                state.step(picked)
                if not self._plain_layers:  # caches that cannot sit side by side: the rows that ended leave
                    if len(stay) < len(state.rows):  # selecting copies every layer's cache: only when one left
                        state = state.select(stay)
                    continue
                for b in reversed(range(len(state.rows))):
                    if b not in stay:
                        state.leave(b)
                # the others decode on; queued requests take the places freed
                state = self._join(state, batch.join(self.max_batch - len(state.rows)))

    def _join(self, state: _Rows, new: list[Request]) -> _Rows:
        """The rows decoding and `new` ones. A new row's prompt but its last token is encoded from the
        kept entry that shares most with it (`prefill`) and written into a free row of the cache;
        its last token is what it is fed next. The cache is built anew, each row's own columns packed
        to the left, when there is no room, and when the columns nobody uses (rows that started
        short beside a long one that has left) would cost more than the copy."""
        starts = [(r, *self.prefill(r.prompt_ids)) for r in new]
        if not state.rows:
            return self._packed(None, starts)
        starts = [(r, n, entry) for r, n, entry in starts if not state.put(r, n, entry)]
        used = int(state.mask.sum(1).max()) - 1
        if starts or state.mask.shape[1] - 1 - used > max(256, used // 2):
            return self._packed(state, starts)
        return state

    def _packed(self, state: _Rows | None, starts: list[tuple[Request, int, Any]]) -> _Rows:
        """A new cache of the rows decoding and of `starts` (request, n, kept entry of its first n tokens):
        each row's own columns left-aligned, the rest of its row masked off, then the column it is fed
        next; room for max_batch rows and the answers ahead."""
        import torch

        device = self.hf_model.device
        rows = state.rows if state else []
        parts = []
        for b in range(len(rows)):
            assert state is not None  # rows are its rows
            cols = state.mask[b, :-1].nonzero().squeeze(1)
            n = len(cols)
            if n and int(cols[-1]) == n - 1:  # its first n columns
                parts.append((n, [(layer.keys[b:b + 1], layer.values[b:b + 1]) for layer in state.cache.layers]))
            else:
                parts.append((n, _columns(state.cache, b, cols)))
        parts += [(n, entry) for _, n, entry in starts]
        new = [r for r, _, _ in starts]
        if not parts:
            return _Rows([], None, None, None, None)
        width = max(n for n, _ in parts)
        # room for the answers ahead (at most 512 tokens: past that it grows, as long answers are rare)
        room = 1 + min(512, max(r.max_new_tokens - len(r.token_ids) for r in rows + new))
        mask = torch.zeros((len(parts), width + 1), dtype=torch.long, device=device)
        for i, (n, _) in enumerate(parts):
            mask[i, :n] = 1
        mask[:, width] = 1
        feed = torch.tensor([[r.prompt_ids[-1]] for r in new], dtype=torch.long, device=device)
        positions = torch.tensor([[n] for _, n, _ in starts], dtype=torch.long, device=device)
        if state is not None and rows:
            feed, positions = torch.cat([state.feed, feed]), torch.cat([state.positions, positions])
        cache = self._cache(parts, width, room, capacity=self.max_batch)
        return _Rows(rows + new, cache, mask, feed, positions)

    def _padded(self, new: list[Request]) -> _Rows:
        """For a model whose caches cannot sit side by side: the prompts left-padded, encoded together."""
        import torch
        from transformers import DynamicCache

        tok = self.tokenizer
        width = max(len(r.prompt_ids) for r in new)
        pad = tok.pad_token_id if tok.pad_token_id is not None else min(self.eos_ids, default=0)
        feed = torch.full((len(new), width), pad, dtype=torch.long)
        mask = torch.zeros((len(new), width), dtype=torch.long)
        for i, r in enumerate(new):
            feed[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[i, width - len(r.prompt_ids):] = 1
        mask = mask.to(self.hf_model.device)
        return _Rows(new, DynamicCache(config=self.hf_model.config), mask, feed, (mask.cumsum(-1) - 1).clamp(min=0))


class _Rows:
    """A batch being decoded: its requests, their cache, `mask` (per row, which cache columns are its
    own, and the column about to be fed), `feed` (the tokens fed next) and `positions` (where they
    stand in their own sequences)."""

    def __init__(self, rows: list[Request], cache: Any, mask: Any, feed: Any, positions: Any):
        self.rows, self.cache, self.mask, self.feed, self.positions = rows, cache, mask, feed, positions

    def step(self, picked: Any) -> None:
        """After a step: each row is fed the token it picked, in the next column."""
        import torch

        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self.rows), 1))], dim=1)
        self.positions = self.positions[:, -1:] + 1
        self.feed = picked[:, None]

    def select(self, stay: list[int]) -> _Rows:
        """Only the rows `stay`, in the same cache."""
        import torch

        keep = torch.tensor(stay, dtype=torch.long, device=self.mask.device)
        if stay:
            self.cache.batch_select_indices(keep)
        return _Rows([self.rows[b] for b in stay], self.cache, self.mask[keep], self.feed[keep], self.positions[keep])

    # A cache built by `_cache` (growing layers) has room for more rows: rows leave and join in place.

    def _view(self, n_rows: int, length: int) -> None:
        for layer in self.cache.layers:
            layer.keys, layer.values = layer.room[0][:n_rows, :, :length], layer.room[1][:n_rows, :, :length]

    def leave(self, b: int) -> None:
        """Row b goes: the last row takes its place (one row copied, not the cache)."""
        last, length = len(self.rows) - 1, self.mask.shape[1] - 1
        if b != last:
            for layer in self.cache.layers:
                for t in layer.room:
                    t[b, :, :length] = t[last, :, :length]
            for t in (self.mask, self.feed, self.positions):
                t[b] = t[last]
            self.rows[b] = self.rows[last]
        self.rows.pop()
        self.mask, self.feed, self.positions = self.mask[:last], self.feed[:last], self.positions[:last]
        self._view(last, length)

    def put(self, r: Request, n: int, entry: Any) -> bool:
        """Row r, whose first n tokens `entry` holds, joins in a free row; False when there is no room."""
        import torch

        rows, length = len(self.rows), self.mask.shape[1] - 1
        room = self.cache.layers[0].room
        width = max(length, n)
        if room is None or rows >= room[0].shape[0] or width + 1 > room[0].shape[2]:
            return False
        if n > length:  # the others' rows widen: the new columns are masked off for them
            for layer in self.cache.layers:
                for t in layer.room:
                    t[:rows, :, length:n] = 0
            gap = self.mask.new_zeros((rows, n - length))
            self.mask = torch.cat([self.mask[:, :length], gap, self.mask[:, length:]], dim=1)
        for layer, (k, v) in zip(self.cache.layers, entry or [(None, None)] * len(self.cache.layers), strict=True):
            for t, src in zip(layer.room, (k, v), strict=True):
                if n:
                    t[rows, :, :n] = src[0, :, :n]
                t[rows, :, n:width] = 0
        own = self.mask.new_zeros((1, width + 1))
        own[0, :n] = 1
        own[0, width] = 1
        self.mask = torch.cat([self.mask, own])
        self.feed = torch.cat([self.feed, self.feed.new_tensor([[r.prompt_ids[-1]]])])
        self.positions = torch.cat([self.positions, self.positions.new_tensor([[n]])])
        self.rows.append(r)
        self._view(rows + 1, width)
        return True


def _pick(logits: Any, temperature: float, top_p: float | None, generator: Any) -> Any:
    """The next token of each row: the most likely at temperature 0, else sampled at `temperature`
    from the smallest set of tokens whose probability reaches `top_p`."""
    import torch

    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        beyond = sorted_probs.cumsum(dim=-1) - sorted_probs > top_p  # the first token always stays
        sorted_probs[beyond] = 0.0
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


_GROWING: list[Any] = []


def _growing_layer() -> Any:
    """A transformers DynamicLayer that writes each step's keys and values into room it keeps ahead
    instead of concatenating: a decoding step copies one token per row, not the whole cache (which,
    at 16 rows of 2.5k tokens, made a SmolLM2-135M step 3x slower)."""
    if not _GROWING:
        from transformers.cache_utils import DynamicLayer

        class GrowingLayer(DynamicLayer):
            room: tuple[Any, Any] | None = None
            keys: Any  # DynamicLayer's tensors (transformers is not analysed here)
            values: Any

            def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                n, add = self.get_seq_length(), key_states.shape[-2]
                rows, heads = key_states.shape[:2]
                room = self.room
                if (room is None or n + add > room[0].shape[-2] or rows > room[0].shape[0]
                        or heads != room[0].shape[1] or (n and self.keys.data_ptr() != room[0].data_ptr())):
                    # no room kept (a first update: exactly what it brings), too little, or the cache was
                    # replaced (batch_select_indices): a new buffer, half as big again as what it holds
                    size = n + add + (max(256, (n + add) // 2) if room is not None else 0)
                    shape = (max(rows, room[0].shape[0] if room is not None else 0), heads, size, key_states.shape[3])
                    keys, values = key_states.new_empty(shape), value_states.new_empty(shape)
                    if n:
                        keys[:rows, :, :n] = self.keys
                        values[:rows, :, :n] = self.values
                    self.room = room = (keys, values)
                room[0][:rows, :, n:n + add] = key_states
                room[1][:rows, :, n:n + add] = value_states
                self.keys, self.values = room[0][:rows, :, :n + add], room[1][:rows, :, :n + add]
                return self.keys, self.values

        _GROWING.append(GrowingLayer)
    return _GROWING[0]


def _columns(cache: Any, b: int, cols: Any) -> list[tuple[Any, Any]]:
    """Row b of a cache, only the columns `cols`: per layer (keys, values) at batch size 1."""
    return [(layer.keys[b:b + 1].index_select(2, cols), layer.values[b:b + 1].index_select(2, cols))
            for layer in cache.layers]


def _nbytes(entry: Any) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in entry)


def _common(a: Any, b: Any, limit: int) -> int:
    """How many leading tokens a and b share, up to limit."""
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n
