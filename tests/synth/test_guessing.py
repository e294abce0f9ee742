"""A family's answer must not be guessable without reading the inputs (found by a read-only audit with cheap
agents): `semver-bump` level 1 asked only for the new version, and a minor bump written without reading a
commit passed 73% of its tasks; in `meeting-slot` level 1 the first slot of the day was the answer to 36%."""

from __future__ import annotations

from collections import Counter

import anyio

from clawsdk.plugins import get_registry
from clawsdk.runtime.agent import Agent, AgentContext
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.runtime.rollout import attempt_rollout
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.synth.families import FAMILIES


class MinorBump(Agent):
    """Reads VERSION and writes the next minor version, reading no commit: the likeliest answer."""

    name = "minor-bump"

    async def run(self, ctx: AgentContext) -> None:
        major, minor, _ = (await ctx.tools.call("read", {"path": "VERSION"})).text.strip().split(".")[:3]
        await ctx.tools.call("write", {"path": "VERSION", "content": f"{major}.{int(minor) + 1}.0\n"})


def score(task, agent) -> float:
    registry = get_registry()
    make = registry.get("sandboxes", "local")
    r = anyio.run(lambda: attempt_rollout(task, agent, lambda: make(SandboxConfig()), Recorder(None, "t"), registry))
    assert r.verdict is not None, r.error
    return r.verdict.score


def test_a_guessed_version_earns_nothing_in_semver_bump_at_any_level():
    family = FAMILIES["semver-bump"]
    tasks = [family.task(5, i, level) for level in (1, 2, 3) for i in range(4)]
    right = [t for t in tasks if _version(t) == _minor_bump(t)]  # where the guess is the right version
    assert len(right) >= 6
    assert [score(t, MinorBump()) for t in right] == [0.0] * len(right)  # a version alone is not the work
    assert [score(t, OracleAgent()) for t in tasks] == [1.0] * len(tasks)


def _version(task) -> str:
    return next(c["text"] for c in task.verifier.checks if c["path"] == "VERSION")


def _minor_bump(task) -> str:
    major, minor, _ = next(f.text for f in task.workspace if f.path == "VERSION").strip().split(".")
    return f"{major}.{int(minor) + 1}.0"


def test_no_fixed_answer_passes_many_meeting_slot_tasks():
    """The likeliest slot of 300 tasks per level (the best a guesser that knew the generator could write)."""
    family = FAMILIES["meeting-slot"]
    for level in (1, 2, 3):
        answers = Counter()
        for i in range(300):
            task = family.task(5, i, level)
            answers[next(f.text for f in task.hidden if f.path == "expected.json")] += 1
        (best, n), = answers.most_common(1)
        assert n / 300 <= 0.2, (level, best, n)  # it was 0.36 at level 1
        assert not any('"start": "09:00"' in a for a in answers), level  # the day's first slot: never
