"""Checks a plugin author runs against their plugin: the same ones the built-ins pass.

One kit per plugin kind, each checking the kind's stated error contract (exception type, and a
message that names the path, field or option): sandboxes (`SANDBOX_CHECKS`, `self_check`),
skills (`assert_skill_conforms`), task sources, verifiers, models and trainers (each returns a
`Report`; `report.assert_ok()` fails a test with what is wrong).
"""

from __future__ import annotations

from clawsdk._lazy import lazy_attributes

_EXPORTS = {
    "SANDBOX_CHECKS": "clawsdk.testing.sandbox",
    "CheckSkipped": "clawsdk.testing.sandbox",
    "SandboxCheck": "clawsdk.testing.sandbox",
    "run_sandbox_check": "clawsdk.testing.sandbox",
    "self_check": "clawsdk.testing.sandbox",
    "assert_skill_conforms": "clawsdk.testing.skills",
    "check_skill": "clawsdk.testing.skills",
    "check_task_source": "clawsdk.testing.sources",
    "check_verifier": "clawsdk.testing.verifiers",
    "check_model": "clawsdk.testing.models",
    "check_trainer": "clawsdk.testing.trainers",
    "Report": "clawsdk.testing.report",
    "Finding": "clawsdk.testing.report",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS, globals())
