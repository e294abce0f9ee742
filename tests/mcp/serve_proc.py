"""`clawsdk serve` as its own process, and an MCP client session against it over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CLAWSDK = str(Path(sys.executable).parent / "clawsdk")


def start_http(args: list[str], db: Path | None, env: dict | None = None) -> tuple[subprocess.Popen, dict]:
    """Start `clawsdk serve ARGS --http` on a free loopback port; returns it and the JSON line it printed."""
    cmd = [CLAWSDK, "serve", *args, "--http", "--port", "0"] + (["--db", str(db)] if db else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    line = proc.stdout.readline()  # the server prints one JSON line once it listens
    if not line:
        raise AssertionError(proc.stderr.read())
    return proc, json.loads(line)


@contextlib.asynccontextmanager
async def session(info: dict) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {info['token']}"}, timeout=120) as http:
        async with Client(streamable_http_client(info["url"], http_client=http)) as client:
            yield client


def require_bwrap() -> None:
    """Skip where bubblewrap cannot run; in CI (CI=true, bubblewrap installed) that is a failure."""
    from clawsdk.sandbox.capabilities import unavailable_reason

    why = unavailable_reason("bwrap")
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bwrap must run in CI: {why}")
        pytest.skip(f"bwrap sandbox cannot run here: {why}")
