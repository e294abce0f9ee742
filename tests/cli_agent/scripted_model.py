"""A scripted OpenAI-compatible model server: planned tool calls, then a final message.

Served with clawsdk.proxy.serving on 127.0.0.1. Every harness's calls reach it as chat completions (the
recording proxy translates Anthropic Messages and the Responses API), streamed as server-sent events (tool-call
arguments cut in two, as real servers send them) when asked. With `token_ids`, every answer carries vLLM's
token ids and logprobs (`prompt_token_ids`, `choices[0].token_ids`, `choices[0].logprobs.content`): the prompt's
ids are a pure function of its messages, each message's ids in turn, so a prompt that extends an earlier one
extends its ids, as a real tokenizer's would.

`plan_for(agent, task, workspace)` turns a task's reference solution (clawsdk's read/write/exec calls) into the
calls of each harness's own tools: OpenClaw's read/write/exec, Claude Code's Read/Write/Bash, Codex's
exec_command.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from typing import Any

from tests.asgi import request_body


def tool_call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _ids(text: str, n: int | None = None) -> list[int]:
    """Deterministic token ids of a text: one per 4 characters (at least one)."""
    n = n or max(1, len(text) // 4)
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i % 32] * 131 + i) % 50000 + 10 for i in range(n)]


def message_ids(m: dict[str, Any]) -> list[int]:
    """A message's ids as the scripted tokenizer renders it: role, text, tool calls (ids aside: clients rename)."""
    calls = [[(c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")]
             for c in m.get("tool_calls") or []]
    text = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
    return _ids(json.dumps([m.get("role"), text or "", calls]))


def prompt_ids(messages: list[dict[str, Any]]) -> list[int]:
    return [t for m in messages for t in message_ids(m)]


class PlannedModel:
    """Answers a conversation with i assistant turns so far with plan[i]; past the plan, with `final`.

    Keyed by the conversation, not by the order of requests, so concurrent rollouts each get the plan. `plan` may
    be {marker: plan}: a conversation gets the plan whose marker it holds (one per task of a run).
    """

    def __init__(self, plan: list[dict[str, Any]] | dict[str, list[dict[str, Any]]], final: str = "Done.", *,
                 token_ids: bool = False):
        self.plans = plan if isinstance(plan, dict) else {"": list(plan)}
        self.final = {"role": "assistant", "content": final}
        self.token_ids = token_ids
        self.requests: list[dict[str, Any]] = []

    @property
    def plan(self) -> list[dict[str, Any]]:
        return next(iter(self.plans.values()))

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(req.get("messages"))
        plan = next((p for marker, p in self.plans.items() if marker in text), [])
        i = sum(1 for m in req.get("messages") or [] if m.get("role") == "assistant")
        return plan[i] if i < len(plan) else self.final

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None:
            return
        if scope["method"] == "GET":
            return await self._send(send, 200, "application/json", json.dumps({"data": [{"id": "planned"}]}))
        req = json.loads(body)
        self.requests.append(req)
        message = self.answer(req)
        i = len(self.requests)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        ids = {}
        if self.token_ids:
            completion = message_ids({**message, "role": "assistant"})
            ids = {"prompt_token_ids": prompt_ids(req["messages"]), "token_ids": completion,
                   "logprobs": {"content": [{"token": f"token_id:{t}", "logprob": -0.01 * (k + 1), "bytes": None,
                                             "top_logprobs": []} for k, t in enumerate(completion)]}}
        if not req.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            if ids:
                choice.update(token_ids=ids["token_ids"], logprobs=ids["logprobs"])
            answer = {"id": f"cmpl-{i}", "object": "chat.completion", "model": req["model"], "choices": [choice],
                      "usage": usage}
            if ids:
                answer["prompt_token_ids"] = ids["prompt_token_ids"]
            return await self._send(send, 200, "application/json", json.dumps(answer))
        deltas: list[dict[str, Any]] = [{"role": "assistant"}]
        for k, tc in enumerate(message.get("tool_calls") or []):
            args = tc["function"]["arguments"]
            deltas.append({"tool_calls": [{"index": k, "id": tc["id"], "type": "function",
                                           "function": {"name": tc["function"]["name"], "arguments": args[:7]}}]})
            deltas.append({"tool_calls": [{"index": k, "function": {"arguments": args[7:]}}]})
        if message.get("content"):
            deltas.append({"content": message["content"]})
        events = [{"id": f"cmpl-{i}", "model": req["model"], "choices": [
            {"index": 0, "delta": d, "finish_reason": finish if j == len(deltas) - 1 else None}]}
            for j, d in enumerate(deltas)]
        if ids:
            events[-1]["choices"][0].update(token_ids=ids["token_ids"], logprobs=ids["logprobs"])
            events[0]["prompt_token_ids"] = ids["prompt_token_ids"]
        events.append({"id": f"cmpl-{i}", "model": req["model"], "choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        await self._send(send, 200, "text/event-stream", text)

    @staticmethod
    async def _send(send, status: int, ctype: str, text: str) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype.encode())]})
        await send({"type": "http.response.body", "body": text.encode()})


def _native(agent: str, tool: str, args: dict[str, Any], workspace: str) -> tuple[str, dict[str, Any]]:
    """One of clawsdk's core calls (read, write, exec) as the harness's own tool call."""
    if agent == "openclaw":
        return tool, args
    path = f"{workspace.rstrip('/')}/{args.get('path', '')}"
    if agent == "claude-code":
        if tool == "read":
            return "Read", {"file_path": path}
        if tool == "write":
            return "Write", {"file_path": path, "content": args["content"]}
        return "Bash", {"command": args["command"], "description": "run the command"}
    if agent == "codex":
        if tool == "read":
            return "exec_command", {"cmd": f"cat {shlex.quote(args['path'])}"}
        if tool == "write":  # the exact bytes, whatever they hold
            data = base64.b64encode(args["content"].encode()).decode()
            return "exec_command", {"cmd": f"base64 -d > {shlex.quote(args['path'])} <<'EOF'\n{data}\nEOF"}
        return "exec_command", {"cmd": args["command"]}
    raise ValueError(f"no plan for agent {agent!r}")


def plan_for(agent: str, task: Any, workspace: str = "/root/.openclaw/workspace") -> list[dict[str, Any]]:
    """The task's reference solution as the harness's tool calls, one per turn."""
    return [tool_call(i, *_native(agent, c.tool, dict(c.args), workspace)) for i, c in enumerate(task.solution or [])]


def main() -> None:
    """Serve a task's reference solution as planned tool calls: a model for trying a CLI agent by hand.

        python tests/cli_agent/scripted_model.py examples/tasks/access-log-report --port 8111
        clawsdk run examples/tasks/access-log-report --agent openclaw --model planned \\
            --base-url http://127.0.0.1:8111/v1 --sandbox bwrap

    `--agent claude-code` or `--agent codex` plans those harnesses' own tool calls. Each conversation gets the
    whole plan, so concurrent rollouts work too.
    """
    import argparse

    import anyio

    from clawsdk.proxy import serving
    from clawsdk.tasks.sources import load_tasks

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("--port", type=int, default=8111)
    parser.add_argument("--agent", default="openclaw", choices=["openclaw", "claude-code", "codex"])
    ns = parser.parse_args()
    (task,) = load_tasks(ns.task).tasks
    model = PlannedModel(plan_for(ns.agent, task))

    async def serve() -> None:
        async with serving(model, port=ns.port) as url:
            print(f"{url}/v1 answers with {len(model.plan)} planned tool call(s), then a final message", flush=True)
            await anyio.sleep_forever()

    anyio.run(serve)


if __name__ == "__main__":
    main()
