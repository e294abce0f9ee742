"""SIGKILL the runner during a 64-sandbox docker run: the next start sweeps every orphan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandbox_backends import skip_unless_available

RUNNER = """
import sys
from clawsdk import Limits, Task, run_sync
from clawsdk.sandbox.base import SandboxConfig

tasks = [Task(id=f"t{i}", instruction="wait", limits=Limits(timeout_s=900, tool_timeout_s=600))
         for i in range(64)]
run_sync(tasks, agent="scripted", agent_options={"calls": [{"tool": "exec", "args": {"command": "sleep 600"}}]},
         sandbox="docker", concurrency=64, db=sys.argv[1], retries=0)
"""

NEXT_START = """
import anyio
from clawsdk.plugins import get_registry
from clawsdk.tasks.model import Task

async def main():
    sb = get_registry().get("sandboxes", "docker")(None)
    await sb.start(Task(id="next", instruction="x"))
    await sb.close()

anyio.run(main)
"""


def _ours(client, pid: int) -> list:
    from clawsdk_plugins.sandboxes.docker import LABEL, LABEL_OWNER

    # sparse: containers the run removes while we list them must not break the listing
    return [c for c in client.containers.list(all=True, sparse=True, filters={"label": LABEL})
            if (c.attrs.get("Labels") or {}).get(LABEL_OWNER, "").split()[1:2] == [str(pid)]]


@pytest.mark.slow
def test_sigkilled_runner_leaves_nothing_after_the_next_start(tmp_path):
    skip_unless_available("docker")
    from clawsdk_plugins.sandboxes.docker import client

    docker = client()
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path / "store.db")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while len(_ours(docker, proc.pid)) < 64:  # polls the engine: what is being waited for is outside us
            assert proc.poll() is None, f"the runner ended early: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() < deadline, f"only {len(_ours(docker, proc.pid))} of 64 containers started"
            time.sleep(0.5)
        roots = {Path(c.attrs["Labels"]["org.clawsdk.root"]) for c in _ours(docker, proc.pid)}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = len(_ours(docker, proc.pid))
    assert before == 64, f"{before} containers right after SIGKILL"
    assert all(r.exists() for r in roots), "sandbox folders vanished before the sweep"

    subprocess.run([sys.executable, "-c", NEXT_START], env=env, check=True, timeout=300)

    after = len(_ours(docker, proc.pid))
    assert after == 0, f"{after} of {before} orphaned containers survived the next start"
    assert not any(r.exists() for r in roots), "orphaned sandbox folders survived the next start"
