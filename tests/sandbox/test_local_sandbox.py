import os
import time
from pathlib import Path

import anyio
import pytest
from clawsdk_plugins.sandboxes.local import LocalSandbox

from clawsdk.errors import PathEscapeError
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task

TASK = Task(id="t", instruction="x", workspace=[File(path="a.txt", text="hello\n")],
            hidden=[File(path="secret.txt", text="expected\n")])


def with_sandbox(fn, config=None):
    async def main():
        sb = LocalSandbox(config or SandboxConfig())
        await sb.start(TASK)
        try:
            return await fn(sb)
        finally:
            await sb.close()

    return anyio.run(main)


def test_exec_runs_in_the_workspace_with_its_env():
    async def body(sb):
        r = await sb.exec("pwd; cat a.txt; echo $CLAWSDK_WORKSPACE; echo err >&2; exit 3")
        return sb, r

    sb, r = with_sandbox(body)
    lines = r.stdout.splitlines()
    assert lines[0] == lines[2] == sb.workspace_path
    assert lines[1] == "hello" and r.stderr.strip() == "err" and r.exit_code == 3


def test_timeout_kills_the_whole_process_tree(tmp_path):
    marker = tmp_path / "child-alive"

    async def body(sb):
        started = time.monotonic()
        r = await sb.exec(f"(sleep 3; touch {marker}) & sleep 30", timeout=0.5)
        return r, time.monotonic() - started

    r, took = with_sandbox(body)
    assert r.timed_out and r.exit_code == 124 and took < 5
    time.sleep(3.5)
    assert not marker.exists(), "a child of the timed-out command survived"


def test_background_children_do_not_outlive_a_finished_command(tmp_path):
    marker = tmp_path / "late"

    async def body(sb):
        with anyio.fail_after(10):
            return await sb.exec(f"(sleep 2; touch {marker}) >/dev/null 2>&1 & echo started")

    r = with_sandbox(body)
    assert r.stdout.strip() == "started"
    time.sleep(2.5)
    assert not marker.exists()


def test_output_is_capped_with_a_note():
    r = with_sandbox(lambda sb: sb.exec("head -c 500000 /dev/zero | tr '\\0' x"), SandboxConfig(output_limit=1000))
    assert r.truncated and r.stdout.startswith("x" * 1000) and "output cut at 1000 bytes" in r.stdout


def test_file_ops_refuse_escapes_including_symlinks():
    async def body(sb):
        os.symlink("/etc", os.path.join(sb.workspace, "etc-link"))
        os.symlink("/etc/passwd", os.path.join(sb.workspace, "pw"))
        for bad in ["../x", "/etc/passwd", "etc-link/passwd", "pw", "a/../../x"]:
            with pytest.raises(PathEscapeError):
                await sb.read(bad)
        for bad in ["../y", "etc-link/new", "pw"]:
            with pytest.raises(PathEscapeError):
                await sb.write(bad, b"x")
        with pytest.raises(PathEscapeError):
            await sb.list("etc-link")
        await sb.write("deep/er/file.bin", b"\x00\x01")
        return await sb.read("deep/er/file.bin")

    assert with_sandbox(body) == b"\x00\x01"


def test_hidden_files_exist_only_after_injection_and_outside_the_workspace():
    async def body(sb):
        before = await sb.exec("find / -name secret.txt -path '*clawsdk*' 2>/dev/null | head -1")
        where = await sb.inject_hidden(TASK.hidden)
        listing = [e.path for e in await sb.list(".", recursive=True)]
        after = await sb.exec('cat "$CLAWSDK_HIDDEN/secret.txt"')
        return before.stdout, where, listing, after.stdout, sb.workspace_path

    before, where, listing, after, ws = with_sandbox(body)
    assert before.strip() == ""
    assert not where.startswith(ws) and "secret.txt" not in " ".join(listing)
    assert after == "expected\n"


def test_close_removes_everything_even_after_cancellation():
    roots = []

    async def main():
        sb = LocalSandbox(SandboxConfig())
        await sb.start(TASK)
        roots.append(sb.root)
        with anyio.move_on_after(0.3):
            async with sb:
                await sb.exec("sleep 30", timeout=60)
        assert not sb.root.exists()
        await sb.close()  # twice is fine

    anyio.run(main)
    assert not roots[0].exists()


def test_orphans_of_a_killed_runner_are_swept_at_the_next_start(tmp_path):
    import subprocess
    import sys

    from clawsdk.sandbox import hostdir

    root = tmp_path / "root"
    script = (
        "import anyio, sys\n"
        "from clawsdk.sandbox.base import SandboxConfig\n"
        "from clawsdk_plugins.sandboxes.local import LocalSandbox\n"
        "from clawsdk.tasks.model import Task\n"
        "async def main():\n"
        f"    sb = LocalSandbox(SandboxConfig(root={str(root)!r}))\n"
        "    await sb.start(Task(id='t', instruction='x'))\n"
        "    print(sb.root, flush=True)\n"
        "    await sb.exec('sleep 317', timeout=600)\n"
        "anyio.run(main)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    orphan = Path(proc.stdout.readline().strip())
    time.sleep(0.5)  # let `sleep 317` start in the orphan's workspace
    proc.kill()
    proc.wait()
    assert orphan.exists()
    base = hostdir.workspace_root(str(root))
    hostdir._swept.discard(base)

    async def start_another():
        sb = LocalSandbox(SandboxConfig(root=str(root)))
        await sb.start(TASK)
        await sb.close()

    anyio.run(start_another)
    assert not orphan.exists()
    leftover = subprocess.run(["pgrep", "-f", "sleep 317"], capture_output=True, text=True).stdout.split()
    assert leftover == [], "the orphan's process kept running"
