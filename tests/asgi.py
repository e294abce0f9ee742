"""What the scripted ASGI model servers of the tests share: answering the lifespan protocol and reading a body."""

from __future__ import annotations


async def request_body(scope, receive, send) -> bytes | None:
    """The HTTP request's whole body; None for the lifespan protocol, which it has answered until shutdown."""
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            await send({"type": msg["type"] + ".complete"})
            if msg["type"] == "lifespan.shutdown":
                return None
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


async def answered_models(scope, send) -> bool:
    """Answer GET /models as a serving model server does (the agents ask it once before a run); True if it was one."""
    if scope.get("method") != "GET":
        return False
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"object": "list", "data": [{"id": "m"}]}'})
    return True
