"""The recording proxy's three protocols against requests recorded from the real clients (tests/fixtures/proxy/:
Claude Code 2.1's Anthropic Messages and Codex 0.171's Responses API requests, their long prompts cut), with tool
calls, streamed and not: what goes upstream (chat completions), what the client gets back in its own protocol,
what is recorded; and a malformed request is a 400 with the reason, in the client's protocol's error shape."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import anyio
import httpx2
import pytest

from clawsdk.proxy import ModelProxy, serving
from clawsdk.store.recorder import Recorder
from tests.asgi import request_body

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "proxy"
CALL = {"id": "call_9", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(
    {"command": "python3 report.py", "description": "make the report"})}}
ANSWER = {"role": "assistant", "content": "I'll run the report.", "tool_calls": [CALL]}


class Upstream:
    """A chat-completions server: answers every request with ANSWER (a text and a tool call), whole or streamed."""

    def __init__(self):
        self.bodies: list[dict] = []

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None:
            return
        req = json.loads(body)
        self.bodies.append(req)
        usage = {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333}
        if not req.get("stream"):
            data = {"id": "c1", "object": "chat.completion", "model": req["model"], "usage": usage,
                    "choices": [{"index": 0, "message": ANSWER, "finish_reason": "tool_calls"}]}
            return await _send(send, "application/json", json.dumps(data))
        args = CALL["function"]["arguments"]
        deltas = [{"role": "assistant", "content": "I'll run "}, {"content": "the report."},
                  {"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                   "function": {"name": "Bash", "arguments": args[:10]}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": args[10:]}}]}]
        chunks = [{"id": "c1", "model": req["model"], "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                  for d in deltas]
        chunks.append({"id": "c1", "model": req["model"], "choices": [{"index": 0, "delta": {},
                                                                        "finish_reason": "tool_calls"}]})
        chunks.append({"id": "c1", "model": req["model"], "choices": [], "usage": usage})
        await _send(send, "text/event-stream", "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
                    + "data: [DONE]\n\n")


async def _send(send, ctype, text):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype.encode())]})
    await send({"type": "http.response.body", "body": text.encode()})


def _post(path: str, body: dict, headers: dict | None = None):
    """POST `body` through a proxy in front of Upstream; (status, answer text, what went upstream, events)."""
    upstream = Upstream()
    rec = Recorder(None, "r", keep=True)

    async def main():
        async with serving(upstream) as up:
            proxy = ModelProxy(up + "/v1")
            token = proxy.register(rec)
            async with serving(proxy) as url, httpx2.AsyncClient(timeout=30) as http:
                r = await http.post(url + path, json=body, headers={"x-api-key": token, **(headers or {})})
                return r.status_code, r.text

    status, text = anyio.run(main)
    return status, text, upstream.bodies, rec.kept


def _events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line[6:] != "[DONE]"]


def _fixture(name: str, stream: bool) -> dict:
    body = json.loads((FIXTURES / name).read_text())
    body["stream"] = stream
    return body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_anthropic_messages_request_goes_upstream_as_chat_and_comes_back_as_messages(stream):
    body = _fixture("anthropic_request.json", stream)
    body["messages"][-1]["content"][0]["is_error"] = True  # the Bash call failed
    status, text, sent, events = _post("/v1/messages?beta=true", body)
    assert status == 200, text

    (chat,) = sent
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "user", "system", "assistant", "tool"]
    assert chat["messages"][0]["content"].startswith("You are a Claude agent")  # the billing header left out
    assert "x-anthropic-billing-header" not in json.dumps(chat)
    (call,) = chat["messages"][3]["tool_calls"]
    assert call["id"] == "toolu_1" and call["function"]["name"] == "Bash"
    assert json.loads(call["function"]["arguments"]) == body["messages"][2]["content"][0]["input"]
    assert chat["messages"][4] == {"role": "tool", "tool_call_id": "toolu_1", "content": "out.txt"}  # no is_error
    assert [t["function"]["name"] for t in chat["tools"]] == ["Bash", "Write"]
    assert chat["tools"][0]["function"]["parameters"] == body["tools"][0]["input_schema"]
    assert chat["max_tokens"] == body["max_tokens"] and "thinking" not in chat and "metadata" not in chat

    if stream:
        events_out = _events(text)
        kinds = [e["type"] for e in events_out]
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        starts = [e["content_block"] for e in events_out if e["type"] == "content_block_start"]
        assert [b["type"] for b in starts] == ["text", "tool_use"] and starts[1]["id"] == "call_9"
        said = "".join(e["delta"].get("text", "") for e in events_out if e["type"] == "content_block_delta")
        args = "".join(e["delta"].get("partial_json", "") for e in events_out if e["type"] == "content_block_delta")
        assert said == ANSWER["content"] and json.loads(args) == json.loads(CALL["function"]["arguments"])
        delta = next(e for e in events_out if e["type"] == "message_delta")
        assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] == 12
    else:
        answer = json.loads(text)
        assert answer["type"] == "message" and answer["stop_reason"] == "tool_use"
        assert answer["content"] == [{"type": "text", "text": ANSWER["content"]},
                                     {"type": "tool_use", "id": "call_9", "name": "Bash",
                                      "input": json.loads(CALL["function"]["arguments"])}]
        assert answer["usage"] == {"input_tokens": 321, "output_tokens": 12}

    request, response = events[0]["payload"], events[1]["payload"]
    assert request["protocol"] == "anthropic" and request["params"]["thinking"] == body["thinking"]
    assert request["messages"][4]["is_error"] is True  # kept for the tool events, never sent upstream
    assert response["message"]["tool_calls"][0]["function"]["name"] == "Bash" and response["request"] == 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_responses_request_goes_upstream_as_chat_and_comes_back_as_a_response(stream):
    body = _fixture("responses_request.json", stream)
    status, text, sent, events = _post("/v1/responses", body, {"authorization": "Bearer wrong"})
    assert status == 401, text  # the bearer token is what counts when it is there

    status, text, sent, events = _post("/v1/responses", body)
    assert status == 200, text
    (chat,) = sent
    assert [m["role"] for m in chat["messages"]] == ["system", "system", "user", "user", "assistant", "tool"]
    assert chat["messages"][3]["content"] == "write hi to out.txt"
    assert chat["messages"][4]["tool_calls"][0]["id"] == "call_1"
    assert chat["messages"][5] == {"role": "tool", "tool_call_id": "call_1", "content": "unsupported call: shell"}
    names = [t["function"]["name"] for t in chat["tools"]]
    assert "exec_command" in names and "multi_agent_v1" not in names  # a tool namespace has no chat form
    assert events[0]["payload"]["params"]["dropped_tools"] == ["multi_agent_v1", "web_search"]
    assert events[0]["payload"]["protocol"] == "openai-responses"

    if stream:
        events_out = _events(text)
        kinds = [e["type"] for e in events_out]
        assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
        assert [e["sequence_number"] for e in events_out] == list(range(1, len(events_out) + 1))
        said = "".join(e["delta"] for e in events_out if e["type"] == "response.output_text.delta")
        args = "".join(e["delta"] for e in events_out if e["type"] == "response.function_call_arguments.delta")
        assert said == ANSWER["content"] and args == CALL["function"]["arguments"]
        answer = events_out[-1]["response"]
    else:
        answer = json.loads(text)
    assert answer["object"] == "response" and answer["status"] == "completed"
    message, call = answer["output"]
    assert message["type"] == "message" and message["content"][0]["text"] == ANSWER["content"]
    assert (call["type"], call["call_id"], call["name"], call["arguments"]) == \
        ("function_call", "call_9", "Bash", CALL["function"]["arguments"])
    assert answer["usage"]["input_tokens"] == 321 and answer["usage"]["output_tokens"] == 12


def test_a_chat_completions_answer_passes_through_byte_for_byte():
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True}
    status, text, sent, events = _post("/v1/chat/completions", body)
    assert status == 200 and sent == [body]
    chunks = _events(text)
    assert chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == \
        CALL["function"]["arguments"][:10]
    assert events[1]["payload"]["message"]["tool_calls"][0]["function"]["arguments"] == CALL["function"]["arguments"]
    assert "protocol" not in events[0]["payload"]


ANTHROPIC = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "m", "input": "hi"}


@pytest.mark.parametrize("path, body, reason", [
    ("/v1/messages", {**ANTHROPIC, "messages": []}, "`messages` must be a non-empty list"),
    ("/v1/messages", {**ANTHROPIC, "max_tokens": "64"}, "`max_tokens` must be an integer"),
    ("/v1/messages", {**ANTHROPIC, "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role must be one of"),
    ("/v1/messages", {**ANTHROPIC, "messages": [{"role": "user", "content": [{"text": "no type"}]}]},
     "messages[0].content[0] must be a content block with a string `type`"),
    ("/v1/messages", [ANTHROPIC], "must be a JSON object"),
    ("/v1/responses", {**RESPONSES, "input": 3}, "`input` must be a non-empty string or list"),
    ("/v1/responses", {**RESPONSES, "input": [{"type": "function_call_output", "output": "x"}]},
     "input[0].call_id must be a string"),
    ("/v1/responses", {**RESPONSES, "previous_response_id": "resp_1"}, "`previous_response_id` is not supported"),
    ("/v1/chat/completions", {"model": "m", "messages": "hi"}, "`messages` must be a non-empty list"),
])
def test_a_malformed_request_is_a_400_with_the_reason_in_the_clients_own_shape(path, body, reason):
    status, text, sent, events = _post(path, copy.deepcopy(body))
    assert status == 400 and not sent and not events, text
    error = json.loads(text)
    if path == "/v1/messages":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert reason in error["error"]["message"], error
