"""A local Ray cluster the ray executor starts refuses a client without its token."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.conftest import CHECKOUT_PATH

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

# run in a process of its own: Ray keeps the token it loaded for the life of a process
DRIVER = r"""
import json, os, subprocess, sys, anyio, ray
from clawsdk_plugins.executors.ray import RayExecutor

async def main():
    async with RayExecutor(num_cpus=1):
        address = ray.get_runtime_context().gcs_address
        stranger = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        stranger["HOME"] = sys.argv[1]  # no token there
        code = f"import ray; ray.init(address={address!r}); print('CONNECTED')"
        p = subprocess.run([sys.executable, "-c", code], env=stranger, capture_output=True, text=True, timeout=120)
        print(json.dumps({"address": address, "rc": p.returncode, "out": p.stdout[-2000:], "err": p.stderr[-2000:],
                          "mode": os.environ.get("RAY_AUTH_MODE")}))

anyio.run(main)
"""


def test_a_client_without_the_token_is_refused_and_the_token_is_private(tmp_path):
    home, stranger = tmp_path / "home", tmp_path / "stranger"
    home.mkdir()
    stranger.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(HOME=str(home), PYTHONPATH=CHECKOUT_PATH)
    p = subprocess.run([sys.executable, "-c", DRIVER, str(stranger)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["mode"] == "token"
    assert report["rc"] != 0 and "CONNECTED" not in report["out"], report
    assert "authenticat" in report["err"].lower() or "token" in report["err"].lower(), report["err"]
    token = home / ".ray" / "auth_token"
    assert len(token.read_text().strip()) == 64
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
