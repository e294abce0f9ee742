"""The escape suite: what an agent or a model-written verifier might try, contained under bwrap and docker."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.errors import ClawError
from clawsdk.plugins import get_registry
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task
from clawsdk.testing.sandbox import _host_ip, _Listener

BACKENDS = ["bwrap", "docker"]
TASK = Task(id="escape", instruction="try to escape", workspace=[File(path="notes.md", text="hi\n")])


def run_in(backend: str, body, extra: dict | None = None, n: int = 1, timeout: float = 120):
    """Start `n` sandboxes of `backend`, run `body(*sandboxes)`, close them whatever happens."""
    skip_unless_available(backend)
    make = get_registry().get("sandboxes", backend)

    async def main():
        boxes = []
        try:
            with anyio.fail_after(timeout):
                for _ in range(n):
                    sb = make(SandboxConfig(extra=extra or {}))
                    boxes.append(sb)
                    await sb.start(TASK)
                return await body(*boxes)
        finally:
            with anyio.CancelScope(shield=True):
                for sb in boxes:
                    await sb.close()

    return anyio.run(main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cannot_read_etc_shadow(backend):
    assert "root:" in Path("/etc/shadow").read_text() or os.geteuid() != 0

    async def body(sb):
        r = await sb.exec("cat /etc/shadow; cat /etc/gshadow; ls /etc/ssh 2>&1; id -u")
        assert "root:" not in r.stdout
        assert r.stdout.strip().splitlines()[-1] != "0", "commands run as root"
        r = await sb.exec("grep -c . /proc/1/environ 2>&1; cat /proc/kcore 2>&1 | head -c 10")
        assert "CLAWSDK_SANDBOX_ROOT" not in r.stdout

    run_in(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cannot_write_outside_the_workspace(backend, tmp_path):
    os.chmod(tmp_path, 0o777)  # even a folder anyone may write to stays out of reach
    target = tmp_path / "pwned"

    async def body(sb):
        await sb.exec(f"echo x > {target}; touch /usr/pwned /etc/pwned /pwned; echo y > /tmp/inside-only; "
                          f"ls {tmp_path} 2>&1")
        assert not target.exists(), "a command wrote to a host folder"
        for p in ("/usr/pwned", "/etc/pwned", "/pwned"):
            assert not Path(p).exists()
        assert not Path("/tmp/inside-only").exists(), "the sandbox /tmp is the host's"
        assert (await sb.exec("cat /tmp/inside-only")).stdout == "y\n"

    run_in(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_symlinks_do_not_lead_out(backend, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    os.chmod(tmp_path, 0o755)
    secret.chmod(0o644)

    async def body(sb):
        r = await sb.exec(f"ln -s / root && ln -s {secret} s && cat s root{secret} 2>&1")
        assert "TOPSECRET" not in r.stdout, "a symlink read a host file"
        for path in ("s", f"root{secret}", "root/etc/shadow"):
            with pytest.raises((ClawError, ValueError, OSError)):
                await sb.read(path)
        with pytest.raises((ClawError, ValueError, OSError)):
            await sb.write(f"root{tmp_path}/written", b"x")
        assert not (tmp_path / "written").exists()

    run_in(backend, body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cannot_reach_the_network(backend):
    listeners = [("127.0.0.1", _Listener("127.0.0.1"))]
    if ip := _host_ip():
        listeners.append((ip, _Listener(ip)))

    async def body(sb):
        for host, lst in listeners:
            r = await sb.exec(f"timeout 5 bash -c 'echo x > /dev/tcp/{host}/{lst.port}' && echo CONNECTED")
            assert "CONNECTED" not in r.stdout
        r = await sb.exec("timeout 5 bash -c 'echo x > /dev/tcp/1.1.1.1/80' && echo CONNECTED; ls /sys/class/net")
        assert "CONNECTED" not in r.stdout
        assert set(r.stdout.split()) <= {"lo"}, f"network interfaces besides loopback: {r.stdout}"

    try:
        run_in(backend, body)
        assert all(lst.hits == 0 for _, lst in listeners)
    finally:
        for _, lst in listeners:
            lst.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cannot_see_another_rollouts_workspace(backend):
    marker = "OTHER-" + secrets.token_hex(6)

    async def body(a, b):
        await a.write("mine.txt", marker.encode())
        r = await b.exec(f"cat {a.workspace}/mine.txt; ls {a.root.parent}; ls /dev/shm; "
                         f"grep -rsl {marker} / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr; echo end",
                         timeout=60)
        assert marker not in r.stdout and a.root.name not in r.stdout, r.stdout
        assert (await a.exec("cat mine.txt")).stdout == marker

    run_in(backend, body, n=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hidden_files_unreadable_before_injection_and_read_only_after(backend):
    async def body(sb):
        hidden_at = sb.opts.hidden_path
        r = await sb.exec(f"ls -A {hidden_at}; cat {hidden_at}/reward.sh {sb.root}/hidden/reward.sh; echo end")
        assert r.stdout == "end\n", "hidden files are visible before injection"
        await sb.inject_hidden([File(path="reward.sh", text="echo 1\n", executable=True)])
        assert (await sb.exec(f"cat {hidden_at}/reward.sh")).stdout == "echo 1\n"
        r = await sb.exec(f"echo 'echo 0' > {hidden_at}/reward.sh; rm -f {hidden_at}/reward.sh; bash {hidden_at}/reward.sh")
        assert r.stdout.strip() == "1", "a command rewrote a hidden verifier file"

    run_in(backend, body)


FORKS = """
import os, time
n = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_fork_bomb_is_contained(backend):
    async def body(sb):
        # a process limit: far fewer than asked for can run at once
        r = await sb.exec(["python3", "-c", FORKS], timeout=30)
        assert r.exit_code == 0, r.stderr
        assert int(r.stdout) < 64, f"{r.stdout} processes started under a limit of 64"
        with anyio.fail_after(90):
            r = await sb.exec(":(){ :|:& };:; sleep 3", timeout=8)
        assert r.duration_s < 60
        r = await sb.exec("echo alive", timeout=30)
        assert r.stdout.strip() == "alive", "the sandbox did not recover from the fork bomb"

    before = len(os.listdir("/proc"))
    run_in(backend, body, extra={"nproc": 64}, timeout=180)
    assert len(os.listdir("/proc")) < before + 50, "processes of the fork bomb outlived the sandbox"


@pytest.mark.parametrize("backend", BACKENDS)
def test_filling_the_disk_fills_only_the_quota(backend):
    if os.geteuid() != 0:
        pytest.skip("the per-sandbox disk quota is a tmpfs that only root can mount; without it each file is capped")
    free_before = shutil.disk_usage("/").free

    async def body(sb):
        r = await sb.exec("head -c 100M /dev/zero > big.bin; echo rc=$?", timeout=60)
        assert "rc=0" not in r.stdout, "wrote past the 32 MiB quota"
        assert len(await sb.read("big.bin")) <= 32 * 1024 * 1024
        r = await sb.exec("head -c 100M /dev/zero > /tmp/big.bin; echo rc=$?", timeout=60)
        assert "rc=0" not in r.stdout, "wrote past the 16 MiB /tmp"
        r = await sb.exec("rm -f big.bin /tmp/big.bin; head -c 20M /dev/zero > one.bin; echo rc=$?", timeout=60)
        assert "rc=0" not in r.stdout, "one file grew past file_mb"
        r = await sb.exec("rm -f one.bin; echo still > ok.txt && cat ok.txt")
        assert r.stdout == "still\n", "the sandbox is unusable after the disk filled"

    run_in(backend, body, extra={"disk_mb": 32, "tmp_mb": 16, "file_mb": 8})
    assert shutil.disk_usage("/").free > free_before - 64 * 1024 * 1024
