"""The verifier conformance kit: a verifier plugin checked on a task with a reference solution.

    from clawsdk.testing import check_verifier

    def test_my_verifier():
        check_verifier(my_task, my_verifier_factory).assert_ok()   # factory(spec) -> Verifier

The contract (`clawsdk.verify.verdict.Verifier`), run through the same rollout code as `clawsdk run`:

- on the task's untouched workspace it returns a Verdict that does not pass;
- after the task's reference solution (the oracle) it returns a Verdict that passes;
- every score and sub-score lies in [0, 1], and ``passed`` agrees with the score and threshold;
- when it cannot score (here: its sandbox is gone) it raises ``VerifierError`` (or lets the
  sandbox's ``SandboxError`` through), never a Verdict: a zero would count against the agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from clawsdk.errors import SandboxError, VerifierError
from clawsdk.plugins import Registry, get_registry
from clawsdk.runtime.oracle import OracleAgent
from clawsdk.runtime.probes import Idle
from clawsdk.runtime.rollout import attempt_rollout
from clawsdk.sandbox.base import SandboxConfig
from clawsdk.store.recorder import Recorder
from clawsdk.tasks.model import Task
from clawsdk.testing.report import Report
from clawsdk.verify.verdict import Verdict, VerifyContext


def _registry_with(kind: str, name: str, factory: Any) -> Registry:
    """The loaded plugins, with `factory` in place of `name` (the loaded registry is left alone)."""
    base = get_registry()
    registry = Registry()
    registry.tables = {k: dict(v) for k, v in base.tables.items()}
    registry.tables[kind][name] = factory
    return registry


def _verdict_sane(report: Report, what: str, v: Verdict | None, threshold: float | None) -> None:
    if v is None:
        return
    scores_ok = 0 <= v.score <= 1 and all(0 <= s.score <= 1 for s in v.subscores)
    report.add(f"{what}: scores in [0, 1]", scores_ok, f"score {v.score}, sub-scores {[s.score for s in v.subscores]}")
    if threshold is not None:
        report.add(f"{what}: passed agrees with the score", v.passed == (v.score >= threshold - 1e-9),
                   f"score {v.score} against threshold {threshold} but passed={v.passed}")


def check_verifier(task: Task, factory: Callable[[Any], Any] | None = None, *, sandbox: str = "local",
                   name: str | None = None) -> Report:
    """Check `factory` (default: the registered verifier for task.verifier.type) on `task`,
    which must have a reference solution."""
    kind = task.verifier.type
    registry = get_registry() if factory is None else _registry_with("verifiers", kind, factory)
    factory = registry.get("verifiers", kind)
    report = Report("verifier", name or kind)
    if not report.add("the task has a reference solution", bool(task.solution),
                      f"task {task.id} has no solution: the kit needs one to see the verifier pass"):
        return report
    make = registry.get("sandboxes", sandbox)
    threshold = getattr(task.verifier, "pass_threshold", None)

    async def main() -> None:
        for what, agent, want in (("untouched workspace", Idle(), False),
                                  ("after the reference solution", OracleAgent(), True)):
            r = await attempt_rollout(task, agent, lambda: make(SandboxConfig()), Recorder(None, "kit"), registry)
            v = r.verdict
            if not report.add(f"{what}: a verdict", v is not None, f"no verdict ({r.kind.value}: {r.error})"):
                continue
            assert v is not None
            report.add(f"{what}: {'passes' if want else 'does not pass'}", v.passed is want,
                       f"passed={v.passed}, score {v.score:g}: {v.detail[:300]}")
            _verdict_sane(report, what, v, threshold)

        box = make(SandboxConfig())
        await box.start(task)
        await box.close()
        try:
            got = await factory(task.verifier).verify(VerifyContext(task=task, sandbox=box, recorder=Recorder(None, "kit")))
        except (VerifierError, SandboxError):
            report.add("cannot score: raises VerifierError, not a verdict", True)
        except Exception as e:
            report.add("cannot score: raises VerifierError, not a verdict", False,
                       f"raised {type(e).__name__}: {e} (the contract is VerifierError)")
        else:
            report.add("cannot score: raises VerifierError, not a verdict", False,
                       f"returned a verdict (score {got.score:g}) for a sandbox that is gone")

    anyio.run(main)
    return report


__all__ = ["check_verifier"]
