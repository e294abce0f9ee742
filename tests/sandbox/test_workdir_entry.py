"""A command's working folder that cannot be entered is the agent's doing: its command fails (a tool error or
exit 126 and a message), never its sandbox.

On the local sandbox the spawn's own chdir entered the folder by its path: a folder chain of 25 names of 200
characters (a path past PATH_MAX, which the file tools walk by descriptors), a folder a background loop removed
between its resolution and the spawn, a folder without search right, made the chdir fail (ENAMETOOLONG, ENOENT,
EACCES), and exec took it for a sandbox that could not start `bash`: the rollout ended `sandbox_error`,
unscored. bwrap answered the same call with exit 1 and docker with 126, both scored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.errors import PathEscapeError, SandboxError
from clawsdk.plugins import get_registry
from clawsdk.sandbox import hostdir
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task

TASK = Task(id="workdir", instruction="run", workspace=[File(path="a.txt", text="a\n")])
SEG = "a" * 200
DEEP = "/".join([SEG] * 25)  # 5,024 characters from the workspace


def run_in(backend: str, body) -> None:
    """Start `backend`'s sandbox, run `body(sb)`, close it."""
    skip_unless_available(backend)
    sb = get_registry().get("sandboxes", backend)(SandboxConfig())

    async def main():
        await sb.start(TASK)
        try:
            await body(sb)
        finally:
            with anyio.CancelScope(shield=True):
                await sb.close()

    anyio.run(main)


async def still_whole(sb) -> None:
    assert sb.failure is None, sb.failure
    r = await sb.exec("cat a.txt", timeout=30)
    assert (r.exit_code, r.stdout) == (0, "a\n"), r


@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_a_workdir_longer_than_path_max_fails_only_the_command(backend):
    async def body(sb):
        r = await sb.exec(f"mkdir -p {DEEP} && echo made", timeout=30)
        assert (r.exit_code, r.stdout) == (0, "made\n"), r
        r = await sb.exec("pwd | wc -c; touch here", timeout=30, cwd=DEEP)
        if backend == "local":  # entered through its descriptor: the command runs there
            assert r.exit_code == 0, r
            assert int(r.stdout) == len(f"{sb.workspace}/{DEEP}\n"), r
            assert sb.files().read(f"{DEEP}/here") == b""
        # bwrap cannot enter it inside either (exit 1): what matters is that the sandbox stays whole
        await still_whole(sb)

    run_in(backend, body)


def test_without_proc_a_folder_that_cannot_be_entered_is_exit_126(monkeypatch):
    """Where the folder is entered by its path (no /proc), the child's chdir failure is told from a spawn's."""
    monkeypatch.setattr(hostdir, "PROC_FDS", "/nonexistent-proc/self/fd")

    async def body(sb):
        await sb.exec(f"mkdir -p {DEEP}", timeout=30)
        r = await sb.exec("echo ran", timeout=30, cwd=DEEP)
        assert r.exit_code == 126 and r.stdout == "", r
        assert "cannot enter the working folder" in r.stderr and "File name too long" in r.stderr, r
        await still_whole(sb)

        # removed between its resolution and the spawn (the background loop's race, made certain)
        await sb.exec("mkdir d", timeout=30)
        real = sb.wrap_command

        def remove_then_wrap(argv, cwd, env):
            os.rmdir(sb.workspace / "d")
            return real(argv, cwd, env)

        monkeypatch.setattr(sb, "wrap_command", remove_then_wrap)
        r = await sb.exec("echo ran", timeout=30, cwd="d")
        assert r.exit_code == 126 and "No such file or directory" in r.stderr, r
        monkeypatch.setattr(sb, "wrap_command", real)
        await still_whole(sb)

    run_in("local", body)


def test_a_workdir_removed_between_resolution_and_spawn_fails_only_the_command(monkeypatch):
    async def body(sb):
        real = sb.wrap_command
        for _ in range(3):
            await sb.exec("mkdir -p d", timeout=30)

            def remove_then_wrap(argv, cwd, env):
                os.rmdir(sb.workspace / "d")
                return real(argv, cwd, env)

            monkeypatch.setattr(sb, "wrap_command", remove_then_wrap)
            try:
                r = await sb.exec("echo ran", timeout=30, cwd="d")
            except FileNotFoundError as e:  # the same answer as a workdir missing from the start
                assert "d" in str(e)
            else:
                assert r.exit_code == 126 and r.stdout == "", r
            monkeypatch.setattr(sb, "wrap_command", real)
            await still_whole(sb)

        # the folder held open while it goes: the command still starts (in a folder that is gone)
        await sb.exec("mkdir -p d", timeout=30)
        r = await sb.exec("cd .. && rmdir d && echo gone", timeout=30, cwd="d")
        assert (r.exit_code, r.stdout) == (0, "gone\n"), r
        await still_whole(sb)

    run_in("local", body)


def test_a_workdir_swapped_for_a_link_out_after_its_resolution_is_not_entered(monkeypatch, tmp_path):
    """The folder is entered by the descriptor the workspace's walk opened, never by its path again: a link
    to a folder outside, swapped in after `cwd_of` resolved the name, is not followed."""
    outside = tmp_path / "outside"
    outside.mkdir()

    async def body(sb):
        await sb.exec("mkdir d", timeout=30)
        real = sb.wrap_command

        def swap_then_wrap(argv, cwd, env):
            os.rename(sb.workspace / "d", sb.workspace / "d.real")
            os.symlink(outside, sb.workspace / "d")
            return real(argv, cwd, env)

        monkeypatch.setattr(sb, "wrap_command", swap_then_wrap)
        with pytest.raises(PathEscapeError):
            await sb.exec("touch planted", timeout=30, cwd="d")
        monkeypatch.setattr(sb, "wrap_command", real)
        assert not (outside / "planted").exists()
        await still_whole(sb)

    run_in("local", body)


def test_a_program_that_cannot_start_still_breaks_the_sandbox():
    """Only the folder is the agent's: a program missing on the runner (bash) stays a broken sandbox."""

    async def body(sb):
        await sb.exec("mkdir d", timeout=30)
        with pytest.raises(SandboxError, match="could not start"):
            await sb.exec(["/nonexistent/bash", "-c", "true"], timeout=30, cwd="d")
        assert sb.failure and "could not start" in sb.failure

    run_in("local", body)


UNSEARCHABLE = textwrap.dedent("""
    import anyio, os, sys
    from clawsdk.plugins import get_registry
    from clawsdk.sandbox.base import SandboxConfig
    from clawsdk.tasks.model import File, Task

    async def main():
        sb = get_registry().get("sandboxes", "local")(SandboxConfig())
        await sb.start(Task(id="w", instruction="run", workspace=[File(path="a.txt", text="a\\n")]))
        try:
            r = await sb.exec("mkdir d && chmod 0400 d", timeout=30)
            assert r.exit_code == 0, r
            r = await sb.exec("echo ran", timeout=30, cwd="d")
            assert r.exit_code == 126 and r.stdout == "", r
            assert "cannot enter the working folder 'd'" in r.stderr and "Permission denied" in r.stderr, r
            assert sb.failure is None, sb.failure
            r = await sb.exec("cat a.txt", timeout=30)
            assert (r.exit_code, r.stdout) == (0, "a\\n"), r
        finally:
            await sb.close()
        print("ok")

    anyio.run(main)
""")


def test_an_unsearchable_workdir_is_exit_126():
    """A folder the agent left without its x bit (0400) cannot be entered by a non-root runner (EACCES)."""
    argv = [sys.executable, "-c", UNSEARCHABLE]
    home = tempfile.mkdtemp(prefix="clawsdk-workdir-")  # under tmp: reachable by the uid dropped to
    try:
        if os.geteuid() == 0:  # root searches any folder: run the sandbox as nobody
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv to drop to another uid")
            os.chown(home, 65534, 65534)
            argv = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", *argv]
        env = dict(os.environ, CLAWSDK_SANDBOX_ROOT=f"{home}/root", HOME=home)
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr
