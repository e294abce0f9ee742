"""Checks a plugin author runs against their plugin: the same ones the built-ins pass."""

from clawsdk.testing.sandbox import SANDBOX_CHECKS, CheckSkipped, SandboxCheck, run_sandbox_check, self_check

__all__ = ["SANDBOX_CHECKS", "CheckSkipped", "SandboxCheck", "run_sandbox_check", "self_check"]
