"""Capabilities declared by each backend, checked against what a task asks for before it runs."""

from __future__ import annotations

import pytest

from clawsdk.errors import SandboxError
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.sandbox.capabilities import CapabilityError, backend_capabilities, check_tasks
from clawsdk.sandbox.limits import IsolationOptions
from clawsdk.tasks.model import Task


def task(tid: str, requires) -> Task:
    return Task(id=tid, instruction="x", metadata={"requires": requires})


def test_backends_declare_what_they_isolate():
    assert not backend_capabilities("local").network_isolated
    assert backend_capabilities("bwrap").network_isolated and backend_capabilities("bwrap").fs_isolated
    assert not backend_capabilities("bwrap").persistent_processes
    assert backend_capabilities("docker").network_isolated
    opened = backend_capabilities("docker", SandboxConfig(extra={"network": True}))
    assert not opened.network_isolated, "a docker sandbox given a network still claims isolation"


def test_a_task_needing_isolation_is_refused_on_local_with_its_id():
    tasks = [task("needs-net", ["network_isolated"]), task("plain", [])]
    with pytest.raises(CapabilityError, match="needs-net needs network_isolated"):
        check_tasks(tasks, backend_capabilities("local"), "local")
    check_tasks(tasks, backend_capabilities("bwrap"), "bwrap")


def test_unknown_capability_names_the_task_and_the_known_ones():
    with pytest.raises(CapabilityError, match=r"typo-task.*unknown capabilities.*network_isolated"):
        check_tasks([task("typo-task", "network_isolatd")], backend_capabilities("bwrap"))


def test_bad_sandbox_options_say_which_key():
    with pytest.raises(SandboxError, match=r"unknown option.*mem_gb"):
        IsolationOptions.from_extra({"mem_gb": 4}, "bwrap")
    with pytest.raises(SandboxError, match="nproc"):
        IsolationOptions.from_extra({"nproc": "many"}, "docker")
    with pytest.raises(SandboxError, match="outside workspace_path"):
        IsolationOptions.from_extra({"hidden_path": "/root/.openclaw/workspace/h"}, "bwrap")
