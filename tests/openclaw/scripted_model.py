"""An OpenAI-compatible model server that answers with planned tool calls, then a final message.

Served with clawsdk.mcp.proxy.serving on 127.0.0.1; OpenClaw streams, so answers are streamed
as server-sent events (tool-call arguments cut in two, as real servers send them).
"""

from __future__ import annotations

import json
from typing import Any

from tests.asgi import request_body


def tool_call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


class PlannedModel:
    """Answers a conversation with i assistant turns so far with plan[i]; past the plan, with `final`.

    Keyed by the conversation, not by the order of requests, so concurrent rollouts each get the plan.
    """

    def __init__(self, plan: list[dict[str, Any]], final: str = "Done."):
        self.plan = list(plan)
        self.final = {"role": "assistant", "content": final}
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope, receive, send):
        body = await request_body(scope, receive, send)
        if body is None:
            return
        if scope["method"] == "GET":
            return await self._send(send, 200, "application/json", json.dumps({"data": [{"id": "planned"}]}))
        req = json.loads(body)
        self.requests.append(req)
        i = sum(1 for m in req.get("messages") or [] if m.get("role") == "assistant")
        message = self.plan[i] if i < len(self.plan) else self.final
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if not req.get("stream"):
            return await self._send(send, 200, "application/json", json.dumps({
                "id": f"cmpl-{i}", "object": "chat.completion", "model": req["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}))
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
        events.append({"id": f"cmpl-{i}", "model": req["model"], "choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        await self._send(send, 200, "text/event-stream", text)

    @staticmethod
    async def _send(send, status: int, ctype: str, text: str) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype.encode())]})
        await send({"type": "http.response.body", "body": text.encode()})


def main() -> None:
    """Serve a task's reference solution as planned tool calls: a model for trying `--agent openclaw` by hand.

        python tests/openclaw/scripted_model.py examples/tasks/access-log-report --port 8111
        clawsdk run examples/tasks/access-log-report --agent openclaw --model planned \\
            --base-url http://127.0.0.1:8111/v1 --sandbox bwrap

    Each conversation gets the whole plan, so concurrent rollouts work too.
    """
    import argparse

    import anyio

    from clawsdk.proxy import serving
    from clawsdk.tasks.sources import load_tasks

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("--port", type=int, default=8111)
    ns = parser.parse_args()
    (task,) = load_tasks(ns.task).tasks
    model = PlannedModel([tool_call(i, c.tool, c.args) for i, c in enumerate(task.solution or [])])

    async def serve() -> None:
        async with serving(model, port=ns.port) as url:
            print(f"{url}/v1 answers with {len(model.plan)} planned tool call(s), then a final message", flush=True)
            await anyio.sleep_forever()

    anyio.run(serve)


if __name__ == "__main__":
    main()
