"""Verdicts keep every sub-score, so benchmarks can report them and filters can use them."""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field, model_validator

from clawsdk.plugins import Contract

M = TypeVar("M", bound=BaseModel)

if TYPE_CHECKING:
    from clawsdk.sandbox.base import Sandbox
    from clawsdk.store.events import StoredEvent
    from clawsdk.store.recorder import Recorder
    from clawsdk.tasks.model import Task

# ASCII decimals only: float() also reads "１" (U+FF11), "٠.٥", "0.5_0" and "nan", so a full-width
# "１" scored 1.0 where an unreadable line scores 0
_SCORE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def spec_as(model: type[M], spec: Any) -> M:
    """A verifier's own spec model from the task's VerifierSpec; ValueError naming the field
    (`verifier.timeout_s: ...`), as a verifier factory raises for a spec it cannot take."""
    from pydantic import ValidationError

    try:
        return model.model_validate(spec.model_dump())
    except ValidationError as e:
        err = e.errors()[0]
        raise ValueError(f"verifier.{'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def read_score(text: str) -> float | None:
    """The number a script printed as its score (ASCII decimal, spaces around it ignored); None otherwise."""
    text = text.strip()
    return float(text) if _SCORE.fullmatch(text) else None


class SubScore(BaseModel):
    name: str
    score: float = Field(ge=0, le=1)
    weight: float = Field(1.0, ge=0)
    detail: str = ""


class Verdict(BaseModel):
    verifier: str
    score: float = Field(ge=0, le=1)
    passed: bool
    subscores: list[SubScore] = Field(default_factory=list)
    detail: str = ""

    @model_validator(mode="after")
    def _unique_names(self) -> Verdict:
        """Sub-scores of one name get `#2`, `#3`, ... in order: the store keeps one row per name, and two
        checks labelled alike (`text_contains:done.txt` twice) left one of them, contradicting the score."""
        taken: set[str] = set()
        for s in self.subscores:
            name, n = s.name, 1
            while name in taken:
                n += 1
                name = f"{s.name} #{n}"
            s.name = name
            taken.add(name)
        return self
    duration_s: float = 0.0

    @classmethod
    def aggregate(cls, verifier: str, subscores: list[SubScore], pass_threshold: float = 1.0,
                  detail: str = "") -> Verdict:
        """The weighted mean of the sub-scores; passed when it reaches the threshold."""
        total = sum(s.weight for s in subscores)
        score = sum(s.score * s.weight for s in subscores) / total if total else 0.0
        score = min(max(score, 0.0), 1.0)
        return cls(verifier=verifier, score=score, passed=score >= pass_threshold - 1e-9,
                   subscores=subscores, detail=detail)


@dataclass
class VerifyContext:
    task: Task
    sandbox: Sandbox
    recorder: Recorder
    #: where the hidden files are inside the sandbox, if the task has any
    hidden_path: str | None = None
    #: the rollout's events, when the caller has them at hand; otherwise `events()` reads them
    transcript: list[StoredEvent] | None = None
    #: when the verifier's time runs out (anyio.current_time()), if the caller bounds it
    deadline: float | None = None

    async def events(self) -> list[StoredEvent]:
        """The rollout's events so far (clawsdk.store.events), for verifiers that grade the trajectory."""
        if self.transcript is None:
            self.transcript = await self.recorder.events_so_far()
        return self.transcript


class Verifier(abc.ABC):
    """Scores the final workspace. Raise VerifierError when it cannot, never score 0 for that."""

    name: str = "verifier"

    async def before_hidden(self, ctx: VerifyContext) -> bool:
        """Run what must not see the hidden files: the agent's code. Called after the agent's turn and
        before the hidden files are injected (ctx.hidden_path is None); returns whether anything ran,
        so the sandbox stops what it left running. The default runs nothing."""
        return False

    def check_task(self, task: Any) -> None:
        """Called when a task is loaded: raise ValueError("verifier.FIELD: why") if this verifier could never
        score it (a hidden file it reads is missing, its code does not compile), so the task is refused at
        load instead of every rollout ending verifier_error. The default checks nothing."""

    @abc.abstractmethod
    async def verify(self, ctx: VerifyContext) -> Verdict: ...


class VerifierPlugin(Contract):
    """The verifier kind: a factory ``(spec: VerifierSpec) -> Verifier``, registered with `register_verifiers`
    under the `VerifierSpec.type` it reads. What it makes is a `Verifier`, whose methods are the kind's
    optional parts; an object that is no `Verifier` subclass (a plain class with `verify`) is seen through
    one, its own `before_hidden` and `check_task` used where it has them."""

    kind = "verifiers"

    def make(self, spec: Any) -> Verifier:
        made = self.target(spec)
        return made if isinstance(made, Verifier) else _PlainVerifier(made)


class _PlainVerifier(Contract, Verifier):
    """A verifier written without the base class, with the base class's defaults for what it leaves out."""

    def __init__(self, target: Any) -> None:
        super().__init__(target)
        self.name = str(self.provided("name") or type(target).__name__)

    async def before_hidden(self, ctx: VerifyContext) -> bool:
        run = self.provided("before_hidden")
        return bool(await run(ctx)) if run is not None else False

    def check_task(self, task: Any) -> None:
        self.call("check_task", task)

    async def verify(self, ctx: VerifyContext) -> Verdict:
        return await self.target.verify(ctx)

