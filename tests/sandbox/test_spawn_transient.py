"""A command that cannot start because this process is out of descriptors (EMFILE, shared by every
rollout of the run) waits for them; it never marks its sandbox broken.

One rollout's end_turn walked another's deep links holding a descriptor per folder; meanwhile any other
rollout's next command failed to spawn ("could not start '/usr/bin/setpriv': [Errno 24] Too many open
files"), the sandbox was marked broken for good, and the rollout ended `sandbox_error`, unscored.
"""

from __future__ import annotations

import contextlib
import os
import resource

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.errors import SandboxError
from clawsdk.plugins import get_registry
from clawsdk.sandbox import hostdir
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Task

TASK = Task(id="spawn", instruction="run", workspace=[File(path="a.txt", text="a\n")])


@contextlib.contextmanager
def every_descriptor_taken():
    """This process's descriptor limit lowered a little above what it holds, and the rest taken; yields the
    list of taken descriptors (close and remove them to give them back)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 32, hard))
    held: list[int] = []
    try:
        while True:
            try:
                held.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                break
        yield held
    finally:
        give_back(held)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def give_back(held: list[int]) -> None:
    while held:
        os.close(held.pop())


@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_a_command_started_while_descriptors_run_out_waits_and_the_sandbox_stays_whole(backend, monkeypatch):
    skip_unless_available(backend)
    sb = get_registry().get("sandboxes", backend)(SandboxConfig())

    async def main():
        await sb.start(TASK)
        try:
            with every_descriptor_taken() as held:
                async def release():
                    await anyio.sleep(0.5)
                    give_back(held)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(release)
                    r = await sb.exec("cat a.txt", timeout=30)
            assert (r.exit_code, r.stdout, sb.failure) == (0, "a\n", None), (r, sb.failure)

            # still out of them after the retries: this command fails, the sandbox does not
            monkeypatch.setattr(hostdir, "SPAWN_RETRY_S", 0.3)
            with every_descriptor_taken():
                with pytest.raises(SandboxError, match="Too many open files"):
                    await sb.exec("true", timeout=30)
            assert sb.failure is None
            r = await sb.exec("cat a.txt", timeout=30)
            assert (r.exit_code, r.stdout) == (0, "a\n"), r
        finally:
            with anyio.CancelScope(shield=True):
                await sb.close()

    anyio.run(main)


def test_a_bwrap_probe_that_could_not_start_is_not_remembered(monkeypatch):
    """bubblewrap is probed once per process and the answer kept: a probe that failed to start because the
    process was out of descriptors failed every later bwrap sandbox of the run."""
    skip_unless_available("bwrap")
    from clawsdk_plugins.sandboxes import bwrap as sandbox_bwrap

    real_run = sandbox_bwrap.subprocess.run

    def out_of_descriptors(*args, **kwargs):
        raise OSError(24, "Too many open files")

    sandbox_bwrap.probe.cache_clear()
    monkeypatch.setattr(sandbox_bwrap.subprocess, "run", out_of_descriptors)
    sb = sandbox_bwrap.make_bwrap()
    with pytest.raises(SandboxError, match="Too many open files"):
        anyio.run(sb.preflight)
    monkeypatch.setattr(sandbox_bwrap.subprocess, "run", real_run)
    anyio.run(sandbox_bwrap.make_bwrap().preflight)
