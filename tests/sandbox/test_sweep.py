"""A SIGKILL at any point of a sandbox root's life (after mkdir, after mount, half-way through
teardown) leaves a root the next start recognises by its name and removes, mount and all; and
tmpfs quotas, which are memory, are cut to what the machine has, with a warning."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawsdk.sandbox import hostroot
from clawsdk.sandbox.hostroot import SandboxRoot, mounts_under, sweep_orphans

#: made by a child that is then SIGKILLed at the named moment
CHILD = r"""
import os, signal, sys
from pathlib import Path
from clawsdk.sandbox.hostroot import SandboxRoot, umount
base, moment = Path(sys.argv[1]), sys.argv[2]
root = SandboxRoot(base, "bwrap", 16 if moment != "after-mkdir" else 0)
if moment == "after-mkdir":
    root.path.mkdir(mode=0o711)
else:
    root.create()
    (root.path / "workspace").mkdir()
    (root.path / "workspace" / "f.txt").write_text("x")
    if moment == "mid-teardown":
        umount(root.path)
        (root.path / "left.txt").write_text("the rmtree never ran")
print(root.path, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@needs_root
@pytest.mark.parametrize("moment", ["after-mkdir", "after-mount", "mid-teardown"])
def test_a_root_killed_at_any_moment_is_swept(moment, tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    done = subprocess.run([sys.executable, "-c", CHILD, str(base), moment], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    left = Path(done.stdout.strip())
    assert left.is_dir()
    assert (left in mounts_under(base)) == (moment == "after-mount")
    mine = SandboxRoot(base, "bwrap")  # a live owner's root stays
    mine.create()
    other = base / left.name.replace("-bwrap-", "-docker-")  # another backend's is not ours to sweep
    other.mkdir()
    try:
        assert sweep_orphans(base, "bwrap") == 1
        assert not left.exists() and left not in mounts_under(base)
        assert mine.path.is_dir() and other.is_dir()
    finally:
        mine.remove()
        other.rmdir()


def test_quotas_are_cut_to_the_memory_there_is(monkeypatch, caplog):
    monkeypatch.setattr(hostroot, "available_memory_mb", lambda: 1000)
    monkeypatch.setattr(hostroot, "_committed_mb", 0)
    monkeypatch.setattr(hostroot, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="clawsdk.sandbox.hostroot"):
        grants = [hostroot.reserve_quota(200) for _ in range(6)]
    assert grants == [200, 200, 200, 200, 100, 64]  # 90% of 1000 MiB in all, then the floor
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "--concurrency" in warnings[0] and "disk_mb" in warnings[0]
    for g in grants:
        hostroot.release_quota(g)
    assert hostroot.reserve_quota(200) == 200


@needs_root
def test_a_cut_quota_is_the_mounted_size(monkeypatch, tmp_path):
    monkeypatch.setattr(hostroot, "available_memory_mb", lambda: 200)
    monkeypatch.setattr(hostroot, "_committed_mb", 0)
    root = SandboxRoot(tmp_path, "bwrap", 2048)
    root.create()
    try:
        st = os.statvfs(root.path)
        assert st.f_blocks * st.f_frsize == 180 * 1024 * 1024
    finally:
        root.remove()
    assert hostroot._committed_mb == 0


@pytest.mark.parametrize("backend", ["local", "bwrap", "docker"])
def test_the_sweep_command_removes_a_dead_owners_roots(backend, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from clawsdk.cli import cli
    from clawsdk.sandbox.hostdir import workspace_root

    monkeypatch.setenv("CLAWSDK_SANDBOX_ROOT", str(tmp_path))
    base = workspace_root()
    # our own pid with another start time: a process that is gone, whose pid was reused
    dead = base / f"sb-0123456789ab-{backend}-{os.getpid()}-0"
    (dead / "workspace").mkdir(parents=True)
    alive = SandboxRoot(base, backend)
    alive.create()
    try:
        r = CliRunner().invoke(cli, ["sandbox", "sweep"], catch_exceptions=False)
        # (bwrap's fallback root, shared by every run on this host, may hold other dead owners' roots too)
        assert r.exit_code == 0 and " 0 folder(s)" not in r.output, r.output
        assert not dead.exists() and alive.path.is_dir()
    finally:
        alive.remove()
