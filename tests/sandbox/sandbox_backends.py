"""Which isolating backends can run here; a test skips with the reason when one cannot."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def why_unavailable(backend: str) -> str | None:
    if backend == "bwrap":
        from clawsdk_plugins.sandbox_bwrap import available

        return available()
    if backend == "docker":
        from clawsdk_plugins.sandbox_docker import available

        return available()
    return None


def skip_unless_available(backend: str) -> None:
    why = why_unavailable(backend)
    if why:
        pytest.skip(f"{backend} sandbox cannot run here: {why}")
