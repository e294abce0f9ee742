"""clawsdk: workspace tasks, sandboxed MCP rollouts, one SQLite store, training and benchmarks.

The names below load on first use (PEP 562), so `import clawsdk` and every `clawsdk` command
pay only for what they touch: `clawsdk --version` imports no MCP, pydantic model or store code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawsdk._lazy import lazy_attributes

__version__ = "0.1.0"

_EXPORTS = {
    "FailureKind": "clawsdk.errors",
    "TaskFormatError": "clawsdk.errors",
    "Agent": "clawsdk.runtime.agent",
    "AgentContext": "clawsdk.runtime.agent",
    "RunResult": "clawsdk.runtime.runner",
    "run": "clawsdk.runtime.runner",
    "run_sync": "clawsdk.runtime.runner",
    "Capabilities": "clawsdk.sandbox.base",
    "ExecResult": "clawsdk.sandbox.base",
    "Sandbox": "clawsdk.sandbox.base",
    "SandboxConfig": "clawsdk.sandbox.base",
    "Store": "clawsdk.store.store",
    "File": "clawsdk.tasks.model",
    "Limits": "clawsdk.tasks.model",
    "Task": "clawsdk.tasks.model",
    "ToolCall": "clawsdk.tasks.model",
    "VerifierSpec": "clawsdk.tasks.model",
    "load_task": "clawsdk.tasks.native",
    "save_task": "clawsdk.tasks.native",
    "load_tasks": "clawsdk.tasks.sources",
    "SubScore": "clawsdk.verify.verdict",
    "Verdict": "clawsdk.verify.verdict",
    "Verifier": "clawsdk.verify.verdict",
    "VerifyContext": "clawsdk.verify.verdict",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # the same names for type checkers; `X as X` marks each a re-export
    from clawsdk.errors import FailureKind as FailureKind
    from clawsdk.errors import TaskFormatError as TaskFormatError
    from clawsdk.runtime.agent import Agent as Agent
    from clawsdk.runtime.agent import AgentContext as AgentContext
    from clawsdk.runtime.runner import RunResult as RunResult
    from clawsdk.runtime.runner import run as run
    from clawsdk.runtime.runner import run_sync as run_sync
    from clawsdk.sandbox.base import Capabilities as Capabilities
    from clawsdk.sandbox.base import ExecResult as ExecResult
    from clawsdk.sandbox.base import Sandbox as Sandbox
    from clawsdk.sandbox.base import SandboxConfig as SandboxConfig
    from clawsdk.store.store import Store as Store
    from clawsdk.tasks.model import File as File
    from clawsdk.tasks.model import Limits as Limits
    from clawsdk.tasks.model import Task as Task
    from clawsdk.tasks.model import ToolCall as ToolCall
    from clawsdk.tasks.model import VerifierSpec as VerifierSpec
    from clawsdk.tasks.native import load_task as load_task
    from clawsdk.tasks.native import save_task as save_task
    from clawsdk.tasks.sources import load_tasks as load_tasks
    from clawsdk.verify.verdict import SubScore as SubScore
    from clawsdk.verify.verdict import Verdict as Verdict
    from clawsdk.verify.verdict import Verifier as Verifier
    from clawsdk.verify.verdict import VerifyContext as VerifyContext
