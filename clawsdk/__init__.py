"""clawsdk: workspace tasks, sandboxed MCP rollouts, one SQLite store, training and benchmarks.

The names below load on first use (PEP 562), so `import clawsdk` and every `clawsdk` command
pay only for what they touch: `clawsdk --version` imports no MCP, pydantic model or store code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawsdk._lazy import lazy_attributes

__version__ = "0.1.0"

#: the public surface: what users and plugin authors import, from here. Other modules are the implementation
#: (docs/architecture.md, "Public surface"); the kits (clawsdk.testing), synthesis (clawsdk.synth) and
#: benchmarks (clawsdk.bench) are public packages of their own.
_EXPORTS = {
    # running tasks and reading the results
    "load_tasks": "clawsdk.tasks.sources",
    "load_task": "clawsdk.tasks.native",
    "save_task": "clawsdk.tasks.native",
    "run": "clawsdk.runtime.runner",
    "run_sync": "clawsdk.runtime.runner",
    "RunOptions": "clawsdk.runtime.runner",
    "RunResult": "clawsdk.runtime.runner",
    "Store": "clawsdk.store.store",
    # the task model
    "Task": "clawsdk.tasks.model",
    "File": "clawsdk.tasks.model",
    "Limits": "clawsdk.tasks.model",
    "ToolCall": "clawsdk.tasks.model",
    "VerifierSpec": "clawsdk.tasks.model",
    # writing plugins: the hook marker, the registry and each kind's contract
    "hookimpl": "clawsdk.hookspecs",
    "get_registry": "clawsdk.plugins",
    "register_plugin": "clawsdk.plugins",
    "TaskSource": "clawsdk.tasks.sources",
    "Sandbox": "clawsdk.sandbox.base",
    "SandboxConfig": "clawsdk.sandbox.base",
    "Capabilities": "clawsdk.sandbox.base",
    "ExecResult": "clawsdk.sandbox.base",
    "Agent": "clawsdk.runtime.agent",
    "AgentContext": "clawsdk.runtime.agent",
    "Model": "clawsdk.models.base",
    "ChatResponse": "clawsdk.models.base",
    "Verifier": "clawsdk.verify.verdict",
    "VerifyContext": "clawsdk.verify.verdict",
    "Verdict": "clawsdk.verify.verdict",
    "SubScore": "clawsdk.verify.verdict",
    "Trainer": "clawsdk.train.base",
    "TrainResult": "clawsdk.train.base",
    "resolve_weights": "clawsdk.train.base",
    "Executor": "clawsdk.runtime.executor",
    "ToolServer": "clawsdk.mcp.toolkit",
    "skill_server": "clawsdk.mcp.toolkit",
    "tool_errors": "clawsdk.mcp.toolkit",
    # errors
    "ClawError": "clawsdk.errors",
    "FailureKind": "clawsdk.errors",
    "TaskFormatError": "clawsdk.errors",
    "AgentError": "clawsdk.errors",
    "ModelError": "clawsdk.errors",
    "SandboxError": "clawsdk.errors",
    "VerifierError": "clawsdk.errors",
    "PathEscapeError": "clawsdk.errors",
    "StoreError": "clawsdk.errors",
    "PluginError": "clawsdk.errors",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_attributes(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from clawsdk.errors import (AgentError, ClawError, FailureKind, ModelError, PathEscapeError, PluginError,
                                SandboxError, StoreError, TaskFormatError, VerifierError)
    from clawsdk.hookspecs import hookimpl
    from clawsdk.mcp.toolkit import ToolServer, skill_server, tool_errors
    from clawsdk.models.base import ChatResponse, Model
    from clawsdk.plugins import get_registry, register_plugin
    from clawsdk.runtime.agent import Agent, AgentContext
    from clawsdk.runtime.executor import Executor
    from clawsdk.runtime.runner import RunOptions, RunResult, run, run_sync
    from clawsdk.sandbox.base import Capabilities, ExecResult, Sandbox, SandboxConfig
    from clawsdk.store.store import Store
    from clawsdk.tasks.model import File, Limits, Task, ToolCall, VerifierSpec
    from clawsdk.tasks.native import load_task, save_task
    from clawsdk.tasks.sources import TaskSource, load_tasks
    from clawsdk.train.base import Trainer, TrainResult, resolve_weights
    from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifyContext
