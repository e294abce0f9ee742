"""Each kind's contract, as a third-party plugin meets it: plain factories and classes registered through the
hooks keep working, their optional parts reach the core through the kind's declared methods, and what they
leave out means what the contract says."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clawsdk import load_tasks
from clawsdk.errors import PluginError
from clawsdk.hookspecs import hookimpl
from clawsdk.models.base import ModelPlugin
from clawsdk.plugins import get_registry, register_plugin, reset_registry
from clawsdk.sandbox.base import SandboxPlugin
from clawsdk.sandbox.capabilities import backend_warning, release_idle, unavailable_reason
from clawsdk.sandbox.toolruntime import SkillPlugin
from clawsdk.tasks.convert import export_tasks, formats
from clawsdk.tasks.sources import TaskSourcePlugin
from clawsdk.testing import check_verifier
from clawsdk.train.base import resolve_weights
from clawsdk.verify.verdict import Verifier, VerifierPlugin

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
DRAINED: list[str] = []


def local_box(config=None):
    return get_registry().get("sandboxes", "local")(config)


def moon_box(config=None):
    return local_box(config)


moon_box.available = lambda: "needs the moon"
moon_box.warning = lambda: "runs on the moon, unisolated"
moon_box.start_concurrency = lambda: 3


async def _drain() -> None:
    DRAINED.append("moon")


moon_box.drain = _drain


class Subclassed(SandboxPlugin):
    """A plugin may subclass the contract instead: its methods are the parts."""

    def __call__(self, config=None):
        return local_box(config)

    def available(self) -> str | None:
        return "subclassed says no"


def tiny_model(**options):
    raise AssertionError("not made in these tests")


tiny_model.weights = lambda name: f"/weights/{name or 'default'}"


class Writer:
    """A task source that reads nothing and writes a count file."""

    def detect(self, path):
        return False

    def load(self, path):
        return iter(())

    def export(self, tasks, dest):
        tasks = list(tasks)
        Path(dest).write_text(str(len(tasks)))
        return len(tasks), []


class Reader:
    def detect(self, path):
        return False

    def load(self, path):
        return iter(())


def skill_server(sandbox, task):
    raise AssertionError("not started in these tests")


skill_server.skill_dir = "/opt/my-skill"


class PlainChecks:
    """A verifier written without the base class: only `verify` (a third party's, delegating to `checks`)."""

    def __init__(self, spec):
        self.inner = get_registry().get("verifiers", "checks")(spec)

    async def verify(self, ctx):
        await self.inner.before_hidden(ctx)
        return await self.inner.verify(ctx)


class ThirdParty:
    """Registers the way a third party's module does: one hook per kind, plain objects."""

    @hookimpl
    def register_sandboxes(self, register):
        register("tp-moon", moon_box)
        register("tp-plain", local_box)
        register("tp-subclassed", Subclassed())

    @hookimpl
    def register_models(self, register):
        register("tp-model", tiny_model)

    @hookimpl
    def register_task_sources(self, register):
        register("tp-writer", Writer())
        register("tp-reader", Reader())

    @hookimpl
    def register_skills(self, register):
        register("tp-skill", skill_server)

    @hookimpl
    def register_verifiers(self, register):
        register("tp-plain-checks", PlainChecks)


@pytest.fixture(autouse=True)
def third_party():
    reset_registry()
    info = register_plugin(ThirdParty(), "third-party")
    assert info.error is None and not info.notes, info
    yield
    reset_registry()


def test_a_sandbox_factory_s_optional_parts_reach_the_core():
    assert unavailable_reason("tp-moon") == "needs the moon"
    assert backend_warning("tp-moon") == "runs on the moon, unisolated"
    assert SandboxPlugin.named("tp-moon").start_concurrency() == 3
    anyio.run(release_idle, "tp-moon")
    assert DRAINED == ["moon"]
    # left out: available, nothing exposed, the controller's own start, nothing to drain
    plain = SandboxPlugin.named("tp-plain")
    assert (plain.available(), plain.warning(), plain.start_concurrency()) == (None, None, None)
    anyio.run(release_idle, "tp-plain")
    assert unavailable_reason("tp-subclassed") == "subclassed says no"
    assert SandboxPlugin.named("tp-subclassed") is get_registry().get("sandboxes", "tp-subclassed")


def test_the_registry_keeps_what_was_registered():
    assert get_registry().get("sandboxes", "tp-moon") is moon_box
    assert SandboxPlugin.named("tp-moon").target is moon_box
    with pytest.raises(PluginError, match="no sandbox named 'tp-nope'"):
        SandboxPlugin.named("tp-nope")


def test_a_model_backend_says_where_its_weights_are():
    assert resolve_weights("tp-model:small") == "/weights/small"
    assert ModelPlugin.named("tp-model").weights("") == "/weights/default"
    assert resolve_weights("/some/checkpoint") == "/some/checkpoint"  # no backend of that name: a path


def test_a_task_source_with_export_is_a_format(tmp_path):
    assert "tp-writer" in formats() and "tp-reader" not in formats()
    tasks = load_tasks(str(EXAMPLES)).tasks[:2]
    assert export_tasks(tasks, tmp_path / "out", "tp-writer") == (2, [])
    assert (tmp_path / "out").read_text() == "2"
    with pytest.raises(PluginError, match="cannot write tasks"):
        TaskSourcePlugin.named("tp-reader").export(tasks, tmp_path / "no")


def test_a_skill_factory_s_folder_and_server_ref():
    skill = SkillPlugin.named("tp-skill")
    assert skill.skill_dir == Path("/opt/my-skill") and skill.mcp_command is None
    assert skill.server_ref().module == f"{__name__}:skill_server"
    assert SkillPlugin.of(lambda sandbox, task: None).server_ref() is None  # not importable by name


def test_a_verifier_without_the_base_class_scores_rollouts():
    """Its `before_hidden` and `check_task` left out: the rollout used to call them and end verifier_error."""
    made = VerifierPlugin.named("tp-plain-checks").make(_task_with_solution().verifier)
    assert isinstance(made, Verifier) and made.name == "PlainChecks"
    check_verifier(_task_with_solution(), PlainChecks).assert_ok()


def _task_with_solution():
    return next(t for t in load_tasks(str(EXAMPLES)).tasks if t.solution and t.verifier.type == "checks")
