"""An external agent in its own process: connects to `clawsdk serve` with mcp.Client and replays a plan.

    python external_client.py --stdio TASK_FOLDER PLAN.yaml      (spawns `clawsdk serve TASK_FOLDER`)
    python external_client.py --http URL TOKEN PLAN.yaml

The plan is a YAML list of {tool, args} (a task's solution/steps.yaml works). Prints one JSON
line: the tools it saw, each call's error flag, and what `finish` answered.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import yaml
from mcp import Client, StdioServerParameters


async def work(client: Client, plan: list[dict]) -> dict:
    tools = [t.name for t in (await client.list_tools()).tools]
    calls = []
    for step in plan:
        r = await client.call_tool(step["tool"], step.get("args", {}))
        calls.append({"tool": step["tool"], "is_error": bool(r.is_error)})
    r = await client.call_tool("finish", {"summary": "replayed the plan"})
    return {"tools": tools, "calls": calls, "finish": r.content[0].text, "finish_error": bool(r.is_error),
            "instructions": getattr(client, "instructions", None)}


async def main(argv: list[str]) -> None:
    import httpx2

    if argv[0] == "--stdio":
        task, plan_file, *extra = argv[1:]
        clawsdk = str(Path(sys.executable).parent / "clawsdk")
        # the whole environment: the SDK passes only a few variables by default, and the server must import
        # the same clawsdk as this process (PYTHONPATH in a checkout)
        params = StdioServerParameters(command=clawsdk, args=["serve", task, *extra], env=dict(os.environ))
        plan = yaml.safe_load(Path(plan_file).read_text())
        async with Client(params, mode="legacy") as client:
            out = await work(client, plan)
    else:
        url, token, plan_file = argv[1:4]
        plan = yaml.safe_load(Path(plan_file).read_text())
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                out = await work(client, plan)
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
