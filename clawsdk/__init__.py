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
    from clawsdk.errors import (
        AgentError as AgentError,
    )
    from clawsdk.errors import (
        ClawError as ClawError,
    )
    from clawsdk.errors import (
        FailureKind as FailureKind,
    )
    from clawsdk.errors import (
        ModelError as ModelError,
    )
    from clawsdk.errors import (
        PathEscapeError as PathEscapeError,
    )
    from clawsdk.errors import (
        PluginError as PluginError,
    )
    from clawsdk.errors import (
        SandboxError as SandboxError,
    )
    from clawsdk.errors import (
        StoreError as StoreError,
    )
    from clawsdk.errors import (
        TaskFormatError as TaskFormatError,
    )
    from clawsdk.errors import (
        VerifierError as VerifierError,
    )
    from clawsdk.hookspecs import (
        hookimpl as hookimpl,
    )
    from clawsdk.mcp.toolkit import (
        ToolServer as ToolServer,
    )
    from clawsdk.mcp.toolkit import (
        skill_server as skill_server,
    )
    from clawsdk.mcp.toolkit import (
        tool_errors as tool_errors,
    )
    from clawsdk.models.base import (
        ChatResponse as ChatResponse,
    )
    from clawsdk.models.base import (
        Model as Model,
    )
    from clawsdk.plugins import (
        get_registry as get_registry,
    )
    from clawsdk.plugins import (
        register_plugin as register_plugin,
    )
    from clawsdk.runtime.agent import (
        Agent as Agent,
    )
    from clawsdk.runtime.agent import (
        AgentContext as AgentContext,
    )
    from clawsdk.runtime.executor import (
        Executor as Executor,
    )
    from clawsdk.runtime.runner import (
        RunOptions as RunOptions,
    )
    from clawsdk.runtime.runner import (
        RunResult as RunResult,
    )
    from clawsdk.runtime.runner import (
        run as run,
    )
    from clawsdk.runtime.runner import (
        run_sync as run_sync,
    )
    from clawsdk.sandbox.base import (
        Capabilities as Capabilities,
    )
    from clawsdk.sandbox.base import (
        ExecResult as ExecResult,
    )
    from clawsdk.sandbox.base import (
        Sandbox as Sandbox,
    )
    from clawsdk.sandbox.base import (
        SandboxConfig as SandboxConfig,
    )
    from clawsdk.store.store import (
        Store as Store,
    )
    from clawsdk.tasks.model import (
        File as File,
    )
    from clawsdk.tasks.model import (
        Limits as Limits,
    )
    from clawsdk.tasks.model import (
        Task as Task,
    )
    from clawsdk.tasks.model import (
        ToolCall as ToolCall,
    )
    from clawsdk.tasks.model import (
        VerifierSpec as VerifierSpec,
    )
    from clawsdk.tasks.native import (
        load_task as load_task,
    )
    from clawsdk.tasks.native import (
        save_task as save_task,
    )
    from clawsdk.tasks.sources import (
        TaskSource as TaskSource,
    )
    from clawsdk.tasks.sources import (
        load_tasks as load_tasks,
    )
    from clawsdk.train.base import (
        Trainer as Trainer,
    )
    from clawsdk.train.base import (
        TrainResult as TrainResult,
    )
    from clawsdk.train.base import (
        resolve_weights as resolve_weights,
    )
    from clawsdk.verify.verdict import (
        SubScore as SubScore,
    )
    from clawsdk.verify.verdict import (
        Verdict as Verdict,
    )
    from clawsdk.verify.verdict import (
        Verifier as Verifier,
    )
    from clawsdk.verify.verdict import (
        VerifyContext as VerifyContext,
    )
