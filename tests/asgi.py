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
