"""The ray executor's options, without a cluster: registration, placement requests, clear errors."""

from __future__ import annotations

import pytest
from clawsdk_plugins.executors.ray import RayExecutor, RayExecutorError

from clawsdk.plugins import get_registry
from clawsdk.runtime.executor import RolloutJob
from clawsdk.sandbox.base import SandboxConfig


def job(**resources) -> RolloutJob:
    return RolloutJob(task=None, agent=None, agent_name="oracle", agent_options={}, sandbox="local",
                      sandbox_config=SandboxConfig(), rollout_id="r", attempt=0,
                      resources=resources or {"num_cpus": 1})


def test_ray_is_a_registered_executor_that_refuses_unknown_options():
    make = get_registry().get("executors", "ray")
    assert isinstance(make(address="auto", batch_ms=20), RayExecutor)
    with pytest.raises(ValueError, match=r"unknown option.*adress.*known: address"):
        make(adress="ray://head:10001")


def test_sizing_a_remote_cluster_is_refused_before_connecting():
    import anyio

    pytest.importorskip("ray")

    async def enter():
        async with RayExecutor(address="127.0.0.1:1", num_cpus=2):
            pass

    with pytest.raises(RayExecutorError, match="num_cpus/num_gpus size a local cluster"):
        anyio.run(enter)


def test_a_rollout_asks_ray_for_its_resources():
    options = RayExecutor().task_options(job(num_cpus=2, memory=512, num_gpus=1, docker_slot=1))
    assert options["num_cpus"] == 2 and options["num_gpus"] == 1
    assert options["memory"] == 512 * 1024 * 1024  # the job says MB, Ray counts bytes
    assert options["resources"] == {"docker_slot": 1}  # anything else is a custom Ray resource
    assert options["max_retries"] == 0  # a lost worker becomes a new attempt of the runner, not a replay


def test_executor_options_override_what_a_rollout_asks():
    executor = RayExecutor(cpus_per_rollout=0.25, memory_mb_per_rollout=100,
                           resources_per_rollout={"sandbox": 1}, scheduling_strategy="SPREAD")
    options = executor.task_options(job())
    assert options["num_cpus"] == 0.25 and options["memory"] == 100 * 1024 * 1024
    assert options["resources"] == {"sandbox": 1}
    assert options["scheduling_strategy"] == "SPREAD"


@pytest.mark.parametrize("bad", [{"batch_ms": 0}, {"backpressure": -1}, {"buffer_events": "many"},
                                 {"runtime_env": "venv"}, {"resources_per_rollout": {"sandbox": "one"}}])
def test_bad_options_say_which_and_what(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        RayExecutor(**bad)
