"""The escape suite, raced: a command in the sandbox swaps a workspace folder with a symlink to `/`
while the real MCP file tools (which run on the host, as root) act on paths through it.

The file tools are host-side under every backend, so `local` is raced too: its commands are not
isolated, but its file tools must still never leave the workspace.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import anyio
import pytest
from clawsdk_tools.core import core_server
from mcp import Client
from sandbox_backends import skip_unless_available

from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task

BACKENDS = ["local", "bwrap", "docker"]
RACED_CALLS = 320
TASK = Task(id="race", instruction="race the file tools", workspace=[File(path="notes.md", text="hi\n")])

#: swaps `d` (a folder) and `l` (a symlink to /) until `stop` appears: renameat2(RENAME_EXCHANGE)
SWAPPER = r"""
import ctypes, os, platform, sys, time
os.makedirs("d", exist_ok=True)
if not os.path.lexists("l"):
    os.symlink("/", "l")
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 316, "aarch64": 276}.get(platform.machine())
def exchange():
    if hasattr(libc, "renameat2"):
        return libc.renameat2(-100, b"d", -100, b"l", 2)
    return libc.syscall(nr, -100, b"d", -100, b"l", 2)
swaps = 0
deadline = time.time() + float(sys.argv[1])
while not os.path.exists("stop") and time.time() < deadline:
    if exchange() != 0:
        print("renameat2 failed", ctypes.get_errno(), flush=True)
        sys.exit(3)
    swaps += 1
print("swaps", swaps, flush=True)
"""


def text(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def ownership(paths: list[Path]) -> dict[str, tuple[int, int, int]]:
    out = {}
    for p in paths:
        st = os.lstat(p)
        out[str(p)] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
    return out


def with_tools(backend: str, body, timeout: float = 240):
    """Start a `backend` sandbox and an MCP client on its core tools; run `body(sandbox, client)`."""
    skip_unless_available(backend)
    sb = get_registry().get("sandboxes", backend)(SandboxConfig())

    async def main():
        try:
            with anyio.fail_after(timeout):
                await sb.start(TASK)
                async with Client(core_server(sb, TASK)) as client:
                    return await body(sb, client)
        finally:
            with anyio.CancelScope(shield=True):
                await sb.close()

    return anyio.run(main)


@pytest.fixture
def host(tmp_path_factory):
    """A host folder anyone may write to, with a secret in it; the race aims at both."""
    # under /tmp itself, so the raced path `d/tmp/...` exists on the host
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"clawsdk-race-{secrets.token_hex(4)}"
    folder.mkdir()
    folder.chmod(0o777)
    secret = folder / f"secret-{secrets.token_hex(4)}.txt"
    secret.write_text("TOPSECRET-" + secrets.token_hex(8))
    secret.chmod(0o666)
    yield folder, secret
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_raced_file_tools_never_reach_the_host(backend, host):
    folder, secret = host
    secret_text = secret.read_text()
    rel = str(folder).lstrip("/")
    counts = {"calls": 0, "refused": 0, "inside": 0, "host_reads": 0}

    async def body(sb, client):
        watched = [Path("/"), Path("/tmp"), folder, secret, Path(sb.root).parent]
        before = ownership(watched)
        swapper_out: list[str] = []

        async def swap():
            r = await sb.exec(["python3", "-c", SWAPPER, "120"], timeout=150)
            swapper_out.append(r.stdout + r.stderr)

        async with anyio.create_task_group() as tg:
            tg.start_soon(swap)
            await wait_for(lambda: _exists(sb, "l"), "the swapper to start")
            for i in range(RACED_CALLS):
                kind = i % 4
                if kind == 0:
                    r = await client.call_tool("write", {"path": f"d/{rel}/canary-{i}", "content": "PWNED"})
                elif kind == 1:
                    r = await client.call_tool("read", {"path": f"d/{rel}/{secret.name}"})
                elif kind == 2:
                    r = await client.call_tool("edit", {"path": f"d/{rel}/{secret.name}", "old_text": "TOPSECRET",
                                                        "new_text": "PWNED"})
                else:
                    r = await client.call_tool("ls", {"path": f"d/{rel}"})
                counts["calls"] += 1
                out = text(r)
                # an error names the path asked for; only content, or a listing, shows the host
                if "TOPSECRET" in out or (kind == 3 and not r.is_error and secret.name in out):
                    counts["host_reads"] += 1
                if r.is_error and ("outside" in out or "symlink" in out or "keeps changing" in out):
                    counts["refused"] += 1
                elif not r.is_error or "no such file" in out:
                    counts["inside"] += 1
            await sb.write("stop", b"")
        after = ownership(watched)
        return before, after, swapper_out

    before, after, swapper_out = with_tools(backend, body)
    assert swapper_out and "swaps" in swapper_out[0], f"the swapper did not run: {swapper_out}"
    assert int(swapper_out[0].split()[-1]) > 1000, swapper_out
    # the race really was run: some calls met the symlink, some the folder
    assert counts["refused"] > 0 and counts["inside"] > 0, counts
    assert counts["calls"] >= 300
    canaries = sorted(p.name for p in folder.iterdir() if p.name.startswith("canary"))
    assert canaries == [], f"{len(canaries)} raced writes landed on the host ({backend}): {counts}"
    assert counts["host_reads"] == 0, f"raced calls read the host ({backend}): {counts}"
    assert secret.read_text() == secret_text, "a raced edit changed a host file"
    assert after == before, f"ownership outside the sandbox changed: {before} -> {after}"
    print(f"{backend}: {counts}, swapper {swapper_out[0].strip()}")


async def _exists(sb, path: str) -> bool:
    try:
        return any(e.path == path for e in await sb.list("."))
    except OSError:
        return False


async def wait_for(predicate, what: str, timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        while not await predicate():
            await anyio.sleep(0.05)
