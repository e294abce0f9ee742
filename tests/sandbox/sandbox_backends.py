"""Which isolating backends can run here; a test skips with the reason when one cannot.

In CI (``CI=true``) bubblewrap and dockerd are installed on purpose, so a backend that cannot
run is a broken machine, not a reason to skip: the isolation tests would pass by proving
nothing. There the test fails with the reason instead.
"""

from __future__ import annotations

import functools
import os

import pytest


@functools.cache
def why_unavailable(backend: str) -> str | None:
    if backend == "bwrap":
        from clawsdk_plugins.sandboxes.bwrap import available

        return available()
    if backend == "docker":
        from clawsdk_plugins.sandboxes.docker import available

        return available()
    return None


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def skip_unless_available(backend: str) -> None:
    """Skip (fail, in CI) a test whose backend cannot run on this machine."""
    why = why_unavailable(backend)
    if why:
        message = f"{backend} sandbox cannot run here: {why}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: an isolation test must run, not skip)", pytrace=False)
        pytest.skip(message)
