"""Shared by the CLI agents' tests: where each CLI is installed (skipped without it, a failure under CI=true)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def installed_home(package) -> str:
    """The install prefix of `package` ($CLAWSDK_<AGENT>_HOME, else .clawsdk/<agent> in the repo)."""
    from clawsdk_plugins.agents.cli_agent.install import find_install

    home = os.environ.get(package.home_env) or str(REPO / ".clawsdk" / package.agent)
    if find_install(package, home) is None:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(package.missing(home), pytrace=False)
        pytest.skip(package.missing(home))
    return home
