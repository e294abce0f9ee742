"""Hybrid verification: a weighted mean of verifiers (code checks and a rubric judge), with gates.

    verifier:
      type: hybrid
      gate: true            # shorthand: the first part gates
      parts:
        - {name: code, weight: 0.7, verifier: {type: clawgym}}
        - {name: rubric, weight: 0.3, verifier: {type: rubric, rules: [...]}}

A part with ``gate: true`` that does not pass (its own pass_threshold) stops the other parts
from counting: they are not run and score 0, so a rubric judge can never rescue a failed code
check, and the hybrid does not pass. Sub-scores keep every part (``code``, ``rubric``) at its
weight and each part's own sub-scores as ``part/name`` at weight 0, so the weighted mean of
the sub-scores is the verdict's score and nothing is lost.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clawsdk.errors import VerifierError
from clawsdk.tasks.model import Number, VerifierSpec
from clawsdk.verify.rubric import JudgeMissing
from clawsdk.verify.verdict import SubScore, Verdict, Verifier, VerifierPlugin, VerifyContext


class PartlyVerified(VerifierError):
    """A part could not be judged (no judge model): the parts that ran are in `partial_verdict`,
    recorded as sub-scores, and the rollout is unscored (verifier_error), never a silent 0."""

    retryable = False  # a missing judge is setup, not a transient failure

    def __init__(self, message: str, partial_verdict: Verdict):
        super().__init__(message)
        self.partial_verdict = partial_verdict


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    weight: Number = Field(ge=0)
    gate: bool = False
    verifier: dict[str, Any]

    @property
    def label(self) -> str:
        """The part's name: HybridSpec's validator names every part."""
        assert self.name is not None, "a part outside a HybridSpec has no name yet"
        return self.name


class HybridSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = "hybrid"
    parts: list[Part] = Field(min_length=1)
    gate: bool = False
    pass_threshold: Number = Field(1.0, ge=0, le=1)
    untouched_score_max: Number | None = Field(None, ge=0, le=1)
    checks: list = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> HybridSpec:
        if sum(p.weight for p in self.parts) <= 0:
            raise ValueError("the parts' weights sum to 0")
        for i, p in enumerate(self.parts):
            if p.name is None:
                p.name = str(p.verifier.get("type", f"part{i}"))
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"part names must be unique (got {names}); name them with 'name'")
        if self.gate:
            self.parts[0].gate = True
        return self


class HybridVerifier(Verifier):
    name = "hybrid"

    def __init__(self, spec: VerifierSpec):
        from clawsdk.plugins import get_registry

        try:
            self.spec = HybridSpec.model_validate(spec.model_dump())
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"verifier{'.' + loc if loc else ''}: {err['msg'].removeprefix('Value error, ')}") \
                from None
        registry = get_registry()
        self.parts: list[tuple[Part, Verifier]] = []
        for i, part in enumerate(self.spec.parts):
            sub_type = part.verifier.get("type", "checks")
            if sub_type == "hybrid":
                raise ValueError(f"verifier.parts[{i}]: a hybrid inside a hybrid is not supported")
            try:
                factory = VerifierPlugin.named(sub_type, registry)
                sub_spec = VerifierSpec.model_validate(part.verifier)
                self.parts.append((part, factory.make(sub_spec)))
            except (ValueError, TypeError, ValidationError) as e:
                raise ValueError(f"verifier.parts[{i}] ({part.name}): {e}") from None
            except Exception as e:  # an unknown type: PluginError
                raise ValueError(f"verifier.parts[{i}] ({part.name}): {e}") from None

    def check_task(self, task: Any) -> None:
        """Each part's own load-time check (its hidden files are there, its code compiles), named as the
        task file names it: verifier.parts[0].verifier.script."""
        for i, (_, verifier) in enumerate(self.parts):
            try:
                verifier.check_task(task)
            except ValueError as e:
                msg = str(e)
                where = f"verifier.parts[{i}].verifier"
                raise ValueError(where + msg.removeprefix("verifier") if msg.startswith("verifier")
                                 else f"{where}: {msg}") from None

    async def before_hidden(self, ctx: VerifyContext) -> bool:
        ran = False
        for _, verifier in self.parts:
            ran = await verifier.before_hidden(ctx) or ran
        return ran

    async def verify(self, ctx: VerifyContext) -> Verdict:
        gates = [p for p, _ in self.parts if p.gate]
        results: dict[str, Verdict | None] = {}
        missing: dict[str, str] = {}  # part -> why it could not be judged
        failed_gate: str | None = None
        # gates first: when one fails, the rest need not run (no judge call for a failed code check)
        for part, verifier in sorted(self.parts, key=lambda pv: not pv[0].gate):
            if failed_gate and not part.gate:
                results[part.label] = None
                continue
            try:
                verdict = await verifier.verify(ctx)
            except JudgeMissing as e:
                missing[part.label] = str(e)
                continue
            results[part.label] = verdict
            if part.gate and not verdict.passed:
                failed_gate = failed_gate or part.label
        if failed_gate:  # the verdict is decided without the parts that could not be judged
            for name in missing:
                results[name] = None
            missing = {}
        subs: list[SubScore] = []
        details = []
        for part, _ in self.parts:
            if part.label in missing:
                details.append(f"{part.label}: missing (not judged)")
                continue
            got = results[part.label]
            if got is None:
                subs.append(SubScore(name=part.label, score=0.0, weight=part.weight,
                                     detail=f"not run: gate {failed_gate!r} failed"))
                details.append(f"{part.label}: skipped (gate {failed_gate} failed)")
                continue
            subs.append(SubScore(name=part.label, score=got.score, weight=part.weight,
                                 detail=(got.detail or got.verifier)[:2000]))
            details.append(f"{part.label} {got.score:.3f} x {part.weight:g}")
            for s in got.subscores:
                subs.append(SubScore(name=f"{part.label}/{s.name}"[:250], score=s.score, weight=0.0,
                                     detail=s.detail))
        out = Verdict.aggregate(self.name, subs, self.spec.pass_threshold, detail="; ".join(details))
        if missing:
            ran = [p.label for p, _ in self.parts if p.label not in missing]
            out.passed = False
            reasons = "; ".join(f"{name}: {why}" for name, why in missing.items())
            scored = ", ".join(f"{n!r} {v.score:.2f}" for n in ran if (v := results.get(n))) or "none"
            raise PartlyVerified(
                f"hybrid verdict incomplete, so the task is unscored: part(s) {', '.join(map(repr, missing))} "
                f"not judged ({reasons}); the automated part(s) scored {scored}, recorded as sub-scores",
                out)
        if failed_gate:
            out.passed = False
            out.detail += f"; not passed: gate {failed_gate!r} failed"
        if gates and not failed_gate:
            out.detail += "; gates passed"
        return out


def hybrid_verifier(spec: VerifierSpec) -> HybridVerifier:
    return HybridVerifier(spec)
