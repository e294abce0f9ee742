"""The transformers backend: batching across rollouts, the wall clock, cancellation, token data.

Fast tests use a tiny random Llama checkpoint built here (its words are random, so it never
stops on its own: the model that runs on). The slow test runs the real embedded model.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import anyio
import pytest
from conftest import write_task

pytest.importorskip("torch")
pytest.importorskip("transformers")

from clawsdk_plugins.models.transformers import TransformersModel as Backend

from clawsdk.runtime.runner import run
from clawsdk.store.store import Store
from clawsdk.tasks.native import load_task


def TransformersModel(path: str, **options) -> Backend:
    """The backend in float32 on every device. These tests compare answers token for token and log-probability
    to 1e-3; in bfloat16, the default on CUDA, the tiny random model's near-equal logits order differently
    when a batch sums them in another order (seen on an H200)."""
    return Backend(path, dtype="float32", **options)

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<|im_start|>", "<|im_end|>", "<pad>"] + [f"w{i}" for i in range(200)] + [
        "system", "user", "assistant", "<tool_call>", "</tool_call>", "hello", "world", "write", "{", "}", '"', ":", ","]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>",
                                   pad_token="<pad>", bos_token="<|im_start|>")
    fast.chat_template = CHATML
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=100_000,
                         eos_token_id=2, pad_token_id=3, bos_token_id=1)
    path = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


MESSAGES = [{"role": "system", "content": "w1 w2"}, {"role": "user", "content": "hello world"}]


def answer_all(model, prompts: list, limit_s: float = 120) -> list:
    """Every prompt's greedy answer (12 tokens at most), all asked at once so that they batch."""
    out: dict = {}

    async def one(i):
        out[i] = await model.chat(prompts[i], None, max_tokens=12, timeout_s=60)

    async def go():
        with anyio.fail_after(limit_s):
            async with anyio.create_task_group() as tg:
                for i in range(len(prompts)):
                    tg.start_soon(one, i)

    anyio.run(go)
    return [out[i] for i in range(len(prompts))]


def test_a_model_that_runs_on_is_cut_by_the_wall_clock(tiny_checkpoint):
    model = TransformersModel(str(tiny_checkpoint), threads=1)

    async def go():
        started = time.monotonic()
        with anyio.fail_after(60):
            r = await model.chat(MESSAGES, None, max_tokens=90_000, timeout_s=1.0)
        return r, time.monotonic() - started

    model.load()
    anyio.run(lambda: model.chat(MESSAGES, None, max_tokens=2, timeout_s=60))  # CUDA's first call starts it up
    r, took = anyio.run(go)
    assert r.finish_reason == "timeout" and took < 10
    n = r.usage["completion_tokens"]
    assert n > 5 and len(r.completion_token_ids) == n and len(r.logprobs) == n
    assert all(lp <= 0 for lp in r.logprobs)
    assert r.prompt_token_ids and r.usage["prompt_tokens"] == len(r.prompt_token_ids)


def test_concurrent_requests_are_batched_and_logprobs_match_the_model(tiny_checkpoint):
    import torch

    model = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    model.load()
    batches: list = []
    generate = model._generate
    model._generate = lambda batch: (batches.append(batch), generate(batch))[1]
    prompts = [[{"role": "user", "content": " ".join(f"w{j}" for j in range(i + 1))}] for i in range(6)]
    out = answer_all(model, prompts, limit_s=60)
    sizes = [len(b.everyone()) for b in batches]  # each row joins before it is answered
    assert sum(sizes) == 6 and max(sizes) > 1
    # batched, left-padded greedy generation gives what the model gives one prompt alone
    alone = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=1)
    alone.hf_model, alone.tokenizer = model.hf_model, model.tokenizer  # the same weights, loaded once
    alone._setup_tokens()
    alone._loaded = True
    single = anyio.run(lambda: alone.chat(prompts[5], None, max_tokens=12, timeout_s=60))
    assert single.completion_token_ids == out[5].completion_token_ids
    # and the recorded logprobs are the model's own (teacher-forced) log-probabilities
    r = out[5]
    ids = torch.tensor([r.prompt_token_ids + r.completion_token_ids], device=model.hf_model.device)
    with torch.inference_mode():
        logits = model.hf_model(ids).logits.float().log_softmax(-1)[0]
    p = len(r.prompt_token_ids)
    forced = [logits[p - 1 + i, t].item() for i, t in enumerate(r.completion_token_ids)]
    assert forced == pytest.approx(r.logprobs, abs=1e-3)


def test_a_cancelled_rollout_stops_its_generation_and_the_model_stays_usable(tiny_checkpoint):
    model = TransformersModel(str(tiny_checkpoint), threads=1)
    model.load()

    async def go():
        started = time.monotonic()
        with anyio.move_on_after(0.5):
            await model.chat(MESSAGES, None, max_tokens=90_000, timeout_s=60)
        cancelled_after = time.monotonic() - started
        with anyio.fail_after(30):
            r = await model.chat(MESSAGES, None, max_tokens=5, timeout_s=30)
        return cancelled_after, r

    cancelled_after, r = anyio.run(go)
    assert cancelled_after < 2
    assert r.usage["completion_tokens"] <= 5 and r.finish_reason in ("length", "stop")


def test_tool_choice_required_starts_the_answer_with_a_tool_call(tiny_checkpoint):
    model = TransformersModel(str(tiny_checkpoint), threads=1)
    model.load()
    tools = [{"type": "function", "function": {"name": "write", "parameters": {"type": "object"}}}]
    r = anyio.run(lambda: model.chat(MESSAGES, tools, max_tokens=6, timeout_s=30, tool_choice="required"))
    assert r.raw.startswith("<tool_call>\n")
    prompt = model.tokenizer.decode(r.prompt_token_ids)
    assert prompt.endswith("assistant <tool_call>")


def test_a_rollout_whose_model_runs_on_ends_as_agent_timeout(tiny_checkpoint, tmp_path):
    async def go():
        with anyio.fail_after(120):
            return await run([write_task()], agent="tool-loop", db=tmp_path / "s.db", retries=0, agent_options={
                "model": f"transformers:{tiny_checkpoint}", "threads": 1, "max_tokens": 90_000,
                "turn_timeout_s": 1.5, "max_context_chars": 10**9})

    (outcome,) = anyio.run(go).outcomes
    assert outcome.kind.value == "agent_timeout" and "wall-clock limit" in outcome.error
    assert outcome.duration_s < 60
    with Store(tmp_path / "s.db") as store:
        events = store.events(outcome.rollout_id)
        row = store.rollout(outcome.rollout_id)
    assert row["scored"] == 1 and row["model"] == f"transformers:{tiny_checkpoint}"
    response = next(e["payload"] for e in events if e["kind"] == "model_response")
    assert response["finish_reason"] == "timeout"
    assert len(response["completion_token_ids"]) == len(response["logprobs"]) > 0
    assert [e["kind"] for e in events][-1] in ("error", "verifier")


@pytest.mark.slow
def test_the_embedded_model_works_an_example_task_end_to_end(tmp_path):
    pytest.importorskip("gguf")
    from clawsdk_plugins.models.embedded import embedded_gguf

    try:
        embedded_gguf()
    except Exception as e:
        pytest.skip(str(e))
    task = load_task(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "mailing-list-dedupe")

    async def go():
        with anyio.fail_after(900):
            return await run([task], agent="tool-loop", db=tmp_path / "s.db", retries=0, agent_options={
                "model": "embedded", "max_turns": 3, "max_tokens": 64, "tool_choice": "required",
                "tools": "read,write,ls,exec"})

    (outcome,) = anyio.run(go).outcomes
    assert outcome.kind.value in ("ok", "agent_timeout", "agent_error"), outcome.error
    with Store(tmp_path / "s.db") as store:
        events = store.events(outcome.rollout_id)
        row = store.rollout(outcome.rollout_id)
        verdict = store.verdict(outcome.rollout_id)
    assert row["status"] == "finished" and row["model"] == "embedded:smollm2-135m-instruct"
    assert verdict is not None and 0 <= verdict["score"] <= 1
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "model_request" and "model_response" in kinds and kinds[-1] == "verifier"
    request = events[0]["payload"]
    assert request["messages"][1]["content"] == task.instruction and len(request["tools"]) == 5
    for e in events:
        if e["kind"] == "model_response":
            p = e["payload"]
            assert p["message"]["role"] == "assistant"
            assert len(p["completion_token_ids"]) == len(p["logprobs"]) == p["usage"]["completion_tokens"] > 0
    # the tiny model called tools (tool_choice=required): each call was executed or answered with an error
    assert "tool_call" in kinds or any(e["kind"] == "error" and e["payload"].get("kind") == "malformed_tool_call"
                                       for e in events)


@pytest.mark.slow
def test_a_reinstalled_gguf_reuses_its_dequantized_copy(tmp_path):
    """Each new virtualenv installs the embedded GGUF with a new mtime; the copy was keyed by it, and each
    one left another 538 MB copy in the cache (ten in a day of CI runs here)."""
    import os
    import shutil

    pytest.importorskip("gguf")
    from clawsdk_plugins.models.embedded import dequantized_copy, embedded_gguf

    try:
        installed = embedded_gguf()
    except Exception as e:
        pytest.skip(str(e))
    first = dequantized_copy(installed)  # converted once (about 30 s), or already in the cache
    reinstalled = tmp_path / "venv" / installed.name
    reinstalled.parent.mkdir()
    shutil.copyfile(installed, reinstalled)
    os.utime(reinstalled, (1_000_000, 1_000_000))
    assert dequantized_copy(reinstalled) == first


def test_the_backends_keep_their_registered_names_and_import_paths():
    # models_local was split by backend: `--model NAME` and code that imports from it still work
    from clawsdk_plugins.models import embedded as models_embedded
    from clawsdk_plugins.models import llamacpp as models_llamacpp
    from clawsdk_plugins.models import local as models_local
    from clawsdk_plugins.models import vllm as models_vllm

    from clawsdk.plugins import get_registry


    registry = get_registry()
    assert registry.get("models", "transformers") is Backend
    assert registry.get("models", "embedded") is models_embedded.EmbeddedModel
    assert registry.get("models", "vllm") is models_vllm.VLLMModel
    assert registry.get("models", "llamacpp") is models_llamacpp.LlamaCppModel
    for name in models_local.__all__:
        assert getattr(models_local, name) is not None
    assert issubclass(models_local.EmbeddedModel, models_local.LocalChatModel)


def test_what_a_prompt_shares_with_an_earlier_one_is_not_encoded_again_and_changes_no_answer(tiny_checkpoint):
    """Rollouts share the system prompt and tool list; a later turn extends an earlier prompt and its
    answer. Starting from the kept caches must give exactly what encoding the whole prompt gives, and
    the generations that start from a kept cache must not spoil it."""
    system = {"role": "system", "content": " ".join(f"w{i % 200}" for i in range(300))}
    prompts = [[system, {"role": "user", "content": " ".join(f"w{j}" for j in range(i + 1))}] for i in range(5)]
    prompts.append(prompts[4] + [{"role": "assistant", "content": "w7 w8"}, {"role": "user", "content": "w9 " * 40}])

    plain = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    plain.PREFIX_MIN_TOKENS = 10**9  # nothing kept: every prompt encoded whole
    one_by_one = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=1)  # kept entries cut and grown
    cached = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    cached.load()
    widths: list[int] = []  # tokens of every forward that encodes more than one (not a decoding step)
    forward = cached.hf_model.forward

    @functools.wraps(forward)  # generate reads forward's signature to decide what to pass
    def spy(*a, **kw):
        ids = kw.get("input_ids", a[0] if a else None)
        if ids is not None and ids.shape[1] > 1:
            widths.append(int(ids.shape[1]))
        return forward(*a, **kw)

    cached.hf_model.forward = spy
    want = answer_all(plain, prompts)
    first = answer_all(cached, prompts)
    system_turn = len(cached.render(prompts[0][:1], None)) - 8  # the system turn, less the template's last tokens
    assert sum(widths) < sum(len(w.prompt_token_ids) for w in want) - 5 * system_turn, widths  # encoded once
    widths.clear()
    again = answer_all(cached, prompts)
    assert widths == []  # every prompt was seen: nothing encoded again
    alone = answer_all(one_by_one, prompts)
    assert one_by_one.prefixes
    for w, a, b, c in zip(want, first, again, alone, strict=True):
        assert a.completion_token_ids == w.completion_token_ids == b.completion_token_ids == c.completion_token_ids
        for got in (a, b, c):
            assert got.logprobs == pytest.approx(w.logprobs, abs=1e-3)
        assert a.prompt_token_ids == w.prompt_token_ids  # what is recorded is the whole prompt
    # a new conversation encodes only what follows the system turn; a next turn only the new tool result
    widths.clear()
    new = [system, {"role": "user", "content": "w150 w151 w152"}]
    turn = prompts[0] + [{"role": "assistant", "content": tok_text(cached, first[0])},
                         {"role": "user", "content": "w3 " * 30}]
    answer_all(cached, [new, turn])
    own = (len(cached.render(new, None)) - system_turn) + (len(cached.render(turn, None)) - len(want[0].prompt_token_ids))
    assert 0 < sum(widths) <= own, widths


def tok_text(model, response) -> str:
    return model.tokenizer.decode(response.completion_token_ids, skip_special_tokens=True)


def test_kept_caches_are_cut_grown_bounded_and_equal_a_fresh_encoding(tiny_checkpoint):
    import torch

    model = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    model.load()
    n, entry = model.prefill([5] * 40 + [6])
    assert n == 40 and not model.prefixes  # too short to keep
    n, entry = model.prefill([5] * 300 + [6, 9])
    assert n == 301 and list(model.prefixes) == [tuple([5] * 300 + [6])]
    n, again = model.prefill([5] * 300 + [7])  # all but the last token kept already: nothing encoded
    assert n == 300 and again is entry
    # a longer run extends the kept entry, which it replaces (it serves whatever that served)
    n, _ = model.prefill([5] * 300 + [6] * 200 + [1])
    assert n == 500 and list(model.prefixes) == [tuple([5] * 300 + [6] * 200)]
    # a row that parts from it after 400 tokens starts from it, cut; the kept entry stays whole
    n, parted = model.prefill([5] * 300 + [6] * 100 + [7] * 200)
    assert n == 599 and len(model.prefixes) == 2
    assert model.prefixes[tuple([5] * 300 + [6] * 200)][0][0].shape[2] == 500
    with torch.inference_mode():
        ids = torch.tensor([[5] * 300 + [6] * 100 + [7] * 199], device=model.hf_model.device)
        fresh = model.hf_model(input_ids=ids, use_cache=True)
    cache = fresh.get("cache", fresh.get("past_key_values"))
    for (k, v), layer in zip(parted, cache.layers, strict=True):
        assert torch.allclose(k, layer.keys, atol=1e-5) and torch.allclose(v, layer.values, atol=1e-5)
    # bounded: past PREFIX_BYTES the least recently used goes
    model.PREFIX_BYTES = 700 * sum(k[0, :, :1].numel() * 4 * 2 for k, _ in parted)  # about 700 tokens
    model.prefill([9] * 300 + [1])
    assert list(model.prefixes) == [tuple([9] * 300)]


def test_a_growing_cache_writes_into_its_room_and_regrows_when_replaced():
    import torch
    from clawsdk_plugins.models.transformers import _growing_layer

    layer = _growing_layer()()
    chunks = [torch.randn(2, 1, 5, 4)] + [torch.randn(2, 1, 1, 4) for _ in range(300)]
    values = [c + 1 for c in chunks]
    layer.update(chunks[0], values[0])
    assert layer.room[0].shape[2] == 5  # a first update keeps exactly what it brings
    pointers = set()
    for k, v in zip(chunks[1:], values[1:], strict=True):
        keys, vals = layer.update(k, v)
        pointers.add(layer.room[0].data_ptr())
    assert len(pointers) <= 3  # grown half as big again each time, not per token
    assert torch.equal(keys, torch.cat(chunks, 2)) and torch.equal(vals, torch.cat(values, 2))
    layer.crop(-10)
    layer.update(chunks[1], values[1])
    assert torch.equal(layer.keys[:, :, -1:], chunks[1]) and layer.get_seq_length() == 296
    layer.batch_select_indices(torch.tensor([1]))  # a new tensor: the next update copies it into new room
    layer.update(chunks[2][1:], values[2][1:])
    assert layer.keys.shape == (1, 1, 297, 4) and torch.equal(layer.keys[0, :, :5], chunks[0][1])
    assert torch.equal(layer.keys[0, :, -1], chunks[2][1, :, 0])


def test_a_row_that_ends_leaves_the_batch_and_the_others_answer_the_same(tiny_checkpoint):
    model = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    model.load()
    rows: list[int] = []  # batch size of every decoding step
    forward = model.hf_model.forward

    @functools.wraps(forward)
    def spy(*a, **kw):
        ids = kw.get("input_ids", a[0] if a else None)
        if ids is not None and ids.shape[1] == 1:
            rows.append(int(ids.shape[0]))
        return forward(*a, **kw)

    model.hf_model.forward = spy
    prompts = [[{"role": "user", "content": " ".join(f"w{j}" for j in range(i + 3))}] for i in range(3)]
    limits = [2, 5, 12]
    out: dict = {}

    async def go():
        async def one(i):
            out[i] = await model.chat(prompts[i], None, max_tokens=limits[i], timeout_s=60)

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(one, i)

    anyio.run(go)
    assert [len(out[i].completion_token_ids) for i in range(3)] == limits
    assert rows == [3, 3, 2, 2, 2] + [1] * 7, rows  # batched; two left early, the last decoded alone
    model.hf_model.forward = forward
    for i in range(3):  # each answers as it does alone
        alone = anyio.run(functools.partial(model.chat, prompts[i], None, max_tokens=limits[i], timeout_s=60))
        assert alone.completion_token_ids == out[i].completion_token_ids


def test_a_model_whose_caches_cannot_sit_side_by_side_answers_the_same(tiny_checkpoint):
    system = {"role": "system", "content": " ".join(f"w{i % 200}" for i in range(300))}
    prompts = [[system, {"role": "user", "content": " ".join(f"w{j}" for j in range(i + 1))}] for i in range(4)]
    kept = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    padded = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    padded.load()
    padded._plain_layers = False  # as for a model with sliding-window layers: left-padded prompts
    for a, b in zip(answer_all(kept, prompts), answer_all(padded, prompts), strict=True):
        assert a.completion_token_ids == b.completion_token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
    assert not padded.prefixes


def test_sampling_follows_temperature_and_top_p_and_a_seed_repeats():
    import torch
    from clawsdk_plugins.models.transformers import _pick

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(4000, 1)
    assert torch.equal(_pick(logits, 0.0, None, None), torch.zeros(4000, dtype=torch.long))
    assert torch.equal(_pick(logits, 1.0, 1e-6, None), torch.zeros(4000, dtype=torch.long))  # only the top token
    seeded = [_pick(logits[:50], 1.0, None, torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(*seeded)
    drawn = torch.bincount(_pick(logits, 1.0, None, torch.Generator().manual_seed(1)), minlength=4) / 4000
    assert drawn == pytest.approx(torch.softmax(logits[0], -1), abs=0.03)
    # top_p 0.9 keeps the smallest set reaching 0.9: tokens 0-2 (0.64, 0.24, 0.09), never token 3
    kept = torch.bincount(_pick(logits, 1.0, 0.9, torch.Generator().manual_seed(2)), minlength=4)
    assert kept[3] == 0 and kept[2] > 0


def spy_decoding(model) -> list:
    """(rows, columns) of every decoding step the model runs (one new token per row)."""
    steps: list = []
    forward = model.hf_model.forward

    @functools.wraps(forward)
    def spy(*a, **kw):
        ids = kw.get("input_ids", a[0] if a else None)
        if ids is not None and ids.shape[1] == 1:
            steps.append((int(ids.shape[0]), int(kw["attention_mask"].shape[1])))
        return forward(*a, **kw)

    model.hf_model.forward = spy
    return steps


def nan_memory(model, monkeypatch) -> None:
    """Memory a cache takes without writing it is nan, and attention reads every column (eager; sdpa on
    CPU may skip masked ones): a column read that should not be changes every answer after it."""
    import torch

    model.hf_model.set_attn_implementation("eager")
    empty = torch.Tensor.new_empty
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, *a, **kw: empty(self, *a, **kw).fill_(float("nan")))


def alone(model, messages, max_tokens):
    """The answer the model gives this prompt with nothing beside it, nothing kept."""
    model.prefixes.clear()
    return anyio.run(lambda: model.chat(messages, None, max_tokens=max_tokens, timeout_s=60))


def test_a_request_made_while_a_batch_decodes_joins_it_and_is_answered_when_its_row_ends(tiny_checkpoint,
                                                                                         monkeypatch):
    model = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    model.load()
    nan_memory(model, monkeypatch)
    steps = spy_decoding(model)
    prompts = {"long": [{"role": "user", "content": "w5 w6 w7"}],
               "wide": [{"role": "user", "content": " ".join(f"w{i}" for i in range(40))}],  # the other has gaps
               "short": [{"role": "user", "content": "w9 w10"}]}
    limits = {"long": 60, "wide": 40, "short": 4}
    ended: list = []

    async def go():
        out = {}

        async def ask(name):
            out[name] = await model.chat(prompts[name], None, max_tokens=limits[name], timeout_s=60)
            ended.append((name, len(steps)))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "long")
                tg.start_soon(ask, "wide")
                while len(steps) < 5:  # the two are decoding
                    await anyio.sleep(0.005)
                tg.start_soon(ask, "short")
        return out

    out = anyio.run(go)
    rows = [n for n, _ in steps]
    assert rows[:5] == [2] * 5 and 3 in rows, rows  # it joined the batch that was running
    assert len(steps) == 60 and sum(rows) == 104  # and no step was spent on it but its four tokens
    assert [name for name, _ in ended] == ["short", "wide", "long"] and ended[0][1] < 40  # answered as it ended
    for name in prompts:
        want = alone(model, prompts[name], limits[name])
        assert out[name].completion_token_ids == want.completion_token_ids
        assert out[name].logprobs == pytest.approx(want.logprobs, abs=1e-3)


def test_when_a_long_row_leaves_the_columns_nobody_uses_are_packed_away(tiny_checkpoint):
    model = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    model.load()
    steps = spy_decoding(model)
    long_prompt = [{"role": "user", "content": " ".join(f"w{i % 200}" for i in range(600))}]
    short_prompt = [{"role": "user", "content": "w9 w10"}]

    async def go():
        async def ask(messages, n):
            out.append(await model.chat(messages, None, max_tokens=n, timeout_s=60))

        out: list = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, long_prompt, 3)
            tg.start_soon(ask, short_prompt, 30)
        return out

    _long_answer, short_answer = sorted(anyio.run(go), key=lambda r: len(r.completion_token_ids))
    columns = [c for _, c in steps]
    assert columns[0] > 600 and columns[-1] < 60, columns  # the short row went on in its own columns only
    assert short_answer.completion_token_ids == alone(model, short_prompt, 30).completion_token_ids
    assert short_answer.logprobs == pytest.approx(alone(model, short_prompt, 30).logprobs, abs=1e-3)


def test_a_row_longer_than_the_batch_widens_it_in_place_and_unused_memory_never_reaches_an_answer(
        tiny_checkpoint, monkeypatch):
    model = TransformersModel(str(tiny_checkpoint), threads=1, max_batch=8)
    model.load()
    nan_memory(model, monkeypatch)
    steps = spy_decoding(model)
    prompts = {"a": [{"role": "user", "content": "w5 w6 w7"}],
               "b": [{"role": "user", "content": "w8 w9 w10 w11 w12"}],
               "wide": [{"role": "user", "content": " ".join(f"w{i % 200}" for i in range(300))}]}
    limits = {"a": 400, "b": 30, "wide": 10}  # a long answer: room ahead for the wide row to join in place

    async def go():
        out = {}

        async def ask(name):
            out[name] = await model.chat(prompts[name], None, max_tokens=limits[name], timeout_s=60)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "a")
                tg.start_soon(ask, "b")
                while len(steps) < 5:
                    await anyio.sleep(0.005)
                tg.start_soon(ask, "wide")  # 300 tokens: wider than the batch's 20-odd columns
        return out

    out = anyio.run(go)
    assert 3 in [n for n, _ in steps] and max(c for _, c in steps) > 300  # it joined, widening the batch
    for name in prompts:
        want = alone(model, prompts[name], limits[name])
        assert out[name].completion_token_ids == want.completion_token_ids
        assert out[name].logprobs == pytest.approx(want.logprobs, abs=1e-3)


EXIT_WHILE_GENERATING = """
import sys, anyio
from clawsdk_plugins.models.transformers import TransformersModel
model = TransformersModel(sys.argv[1], device="cpu")

async def main():
    with anyio.move_on_after(1):  # the agent's time runs out while the model reads a long prompt
        await model.chat([{"role": "user", "content": "hello " * 20000}], max_tokens=100000, timeout_s=600)

anyio.run(main)
import threading
generating = any(t.name.startswith("clawsdk-") and t.is_alive() for t in threading.enumerate())
print(f"the run is over; still generating: {generating}", flush=True)
"""


def test_a_process_that_ends_while_the_model_generates_exits_cleanly(tiny_checkpoint, tmp_path):
    """The generation thread was still inside torch when the interpreter went down: the process aborted (exit
    134, `terminate called without an active exception`) after `clawsdk run` had printed its summary, every
    time an agent ran out of time while the embedded model was answering."""
    import os
    import subprocess
    import sys

    script = tmp_path / "exit_while_generating.py"
    script.write_text(EXIT_WHILE_GENERATING)
    proc = subprocess.run([sys.executable, str(script), str(tiny_checkpoint)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0 and "the run is over" in proc.stdout, proc.stderr[-2000:]
    assert "still generating: True" in proc.stdout  # the case at hand: the thread is inside torch at exit
    assert "terminate called" not in proc.stderr


def test_models_load_without_the_hubs_kernels_unless_asked(tiny_checkpoint, monkeypatch):
    """transformers 5 fetches `kernels-community/*` code from the Hub in `model.train()` on CUDA: on an H200
    with no network every `train sft` failed that way, and where there is a network it runs code nobody
    installed. clawsdk's backend and trainers load with it off; transformers' USE_HUB_KERNELS=1 turns it on."""
    from clawsdk_plugins.trainers.common import _load_model

    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    model = TransformersModel(str(tiny_checkpoint), threads=1)
    model.load()
    trained, _ = _load_model(str(tiny_checkpoint), 1)
    assert not model.hf_model.use_kernels and not trained.use_kernels
    monkeypatch.setenv("USE_HUB_KERNELS", "1")
    assert _load_model(str(tiny_checkpoint), 1)[0].use_kernels


def test_a_failed_generation_frees_what_it_held(tiny_checkpoint, monkeypatch):
    """The waiters got the exception with its traceback, whose frames held the batch's caches and logits: after
    CUDA ran out of memory, the next batch found the memory still taken."""
    import logging
    import weakref

    import torch

    from clawsdk.errors import ModelError

    model = TransformersModel(str(tiny_checkpoint), threads=1)
    model.load()
    held: list = []

    def generate(batch):
        caches = torch.zeros(1024)  # what a real batch holds in its frame when it fails
        held.append(weakref.ref(caches))
        raise RuntimeError("CUDA out of memory")

    model._generate = generate
    # the failure is logged with its traceback; pytest's log capture keeps every record (a console does not)
    monkeypatch.setattr(logging.getLogger("clawsdk_plugins.models.local_engine"), "propagate", False)
    with pytest.raises(ModelError, match="CUDA out of memory"):
        anyio.run(lambda: model.chat(MESSAGES, None, max_tokens=4, timeout_s=30))
    assert held and held[0]() is None
