"""clawsdk: workspace tasks, sandboxed MCP rollouts, one SQLite store, training and benchmarks."""

from clawsdk.errors import FailureKind, TaskFormatError
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.runner import RunResult, run, run_sync
from clawsdk.sandbox.base import Capabilities, ExecResult, Sandbox, SandboxConfig
from clawsdk.store.store import Store
from clawsdk.tasks.model import File, Limits, Task, ToolCall, VerifierSpec
from clawsdk.tasks.native import load_task, save_task
from clawsdk.tasks.sources import load_tasks
from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifyContext

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentContext",
    "Capabilities",
    "ExecResult",
    "FailureKind",
    "File",
    "Limits",
    "RunResult",
    "Sandbox",
    "SandboxConfig",
    "Store",
    "SubScore",
    "Task",
    "TaskFormatError",
    "ToolCall",
    "Verdict",
    "Verifier",
    "VerifierSpec",
    "VerifyContext",
    "load_task",
    "load_tasks",
    "run",
    "run_sync",
    "save_task",
]
