"""Executors decide where a rollout attempt runs: in this process (`local`) or elsewhere (e.g. Ray).

The runner owns planning, retries, resume and the one store writer; an executor only runs
attempts and streams their events to the recorder it is handed.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import anyio

from clawsdk.runtime.agent import Agent
from clawsdk.runtime.rollout import AttemptResult, attempt_rollout
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Task


@dataclass
class RolloutJob:
    task: Task
    #: the agent instance built on the driver; `agent_name`/`agent_options` rebuild it elsewhere
    agent: Agent
    agent_name: str | None
    agent_options: dict[str, Any]
    sandbox: str
    sandbox_config: SandboxConfig
    rollout_id: str
    attempt: int
    #: resources one rollout asks of a scheduler (CPUs, memory in MB, GPUs)
    resources: dict[str, float] = field(default_factory=lambda: {"num_cpus": 1})


class Executor(abc.ABC):
    name = "executor"
    #: the slots its attempts' verifiers share (a live run's `verifiers=N` resizes them), or None: no limit
    verifier_slots: anyio.CapacityLimiter | None = None

    async def __aenter__(self) -> Executor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    @abc.abstractmethod
    async def attempt(self, job: RolloutJob, recorder: Recorder) -> AttemptResult:
        """Run one attempt of a rollout, recording its events; never raise for the rollout's own failure."""


class LocalExecutor(Executor):
    """Attempts run as tasks of this process's event loop."""

    name = "local"

    def __init__(self, verifier_concurrency: int | None = None):
        self.verifier_slots = anyio.CapacityLimiter(verifier_concurrency) if verifier_concurrency else None

    async def attempt(self, job: RolloutJob, recorder: Recorder) -> AttemptResult:
        from clawsdk.plugins import get_registry

        registry = get_registry()
        make = registry.get("sandboxes", job.sandbox)
        return await attempt_rollout(job.task, job.agent, lambda: make(job.sandbox_config), recorder, registry,
                                     self.verifier_slots)
