"""Many distinct tasks from the procedural families: round-robin over families, distinct by hash."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from clawsdk.synth.families import LEVELS, Family
from clawsdk.synth.records import FINAL, SynthRecords
from clawsdk.tasks.model import Task
from clawsdk.tasks.native import save_task, task_folder

DIFFICULTIES = ("mixed", *LEVELS)


def level_for(difficulty: str, j: int) -> int:
    """The level of a family's j-th task: fixed, or cycling easy, medium, hard for 'mixed'."""
    if difficulty == "mixed":
        return j % 3 + 1
    if difficulty not in LEVELS:
        raise ValueError(f"difficulty {difficulty!r}: one of {', '.join(DIFFICULTIES)}")
    return LEVELS[difficulty]


def generate(families: Sequence[Family], n: int, seed: int, difficulty: str = "mixed",
             max_tries: int = 20) -> Iterator[Task]:
    """n tasks, families taking turns; a task whose hash was already made is replaced by the family's next.

    Deterministic: the same families, n, seed and difficulty give the same tasks in the same order.
    """
    if n < 0:
        raise ValueError("n must be at least 0")
    seen: set[str] = set()
    counters = {f.name: 0 for f in families}
    made = {f.name: 0 for f in families}
    for i in range(n):
        family = families[i % len(families)]
        for _ in range(max_tries):
            index = counters[family.name]
            counters[family.name] += 1
            task = family.task(seed, index, level_for(difficulty, made[family.name]))
            if task.hash not in seen:
                break
        else:
            raise RuntimeError(f"family {family.name} made {max_tries} duplicates in a row; its space is exhausted")
        seen.add(task.hash)
        made[family.name] += 1
        yield task


# ---- a recorded, validated procedural synthesis -----------------------------------------------

Progress = Callable[[int, int, int], None]  # (done, total, accepted)


@dataclass
class SynthResult:
    run_id: str
    route: str
    candidates: int = 0
    accepted: int = 0
    skipped: int = 0  # already final from an earlier, interrupted run
    elapsed_s: float = 0.0
    accepted_ids: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        done = self.candidates - self.skipped
        return done / self.elapsed_s if self.elapsed_s else 0.0


async def synthesize_procedural(families: Sequence[Family], n: int, seed: int, out: str | Path, *,
                                records: SynthRecords | None, run_id: str, difficulty: str = "mixed",
                                validate: bool = True, sandbox: str = "auto", concurrency: int = 4,
                                progress: Progress | None = None) -> SynthResult:
    """Generate, validate (untouched fails, reference passes, cheap agents earn nothing) and write n tasks,
    recording each stage.

    A rerun with the same run_id skips candidates that already reached a final status.
    """
    from clawsdk.runtime.validate import validate_task
    from clawsdk.sandbox.capabilities import choose_sandbox

    sandbox = choose_sandbox(sandbox)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {"families": [f.name for f in families], "n": n, "seed": seed, "difficulty": difficulty,
              "validate": validate, "sandbox": sandbox}
    started = time.perf_counter()
    tasks = list(generate(families, n, seed, difficulty))
    result = SynthResult(run_id=run_id, route="procedural", candidates=len(tasks))
    done_before: dict[str, dict] = {}
    if records is not None:
        records.start_run(run_id, "procedural", str(out), config)
        done_before = {c["id"]: c for c in records.candidates(run_id) if c["status"] in FINAL}
    limiter = anyio.CapacityLimiter(concurrency)
    counter = {"done": 0}

    def note(cid: str, stage: str, verdict: str, detail: str = "", output: Any = None,
             duration_s: float | None = None) -> None:
        if records is not None:
            records.stage(cid, stage, verdict, detail, output, duration_s=duration_s)

    async def one(idx: int, task: Task) -> None:
        cid = f"{run_id}/{idx:05d}"
        prov = task.provenance
        seed_info = {"family": prov["family"], "seed": prov["seed"], "index": prov["index"], "level": prov["level"]}
        prior = done_before.get(cid)
        if prior is not None and (prior["status"] != "accepted" or (out / task.id / "task.yaml").exists()):
            result.skipped += 1
            if prior["status"] == "accepted":
                result.accepted += 1
                result.accepted_ids.append(task.id)
        else:
            if records is not None:
                records.clear_stages(cid)
                records.put_candidate(cid, run_id=run_id, idx=idx, route="procedural", status="pending",
                                      stage="generate", category=task.category, seed=seed_info,
                                      task_id=task.id, task_hash=task.hash)
            note(cid, "generate", "pass", f"{prov['family']} level {prov['level']}",
                 {"task_id": task.id, "hash": task.hash, "files": len(task.workspace),
                  "solution_steps": len(task.solution or [])})
            status, stage, reason = "accepted", "assemble", None
            if validate:
                async with limiter:
                    t0 = time.perf_counter()
                    v = await validate_task(task, sandbox)
                    took = time.perf_counter() - t0
                base_ok = not v.baseline_error and not v.baseline_passed
                note(cid, "untouched_fails", "pass" if base_ok else "fail",
                     "" if base_ok else v.problem, {"score": v.baseline_score, "error": v.baseline_error},
                     duration_s=took)
                sol_ok = base_ok and v.has_solution and not v.solution_error and bool(v.solution_passed)
                if base_ok:
                    note(cid, "reference_passes", "pass" if sol_ok else "fail", "" if sol_ok else v.problem,
                         {"score": v.solution_score, "error": v.solution_error})
                if sol_ok:
                    note(cid, "cheap_agents_fail", "pass" if v.ok else "fail", "" if v.ok else v.problem,
                         {p.agent: {"score": p.score, "error": p.error} for p in v.cheap})
                if not v.ok:
                    stage = "untouched_fails" if not base_ok else "reference_passes" if not sol_ok else \
                        "cheap_agents_fail"
                    status, reason = "rejected", v.problem
            if status == "accepted":
                note(cid, "assemble", "pass", str(save_task(task, task_folder(out, task))))
                result.accepted += 1
                result.accepted_ids.append(task.id)
                if records is not None:
                    with records.store.transaction():
                        records.store.upsert_task(task, source="synth:procedural")
            if records is not None:
                records.put_candidate(cid, run_id=run_id, idx=idx, route="procedural", status=status, stage=stage,
                                      reason=reason)
        counter["done"] += 1
        if progress is not None:
            progress(counter["done"], len(tasks), result.accepted)

    try:
        async with anyio.create_task_group() as tg:
            for idx, task in enumerate(tasks):
                tg.start_soon(one, idx, task)
    except BaseException:
        if records is not None:
            records.finish_run(run_id, "interrupted")  # no await in it: a cancellation cannot stop it
        raise
    if records is not None:
        records.finish_run(run_id)
    result.elapsed_s = time.perf_counter() - started
    return result
