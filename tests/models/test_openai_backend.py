"""The `openai` backend against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import time

import anyio
import pytest
from conftest import Reply, completion

from clawsdk.errors import ModelError
from clawsdk_plugins.models_openai import OpenAIModel

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "ls", "description": "list",
                                           "parameters": {"type": "object", "properties": {}}}}]


def chat(model: OpenAIModel, **params):
    async def go():
        with anyio.fail_after(20):
            return await model.chat(MESSAGES, TOOLS, **params)
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
    with pytest.raises(ModelError, match="HTTP 401: invalid api key.*api_key"):
        chat(model)
    assert len(stub_server.requests) == 1


def test_a_server_that_never_answers_is_cut_by_the_wall_clock(stub_server):
    stub_server.default = Reply(hang=True)
    model = OpenAIModel("stub", base_url=stub_server.base_url, backoff_s=0.01, retries=1)
    started = time.monotonic()
    with pytest.raises(ModelError, match="no answer within 0.3 s"):
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
