"""The `openai` backend against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import pickle
import time

import anyio
import pytest
from clawsdk_plugins.models.openai import OpenAIModel, context_overflow
from conftest import OVERFLOW_STYLES, Reply, completion, prompt_tokens

from clawsdk.errors import ContextOverflow, FailureKind, ModelError

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "ls", "description": "list",
                                           "parameters": {"type": "object", "properties": {}}}}]


def chat(model: OpenAIModel, messages=MESSAGES, **params):
    async def go():
        with anyio.fail_after(20):
            return await model.chat(messages, TOOLS, **params)
    return anyio.run(go)


def test_completion_tool_calls_usage_logprobs_and_key(stub_server):
    stub_server.script = [completion(None, [{"name": "ls", "arguments": {"path": "."}}],
                                     logprobs=[-0.1, -0.2], token_ids=[5, 6], usage=(12, 2))]
    model = OpenAIModel("stub", base_url=stub_server.base_url, api_key="sk-test", logprobs=True, token_ids=True)
    r = chat(model, max_tokens=64, temperature=0.0, timeout_s=5)
    assert r.message["tool_calls"][0]["function"] == {"name": "ls", "arguments": '{"path": "."}'}
    assert r.usage == {"prompt_tokens": 12, "completion_tokens": 2}
    assert r.logprobs == [-0.1, -0.2] and r.completion_token_ids == [5, 6]
    assert r.finish_reason == "tool_calls"
    sent = stub_server.requests[0]
    assert sent["model"] == "stub" and sent["tools"] == TOOLS and sent["max_tokens"] == 64
    assert sent["logprobs"] is True and "timeout_s" not in sent
    assert stub_server.headers[0]["Authorization"] == "Bearer sk-test"
    assert model.name == "openai:stub"


def test_key_and_base_url_from_environment(stub_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", stub_server.base_url)
    stub_server.script = [completion("done")]
    r = chat(OpenAIModel("stub"))
    assert r.message == {"role": "assistant", "content": "done"}
    assert stub_server.headers[0]["Authorization"] == "Bearer sk-env"


def test_429_and_500_are_retried_with_backoff(stub_server):
    stub_server.script = [Reply({"error": {"message": "slow down"}}, 429, headers={"Retry-After": "0"}),
                          Reply({"error": {"message": "boom"}}, 500),
                          Reply("<html>bad gateway</html>", 502),
                          completion("ok")]
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=3)
    assert chat(model).message["content"] == "ok"
    assert len(stub_server.requests) == 4


def test_persistent_5xx_raises_model_error_naming_the_cause(stub_server):
    stub_server.default = Reply({"error": {"message": "overloaded"}}, 503)
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=2)
    with pytest.raises(ModelError, match=r"3 attempt\(s\): HTTP 503: overloaded"):
        chat(model)
    assert len(stub_server.requests) == 3


def test_client_errors_are_not_retried(stub_server):
    stub_server.default = Reply({"error": {"message": "invalid api key"}}, 401)
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01)
    with pytest.raises(ModelError, match=r"HTTP 401: invalid api key.*api_key"):
        chat(model)
    assert len(stub_server.requests) == 1


def test_a_server_that_never_answers_is_cut_by_the_wall_clock(stub_server):
    stub_server.default = Reply(hang=True)
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=1)
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"no answer within 0.3 s"):
        chat(model, timeout_s=0.3)
    assert time.monotonic() - started < 5
    assert len(stub_server.requests) == 2


def test_a_timeout_then_success_is_retried(stub_server):
    stub_server.script = [Reply(hang=True), completion("late but fine")]
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=1)
    assert chat(model, timeout_s=0.3).message["content"] == "late but fine"


def test_connection_refused_is_a_model_error():
    model = OpenAIModel("stub", base_url="http://127.0.0.1:9/v1", backoff_s=0.01, retries=1)
    with pytest.raises(ModelError, match="ConnectError"):
        chat(model)


def test_concurrency_limit_is_shared_by_name(stub_server):
    stub_server.default = Reply(completion("ok"), delay=0.2)
    a = OpenAIModel("stub", base_url=stub_server.base_url, concurrency=2)
    b = OpenAIModel("stub", base_url=stub_server.base_url, concurrency=2)

    async def go():
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon((a if i % 2 else b).chat, MESSAGES, None)

    anyio.run(go)
    assert len(stub_server.requests) == 8
    assert stub_server.max_in_flight == 2


def test_clawsdk_tool_format_renders_tools_into_the_prompt_and_parses_text(stub_server):
    stub_server.script = [completion('Let me look.\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>')]
    model = OpenAIModel("stub", base_url=stub_server.base_url, tool_format="clawsdk")
    r = chat(model)
    assert r.message["content"] == "Let me look."
    assert r.message["tool_calls"][0]["function"] == {"name": "ls", "arguments": "{}"}
    sent = stub_server.requests[0]
    assert "tools" not in sent
    assert sent["messages"][0]["role"] == "system" and "<tools>" in sent["messages"][0]["content"]


def test_bad_options_are_explained():
    with pytest.raises(ValueError, match="openai:NAME"):
        OpenAIModel(None)
    with pytest.raises(ValueError, match="not an http"):
        OpenAIModel("x", base_url="127.0.0.1:8000")


#: a conversation the agent made long: its own turn, then a large tool output
GROWN = [{"role": "system", "content": "s" * 400}, {"role": "user", "content": "u" * 400},
         {"role": "assistant", "content": None, "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "x" * 8000}]


@pytest.mark.parametrize("style", sorted(OVERFLOW_STYLES))
def test_a_conversation_the_agent_overflowed_is_its_failure_not_an_unscored_one(stub_server, style):
    stub_server.window, stub_server.overflow_style = 1000, style
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=3)
    with pytest.raises(ContextOverflow) as info:
        chat(model, GROWN, max_tokens=100)
    e = info.value
    assert e.kind is FailureKind.AGENT_ERROR and e.kind.scored
    assert len(stub_server.requests) == 1  # not retried: it would not fit the next time either
    assert "HTTP 400" in str(e) and "max-model-len" not in str(e)
    if style != "bare":
        assert (e.window, model.context_window) == (1000, 1000)
    if style not in ("bare", "openai"):
        assert e.prompt_tokens == prompt_tokens({"messages": GROWN})
    copy = pickle.loads(pickle.dumps(e))  # crosses processes (ray workers) as it is
    assert (str(copy), copy.kind, copy.window) == (str(e), e.kind, e.window)


def test_an_opening_prompt_that_does_not_fit_is_a_setup_problem(stub_server):
    stub_server.window = 100
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01)
    with pytest.raises(ContextOverflow, match=r"opening prompt.*--max-model-len") as info:
        chat(model, [{"role": "user", "content": "u" * 800}], max_tokens=10)
    assert info.value.kind is FailureKind.MODEL_ERROR


@pytest.mark.parametrize("style", ["vllm", "vllm-input"])
def test_a_max_tokens_past_the_window_is_clipped_to_what_is_left(stub_server, style):
    stub_server.window, stub_server.overflow_style = 1000, style
    stub_server.script = [completion("short answer", finish_reason="length")]
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01)
    r = chat(model, GROWN[:2], max_tokens=4096)
    assert r.message["content"] == "short answer"
    assert [q["max_tokens"] for q in stub_server.requests] == [4096, 1000 - prompt_tokens({"messages": GROWN[:2]})]


@pytest.mark.parametrize("body", [
    {"error": {"message": "invalid api key", "type": "invalid_request_error"}},
    {"error": {"message": "max_tokens is too large: 99999. This model supports at most 4096 completion tokens",
               "code": "invalid_value"}},
    {"error": {"message": "unknown model 'gpt-9'"}},
    {"error": "not a dict"},
    "<html>bad request</html>",
])
def test_other_client_errors_are_not_read_as_an_overflow(body):
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    assert context_overflow(raw) is None
