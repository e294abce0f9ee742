"""What a task asks of its sandbox, checked against what a backend declares, before anything runs.

A task lists the capabilities it needs in ``metadata["requires"]`` (the names of
`Capabilities` fields: ``network_isolated``, ``fs_isolated``, ``persistent_processes``,
``gpu``). The runner calls `check_tasks` with the backend's declared capabilities; a task
that asks for something the backend does not give is refused with a message that says which
task, what it needs and which backends give it, instead of running somewhere it should not.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from clawsdk.errors import ClawError, TaskFormatError
from clawsdk.sandbox.base import Capabilities, Sandbox, SandboxConfig, SandboxPlugin
from clawsdk.tasks.model import Task

CAPABILITY_NAMES = tuple(f.name for f in fields(Capabilities))


class CapabilityError(ClawError):
    """A task needs a capability its sandbox backend does not declare."""


def required(task: Task) -> list[str]:
    """The capabilities `task` asks for; an unknown name is an error naming the task and the field."""
    raw = task.metadata.get("requires", [])
    names = [raw] if isinstance(raw, str) else list(raw or [])
    unknown = [n for n in names if n not in CAPABILITY_NAMES]
    if unknown:
        raise CapabilityError(
            f"task {task.id}: metadata.requires names unknown capabilities {unknown}; "
            f"known: {', '.join(CAPABILITY_NAMES)}"
        )
    return names


def unmet(task: Task, caps: Capabilities) -> list[str]:
    """The capabilities `task` needs that `caps` does not give."""
    return [name for name in required(task) if not getattr(caps, name)]


def check_tasks(tasks: Iterable[Task], caps: Capabilities, backend: str = "this sandbox") -> None:
    """Raise CapabilityError listing every task whose needs `caps` does not meet."""
    problems = []
    for task in tasks:
        missing = unmet(task, caps)
        if missing:
            problems.append(f"task {task.id} needs {', '.join(missing)}")
    if problems:
        raise CapabilityError(
            f"{backend} does not provide what these tasks need: " + "; ".join(problems)
            + " (see `clawsdk sandbox check` for the backends that do)"
        )


def runnable(tasks: list[Task], sandbox: Any) -> tuple[list[Task], list[TaskFormatError]]:
    """The tasks `sandbox` (an unstarted instance of the run's backend) can run, and one error for each it
    cannot (`Sandbox.cannot_run`: an image it cannot build, paths it cannot mount, a network policy it cannot
    enforce). Said once per task, before anything runs; none of a refused task's rollouts runs."""
    keep, refused = [], []
    for task in tasks:
        why = sandbox.cannot_run(task) if isinstance(sandbox, Sandbox) else None  # a duck-typed one says nothing
        if why is None:
            keep.append(task)
        else:
            refused.append(TaskFormatError(str(task.provenance.get("path", task.id)), why, task_id=task.id))
    return keep, refused


def backend_capabilities(name: str, config: SandboxConfig | None = None) -> Capabilities:
    """What a registered backend declares for `config`, without starting a sandbox."""
    sandbox = SandboxPlugin.named(name)(config)
    return sandbox.capabilities


def unavailable_reason(name: str) -> str | None:
    """Why backend `name` cannot run here, or None (`SandboxPlugin.available`: any backend, a third
    party's included, can say why it is unavailable)."""
    return SandboxPlugin.named(name).available()


def backend_warning(name: str) -> str | None:
    """What choosing backend `name` exposes, said wherever it is chosen, or None (`SandboxPlugin.warning`)."""
    return SandboxPlugin.named(name).warning()


async def release_idle(name: str) -> None:
    """Let backend `name` free what it keeps warm between sandboxes (a run calls it when it ends;
    `SandboxPlugin.drain`)."""
    await SandboxPlugin.named(name).drain()


def backend_status(name: str) -> tuple[str | None, Capabilities | None]:
    """(None or why `name` cannot run here, its capabilities)."""
    try:
        caps = backend_capabilities(name)
    except Exception as e:
        return f"{type(e).__name__}: {e}", None
    return unavailable_reason(name), caps


def choose_sandbox(name: str) -> str:
    """The backend a sandbox option names: `auto` is `default_sandbox()`, any other name itself."""
    return default_sandbox() if name == "auto" else name


@functools.lru_cache(maxsize=1)
def default_sandbox() -> str:
    """`bwrap` where bubblewrap works, else `local` (which isolates nothing: trusted tasks only)."""
    try:
        return "bwrap" if unavailable_reason("bwrap") is None else "local"
    except ClawError:  # no bwrap backend registered (an allow-list, a broken plugin)
        return "local"
