"""The model routes (persona-driven and skill-grounded) and the gates after them, each recorded.

    draft -> leak_judge -> workspace -> verifier (execution-gated repair loop) -> rubric
          -> dedup (within a category, in candidate order) -> assemble (native task folder)

Every stage writes a row to synth_stages with its verdict, reason and output; the candidate's
state after each finished stage is kept, so a rerun of the same run id goes on where it stopped.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from clawsdk.errors import ClawError, ModelError
from clawsdk.models.base import Model
from clawsdk.synth import gates, prompts
from clawsdk.synth.dedup import NearDuplicates
from clawsdk.synth.gates import GateFailure
from clawsdk.synth.procedural import Progress, SynthResult
from clawsdk.synth.records import FINAL, SynthRecords
from clawsdk.synth.seeds import Seeds, Skill, pick
from clawsdk.tasks.model import CATEGORIES
from clawsdk.tasks.native import save_task, task_folder

log = logging.getLogger(__name__)

GATE_STAGES = ("draft", "leak_judge", "workspace", "verifier", "rubric")


@dataclass
class RouteOptions:
    route: str                              # persona | skill
    n: int
    seed: int
    out: Path
    run_id: str
    seeds: Seeds | None = None              # persona route
    skills: list[Skill] = field(default_factory=list)  # skill route: every skill a task may draw on
    primary_skills: list[str] | None = None  # the ones to build tasks around (default: all)
    categories: list[str] | None = None     # restrict (persona) or suggest (skill)
    k_operations: int = 3
    supporting: int = 1
    repair_rounds: int = 3
    json_retries: int = 1                   # resend an unusable JSON answer with what was wrong
    rubric: bool = True
    dedup: str = "auto"                     # auto | minilm | minhash | off
    dedup_threshold: float | None = None
    concurrency: int = 4                    # model calls at once
    sandboxes: int = 2                      # execution gates at once
    sandbox: str = "auto"                   # of the execution gate, which runs model-written code
    max_tokens: int = 4096
    temperature: float = 0.7
    model_name: str = ""


@dataclass
class _Candidate:
    cid: str
    idx: int
    seed: dict[str, Any]
    state: dict[str, Any]


class RoutePipeline:
    def __init__(self, model: Model, options: RouteOptions, records: SynthRecords, judge: Model | None = None,
                 progress: Progress | None = None):
        if options.route not in ("persona", "skill"):
            raise ValueError(f"route {options.route!r}: persona or skill")
        if options.route == "persona" and options.seeds is None:
            raise ValueError("the persona route needs seeds (clawsdk.synth.seeds.load_seeds())")
        if options.route == "skill" and not options.skills:
            raise ValueError("the skill route needs at least one skill (a folder with a SKILL.md)")
        self.model = model
        self.judge = judge or model
        self.o = options
        self.records = records
        self.progress = progress
        self.model_slots = anyio.CapacityLimiter(options.concurrency)
        self.sandbox_slots = anyio.CapacityLimiter(options.sandboxes)
        self.model_calls = 0
        self.done = 0
        self.accepted = 0

    # ---- seeds --------------------------------------------------------------------------------

    def seed_for(self, idx: int) -> dict[str, Any]:
        rng = random.Random(f"{self.o.route}:{self.o.seed}:{idx}")
        if self.o.route == "persona":
            seeds = self.o.seeds
            assert seeds is not None  # __init__ refused the persona route without them
            cats = [c for c in (self.o.categories or list(seeds.categories)) if c in seeds.categories]
            if not cats:
                raise ValueError(f"none of the categories {self.o.categories} is in the seeds")
            category = cats[idx % len(cats)]
            return {"persona": rng.choice(seeds.personas), "category": category,
                    "subcategory": rng.choice(seeds.categories[category]),
                    "operations": pick(rng, seeds.operations, self.o.k_operations)}
        skills = self.o.skills
        primaries = [s for s in skills if s.name in (self.o.primary_skills or [])] or skills
        primary = primaries[idx % len(primaries)]
        others = [s for s in skills if s.name != primary.name]
        return {"primary": primary.name, "supporting": [s.name for s in pick(rng, others, self.o.supporting)],
                "category": self.o.categories[idx % len(self.o.categories)] if self.o.categories else None}

    # ---- model calls --------------------------------------------------------------------------

    async def ask(self, messages: list[dict], model: Model | None = None) -> str:
        async with self.model_slots:
            self.model_calls += 1
            response = await (model or self.model).chat(messages, max_tokens=self.o.max_tokens,
                                                        temperature=self.o.temperature)
        return (response.message or {}).get("content") or ""

    async def ask_parsed(self, c: _Candidate, stage: str, messages: list[dict], parse: Any,
                         model: Model | None = None) -> tuple[Any, str]:
        """Ask, parse; an unusable answer goes back to the model with what was wrong (json_retries times)."""
        for attempt in range(self.o.json_retries + 1):
            text = await self.ask(messages, model)
            try:
                return parse(text), text
            except GateFailure as e:
                if attempt == self.o.json_retries:
                    raise GateFailure(f"{e} (answer: {text[:300]!r})") from None
                self.records.stage(c.cid, stage, "repair", str(e), {"answer": text}, round=attempt)
                messages = [*messages, {"role": "assistant", "content": text},
                            {"role": "user", "content": f"That answer cannot be used: {e}. Answer again, "
                                                        "in the format asked for and nothing else."}]
        raise AssertionError("unreachable")

    # ---- the gates ------------------------------------------------------------------------------

    def _skill(self, name: str) -> Skill:
        return next(s for s in self.o.skills if s.name == name)

    def _tools(self, c: _Candidate) -> list[str]:
        if self.o.route != "skill":
            return ["core"]
        from clawsdk.plugins import get_registry

        servers = set(get_registry().names("skills"))
        names = [c.seed["primary"], *c.seed["supporting"]]
        return ["core", *[n for n in names if n in servers and n != "core"]]

    async def stage_draft(self, c: _Candidate) -> tuple[str, Any]:
        s = c.seed
        if self.o.route == "persona":
            messages = prompts.persona_draft(s["persona"], s["category"], s["subcategory"], s["operations"])
        else:
            messages = prompts.skill_draft(self._skill(s["primary"]), [self._skill(n) for n in s["supporting"]],
                                           s["category"])
        extra = len(self._tools(c)) > 1
        draft, text = await self.ask_parsed(
            c, "draft", messages, lambda t: gates.parse_draft(t, s.get("category"), extra))
        c.state["draft"] = draft.model_dump(mode="json")
        c.state["category"] = draft.category
        return f"{len(draft.input_files)} input file(s), {len(draft.reference_solution or [])} solution step(s)", \
            {"answer": text}

    async def stage_leak_judge(self, c: _Candidate) -> tuple[str, Any]:
        verdict, text = await self.ask_parsed(c, "leak_judge", prompts.leak_judge(c.state["draft"]),
                                              gates.parse_judge, self.judge)
        if verdict["answer_leak"] or verdict["factual_error"]:
            what = " and ".join(k.replace("_", " ") for k in ("answer_leak", "factual_error") if verdict[k])
            raise GateFailure(f"judge found {what}: {verdict['reason']}")
        return verdict["reason"], {"answer": text, **verdict}

    async def stage_workspace(self, c: _Candidate) -> tuple[str, Any]:
        draft = c.state["draft"]
        files: dict[str, str] = {}
        generated = []
        for f in draft["input_files"]:
            content = f.get("content")
            if content is None:
                content = gates.strip_code(await self.ask(prompts.workspace_file(draft, f["path"],
                                                                                 f.get("description", ""))))
                generated.append(f["path"])
            files[f["path"]] = content
        gates.check_files(files)
        c.state["files"] = files
        return f"{len(files)} file(s), {len(generated)} generated", {"generated": generated,
                                                                     "sizes": {p: len(t) for p, t in files.items()}}

    def _task(self, c: _Candidate, check_py: str, rubric: list | None = None) -> Any:
        draft = gates.Draft.model_validate(c.state["draft"])
        seed = c.seed
        provenance = {"source": "synth", "route": self.o.route, "run_id": self.o.run_id, "candidate": c.cid,
                      "model": self.o.model_name or getattr(self.model, "name", "model"), **seed}
        metadata = {"subcategory": draft.subcategory, "expected_behavior": draft.expected_behavior,
                    "deliverables": draft.deliverables}
        if rubric:
            metadata["rubric"] = rubric
        task_id = f"{self.o.run_id}-{c.idx:05d}"
        return gates.build_task(task_id, draft, c.state.get("files", {}), check_py, self._tools(c), provenance,
                                metadata)

    async def stage_verifier(self, c: _Candidate) -> tuple[str, Any]:
        draft = c.state["draft"]
        files = c.state.get("files", {})
        code: str | None = None
        failure: str | None = None
        for r in range(self.o.repair_rounds + 1):
            if r == 0 or code is None or failure is None:
                answer = await self.ask(prompts.verifier(draft, files))
            else:
                answer = await self.ask(prompts.verifier_repair(draft, files, code, failure))
            code = gates.strip_code(answer)
            try:
                gates.check_compiles(code)
                gates.check_isolated(code)
                async with self.sandbox_slots:
                    scores = await gates.execution_gate(self._task(c, code), self.o.sandbox)
            except GateFailure as e:
                failure = str(e)
                last = r == self.o.repair_rounds
                self.records.stage(c.cid, "verifier", "fail" if last else "repair", failure, {"code": code},
                                   round=r)
                if last:
                    raise GateFailure(f"no working verifier after {r} repair round(s): {failure}",) from None
                continue
            c.state["check_py"] = code
            return (f"passed in round {r}" + (" (no reference solution)" if not draft.get("reference_solution")
                                              else ""), {"code": code, "round": r, **scores})
        raise AssertionError("unreachable")

    async def stage_rubric(self, c: _Candidate) -> tuple[str, Any]:
        if not self.o.rubric:
            c.state["rubric"] = None
            return "skipped (--no-rubric)", None
        rules, text = await self.ask_parsed(c, "rubric", prompts.rubric(c.state["draft"]), gates.parse_rubric)
        c.state["rubric"] = rules
        return f"{len(rules)} rule(s)", {"answer": text, "rules": rules}

    # ---- driving ------------------------------------------------------------------------------

    def _put(self, c: _Candidate, status: str, stage: str | None, reason: str | None = None, **kw: Any) -> None:
        self.records.put_candidate(c.cid, run_id=self.o.run_id, idx=c.idx, route=self.o.route, status=status,
                                   stage=stage, category=c.state.get("category") or c.seed.get("category"),
                                   seed=c.seed, reason=reason, state=c.state, **kw)

    async def run_gates(self, c: _Candidate) -> bool:
        """The stages before dedup; False when the candidate was dropped or failed."""
        for stage in GATE_STAGES:
            if stage in c.state["done"]:
                continue
            started = time.perf_counter()
            try:
                detail, output = await getattr(self, f"stage_{stage}")(c)
            except GateFailure as e:
                self.records.stage(c.cid, stage, "fail", str(e), duration_s=time.perf_counter() - started)
                self._put(c, "rejected", stage, str(e))
                return False
            except (ModelError, ClawError, OSError) as e:
                reason = f"{type(e).__name__}: {e}"
                self.records.stage(c.cid, stage, "error", reason, duration_s=time.perf_counter() - started)
                self._put(c, "error", stage, reason)
                return False
            c.state["done"].append(stage)
            rnd = output.get("round", 0) if isinstance(output, dict) else 0
            self.records.stage(c.cid, stage, "pass", detail, output, round=rnd,
                               duration_s=time.perf_counter() - started)
            self._put(c, "pending", stage)
        return True

    def _tick(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.o.n, self.accepted)

    async def run(self) -> SynthResult:
        o = self.o
        o.out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        config = {k: v for k, v in o.__dict__.items() if k not in ("seeds", "skills", "out")}
        config["skills"] = [s.name for s in o.skills]
        self.records.start_run(o.run_id, o.route, str(o.out), config)
        previous = {c["id"]: c for c in self.records.candidates(o.run_id)}
        result = SynthResult(run_id=o.run_id, route=o.route, candidates=o.n)
        todo: list[_Candidate] = []
        for idx in range(o.n):
            cid = f"{o.run_id}/{idx:05d}"
            prev = previous.get(cid)
            if prev and prev["status"] in FINAL:
                result.skipped += 1
                continue
            state = (prev or {}).get("state") or {"done": []}
            if prev and prev["status"] == "error":  # retry the failed stage
                state.setdefault("done", [])
            c = _Candidate(cid, idx, (prev or {}).get("seed") or self.seed_for(idx), state)
            if not prev:
                self._put(c, "pending", None)
            todo.append(c)
        survivors: list[_Candidate] = []

        async def one(c: _Candidate) -> None:
            if await self.run_gates(c):
                survivors.append(c)
            else:
                self._tick()

        try:
            async with anyio.create_task_group() as tg:
                for c in todo:
                    tg.start_soon(one, c)
            self.dedup_and_assemble(sorted(survivors, key=lambda c: c.idx), previous)
        except BaseException:
            self.records.finish_run(o.run_id, "interrupted")  # no await in it: a cancellation cannot stop it
            raise
        self.records.finish_run(o.run_id)
        accepted = [c for c in self.records.candidates(o.run_id) if c["status"] == "accepted"]
        result.accepted = len(accepted)
        result.accepted_ids = [c["task_id"] for c in accepted]
        result.elapsed_s = time.perf_counter() - started
        return result

    def dedup_and_assemble(self, survivors: list[_Candidate], previous: dict[str, dict]) -> None:
        o = self.o
        near = None
        if o.dedup != "off":
            near = NearDuplicates(o.dedup, o.dedup_threshold)
            for prev in sorted(previous.values(), key=lambda p: p["idx"]):
                if prev["status"] == "accepted" and prev.get("state") and prev["state"].get("draft"):
                    near.check(prev["category"] or "", prev["task_id"] or prev["id"],
                               prev["state"]["draft"]["instruction"])
        for c in survivors:
            draft = c.state["draft"]
            category = c.state.get("category") or ""
            if near is not None:
                started = time.perf_counter()
                dup, sim = near.check(category, f"{o.run_id}-{c.idx:05d}", draft["instruction"])
                out = {"method": near.note, "similarity": round(sim, 4), "threshold": near.threshold,
                       "nearest": dup}
                if dup is not None:
                    reason = f"near-duplicate of {dup} in {category!r} (similarity {sim:.2f} >= {near.threshold:g})"
                    self.records.stage(c.cid, "dedup", "fail", reason, out, duration_s=time.perf_counter() - started)
                    self._put(c, "rejected", "dedup", reason)
                    self._tick()
                    continue
                self.records.stage(c.cid, "dedup", "pass", f"nearest similarity {sim:.2f} ({near.note})", out,
                                   duration_s=time.perf_counter() - started)
            task = self._task(c, c.state["check_py"], c.state.get("rubric"))
            folder = save_task(task, task_folder(o.out, task))
            with self.records.store.transaction():
                self.records.store.upsert_task(task, source=f"synth:{o.route}")
            self.records.stage(c.cid, "assemble", "pass", str(folder), {"task_id": task.id, "hash": task.hash})
            self._put(c, "accepted", "assemble", task_id=task.id, task_hash=task.hash)
            self.accepted += 1
            self._tick()


async def synthesize_route(model: Model, options: RouteOptions, records: SynthRecords, judge: Model | None = None,
                           progress: Progress | None = None) -> SynthResult:
    """Run the persona or skill route for options.n candidates; see RouteOptions."""
    if options.categories:
        bad = [c for c in options.categories if c not in CATEGORIES]
        if bad:
            raise ValueError(f"unknown categories {bad}; one of: {', '.join(CATEGORIES)}")
    return await RoutePipeline(model, options, records, judge, progress).run()
