"""Trajectory selection: which recorded rollouts become training data, and why the others do not.

Rules apply in a fixed order and the first that drops a rollout is its reason, so a dry run
reads as a ledger: kept, or dropped by which rule with which value.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from clawsdk.data.trajectory import PromptStyle, Trajectory, tool_listing, trajectory_from_events
from clawsdk.store.events import EventError, ModelResponse, StoredEvent

__all__ = ["Candidate", "HeldOut", "Selection", "SelectionResult", "load_candidates", "select"]


@dataclass
class Selection:
    """The rules. None means "no limit"."""

    runs: list[str] = field(default_factory=list)  # run ids to draw from; empty: every run
    agents: list[str] = field(default_factory=list)  # only rollouts of these agents (e.g. oracle, tool-loop)
    min_reward: float | None = 1.0  # verdict score at least this
    passed_only: bool = False  # and the verdict says passed
    failure_kinds: list[str] = field(default_factory=lambda: ["ok"])  # endings allowed
    max_turns: int | None = None  # assistant turns
    max_tokens: int | None = None  # conversation length, estimated at 4 characters a token
    max_tool_error_rate: float | None = None  # failed tool calls / tool calls
    per_task_cap: int | None = None  # at most this many per task
    best_of: int | None = None  # per task, the best k (by reward, then fewer turns, then shorter)
    dedup: bool = True  # drop a trajectory whose tool calls repeat a kept one of the same task
    exclude_tasks: list[str] = field(default_factory=list)  # task ids or hashes never to use (held-out sets)
    keep_truncated: bool = False  # keep rollouts with a model reply cut at its token limit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Selection:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown selection rules {sorted(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)


@dataclass
class Candidate:
    rollout: dict[str, Any]
    trajectory: Trajectory | None
    reward: float | None
    tokens: int = 0
    keep: bool = False
    reason: str = ""  # why it was dropped, or "kept"

    @property
    def rollout_id(self) -> str:
        return self.rollout["id"]

    @property
    def traj(self) -> Trajectory:
        """The trajectory of a candidate past the filters (kept, or paired): those without one are dropped."""
        assert self.trajectory is not None, f"rollout {self.rollout_id}: no trajectory past the filters"
        return self.trajectory

    @property
    def score(self) -> float:
        """The reward of a candidate past the filters: an unscored rollout is dropped."""
        assert self.reward is not None, f"rollout {self.rollout_id}: no reward past the filters"
        return self.reward


@dataclass
class SelectionResult:
    selection: Selection
    candidates: list[Candidate]
    held_out: dict[str, int] = field(default_factory=dict)  # rollouts held out by: hash, id, near_duplicate

    @property
    def kept(self) -> list[Candidate]:
        return [c for c in self.candidates if c.keep]

    @property
    def dropped(self) -> list[Candidate]:
        return [c for c in self.candidates if not c.keep]

    def reasons(self) -> dict[str, int]:
        """How many were dropped by each rule (the rule name is the reason's first word)."""
        out: dict[str, int] = defaultdict(int)
        for c in self.dropped:
            out[c.reason.split(":")[0]] += 1
        return dict(out)


class HeldOut:
    """The held-out rule: tasks excluded by hash or id (`Selection.exclude_tasks`), and near-duplicates of the
    held-out `tasks` (`clawsdk.bench.decontam.TrainingSet.near_duplicate`: the same hidden files, workspace
    or reference solution; where there is no content to compare, an instruction at Jaccard 0.7 or more).
    `counts` tallies the rollouts held out by each."""

    def __init__(self, exclude: Iterable[str], tasks: Sequence[Any] = ()):
        self.exclude = set(exclude)
        self.near = None
        if tasks:
            from clawsdk.bench.decontam import TrainingSet

            self.near = TrainingSet()
            for t in tasks:
                self.near.add_task(t)
        self.counts: Counter[str] = Counter({"hash": 0, "id": 0, "near_duplicate": 0})
        self._tasks: dict[str, Any] = {}

    def why(self, store: Any, task_id: str, task_hash: str, task: Any = None) -> str:
        """Why a rollout of this task is held out (its drop reason), or "" when it is not."""
        if task_hash in self.exclude:
            how, why = "hash", f"excluded: task {task_id} is held out (by hash)"
        elif task_id in self.exclude:
            how, why = "id", f"excluded: task {task_id} is held out (by id)"
        elif self.near is None:
            return ""
        else:
            if task is None:
                if task_hash not in self._tasks:
                    self._tasks[task_hash] = store.task(task_hash)
                task = self._tasks[task_hash]
            m = self.near.near_duplicate(task) if task is not None else None
            if m is None:
                return ""
            how, why = "near_duplicate", (f"held_out_near_duplicate: task {task_id} is a near-duplicate of "
                                          f"held-out task {m.other}: {m.detail}")
        self.counts[how] += 1
        return why


def _estimate_tokens(t: Trajectory) -> int:
    chars = sum(
        len(m.get("content") or "")
        + sum(len(c["function"]["arguments"]) + len(c["function"]["name"]) for c in m.get("tool_calls") or [])
        for m in t.messages
    )
    chars += len(json.dumps(t.tools))
    return chars // 4


def load_candidates(store: Any, selection: Selection, style: PromptStyle | None = None) -> list[Candidate]:
    """Every finished rollout of the chosen runs, with its conversation rebuilt. One that cannot be
    rebuilt comes back already dropped, with its reason: `unverified: ...` (an assistant turn no reply of the
    model backs), `control_tokens: ...` (a chat template's turn marker typed as text), else `unreadable: ...`;
    so does one with a reply cut at its token limit (`truncated: ...`, unless `selection.keep_truncated`)."""
    sql = (
        "SELECT o.*, t.instruction FROM rollouts o LEFT JOIN tasks t ON t.hash = o.task_hash "
        "WHERE o.status = 'finished'"
    )
    params: list[Any] = []
    if selection.runs:
        known = {
            r["id"]
            for r in store.query(
                f"SELECT id FROM runs WHERE id IN ({','.join('?' * len(selection.runs))})", selection.runs
            )
        }
        missing = [r for r in selection.runs if r not in known]
        if missing:
            raise LookupError(f"no run {', '.join(missing)} in {store.path} (see `clawsdk runs`)")
        sql += f" AND o.run_id IN ({','.join('?' * len(selection.runs))})"
        params += selection.runs
    sql += " ORDER BY o.run_id, o.task_id, o.sample"
    out = []
    tasks: dict[str, Any] = {}
    for row in store.query(sql, params):
        try:
            events = store.events(row["id"], row["attempt"], strict=True)
        except EventError as e:  # a payload another writer damaged: that rollout is left out, saying where
            out.append(Candidate(row, None, row["reward"], reason=f"unreadable: {e}"))
            continue
        listing = None
        kinds = {e.kind for e in events}
        if "model_request" in kinds and "model_response" not in kinds:
            # the model was asked and never answered (a model_error): no conversation to learn from,
            # and the tool-call replay would put words in a model's mouth
            out.append(Candidate(row, None, row["reward"], reason="no_reply: no model reply recorded"))
            continue
        try:
            if "model_request" not in kinds:
                if row["task_hash"] not in tasks:
                    tasks[row["task_hash"]] = store.task(row["task_hash"])
                task = tasks[row["task_hash"]]
                if task is None:
                    out.append(Candidate(row, None, row["reward"], reason="task: not in the store"))
                    continue
                listing = tool_listing(task)
            traj = trajectory_from_events(
                row, events, listing=listing, style=style, instruction=row["instruction"]
            )
            tokens = _estimate_tokens(traj)
            cut = "" if selection.keep_truncated else _truncated(events)
        except Exception as e:
            # one oddly recorded rollout, or a skill not installed here, must not stop the others
            why = _why(e, row["id"])
            kind = next((k for k in NOT_USABLE[1:] if f": {k}: " in why), NOT_USABLE[0])
            out.append(Candidate(row, None, row["reward"], reason=f"{kind}: {why}"))
            continue
        out.append(Candidate(row, traj, row["reward"], tokens=tokens, reason=cut))
    return out


#: the reasons a rollout is left out before any rule: it could not be rebuilt, or not as the model said it
NOT_USABLE = ("unreadable", "unverified", "control_tokens")


def _why(e: Exception, rollout_id: str) -> str:
    """What went wrong, naming the rollout (clawsdk's own messages already do)."""
    text = str(e)
    return text if rollout_id in text else f"rollout {rollout_id}: {type(e).__name__}: {text}"


def _truncated(events: list[StoredEvent]) -> str:
    """The drop reason when a model reply was cut at its token limit, else "": the conversation would
    teach that a half-written answer (or tool call) ends a turn."""
    replies = [e for e in events if isinstance(e, ModelResponse)]
    cut = [i for i, p in enumerate(replies, 1) if p.finish_reason == "length"]
    if not cut:
        return ""
    return (f"truncated: model reply {cut[0]} of {len(replies)} was cut at its token limit "
            f"(finish_reason length)")


def _rank(c: Candidate) -> tuple:
    t = c.trajectory
    return (-(c.reward if c.reward is not None else -1.0), t.n_assistant_turns if t else 0, c.tokens)


def select(
    store: Any,
    selection: Selection,
    style: PromptStyle | None = None,
    candidates: list[Candidate] | None = None,
    held_out: Sequence[Any] = (),
) -> SelectionResult:
    """Apply the rules to the store's rollouts; nothing is written. Rollouts of near-duplicates of the
    `held_out` tasks are dropped too (their ids and hashes go in `selection.exclude_tasks`)."""
    s = selection
    cands = candidates if candidates is not None else load_candidates(store, s, style)
    rule = HeldOut(s.exclude_tasks, held_out)
    live: list[Candidate] = []
    for c in cands:
        r = c.rollout
        if c.reason:  # already dropped while loading
            continue
        t = c.trajectory
        if s.agents and r.get("agent") not in s.agents:
            c.reason = f"agent: {r.get('agent')} is not one of {', '.join(s.agents)}"
        elif why := rule.why(store, r["task_id"], r["task_hash"]):
            c.reason = why
        elif s.failure_kinds and r.get("failure_kind") not in s.failure_kinds:
            c.reason = f"failure_kind: {r.get('failure_kind')}"
        elif not r.get("scored"):
            c.reason = "unscored: the verdict does not count (infrastructure failure)"
        elif s.min_reward is not None and (c.reward is None or c.reward < s.min_reward):
            c.reason = f"min_reward: reward {c.reward} < {s.min_reward}"
        elif s.passed_only and not r.get("passed"):
            c.reason = "passed_only: the verdict did not pass"
        elif t is None or t.n_assistant_turns == 0:
            c.reason = "empty: no assistant turn to learn from"
        elif s.max_turns is not None and t.n_assistant_turns > s.max_turns:
            c.reason = f"max_turns: {t.n_assistant_turns} turns > {s.max_turns}"
        elif s.max_tokens is not None and c.tokens > s.max_tokens:
            c.reason = f"max_tokens: about {c.tokens} tokens > {s.max_tokens}"
        elif s.max_tool_error_rate is not None and t.tool_error_rate > s.max_tool_error_rate:
            c.reason = (
                f"max_tool_error_rate: {t.n_tool_errors}/{t.n_tool_calls} tool calls failed "
                f"({t.tool_error_rate:.0%} > {s.max_tool_error_rate:.0%})"
            )
        else:
            live.append(c)
    by_task: dict[str, list[Candidate]] = defaultdict(list)
    for c in live:
        by_task[c.rollout["task_hash"]].append(c)
    for group in by_task.values():
        if s.best_of is not None:
            group.sort(key=_rank)
        seen: set[str] = set()
        kept = 0
        cap = (
            min(x for x in (s.per_task_cap, s.best_of) if x is not None)
            if (s.per_task_cap is not None or s.best_of is not None)
            else None
        )
        for c in group:
            sig = c.traj.signature()
            if s.dedup and sig in seen:
                c.reason = "dedup: the same tool calls as a kept trajectory of this task"
            elif cap is not None and kept >= cap:
                c.reason = (
                    f"best_of: not among the best {s.best_of} of {len(group)}"
                    if s.best_of is not None and kept >= s.best_of
                    else f"per_task_cap: {cap} already kept for this task"
                )
            else:
                c.keep, c.reason = True, "kept"
                kept += 1
                seen.add(sig)
    return SelectionResult(selection=s, candidates=cands, held_out=dict(rule.counts))
