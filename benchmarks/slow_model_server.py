"""A local OpenAI-compatible chat server that answers after a fixed delay (load tests).

It plays a two-turn agent: with no tool result in the conversation it asks for one `write`
call; once a tool result is there, it answers with text. It binds 127.0.0.1 only.

    python benchmarks/slow_model_server.py --delay 1.0      # prints the port, serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

COUNTS = {"requests": 0}


def completion(body: dict) -> dict:
    messages = body.get("messages", [])
    done = any(m.get("role") == "tool" for m in messages)
    if done:
        message = {"role": "assistant", "content": "Done: done.txt is written."}
        finish = "stop"
    else:
        args = json.dumps({"path": "done.txt", "content": "done\n"})
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{COUNTS['requests']}", "type": "function", "function": {"name": "write", "arguments": args}}]}
        finish = "tool_calls"
    return {"id": f"cmpl-{COUNTS['requests']}", "object": "chat.completion", "model": body.get("model", "sim"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            COUNTS["requests"] += 1
            await asyncio.sleep(delay)
            payload = json.dumps(completion(body)).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(delay: float, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, delay), "127.0.0.1", port, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    try:
        asyncio.run(main(a.delay, a.port))
    except KeyboardInterrupt:
        sys.exit(0)
