"""A folder made read-only for real, for tests of what reads from one (a read-only mount, an archive)."""

from __future__ import annotations

import contextlib
import os

import pytest


@contextlib.contextmanager
def read_only(folder):
    """The folder made read-only for real: a read-only bind mount as root (file modes do not bind root), else
    its mode."""
    import subprocess

    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    mount = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mount.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
        yield
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)  # even while a failed open holds a file
