"""The queue every in-process backend shares, with a backend that counts instead of a model: a failing
generation reaches every waiter, joined or not; time that runs out in the queue is a timeout; a
cancelled waiter's row goes; the thread leaves nobody waiting."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from clawsdk_plugins.models.local_engine import Batch, LocalChatModel

from clawsdk.errors import ContextOverflow, FailureKind, ModelError


class Words:
    """A tokenizer of words: a prompt is the number of words of its messages."""

    chat_template = ""

    def apply_chat_template(self, messages, **_):
        return " ".join(m["content"] for m in messages)

    def __call__(self, text, **_):
        return {"input_ids": [len(w) for w in text.split()]}

    def decode(self, ids, **_):
        return " ".join("x" * i for i in ids)


class Counting(LocalChatModel):
    """Emits one token per step, `step_s` apart, until max_new_tokens; `fail` makes a step raise."""

    backend = "counting"
    name = "counting"

    def __init__(self, step_s: float = 0.01, **options):
        super().__init__(**options)
        self.step_s = step_s
        self.fail: threading.Event = threading.Event()
        self.batches: list[list[int]] = []  # the prompt length of every row a batch served

    def _load(self):
        self.tokenizer = Words()
        self.context_window = 10_000

    def _generate(self, batch: Batch):
        rows = list(batch.requests)
        served = [len(r.prompt_ids) for r in rows]
        self.batches.append(served)
        while rows:
            time.sleep(self.step_s)
            if self.fail.is_set():
                raise RuntimeError("the device fell over")
            for r in list(rows):
                r.token_ids.append(1)
                r.logprobs.append(0.0)
                if r.cancelled or len(r.token_ids) >= r.max_new_tokens:
                    r.finish_reason = "cancelled" if r.cancelled else "length"
                    rows.remove(r)
                    batch.answer(r)
            joined = batch.join(self.max_batch - len(rows))
            served += [len(r.prompt_ids) for r in joined]
            rows += joined


def ask(words: int, tokens: int, **params):
    return [{"role": "user", "content": " ".join(["w"] * words)}], {"max_tokens": tokens, **params}


def test_a_failing_generation_reaches_every_waiter_and_the_next_call_works():
    model = Counting(max_batch=4)
    errors: list = []

    async def one(words, tokens):
        messages, params = ask(words, tokens)
        try:
            await model.chat(messages, **params)
        except ModelError as e:
            errors.append((words, str(e)))

    async def go():
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 1, 1000)
                await anyio.sleep(0.1)
                tg.start_soon(one, 2, 1000)  # joins the running batch
                await anyio.sleep(0.1)
                model.fail.set()
            model.fail.clear()
            messages, params = ask(3, 2)
            return await model.chat(messages, **params)

    after = anyio.run(go)
    assert model.batches[0] == [1, 2]
    assert sorted(w for w, _ in errors) == [1, 2]
    assert all("generation failed: RuntimeError: the device fell over" in e for _, e in errors)
    assert after.usage["completion_tokens"] == 2


def test_time_that_runs_out_in_the_queue_is_a_timeout_and_a_cancelled_row_goes():
    model = Counting(max_batch=1, step_s=0.02)

    async def go():
        out = {}

        async def one(name, words, tokens, timeout_s):
            messages, params = ask(words, tokens, timeout_s=timeout_s)
            out[name] = await model.chat(messages, **params)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "first", 1, 25, 30)  # holds the only place for half a second
                await anyio.sleep(0.05)
                tg.start_soon(one, "queued", 2, 5, 0.2)
                with anyio.move_on_after(0.1):
                    await one("cancelled", 3, 10**6, 30)
        return out

    out = anyio.run(go)
    assert out["first"].finish_reason == "length" and out["first"].usage["completion_tokens"] == 25
    assert out["queued"].finish_reason == "timeout" and out["queued"].usage["completion_tokens"] == 0
    assert "cancelled" not in out
    assert [3] not in model.batches  # the cancelled request left the queue before it got a place


def test_seeded_sampling_never_joins_a_running_batch():
    model = Counting(max_batch=4)

    async def go():
        async with anyio.create_task_group() as tg:
            for i in range(2):
                messages, params = ask(1 + i, 20, temperature=1.0, seed=7)
                tg.start_soon(lambda m=messages, p=params: model.chat(m, **p))
                await anyio.sleep(0.05)

    anyio.run(go)
    assert model.batches == [[1], [2]]


@pytest.mark.parametrize("fails", [False, True])
def test_the_generation_thread_ends_when_the_queue_is_empty(fails):
    model = Counting(max_batch=2)
    model.fail.set() if fails else None

    async def go():
        messages, params = ask(1, 3)
        try:
            await model.chat(messages, **params)
        except ModelError:
            assert fails

    def serving():
        return [t for t in threading.enumerate() if t.name == "clawsdk-counting"]

    anyio.run(go)
    # wait for this thread itself: the count of all threads fell early when another test's thread ended
    deadline = time.monotonic() + 5
    while serving() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not serving()
    assert model._state is not None and not model._state.serving and not model._state.pending


def test_a_conversation_past_the_window_is_the_agents_failure_once_it_has_turns():
    model = Counting()
    opening = ask(20_000, 5)[0]
    grown = [{"role": "user", "content": "w"}, {"role": "assistant", "content": "w"},
             {"role": "tool", "content": " ".join(["w"] * 20_000)}]

    async def go(messages, max_tokens):
        with anyio.fail_after(20):
            return await model.chat(messages, max_tokens=max_tokens)

    with pytest.raises(ContextOverflow) as grown_overflow:
        anyio.run(go, grown, 5)
    with pytest.raises(ContextOverflow, match="opening prompt") as opening_overflow:
        anyio.run(go, opening, 5)
    assert grown_overflow.value.kind is FailureKind.AGENT_ERROR
    assert grown_overflow.value.window == 10_000 and grown_overflow.value.prompt_tokens > 20_000
    assert opening_overflow.value.kind is FailureKind.MODEL_ERROR
    # a prompt that fits with a generous max_tokens gets what the window leaves
    assert anyio.run(go, ask(9_990, 5)[0], 10**6).usage["completion_tokens"] == 10


def test_a_model_that_fails_to_load_fails_every_later_call_at_once():
    """Each rollout (and each retry) loaded again: a hub name with no network spent 2.5 minutes in download
    retries every time before the same error."""

    class Unloadable(Counting):
        loads = 0

        def _load(self):
            type(self).loads += 1
            time.sleep(0.2)
            raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    model = Unloadable()
    errors: list[str] = []

    async def call():
        try:
            await model.chat([{"role": "user", "content": "hi"}])
        except ModelError as e:
            errors.append(str(e))

    async def main():
        async with anyio.create_task_group() as tg:  # rollouts that start together wait for the one load
            for _ in range(3):
                tg.start_soon(call)
        await call()  # a retry

    anyio.run(main)
    assert Unloadable.loads == 1
    assert errors == ["counting failed to load: OSError: We couldn't connect to 'https://huggingface.co' to load "
                      "the files"] * 4
