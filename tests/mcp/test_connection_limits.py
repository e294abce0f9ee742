"""The runner's HTTP listeners (`clawsdk serve`, the recording proxy, its unix socket for the openclaw agent)
against a flood of idle connections: each listener keeps a bounded number open, a request that does not arrive
in full by the deadline is dropped, an answer in progress is not, and sandboxed commands have a file limit.
(Before, 20,000 silent connections took the runner's file descriptors and failed the rollouts in progress.)"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time

import anyio
import httpx2
import pytest

from clawsdk import _http as http
from clawsdk.proxy import serving
from clawsdk.sandbox.limits import IsolationOptions
from tests.asgi import request_body
from tests.conftest import make_task
from tests.mcp.serve_proc import start_http


async def slow_app(scope, receive, send):
    """Answers every request after 1.5 s (longer than the tests' deadline)."""
    if await request_body(scope, receive, send) is None:
        return
    await anyio.sleep(1.5)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def tight(monkeypatch):
    """A deadline of half a second and five connections per listener, so the tests run fast."""
    protocol = http.guarded_protocol()
    monkeypatch.setattr(protocol, "deadline_s", 0.5)
    monkeypatch.setattr(protocol, "max_connections", 5)


async def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` (recv reads EOF or a reset) within `seconds`."""
    sock.setblocking(False)
    with anyio.move_on_after(seconds):
        while True:
            try:
                if sock.recv(1024) == b"":
                    return True
            except BlockingIOError:
                await anyio.sleep(0.05)
            except ConnectionResetError:
                return True
    return False


def _connect(url: str) -> socket.socket:
    if url.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(url[5:])
        return s
    host, port = url.split("//")[1].rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def test_silent_and_half_sent_requests_are_dropped_at_the_deadline(tight):
    async def main():
        async with serving(slow_app) as url:
            silent, partial, body = _connect(url), _connect(url), _connect(url)
            partial.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz")
            body.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nhalf")
            got = [await _closed_within(s, 5) for s in (silent, partial, body)]
            for s in (silent, partial, body):
                s.close()
            return got

    assert anyio.run(main) == [True, True, True]


def test_a_slow_answer_and_a_kept_alive_connection_are_not_cut_by_the_deadline(tight):
    async def main():
        async with serving(slow_app) as url, httpx2.AsyncClient(timeout=10) as client:
            first = await client.post(url + "/", content=b"x" * 100)  # answered after 1.5 s, deadline 0.5 s
            second = await client.post(url + "/", content=b"y")  # the same connection, kept alive
            return first.text, second.text

    assert anyio.run(main) == ("ok", "ok")


@pytest.mark.parametrize("over_unix_socket", [False, True])
def test_past_the_cap_a_connection_is_closed_at_once_and_the_listener_still_serves(tight, tmp_path,
                                                                                   over_unix_socket):
    async def main():
        uds = {"uds": str(tmp_path / "proxy.sock")} if over_unix_socket else {}
        async with serving(slow_app, **uds) as url:
            held = [_connect(url) for _ in range(5)]
            await anyio.sleep(0.1)
            extra = [_connect(url) for _ in range(20)]
            refused = [await _closed_within(s, 0.3) for s in extra]
            kept = [not await _closed_within(s, 0.1) for s in held[:1]]
            for s in held + extra:
                s.close()
            await anyio.sleep(0.2)
            transport = httpx2.AsyncHTTPTransport(uds=uds["uds"]) if uds else None
            base = "http://proxy" if uds else url
            async with httpx2.AsyncClient(timeout=10, transport=transport) as client:
                answer = (await client.post(base + "/", content=b"x")).text
            return refused, kept, answer

    refused, kept, answer = anyio.run(main)
    assert all(refused) and all(kept) and answer == "ok"


def test_the_out_of_descriptors_accept_error_is_logged_once_not_in_a_loop(caplog):
    loop = asyncio.new_event_loop()
    try:
        http._quiet_accept_errors(loop)
        http._quiet_accept_errors(loop)  # once per loop, however many listeners
        with caplog.at_level(logging.WARNING):
            for _ in range(1000):
                loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                             "exception": OSError(24, "Too many open files")})
    finally:
        loop.close()
    lines = [r for r in caplog.records if "accept" in r.getMessage()]
    assert len(lines) == 1 and not lines[0].exc_info, caplog.text


def test_sandboxed_commands_get_a_file_descriptor_limit():
    assert "--nofile=1024" in IsolationOptions().prlimit_args(10)
    assert "--nofile=64" in IsolationOptions.from_extra({"nofile": 64}, "bwrap").prlimit_args(10)
    unlimited = IsolationOptions.from_extra({"nofile": 0}, "bwrap").prlimit_args(10)
    assert not [a for a in unlimited if "nofile" in a]


@pytest.mark.slow
def test_clawsdk_serve_drops_a_connection_that_sends_half_a_request(tmp_path, db):
    proc, info = start_http([str(make_task(tmp_path, "idle")), "--sandbox", "local"], db)
    try:
        port = int(info["url"].split(":")[2].split("/")[0])
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer x")
        started = time.monotonic()
        closed = anyio.run(_closed_within, sock, http.REQUEST_DEADLINE_S + 10)
        sock.close()
        assert closed and time.monotonic() - started < http.REQUEST_DEADLINE_S + 5
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
