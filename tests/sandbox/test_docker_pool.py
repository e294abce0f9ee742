"""Docker's warm pool: closed sandboxes' containers are reused after a clean reset, a broken one is
not, and 64 concurrent rollouts through `clawsdk.run` finish leaving no container or folder behind."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest
from sandbox_backends import skip_unless_available

from clawsdk.sandbox.base import SandboxConfig
from clawsdk.tasks.model import File, Limits, Task, VerifierSpec


def _ours(base: Path) -> list:
    from clawsdk_plugins.sandboxes.docker import LABEL, LABEL_HOST, LABEL_ROOT, client

    found = client().containers.list(all=True, sparse=True,
                                     filters={"label": [LABEL, f"{LABEL_HOST}={socket.gethostname()}"]})
    return [c for c in found if (c.attrs.get("Labels") or {}).get(LABEL_ROOT, "").startswith(str(base))]


def _base() -> Path:
    from clawsdk.sandbox.hostdir import workspace_root

    return workspace_root()


def test_a_closed_sandbox_container_is_reused_and_a_broken_one_is_not():
    skip_unless_available("docker")
    from clawsdk_plugins.sandboxes import docker_pool
    from clawsdk_plugins.sandboxes.docker import make_docker

    task = Task(id="pool", instruction="x", workspace=[File(path="given.txt", text="g")])

    async def main() -> None:
        first = make_docker(SandboxConfig())
        await first.start(task)
        used = first.container.id
        assert (await first.exec("echo x > ~/kept && mv ~/.openclaw ~/moved")).exit_code == 0
        await first.close()  # the agent moved a mount point: the reset must refuse this container
        assert docker_pool.idle_count() == 0, "a container whose mount point the agent moved was kept"
        second = make_docker(SandboxConfig())
        await second.start(task)
        assert second.container.id != used
        fresh = second.container.id
        r = await second.exec("ipcmk -M 64 -Q -S 1 && echo q > /dev/shm/q && echo q > /var/tmp/q && echo ok")
        assert r.stdout.strip().endswith("ok"), r.stderr
        await second.close()
        assert docker_pool.idle_count() == 1
        third = make_docker(SandboxConfig())
        await third.start(task)
        assert third.container.id == fresh, "a cleanly reset container was not reused"
        assert sorted(e.path for e in await third.list(".")) == ["given.txt"]
        r = await third.exec("ls -A ~; ls -A /tmp /var/tmp /dev/shm /dev/mqueue; ipcs | grep -c sandbox; cat given.txt")
        assert r.stdout.split() == [".openclaw", "/dev/mqueue:", "/dev/shm:", "/tmp:", "/var/tmp:", "0", "g"], r.stdout
        off = make_docker(SandboxConfig(extra={"pool_size": 0}))
        await off.start(task)
        assert off.container.id != fresh, "pool_size=0 took a pooled container"
        await off.close()
        await third.close()
        assert docker_pool.idle_count() == 1, "pool_size=0 put its container in the pool"
        assert docker_pool.drain() == 1
        assert _ours(_base()) == [], "drain left containers"

    anyio.run(main)


@pytest.mark.slow
def test_64_concurrent_docker_rollouts_finish_and_leave_nothing(tmp_path):
    skip_unless_available("docker")
    import clawsdk

    calls = [{"tool": "exec", "args": {"command": "echo hi > out.txt && setsid sleep 300 </dev/null >/dev/null 2>&1 &"}},
             {"tool": "write", "args": {"path": "done.txt", "content": "done\n"}},
             {"tool": "exec", "args": {"command": "cat out.txt"}}]
    tasks = [Task(id=f"t{i:02d}", instruction="write done.txt", workspace=[File(path="in.txt", text=str(i))],
                  verifier=VerifierSpec(checks=[{"type": "file_exists", "path": "done.txt"}]),
                  limits=Limits(timeout_s=600, tool_timeout_s=60)) for i in range(96)]  # 64 + a reusing wave
    base = _base()
    result = clawsdk.run_sync(tasks, agent="scripted", agent_options={"calls": calls}, sandbox="docker",
                              concurrency=64, db=tmp_path / "store.db", retries=0)
    bad = [(o.task_id, o.kind.value, o.error) for o in result.outcomes if not o.passed]
    assert len(result.outcomes) == 96 and not bad, bad[:3]
    assert _ours(base) == [], f"{len(_ours(base))} containers left after the run"
    left = [p.name for p in base.iterdir()] if base.exists() else []
    assert left == [], f"sandbox folders left after the run: {left[:5]}"
