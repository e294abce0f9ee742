"""The hooks a clawsdk plugin implements. Each takes a `register(name, factory)` callback."""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("clawsdk")
hookimpl = pluggy.HookimplMarker("clawsdk")


@hookspec
def register_task_sources(register):
    """Register task sources: register(name, source) where source has detect(path) and load(path)."""


@hookspec
def register_sandboxes(register):
    """Register sandbox backends: register(name, factory(config) -> Sandbox)."""


@hookspec
def register_skills(register):
    """Register tool/skill servers: register(name, factory(sandbox, task) -> MCP server)."""


@hookspec
def register_models(register):
    """Register model backends: register(name, factory(**options) -> Model)."""


@hookspec
def register_agents(register):
    """Register agents: register(name, factory(**options) -> Agent)."""


@hookspec
def register_verifiers(register):
    """Register verifiers: register(type, factory(spec) -> Verifier) for VerifierSpec.type."""


@hookspec
def register_trainers(register):
    """Register trainers: register(name, factory(**options) -> Trainer)."""


@hookspec
def register_executors(register):
    """Register rollout executors: register(name, factory(**options) -> Executor)."""


@hookspec
def register_commands(register):
    """Register CLI commands: register(click_command)."""
