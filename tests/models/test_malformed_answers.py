"""Answers of the wrong shape from a real HTTP server on 127.0.0.1: the backend's failure (`model_error`),
retried, unscored, with the raw answer (capped) in the rollout's error event; never the agent's zero."""

from __future__ import annotations

import json

import anyio
import pytest
from clawsdk_plugins.models.openai import OpenAIModel
from conftest import Reply, completion, write_task

from clawsdk.errors import ModelError
from clawsdk.models.completion import RAW_CAP
from clawsdk.runtime.runner import run
from clawsdk.store.store import Store

MESSAGES = [{"role": "user", "content": "hi"}]


def choice(**message):
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}]}


def call(**fields):
    return choice(content=None, tool_calls=[fields])


WRONG_SHAPES = [
    ({"choices": "nope"}, "choices: expected a list, got a string"),
    ({"choices": []}, "choices: the list is empty"),
    ({"choices": ["x"]}, "choices[0]: expected an object, got a string"),
    ({"choices": [{"finish_reason": "stop"}]}, "choices[0].message: missing"),
    ({"choices": [{"message": "hello"}]}, "choices[0].message: expected an object, got a string"),
    ({"choices": [{"message": None}]}, "choices[0].message: expected an object, got null"),
    (choice(content=42), "choices[0].message.content: expected a string or null, got int"),
    (choice(content=None, tool_calls={"name": "ls"}), "choices[0].message.tool_calls: expected a list, got an object"),
    (choice(content=None, tool_calls=["ls()"]), "choices[0].message.tool_calls[0]: expected a tool call object"),
    (call(id="c1", function="ls"), "tool_calls[0].function: expected an object with name and arguments, got a string"),
    (call(id="c1", type="function"), "tool_calls[0].function: expected an object with name and arguments, got null"),
    (call(id="c1", function={"name": 7, "arguments": "{}"}), "tool_calls[0].function.name: expected a string, got int"),
    (call(id="c1", function={"name": "ls", "arguments": 3}), "function.arguments: expected a JSON string or an object"),
    (call(id=9, function={"name": "ls", "arguments": "{}"}), "tool_calls[0].id: expected a string, got int"),
    (dict(choice(content="hi"), usage="lots"), "usage: expected an object, got a string"),
    (dict(choice(content="hi"), usage={"prompt_tokens": "12"}), "usage.prompt_tokens: expected an integer, got a string"),
    ({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"logprob": "low"}]}}]},
     "logprobs.content[0].logprob: expected a number, got a string"),
    ({"choices": [{"message": {"content": "x"}, "token_ids": [1, "2"]}]}, "token_ids[1]: expected a token id"),
    ([1, 2, 3], "the answer: expected a JSON object, got a list"),
    ("just text", "the answer: expected a JSON object, got a string"),
    (None, "the answer: expected a JSON object, got null"),
    (b"<html>502 Bad Gateway</html>", "the body is not JSON"),
    (b"", "the body is not JSON"),
]


def chat(model):
    async def go():
        with anyio.fail_after(20):
            return await model.chat(MESSAGES, None)
    return anyio.run(go)


@pytest.mark.parametrize("body,why", WRONG_SHAPES, ids=[w.split(":")[0][:40] for _, w in WRONG_SHAPES])
def test_a_wrong_shape_is_a_retried_model_error_naming_the_field_with_the_raw_answer(stub_server, body, why):
    stub_server.default = Reply(body)
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=2)
    with pytest.raises(ModelError) as caught:
        chat(model)
    assert "3 attempt(s): the answer is not a chat completion: " in str(caught.value)
    assert why in str(caught.value)
    assert len(stub_server.requests) == 3  # retried like a 5xx
    sent = body if isinstance(body, bytes) else __import__("json").dumps(body).encode()
    assert caught.value.raw == sent.decode()


def test_a_wrong_shape_then_a_good_answer_is_retried_to_success(stub_server):
    stub_server.script = [Reply({"choices": "nope"}), completion("fine")]
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=1)
    assert chat(model).message == {"role": "assistant", "content": "fine"}


def test_the_raw_answer_kept_is_capped(stub_server):
    stub_server.default = Reply({"choices": "n" * 10_000})
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=0)
    with pytest.raises(ModelError) as caught:
        chat(model)
    raw = caught.value.raw
    assert raw.startswith('{"choices": "nnn') and raw.endswith("… (10015 bytes in all)")
    assert len(raw.encode()) < RAW_CAP + 40


def test_a_rollout_whose_model_answers_the_wrong_shape_ends_model_error_unscored(stub_server, tmp_path):
    stub_server.default = Reply({"choices": "nope"})
    opts = {"model": "openai:stub", "base_url": stub_server.base_url, "backoff_s": 0.01, "retries": 1}

    async def go():
        with anyio.fail_after(60):
            return await run([write_task()], agent="tool-loop", agent_options=opts, db=tmp_path / "s.db",
                             retries=1, backoff_s=0.01)

    (outcome,) = anyio.run(go).outcomes
    assert outcome.kind.value == "model_error" and outcome.reward is None and outcome.passed is None
    assert outcome.attempts == 2  # the runner retried the rollout too
    assert "choices: expected a list, got a string" in outcome.error
    with Store(tmp_path / "s.db") as store:
        row = store.rollout(outcome.rollout_id)
        events = store.events(outcome.rollout_id)
    assert row["scored"] == 0 and row["failure_kind"] == "model_error" and row["reward"] is None
    [error] = [e["payload"] for e in events if e["kind"] == "error"]
    assert error["kind"] == "model_error" and error["raw"] == '{"choices": "nope"}'
    assert len(stub_server.requests) == 4  # 2 backend attempts in each of 2 rollout attempts


def test_any_text_a_local_model_writes_becomes_a_message_never_an_exception():
    """The local backends parse their own output with message_from_text: whatever the model writes (a
    botched call, a stray tag, bytes of noise) is the model's answer for the agent to judge, never a crash."""
    import random

    from clawsdk.models.toolcalls import message_from_text

    rng = random.Random(7)
    atoms = ["<tool_call>", "</tool_call>", "{", "}", "[", "]", '"', ":", ",", "name", "arguments", "null",
             "\\", "\n", "```json", "```", "1e999", "NaN", "\x00", "é", " ", "<tool_response>", "'", "{{", "}}"]
    for _ in range(3000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 40)))
        msg = message_from_text(text)
        assert msg["role"] == "assistant"
        for c in msg.get("tool_calls") or []:
            assert isinstance(c["function"]["name"], str) and isinstance(c["function"]["arguments"], str)


def test_a_model_that_nests_brackets_thousands_deep_gets_a_malformed_call_back_not_a_crash():
    """json raises RecursionError, not JSONDecodeError, past about a thousand levels; a small model that
    repeats "[" wrote that, and parse_tool_calls ("never raises") raised it into the agent."""
    from clawsdk.models.toolcalls import arguments_of, message_from_text, parse_tool_calls

    deep = "[" * 5000 + "]" * 5000
    for text in ("<tool_call>" + "[" * 100_000 + "</tool_call>",
                 "<tool_call>" + json.dumps({"name": "read", "arguments": deep}) + "</tool_call>",
                 '<tool_call>{"name": "read", "arguments": ' + deep + "}</tool_call>"):
        parsed = parse_tool_calls(text)
        assert parsed.calls == [] and len(parsed.errors) == 1 and "nested too deep" in parsed.errors[0][1], parsed
        assert message_from_text(text)["content"]  # the block stays, for the agent to answer with an error
    assert arguments_of({"function": {"name": "read", "arguments": deep}}) == deep  # not an object: a tool error


def test_a_message_with_a_lone_surrogate_is_sent_as_its_json_escape(stub_server):
    """A name that is not UTF-8 reads back as a lone surrogate; httpx's UTF-8 JSON could not encode a
    request that held one, so the model was never asked."""
    stub_server.default = completion("fine")
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=0)

    async def go():
        return await model.chat([{"role": "user", "content": "ls: n\udcffm.txt caf\u00e9"}], None)

    assert anyio.run(go).message["content"] == "fine"
    assert stub_server.requests[0]["messages"][0]["content"] == "ls: n\udcffm.txt caf\u00e9"
