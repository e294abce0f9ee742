"""The conformance kit against the three built-in sandboxes."""

from __future__ import annotations

import pytest
from sandbox_backends import skip_unless_available

from clawsdk.plugins import get_registry
from clawsdk.testing import SANDBOX_CHECKS, run_sandbox_check


@pytest.mark.parametrize("backend", ["local", "bwrap", "docker"])
@pytest.mark.parametrize("check", SANDBOX_CHECKS, ids=str)
def test_conformance(backend, check):
    skip_unless_available(backend)
    run_sandbox_check(check, get_registry().get("sandboxes", backend))
